// Reference kernels for binary and variadic elementwise ops with numpy broadcasting
// (and legacy opset < 7 broadcasting): arithmetic, Pow, Mod, Min/Max/Sum/Mean,
// comparisons, logic, bit shifts, bitwise ops and PRelu. These are the test oracle:
// plain loops, no ISA tricks.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/kernel.h"
#include "cpu/broadcast.h"
#include "cpu/int_wrap.h"

namespace strata::cpu {
namespace {

enum class BinOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kFmod,
  kMin,
  kMax,
  kEqual,
  kLess,
  kGreater,
  kLessEq,
  kGreaterEq,
  kAnd,
  kOr,
  kXor,
  kShl,
  kShr,
  kBitAnd,
  kBitOr,
  kBitXor,
  kPRelu,
};

template <BinOp op>
constexpr bool kIsCompare = op == BinOp::kEqual || op == BinOp::kLess || op == BinOp::kGreater ||
                            op == BinOp::kLessEq || op == BinOp::kGreaterEq;
template <BinOp op>
constexpr bool kIsLogic = op == BinOp::kAnd || op == BinOp::kOr || op == BinOp::kXor;

// Which element types an op is defined for (compile-time, so invalid combinations are
// never instantiated; at run time they become UNSUPPORTED errors).
template <BinOp op, typename T>
constexpr bool Valid() {
  constexpr bool is_bool = std::is_same_v<T, bool>;
  if constexpr (kIsLogic<op>) return is_bool;
  if constexpr (op == BinOp::kEqual) return true;
  if constexpr (op == BinOp::kShl || op == BinOp::kShr) return kIsInt<T> && std::is_unsigned_v<T>;
  if constexpr (op == BinOp::kBitAnd || op == BinOp::kBitOr || op == BinOp::kBitXor) return kIsInt<T>;
  return !is_bool;
}

template <typename C>
C IntDiv(C a, C b) {
  // INT_MIN / -1 overflows (SIGFPE on x86); define it as two's-complement negation.
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return WrapNeg(a);
  }
  return static_cast<C>(a / b);
}

template <BinOp op, typename C>
inline auto Apply(C a, C b) {
  // Integers wrap as numpy's do (cpu/int_wrap.h: signed overflow is UB in C++).
  if constexpr (op == BinOp::kAdd) return WrapAdd(a, b);
  if constexpr (op == BinOp::kSub) return WrapSub(a, b);
  if constexpr (op == BinOp::kMul) return WrapMul(a, b);
  if constexpr (op == BinOp::kDiv) {
    if constexpr (std::is_integral_v<C>)
      return IntDiv(a, b);
    else
      return static_cast<C>(a / b);
  }
  if constexpr (op == BinOp::kFmod) {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
      }
      return static_cast<C>(a % b);
    } else {
      return static_cast<C>(std::fmod(a, b));
    }
  }
  if constexpr (op == BinOp::kMod) {
    // Python semantics: the result takes the sign of the divisor.
    C r;
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
      }
      r = static_cast<C>(a % b);
    } else {
      r = std::fmod(a, b);
    }
    if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) {
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    }
    return r;
  }
  if constexpr (op == BinOp::kMin || op == BinOp::kMax) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a)) return a;  // NaN propagates, like numpy.minimum
      if (std::isnan(b)) return b;
    }
    if constexpr (op == BinOp::kMin)
      return b < a ? b : a;
    else
      return a < b ? b : a;
  }
  if constexpr (op == BinOp::kEqual) return a == b;
  if constexpr (op == BinOp::kLess) return a < b;
  if constexpr (op == BinOp::kGreater) return a > b;
  if constexpr (op == BinOp::kLessEq) return a <= b;
  if constexpr (op == BinOp::kGreaterEq) return a >= b;
  if constexpr (op == BinOp::kAnd) return static_cast<bool>(a && b);
  if constexpr (op == BinOp::kOr) return static_cast<bool>(a || b);
  if constexpr (op == BinOp::kXor) return static_cast<bool>(a != b);
  if constexpr (op == BinOp::kShl || op == BinOp::kShr) {
    // Shifting by the type width or more is UB in C++; ONNX expects the bits to fall off.
    if (b >= static_cast<C>(sizeof(C) * 8)) return C(0);
    if constexpr (op == BinOp::kShl)
      return static_cast<C>(a << b);
    else
      return static_cast<C>(a >> b);
  }
  if constexpr (op == BinOp::kBitAnd) return static_cast<C>(a & b);
  if constexpr (op == BinOp::kBitOr) return static_cast<C>(a | b);
  if constexpr (op == BinOp::kBitXor) return static_cast<C>(a ^ b);
  if constexpr (op == BinOp::kPRelu) return a < C(0) ? WrapMul(a, b) : a;
}

template <BinOp op, typename T>
using OutT = std::conditional_t<kIsCompare<op> || kIsLogic<op>, bool, T>;

// out = op(a, b) over an existing plan. `out` must have plan.out_shape.
template <BinOp op, typename T>
Status BinaryInto(const Node& node, const Tensor& a, const Tensor& b, const BroadcastPlan& plan, Tensor* out) {
  using C = ComputeT<T>;
  using O = OutT<op, T>;
  if (plan.out_size == 0) return Status::Ok();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  O* po = out->mutable_data<O>();
  if constexpr (std::is_integral_v<T> && (op == BinOp::kDiv || op == BinOp::kMod || op == BinOp::kFmod)) {
    // Every element of B is used when the output is non-empty, so a zero anywhere traps.
    const int64_t nb = b.num_elements();
    for (int64_t i = 0; i < nb; ++i)
      if (pb[i] == T(0)) return RuntimeError(node.Describe(), ": integer division by zero (divisor element ", i, ")");
  }
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1), inner = plan.inner();
  ForEachRow(plan, 0, plan.rows(), [&](const int64_t* off, int64_t o) {
    const T* ra = pa + off[0];
    const T* rb = pb + off[1];
    for (int64_t j = 0; j < inner; ++j)
      po[o + j] = static_cast<O>(Apply<op, C>(static_cast<C>(ra[j * sa]), static_cast<C>(rb[j * sb])));
  });
  return Status::Ok();
}

template <BinOp op>
Status DispatchBinaryInto(const Node& node, const Tensor& a, const Tensor& b, const BroadcastPlan& plan, Tensor* out) {
  Status st = UnsupportedDtype(node, a.dtype());
  DispatchNumeric(a.dtype(), [&]<typename T>() {
    if constexpr (Valid<op, T>()) st = BinaryInto<op, T>(node, a, b, plan, out);
  });
  return st;
}

// Ops with opset < 7 used the `broadcast`/`axis` attributes instead of numpy rules.
template <BinOp op>
class BinaryKernel final : public OpKernel {
 public:
  explicit BinaryKernel(bool legacy) : legacy_(legacy) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(ctx, 0));
    ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(ctx, 1));
    RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 1));
    Shape bshape = b->shape();
    if (legacy_) {
      ASSIGN_OR_RETURN(bshape, LegacyBroadcastShape(a->shape(), b->shape(), node));
    }
    // PRelu before opset 7 applied a 1-D slope per channel (axis 1), not numpy-style.
    if (op == BinOp::kPRelu && node.opset < 7 && b->rank() == 1 && a->rank() >= 2 && b->dim(0) == a->dim(1) &&
        b->dim(0) != 1) {
      bshape.assign(a->rank() - 1, 1);
      bshape[0] = b->dim(0);
    }
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({a->shape(), bshape}, node));
    if (op == BinOp::kPRelu && plan.out_shape != a->shape())
      return InvalidArgument(node.Describe(), ": slope shape ", ShapeToString(b->shape()),
                             " is not unidirectionally broadcastable to X shape ", ShapeToString(a->shape()));
    const DataType out_dt = (kIsCompare<op> || kIsLogic<op>) ? DataType::kBool : a->dtype();
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, out_dt, plan.out_shape));
    return DispatchBinaryInto<op>(node, *a, *b, plan, out);
  }

 private:
  bool legacy_;
};

template <BinOp op>
KernelFactory BinaryFactory(bool has_legacy) {
  return [has_legacy](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new BinaryKernel<op>(has_legacy && init.node.opset < 7));
  };
}

// Sum, Mean, Min, Max: fold pairwise; broadcasting is associative so the result
// equals broadcasting all inputs at once.
enum class Variadic { kSum, kMean, kMin, kMax };

class VariadicKernel final : public OpKernel {
 public:
  explicit VariadicKernel(Variadic kind) : kind_(kind) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const size_t n = ctx.num_inputs();
    if (n == 0) return InvalidArgument(node.Describe(), ": needs at least one input");
    std::vector<Shape> shapes;
    for (size_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(const Tensor* t, RequiredInput(ctx, i));
      shapes.push_back(t->shape());
    }
    RETURN_IF_ERROR(CheckSameDtype(ctx, 0, n - 1));
    ASSIGN_OR_RETURN(BroadcastPlan all, MakeBroadcastPlan(shapes, node));
    const DataType dt = ctx.input(0)->dtype();
    Tensor acc = *ctx.input(0);
    for (size_t i = 1; i < n; ++i) {
      ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({acc.shape(), shapes[i]}, node));
      ASSIGN_OR_RETURN(Tensor next, Tensor::Allocate(dt, plan.out_shape, ctx.allocator()));
      const Tensor& b = *ctx.input(i);
      switch (kind_) {
        case Variadic::kSum:
        case Variadic::kMean:
          RETURN_IF_ERROR(DispatchBinaryInto<BinOp::kAdd>(node, acc, b, plan, &next));
          break;
        case Variadic::kMin:
          RETURN_IF_ERROR(DispatchBinaryInto<BinOp::kMin>(node, acc, b, plan, &next));
          break;
        case Variadic::kMax:
          RETURN_IF_ERROR(DispatchBinaryInto<BinOp::kMax>(node, acc, b, plan, &next));
          break;
      }
      acc = std::move(next);
    }
    // A single input still needs its shape broadcast-checked and a dtype check.
    Status st = UnsupportedDtype(node, dt);
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dt, all.out_shape));
    const double inv_n = 1.0 / static_cast<double>(n);
    const bool mean = kind_ == Variadic::kMean;
    DispatchNumeric(dt, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        const T* src = acc.data<T>();
        T* dst = out->mutable_data<T>();
        const int64_t cnt = all.out_size;
        for (int64_t i = 0; i < cnt; ++i)
          dst[i] = mean ? static_cast<T>(static_cast<ComputeT<T>>(static_cast<ComputeT<T>>(src[i]) * inv_n)) : src[i];
        st = Status::Ok();
      }
    });
    return st;
  }

 private:
  Variadic kind_;
};

// Pow: the exponent may have a different dtype than the base (T1 in the spec).
template <typename T, typename E>
T PowOne(T a, E b) {
  if constexpr (kIsInt<T> && kIsInt<E>) {
    using U = std::make_unsigned_t<T>;
    if (b < E(0)) {
      if (a == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>) {
        if (a == T(-1)) return (static_cast<uint64_t>(b) & 1) ? T(-1) : T(1);
      }
      return T(0);  // |a| > 1 truncates to 0; 0^-n has no integer value, 0 by convention
    }
    U result = 1, base = static_cast<U>(a);
    uint64_t e = static_cast<uint64_t>(b);
    while (e) {  // exact, wrapping like repeated integer multiplication (WrapMul: uint16 * uint16
                 // is an int product and could overflow int)
      if (e & 1) result = WrapMul(result, base);
      base = WrapMul(base, base);
      e >>= 1;
    }
    return static_cast<T>(result);
  } else if constexpr (kIsInt<T>) {
    double r = std::pow(static_cast<double>(a), static_cast<double>(static_cast<ComputeT<E>>(b)));
    // Out-of-range float-to-int conversion is UB; saturate instead.
    if (std::isnan(r)) return T(0);
    if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  } else {
    using C = ComputeT<T>;
    return static_cast<T>(std::pow(static_cast<C>(a), static_cast<C>(static_cast<ComputeT<E>>(b))));
  }
}

class PowKernel final : public OpKernel {
 public:
  explicit PowKernel(bool legacy) : legacy_(legacy) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(ctx, 0));
    ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(ctx, 1));
    Shape bshape = b->shape();
    if (legacy_) {
      ASSIGN_OR_RETURN(bshape, LegacyBroadcastShape(a->shape(), b->shape(), node));
    }
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({a->shape(), bshape}, node));
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, a->dtype(), plan.out_shape));
    if (plan.out_size == 0) return Status::Ok();
    Status st = UnsupportedDtype(node, a->dtype());
    DispatchNumeric(a->dtype(), [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        st = Unsupported(node.Describe(), ": unsupported exponent dtype ", DataTypeName(b->dtype()));
        DispatchNumeric(b->dtype(), [&]<typename E>() {
          if constexpr (!std::is_same_v<E, bool>) {
            const T* pa = a->data<T>();
            const E* pb = b->data<E>();
            T* po = out->mutable_data<T>();
            const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1), inner = plan.inner();
            ForEachRow(plan, 0, plan.rows(), [&](const int64_t* off, int64_t o) {
              for (int64_t j = 0; j < inner; ++j) po[o + j] = PowOne<T, E>(pa[off[0] + j * sa], pb[off[1] + j * sb]);
            });
            st = Status::Ok();
          }
        });
      }
    });
    return st;
  }

 private:
  bool legacy_;
};

std::vector<DataType> WithBool(std::vector<DataType> v) {
  v.push_back(DataType::kBool);
  return v;
}

}  // namespace

void RegisterBinaryKernels(KernelRegistry& r) {
  const std::string onnx;
  RegisterVersions(r, onnx, "Add", {1, 6, 7, 13, 14}, NumericTypes(), BinaryFactory<BinOp::kAdd>(true));
  RegisterVersions(r, onnx, "Sub", {1, 6, 7, 13, 14}, NumericTypes(), BinaryFactory<BinOp::kSub>(true));
  RegisterVersions(r, onnx, "Mul", {1, 6, 7, 13, 14}, NumericTypes(), BinaryFactory<BinOp::kMul>(true));
  RegisterVersions(r, onnx, "Div", {1, 6, 7, 13, 14}, NumericTypes(), BinaryFactory<BinOp::kDiv>(true));
  RegisterVersions(r, onnx, "Mod", {10, 13}, NumericTypes(),
                   [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
                     const int64_t fmod = init.node.GetInt("fmod", 0);
                     if (fmod != 0 && fmod != 1)
                       return InvalidModel(init.node.Describe(), ": attribute fmod must be 0 or 1, got ", fmod);
                     if (fmod) return std::unique_ptr<OpKernel>(new BinaryKernel<BinOp::kFmod>(false));
                     return std::unique_ptr<OpKernel>(new BinaryKernel<BinOp::kMod>(false));
                   });
  std::vector<DataType> pow_types = FloatTypes();
  pow_types.push_back(DataType::kInt32);
  pow_types.push_back(DataType::kInt64);
  RegisterVersions(r, onnx, "Pow", {1, 7, 12, 13, 15}, pow_types,
                   [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
                     return std::unique_ptr<OpKernel>(new PowKernel(init.node.opset < 7));
                   });

  auto variadic = [](Variadic kind) {
    return [kind](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return std::unique_ptr<OpKernel>(new VariadicKernel(kind));
    };
  };
  RegisterVersions(r, onnx, "Sum", {1, 6, 8, 13}, FloatTypes(), variadic(Variadic::kSum));
  RegisterVersions(r, onnx, "Mean", {1, 6, 8, 13}, FloatTypes(), variadic(Variadic::kMean));
  RegisterVersions(r, onnx, "Min", {1, 6, 8, 12, 13}, NumericTypes(), variadic(Variadic::kMin));
  RegisterVersions(r, onnx, "Max", {1, 6, 8, 12, 13}, NumericTypes(), variadic(Variadic::kMax));

  RegisterVersions(r, onnx, "Equal", {1, 7, 11, 13}, WithBool(NumericTypes()), BinaryFactory<BinOp::kEqual>(true));
  RegisterVersions(r, onnx, "Less", {1, 7, 9, 13}, NumericTypes(), BinaryFactory<BinOp::kLess>(true));
  RegisterVersions(r, onnx, "Greater", {1, 7, 9, 13}, NumericTypes(), BinaryFactory<BinOp::kGreater>(true));
  RegisterVersions(r, onnx, "LessOrEqual", {12, 16}, NumericTypes(), BinaryFactory<BinOp::kLessEq>(false));
  RegisterVersions(r, onnx, "GreaterOrEqual", {12, 16}, NumericTypes(), BinaryFactory<BinOp::kGreaterEq>(false));
  RegisterVersions(r, onnx, "And", {1, 7}, BoolTypes(), BinaryFactory<BinOp::kAnd>(true));
  RegisterVersions(r, onnx, "Or", {1, 7}, BoolTypes(), BinaryFactory<BinOp::kOr>(true));
  RegisterVersions(r, onnx, "Xor", {1, 7}, BoolTypes(), BinaryFactory<BinOp::kXor>(true));

  RegisterVersions(r, onnx, "BitShift", {11}, UnsignedTypes(),
                   [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
                     const std::string dir = init.node.GetString("direction", "");
                     if (dir == "LEFT") return std::unique_ptr<OpKernel>(new BinaryKernel<BinOp::kShl>(false));
                     if (dir == "RIGHT") return std::unique_ptr<OpKernel>(new BinaryKernel<BinOp::kShr>(false));
                     return InvalidModel(init.node.Describe(),
                                         ": attribute direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
                   });
  RegisterVersions(r, onnx, "BitwiseAnd", {18}, IntegerTypes(), BinaryFactory<BinOp::kBitAnd>(false));
  RegisterVersions(r, onnx, "BitwiseOr", {18}, IntegerTypes(), BinaryFactory<BinOp::kBitOr>(false));
  RegisterVersions(r, onnx, "BitwiseXor", {18}, IntegerTypes(), BinaryFactory<BinOp::kBitXor>(false));
  RegisterVersions(r, onnx, "PRelu", {1, 6, 7, 9, 16}, NumericTypes(), BinaryFactory<BinOp::kPRelu>(false));
}

}  // namespace strata::cpu
