// Reference kernels for unary math ops and activations (incl. Clip, Identity and the
// com.microsoft Gelu/FastGelu used by fusion passes). Plain loops: the test oracle.
#include <cfloat>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/kernel.h"
#include "cpu/broadcast.h"
#include "cpu/float_to_int.h"
#include "cpu/int_wrap.h"

namespace strata::cpu {
namespace {

enum class UnOp {
  kAbs,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kTanh,
  kAsinh,
  kAcosh,
  kAtanh,
  kErf,
  kIsNaN,
  kIsInf,
  kNot,
  kBitwiseNot,
  kRelu,
  kLeakyRelu,
  kElu,
  kSelu,
  kCelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kSoftplus,
  kSoftsign,
  kThresholdedRelu,
  kMish,
  kShrink,
  kGelu,
  kFastGelu,
  kQuickGelu,
};

// Attribute values, read once at kernel creation.
struct Params {
  float alpha = 0, beta = 0, gamma = 0, lambd = 0, bias = 0;
  bool detect_pos = true, detect_neg = true;
};

template <UnOp op, typename T>
constexpr bool Valid() {
  constexpr bool is_bool = std::is_same_v<T, bool>;
  switch (op) {
    case UnOp::kNot:
      return is_bool;
    case UnOp::kBitwiseNot:
      return kIsInt<T>;
    case UnOp::kAbs:
    case UnOp::kSign:
    case UnOp::kErf:
    case UnOp::kShrink:
      return !is_bool;
    case UnOp::kNeg:
    case UnOp::kRelu:
      return kIsFloatLike<T> || (kIsInt<T> && std::is_signed_v<T>);
    default:
      return kIsFloatLike<T>;
  }
}

template <typename C>
C Softplus(C x) {
  // log(1 + e^x) without overflow for large x or precision loss for very negative x.
  return x > C(0) ? static_cast<C>(x + std::log1p(std::exp(-x))) : static_cast<C>(std::log1p(std::exp(x)));
}

template <UnOp op, typename C>
inline auto Apply(C x, const Params& p) {
  if constexpr (op == UnOp::kAbs) {
    if constexpr (kIsInt<C> && std::is_signed_v<C>)
      return x < 0 ? WrapNeg(x) : x;
    else if constexpr (kIsInt<C>)
      return x;
    else
      return std::fabs(x);
  }
  if constexpr (op == UnOp::kNeg) {
    if constexpr (kIsInt<C>)
      return WrapNeg(x);  // INT_MIN wraps to itself (cpu/int_wrap.h)
    else
      return -x;
  }
  if constexpr (op == UnOp::kExp) return std::exp(x);
  if constexpr (op == UnOp::kLog) return std::log(x);
  if constexpr (op == UnOp::kSqrt) return std::sqrt(x);
  if constexpr (op == UnOp::kReciprocal) return static_cast<C>(C(1) / x);
  if constexpr (op == UnOp::kFloor) return std::floor(x);
  if constexpr (op == UnOp::kCeil) return std::ceil(x);
  if constexpr (op == UnOp::kRound) return std::nearbyint(x);  // default rounding mode: half to even
  if constexpr (op == UnOp::kSign) {
    if constexpr (std::is_floating_point_v<C>)
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);  // keeps 0 and NaN
    else
      return static_cast<C>((x > C(0)) - (x < C(0)));
  }
  if constexpr (op == UnOp::kSin) return std::sin(x);
  if constexpr (op == UnOp::kCos) return std::cos(x);
  if constexpr (op == UnOp::kTan) return std::tan(x);
  if constexpr (op == UnOp::kAsin) return std::asin(x);
  if constexpr (op == UnOp::kAcos) return std::acos(x);
  if constexpr (op == UnOp::kAtan) return std::atan(x);
  if constexpr (op == UnOp::kSinh) return std::sinh(x);
  if constexpr (op == UnOp::kCosh) return std::cosh(x);
  if constexpr (op == UnOp::kTanh) return std::tanh(x);
  if constexpr (op == UnOp::kAsinh) return std::asinh(x);
  if constexpr (op == UnOp::kAcosh) return std::acosh(x);
  if constexpr (op == UnOp::kAtanh) return std::atanh(x);
  if constexpr (op == UnOp::kErf) {
    if constexpr (kIsInt<C>)
      return static_cast<C>(std::erf(static_cast<double>(x)));
    else
      return std::erf(x);
  }
  if constexpr (op == UnOp::kIsNaN) return static_cast<bool>(std::isnan(x));
  if constexpr (op == UnOp::kIsInf) {
    return static_cast<bool>((p.detect_pos && x == std::numeric_limits<C>::infinity()) ||
                             (p.detect_neg && x == -std::numeric_limits<C>::infinity()));
  }
  if constexpr (op == UnOp::kNot) return static_cast<bool>(!x);
  if constexpr (op == UnOp::kBitwiseNot) return static_cast<C>(~x);
  if constexpr (op == UnOp::kRelu) return x < C(0) ? C(0) : x;  // NaN passes through
  if constexpr (op == UnOp::kLeakyRelu) return x < C(0) ? static_cast<C>(C(p.alpha) * x) : x;
  if constexpr (op == UnOp::kElu) return x < C(0) ? static_cast<C>(C(p.alpha) * std::expm1(x)) : x;
  if constexpr (op == UnOp::kSelu)
    return x <= C(0) ? static_cast<C>(C(p.gamma) * (C(p.alpha) * std::exp(x) - C(p.alpha))) : C(p.gamma) * x;
  if constexpr (op == UnOp::kCelu) {
    const C a = C(p.alpha);
    return static_cast<C>((x > C(0) ? x : C(0)) + std::fmin(C(0), a * std::expm1(x / a)));
  }
  if constexpr (op == UnOp::kSigmoid) {
    if (x >= C(0)) return static_cast<C>(C(1) / (C(1) + std::exp(-x)));
    const C e = std::exp(x);
    return static_cast<C>(e / (C(1) + e));
  }
  if constexpr (op == UnOp::kHardSigmoid) {
    // Comparisons, not fmin/fmax: those drop a NaN (HardSigmoid(NaN) would be 1, not NaN).
    const C t = C(p.alpha) * x + C(p.beta);
    return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
  }
  if constexpr (op == UnOp::kHardSwish) {
    const C t = x / C(6) + C(0.5);
    return x * (t < C(0) ? C(0) : (t > C(1) ? C(1) : t));
  }
  if constexpr (op == UnOp::kQuickGelu) {  // x * sigmoid(alpha x); alpha = 1 is SiLU (Swish)
    const C z = C(p.alpha) * x;
    if (z >= C(0)) return static_cast<C>(x / (C(1) + std::exp(-z)));
    const C e = std::exp(z);
    return static_cast<C>(x * e / (C(1) + e));
  }
  if constexpr (op == UnOp::kSoftplus) return Softplus(x);
  if constexpr (op == UnOp::kSoftsign) return static_cast<C>(x / (C(1) + std::fabs(x)));
  if constexpr (op == UnOp::kThresholdedRelu) return x > C(p.alpha) ? x : C(0);
  if constexpr (op == UnOp::kMish) return static_cast<C>(x * std::tanh(Softplus(x)));
  if constexpr (op == UnOp::kShrink) {
    using D = std::conditional_t<kIsInt<C>, double, C>;
    const D v = static_cast<D>(x), l = static_cast<D>(p.lambd), b = static_cast<D>(p.bias);
    const D r = v < -l ? v + b : (v > l ? v - b : D(0));
    if constexpr (kIsInt<C>) {
      return FloatToInt<C>(r);  // a bias of 1e30 or NaN must not reach an undefined conversion
    } else {
      return static_cast<C>(r);
    }
  }
  if constexpr (op == UnOp::kGelu) return static_cast<C>(C(0.5) * x * (C(1) + std::erf(x * C(M_SQRT1_2))));
  if constexpr (op == UnOp::kFastGelu) {
    const C k = C(0.7978845608028654);  // sqrt(2/pi)
    return static_cast<C>(C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x))));
  }
}

template <UnOp op, typename T>
using UnOutT = std::conditional_t<op == UnOp::kIsNaN || op == UnOp::kIsInf, bool, T>;

template <UnOp op>
class UnaryKernel final : public OpKernel {
 public:
  explicit UnaryKernel(Params p) : p_(p) {}

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    const bool to_bool = op == UnOp::kIsNaN || op == UnOp::kIsInf;
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, to_bool ? DataType::kBool : x->dtype(), x->shape()));
    Status st = UnsupportedDtype(ctx.node(), x->dtype());
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      if constexpr (Valid<op, T>()) {
        using C = ComputeT<T>;
        using O = UnOutT<op, T>;
        const T* px = x->data<T>();
        O* po = out->mutable_data<O>();
        const int64_t n = x->num_elements();
        for (int64_t i = 0; i < n; ++i) po[i] = static_cast<O>(Apply<op, C>(static_cast<C>(px[i]), p_));
        st = Status::Ok();
      }
    });
    return st;
  }

 private:
  Params p_;
};

template <UnOp op>
void RegUnary(KernelRegistry& r, const std::string& name, std::initializer_list<int> since,
              const std::vector<DataType>& types, const std::string& domain = "") {
  RegisterVersions(r, domain, name, since, types, [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new UnaryKernel<op>(Params{}));
  });
}

// Activation with attributes: `read` fills Params from the node (and may reject them).
template <UnOp op, typename Read>
void RegActivation(KernelRegistry& r, const std::string& name, std::initializer_list<int> since,
                   const std::vector<DataType>& types, Read read, const std::string& domain = "") {
  RegisterVersions(r, domain, name, since, types, [read](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    Params p;
    RETURN_IF_ERROR(read(init.node, &p));
    return std::unique_ptr<OpKernel>(new UnaryKernel<op>(p));
  });
}

// Clip: attributes min/max before opset 11, optional scalar inputs from 11 on.
class ClipKernel final : public OpKernel {
 public:
  ClipKernel(bool attr_form, float lo, float hi) : attr_form_(attr_form), lo_(lo), hi_(hi) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    const Tensor* bounds[2] = {nullptr, nullptr};
    if (!attr_form_) {
      for (int i = 0; i < 2; ++i) {
        bounds[i] = ctx.input(1 + i);
        if (!bounds[i]) continue;
        if (bounds[i]->num_elements() != 1)
          return InvalidArgument(node.Describe(), ": input '", i == 0 ? "min" : "max", "' must be a scalar, got shape ",
                                 ShapeToString(bounds[i]->shape()));
      }
      RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 2));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    Status st = UnsupportedDtype(node, x->dtype());
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        using C = ComputeT<T>;
        C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
        if (attr_form_) {
          if constexpr (std::is_floating_point_v<C>) {
            lo = static_cast<C>(lo_);
            hi = static_cast<C>(hi_);
          }
        } else {
          if (bounds[0]) lo = static_cast<C>(bounds[0]->data<T>()[0]);
          if (bounds[1]) hi = static_cast<C>(bounds[1]->data<T>()[0]);
        }
        const T* px = x->data<T>();
        T* po = out->mutable_data<T>();
        const int64_t n = x->num_elements();
        // min(max(x, lo), hi): when lo > hi every value becomes hi, as the spec says; NaN stays NaN.
        for (int64_t i = 0; i < n; ++i) {
          C v = static_cast<C>(px[i]);
          v = v < lo ? lo : v;
          v = hi < v ? hi : v;
          po[i] = static_cast<T>(v);
        }
        st = Status::Ok();
      }
    });
    return st;
  }

 private:
  bool attr_form_;
  float lo_, hi_;
};

// com.microsoft FastGelu: optional bias input added (broadcast) before the activation.
class FastGeluKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    const Tensor* bias = ctx.input(1);
    RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 1));
    std::vector<Shape> shapes{x->shape()};
    if (bias) shapes.push_back(bias->shape());
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan(shapes, node));
    if (plan.out_shape != x->shape())
      return InvalidArgument(node.Describe(), ": bias shape ", ShapeToString(bias->shape()),
                             " does not broadcast onto X shape ", ShapeToString(x->shape()));
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x->dtype(), x->shape()));
    Status st = UnsupportedDtype(node, x->dtype());
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      if constexpr (kIsFloatLike<T>) {
        using C = ComputeT<T>;
        const T* px = x->data<T>();
        const T* pb = bias ? bias->data<T>() : nullptr;
        T* po = out->mutable_data<T>();
        const int64_t inner = plan.inner();
        const int64_t sb = bias ? plan.inner_stride(1) : 0;
        ForEachRow(plan, 0, plan.rows(), [&](const int64_t* off, int64_t o) {
          for (int64_t j = 0; j < inner; ++j) {
            C v = static_cast<C>(px[o + j]);
            if (pb) v += static_cast<C>(pb[off[1] + j * sb]);
            po[o + j] = static_cast<T>(Apply<UnOp::kFastGelu, C>(v, Params{}));
          }
        });
        st = Status::Ok();
      }
    });
    return st;
  }
};

Status NoAttrs(const Node&, Params*) { return Status::Ok(); }

}  // namespace

void RegisterUnaryKernels(KernelRegistry& r) {
  RegUnary<UnOp::kAbs>(r, "Abs", {1, 6, 13}, NumericTypes());
  RegUnary<UnOp::kNeg>(r, "Neg", {1, 6, 13}, SignedNumericTypes());
  RegUnary<UnOp::kExp>(r, "Exp", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kLog>(r, "Log", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kSqrt>(r, "Sqrt", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kReciprocal>(r, "Reciprocal", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kFloor>(r, "Floor", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kCeil>(r, "Ceil", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kRound>(r, "Round", {11}, FloatTypes());
  RegUnary<UnOp::kSign>(r, "Sign", {9, 13}, NumericTypes());
  RegUnary<UnOp::kSin>(r, "Sin", {7}, FloatTypes());
  RegUnary<UnOp::kCos>(r, "Cos", {7}, FloatTypes());
  RegUnary<UnOp::kTan>(r, "Tan", {7}, FloatTypes());
  RegUnary<UnOp::kAsin>(r, "Asin", {7}, FloatTypes());
  RegUnary<UnOp::kAcos>(r, "Acos", {7}, FloatTypes());
  RegUnary<UnOp::kAtan>(r, "Atan", {7}, FloatTypes());
  RegUnary<UnOp::kSinh>(r, "Sinh", {9}, FloatTypes());
  RegUnary<UnOp::kCosh>(r, "Cosh", {9}, FloatTypes());
  RegUnary<UnOp::kTanh>(r, "Tanh", {1, 6, 13}, FloatTypes());
  RegUnary<UnOp::kAsinh>(r, "Asinh", {9}, FloatTypes());
  RegUnary<UnOp::kAcosh>(r, "Acosh", {9}, FloatTypes());
  RegUnary<UnOp::kAtanh>(r, "Atanh", {9}, FloatTypes());
  RegUnary<UnOp::kErf>(r, "Erf", {9, 13}, NumericTypes());
  RegUnary<UnOp::kIsNaN>(r, "IsNaN", {9, 13}, FloatTypes());
  RegActivation<UnOp::kIsInf>(r, "IsInf", {10}, FloatTypes(), [](const Node& n, Params* p) {
    p->detect_pos = n.GetInt("detect_positive", 1) != 0;
    p->detect_neg = n.GetInt("detect_negative", 1) != 0;
    return Status::Ok();
  });
  RegUnary<UnOp::kNot>(r, "Not", {1}, BoolTypes());
  RegUnary<UnOp::kBitwiseNot>(r, "BitwiseNot", {18}, IntegerTypes());
  // Identity lives with the shape ops (tensor_shape.cc).
}

void RegisterActivationKernels(KernelRegistry& r) {
  auto alpha = [](float def) {
    return [def](const Node& n, Params* p) {
      p->alpha = n.GetFloat("alpha", def);
      return Status::Ok();
    };
  };
  RegUnary<UnOp::kRelu>(r, "Relu", {1, 6, 13, 14}, SignedNumericTypes());
  RegActivation<UnOp::kLeakyRelu>(r, "LeakyRelu", {1, 6, 16}, FloatTypes(), alpha(0.01f));
  RegActivation<UnOp::kElu>(r, "Elu", {1, 6}, FloatTypes(), alpha(1.0f));
  RegActivation<UnOp::kSelu>(r, "Selu", {1, 6}, FloatTypes(), [](const Node& n, Params* p) {
    p->alpha = n.GetFloat("alpha", 1.67326319217681884765625f);
    p->gamma = n.GetFloat("gamma", 1.05070102214813232421875f);
    return Status::Ok();
  });
  RegActivation<UnOp::kCelu>(r, "Celu", {12}, FloatTypes(), [](const Node& n, Params* p) {
    p->alpha = n.GetFloat("alpha", 1.0f);
    if (p->alpha == 0) return InvalidModel(n.Describe(), ": attribute alpha must be non-zero");
    return Status::Ok();
  });
  RegUnary<UnOp::kSigmoid>(r, "Sigmoid", {1, 6, 13}, FloatTypes());
  RegActivation<UnOp::kHardSigmoid>(r, "HardSigmoid", {1, 6}, FloatTypes(), [](const Node& n, Params* p) {
    p->alpha = n.GetFloat("alpha", 0.2f);
    p->beta = n.GetFloat("beta", 0.5f);
    return Status::Ok();
  });
  RegUnary<UnOp::kHardSwish>(r, "HardSwish", {14}, FloatTypes());
  RegUnary<UnOp::kSoftplus>(r, "Softplus", {1}, FloatTypes());
  RegUnary<UnOp::kSoftsign>(r, "Softsign", {1}, FloatTypes());
  RegActivation<UnOp::kThresholdedRelu>(r, "ThresholdedRelu", {10}, FloatTypes(), alpha(1.0f));
  RegUnary<UnOp::kMish>(r, "Mish", {18}, FloatTypes());
  RegActivation<UnOp::kShrink>(r, "Shrink", {9}, NumericTypes(), [](const Node& n, Params* p) {
    p->lambd = n.GetFloat("lambd", 0.5f);
    p->bias = n.GetFloat("bias", 0.0f);
    return Status::Ok();
  });
  RegisterVersions(r, "", "Clip", {1, 6, 11, 12, 13}, NumericTypes(),
                   [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
                     const bool attr_form = init.node.opset < 11;
                     return std::unique_ptr<OpKernel>(
                         new ClipKernel(attr_form, init.node.GetFloat("min", std::numeric_limits<float>::lowest()),
                                        init.node.GetFloat("max", std::numeric_limits<float>::max())));
                   });
  RegActivation<UnOp::kGelu>(r, "Gelu", {1}, FloatTypes(), NoAttrs, "com.microsoft");
  // ai.onnx Gelu (opset 20): approximate "none" is the erf form, "tanh" FastGelu's.
  RegisterVersions(r, "", "Gelu", {20}, FloatTypes(), [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    const std::string approximate = init.node.GetString("approximate", "none");
    if (approximate == "none") return std::unique_ptr<OpKernel>(new UnaryKernel<UnOp::kGelu>(Params{}));
    if (approximate == "tanh") return std::unique_ptr<OpKernel>(new UnaryKernel<UnOp::kFastGelu>(Params{}));
    return InvalidModel(init.node.Describe(), ": unknown approximate '", approximate, "' (expected none or tanh)");
  });
  // ONNX Runtime's contrib op; the optimizer also makes it from Mul(x, Sigmoid(x)) (SiLU).
  RegActivation<UnOp::kQuickGelu>(r, "QuickGelu", {1}, FloatTypes(), alpha(1.702f), "com.microsoft");
  RegisterVersions(r, "com.microsoft", "FastGelu", {1}, FloatTypes(),
                   [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
                     return std::unique_ptr<OpKernel>(new FastGeluKernel());
                   });
}

}  // namespace strata::cpu
