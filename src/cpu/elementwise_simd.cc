// Optimized fp32 kernels for the hot elementwise ops. The loops are written so GCC
// auto-vectorizes them (branch-free math, no libm calls) and are instantiated three
// times: AVX-512, AVX2+FMA and baseline x86-64, picked at run time with
// __builtin_cpu_supports. The file itself is compiled for baseline x86-64, so the core
// runs anywhere. Large tensors are split across the session thread pool.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/kernel.h"
#include "cpu/bit_select.h"
#include "cpu/broadcast.h"
#include "cpu/transformer_kernels.h"

namespace strata::cpu {
namespace {

#define STRATA_ALWAYS_INLINE inline __attribute__((always_inline))

enum class Isa { kBase, kAvx2, kAvx512 };

std::atomic<int> g_isa_cap{static_cast<int>(Isa::kAvx512)};

Isa DetectIsa() {
  static const Isa detected = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
    return Isa::kBase;
  }();
  return static_cast<Isa>(std::min(static_cast<int>(detected), g_isa_cap.load(std::memory_order_relaxed)));
}

const char* IsaName() {
  switch (DetectIsa()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "vec";
  }
}

// ---- branch-free float math (vectorizable) ----

// FromBits, ToBits and Select: cpu/bit_select.h.

// exp(x): Cephes-style range reduction and degree-6 polynomial, ~1 ulp. 2^n is applied
// as two factors so that n in [-150, 128] stays representable: subnormal results come
// out right and x > 88.72 overflows to +inf by itself. NaN propagates through the
// polynomial. Only bit-blend selects, so GCC vectorizes it without masking.
STRATA_ALWAYS_INLINE float VExp(float x) {
  float xc = Select(x < -104.0f, -104.0f, x);
  xc = Select(xc > 89.0f, 89.0f, xc);
  // Adding 1.5*2^23 rounds to the nearest integer and leaves it in the low mantissa
  // bits, so n is read back without a float-to-int conversion (UB for NaN).
  const float fn = xc * 1.44269504088896341f + 12582912.0f;
  const float n = fn - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = ToBits(fn) - 0x4B400000;  // bits of 12582912.0f
  const int32_t h = ni >> 1;
  return (p * FromBits((h + 127) << 23)) * FromBits((ni - h + 127) << 23);
}

// tanh(x): rational approximation (Eigen's float tanh), a few ulp on [-7.9, 7.9];
// exactly +-1 beyond |x| = 9, x*(1 - 1.3e-7) for tiny |x|; NaN propagates.
STRATA_ALWAYS_INLINE float VTanh(float x) {
  const float clamp = 7.90531110763549805f;
  float xc = Select(x > clamp, clamp, x);
  xc = Select(xc < -clamp, -clamp, xc);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  // Past |x| = 9 tanh rounds to +-1 in float; the clamped fit would stay ~2.7e-7 short,
  // which callers such as FastGelu scale up by |x|.
  const float sign_one = FromBits((ToBits(x) & INT32_MIN) | ToBits(1.0f));
  return Select((x > 9.0f) | (x < -9.0f), sign_one, p / q);
}

// erf(x): rational approximation (Eigen's float erf) on [-4, 4], +-1 outside.
STRATA_ALWAYS_INLINE float VErf(float x) {
  float xc = Select(x > 4.0f, 4.0f, x);
  xc = Select(xc < -4.0f, -4.0f, xc);
  const float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * xc;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

// ---- elementwise functors ----

struct AddOp {
  STRATA_ALWAYS_INLINE float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  STRATA_ALWAYS_INLINE float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  STRATA_ALWAYS_INLINE float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  STRATA_ALWAYS_INLINE float operator()(float a, float b) const { return a / b; }
};
struct ReluOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
struct LeakyReluOp {
  float alpha;
  STRATA_ALWAYS_INLINE float operator()(float x) const { return Select(x < 0.0f, alpha * x, x); }
};
struct ClipOp {
  float lo, hi;
  STRATA_ALWAYS_INLINE float operator()(float x) const {
    const float v = x < lo ? lo : x;
    return hi < v ? hi : v;
  }
};
// HardSigmoid / HardSwish: compare-and-select clamps, as the reference (a NaN stays NaN).
struct HardSigmoidOp {
  float alpha, beta;
  STRATA_ALWAYS_INLINE float operator()(float x) const { return ClipOp{0.0f, 1.0f}(alpha * x + beta); }
};
struct HardSwishOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return x * ClipOp{0.0f, 1.0f}(x / 6.0f + 0.5f); }
};
// com.microsoft QuickGelu, x * sigmoid(alpha x); alpha = 1 is SiLU.
struct QuickGeluOp {
  float alpha;
  STRATA_ALWAYS_INLINE float operator()(float x) const { return x / (1.0f + VExp(-alpha * x)); }
};
struct ExpOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return VExp(x); }
};
struct SigmoidOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return 1.0f / (1.0f + VExp(-x)); }
};
struct TanhOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return VTanh(x); }
};
struct ErfOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return VErf(x); }
};
struct GeluOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const { return 0.5f * x * (1.0f + VErf(x * 0.70710678118654752f)); }
};
struct FastGeluOp {
  STRATA_ALWAYS_INLINE float operator()(float x) const {
    return 0.5f * x * (1.0f + VTanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};
// FastGelu with its bias input folded in.
struct FastGeluBiasOp {
  STRATA_ALWAYS_INLINE float operator()(float a, float b) const { return FastGeluOp()(a + b); }
};

// ---- loops, one instantiation per ISA ----

template <class Op>
STRATA_ALWAYS_INLINE void UnaryLoop(const float* x, float* y, int64_t n, const Op& op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
}

// One broadcast row: each side is either contiguous (stride 1) or a repeated scalar.
template <class Op>
STRATA_ALWAYS_INLINE void BinaryLoop(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n,
                                     const Op& op) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (sa == 1) {
    const float bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
  } else if (sb == 1) {
    const float av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
  } else {
    const float v = op(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

template <class Op>
__attribute__((target("avx512f"))) void UnaryAvx512(const float* x, float* y, int64_t n, Op op) {
  UnaryLoop(x, y, n, op);
}
template <class Op>
__attribute__((target("avx2,fma"))) void UnaryAvx2(const float* x, float* y, int64_t n, Op op) {
  UnaryLoop(x, y, n, op);
}
template <class Op>
void UnaryBase(const float* x, float* y, int64_t n, Op op) {
  UnaryLoop(x, y, n, op);
}
template <class Op>
__attribute__((target("avx512f"))) void BinaryAvx512(const float* a, int64_t sa, const float* b, int64_t sb, float* o,
                                                     int64_t n, Op op) {
  BinaryLoop(a, sa, b, sb, o, n, op);
}
template <class Op>
__attribute__((target("avx2,fma"))) void BinaryAvx2(const float* a, int64_t sa, const float* b, int64_t sb, float* o,
                                                    int64_t n, Op op) {
  BinaryLoop(a, sa, b, sb, o, n, op);
}
template <class Op>
void BinaryBase(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n, Op op) {
  BinaryLoop(a, sa, b, sb, o, n, op);
}

template <class Op>
void UnaryRun(const float* x, float* y, int64_t n, const Op& op) {
  switch (DetectIsa()) {
    case Isa::kAvx512:
      UnaryAvx512(x, y, n, op);
      break;
    case Isa::kAvx2:
      UnaryAvx2(x, y, n, op);
      break;
    default:
      UnaryBase(x, y, n, op);
      break;
  }
}
template <class Op>
void BinaryRun(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n, const Op& op) {
  switch (DetectIsa()) {
    case Isa::kAvx512:
      BinaryAvx512(a, sa, b, sb, o, n, op);
      break;
    case Isa::kAvx2:
      BinaryAvx2(a, sa, b, sb, o, n, op);
      break;
    default:
      BinaryBase(a, sa, b, sb, o, n, op);
      break;
  }
}

void Parallel(ThreadPool* pool, int64_t n, int64_t grain, ThreadPool::RangeRef fn) {
  if (pool) {
    pool->ParallelFor(n, grain, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

template <class Op>
void RunUnary(KernelContext& ctx, const Tensor& x, Tensor* out, const Op& op) {
  const float* px = x.data<float>();
  float* py = out->mutable_data<float>();
  Parallel(ctx.pool(), x.num_elements(), kParallelGrain,
           [&](int64_t b, int64_t e) { UnaryRun(px + b, py + b, e - b, op); });
}

// Runs a two-input plan: one row split across threads, or many rows in parallel chunks.
template <class Op>
void RunBinary(KernelContext& ctx, const BroadcastPlan& plan, const float* pa, const float* pb, float* po,
               const Op& op) {
  const int64_t rows = plan.rows(), inner = plan.inner();
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  if (rows == 0) return;
  if (rows == 1) {
    Parallel(ctx.pool(), inner, kParallelGrain,
             [&](int64_t b, int64_t e) { BinaryRun(pa + b * sa, sa, pb + b * sb, sb, po + b, e - b, op); });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  Parallel(ctx.pool(), rows, grain, [&](int64_t rb, int64_t re) {
    ForEachRow(plan, rb, re,
               [&](const int64_t* off, int64_t o) { BinaryRun(pa + off[0], sa, pb + off[1], sb, po + o, inner, op); });
  });
}

Status RequireFloat(const Node& node, const Tensor& t) {
  return t.dtype() == DataType::kFloat ? Status::Ok() : UnsupportedDtype(node, t.dtype());
}

template <class Op>
class FastBinaryKernel final : public OpKernel {
 public:
  explicit FastBinaryKernel(bool legacy) : legacy_(legacy) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* a, RequiredInput(ctx, 0));
    ASSIGN_OR_RETURN(const Tensor* b, RequiredInput(ctx, 1));
    RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 1));
    RETURN_IF_ERROR(RequireFloat(node, *a));
    Shape bshape = b->shape();
    if (legacy_) {
      ASSIGN_OR_RETURN(bshape, LegacyBroadcastShape(a->shape(), b->shape(), node));
    }
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({a->shape(), bshape}, node));
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, plan.out_shape));
    RunBinary(ctx, plan, a->data<float>(), b->data<float>(), out->mutable_data<float>(), Op());
    return Status::Ok();
  }

 private:
  bool legacy_;
};

template <class Op>
class FastUnaryKernel final : public OpKernel {
 public:
  explicit FastUnaryKernel(Op op) : op_(op) {}
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    RETURN_IF_ERROR(RequireFloat(ctx.node(), *x));
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    RunUnary(ctx, *x, out, op_);
    return Status::Ok();
  }

 private:
  Op op_;
};

class FastClipKernel final : public OpKernel {
 public:
  FastClipKernel(bool attr_form, float lo, float hi) : attr_form_(attr_form), lo_(lo), hi_(hi) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    RETURN_IF_ERROR(RequireFloat(node, *x));
    ClipOp op{lo_, hi_};
    if (!attr_form_) {
      RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 2));
      op = ClipOp{std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max()};
      for (int i = 0; i < 2; ++i) {
        const Tensor* t = ctx.input(1 + i);
        if (!t) continue;
        if (t->num_elements() != 1)
          return InvalidArgument(node.Describe(), ": input '", i == 0 ? "min" : "max", "' must be a scalar, got shape ",
                                 ShapeToString(t->shape()));
        (i == 0 ? op.lo : op.hi) = t->data<float>()[0];
      }
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    RunUnary(ctx, *x, out, op);
    return Status::Ok();
  }

 private:
  bool attr_form_;
  float lo_, hi_;
};

class FastFastGeluKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0));
    RETURN_IF_ERROR(RequireFloat(node, *x));
    const Tensor* bias = ctx.input(1);
    ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    if (!bias) {
      RunUnary(ctx, *x, out, FastGeluOp());
      return Status::Ok();
    }
    RETURN_IF_ERROR(CheckSameDtype(ctx, 0, 1));
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({x->shape(), bias->shape()}, node));
    if (plan.out_shape != x->shape())
      return InvalidArgument(node.Describe(), ": bias shape ", ShapeToString(bias->shape()),
                             " does not broadcast onto X shape ", ShapeToString(x->shape()));
    RunBinary(ctx, plan, x->data<float>(), bias->data<float>(), out->mutable_data<float>(), FastGeluBiasOp());
    return Status::Ok();
  }
};

const std::vector<DataType>& F32() {
  static const std::vector<DataType> v{DataType::kFloat};
  return v;
}

template <class Op>
void RegBinary(KernelRegistry& r, const std::string& name) {
  RegisterVersions(
      r, "", name, {1, 6, 7, 13, 14}, F32(),
      [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(new FastBinaryKernel<Op>(init.node.opset < 7));
      },
      false, IsaName());
}

template <class Op>
void RegUnary(KernelRegistry& r, const std::string& domain, const std::string& name, std::initializer_list<int> since) {
  RegisterVersions(
      r, domain, name, since, F32(),
      [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(new FastUnaryKernel<Op>(Op()));
      },
      false, IsaName());
}

}  // namespace

std::string SetElementwiseIsaCapForTesting(const std::string& cap) {
  Isa c = Isa::kAvx512;
  if (cap == "avx2") c = Isa::kAvx2;
  if (cap == "base") c = Isa::kBase;
  g_isa_cap.store(static_cast<int>(c), std::memory_order_relaxed);
  return IsaName();
}

void RegisterOptimizedKernels(KernelRegistry& r) {
  RegBinary<AddOp>(r, "Add");
  RegBinary<SubOp>(r, "Sub");
  RegBinary<MulOp>(r, "Mul");
  RegBinary<DivOp>(r, "Div");
  RegUnary<ReluOp>(r, "", "Relu", {1, 6, 13, 14});
  RegUnary<SigmoidOp>(r, "", "Sigmoid", {1, 6, 13});
  RegUnary<TanhOp>(r, "", "Tanh", {1, 6, 13});
  RegUnary<ExpOp>(r, "", "Exp", {1, 6, 13});
  RegUnary<ErfOp>(r, "", "Erf", {9, 13});
  RegUnary<GeluOp>(r, "com.microsoft", "Gelu", {1});
  RegUnary<HardSwishOp>(r, "", "HardSwish", {14});
  RegisterVersions(
      r, "", "HardSigmoid", {1, 6}, F32(),
      [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(new FastUnaryKernel<HardSigmoidOp>(
            HardSigmoidOp{init.node.GetFloat("alpha", 0.2f), init.node.GetFloat("beta", 0.5f)}));
      },
      false, IsaName());
  RegisterVersions(
      r, "com.microsoft", "QuickGelu", {1}, F32(),
      [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(
            new FastUnaryKernel<QuickGeluOp>(QuickGeluOp{init.node.GetFloat("alpha", 1.702f)}));
      },
      false, IsaName());
  RegisterVersions(
      r, "", "LeakyRelu", {1, 6, 16}, F32(),
      [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(
            new FastUnaryKernel<LeakyReluOp>(LeakyReluOp{init.node.GetFloat("alpha", 0.01f)}));
      },
      false, IsaName());
  RegisterVersions(
      r, "", "Clip", {1, 6, 11, 12, 13}, F32(),
      [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(
            new FastClipKernel(init.node.opset < 11, init.node.GetFloat("min", std::numeric_limits<float>::lowest()),
                               init.node.GetFloat("max", std::numeric_limits<float>::max())));
      },
      false, IsaName());
  RegisterVersions(
      r, "com.microsoft", "FastGelu", {1}, F32(),
      [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
        return std::unique_ptr<OpKernel>(new FastFastGeluKernel());
      },
      false, IsaName());
}

void GeluInPlace(float* y, int64_t n, bool tanh_form) {
  if (tanh_form) {
    UnaryRun(y, y, n, FastGeluOp());
  } else {
    UnaryRun(y, y, n, GeluOp());
  }
}

}  // namespace strata::cpu
