// MatMul and Gemm: shape logic, reference kernels (the test oracle) and registration.
#include <algorithm>
#include <cmath>

#include "core/kernel.h"
#include "cpu/gemm_kernels.h"
#include "cpu/int_wrap.h"
#include "cpu/register.h"
#include "cpu/xnnpack_util.h"

namespace strata {

Result<MatMulDims> ComputeMatMulDims(const Shape& a_in, const Shape& b_in, const Node& node) {
  if (a_in.empty() || b_in.empty())
    return InvalidArgument(node.Describe(), ": MatMul operands must have rank >= 1, got ", ShapeToString(a_in),
                           " and ", ShapeToString(b_in));
  Shape a = a_in, b = b_in;
  bool squeeze_m = a.size() == 1, squeeze_n = b.size() == 1;
  if (squeeze_m) a.insert(a.begin(), 1);
  if (squeeze_n) b.push_back(1);
  MatMulDims d;
  d.M = a[a.size() - 2];
  d.K = a.back();
  d.N = b.back();
  if (b[b.size() - 2] != d.K)
    return InvalidArgument(node.Describe(), ": MatMul inner dimensions differ: A ", ShapeToString(a_in), " has K=", d.K,
                           ", B ", ShapeToString(b_in), " has K=", b[b.size() - 2]);
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(ab, bb, node));
  ASSIGN_OR_RETURN(d.batch, CheckedNumElements(batch, "MatMul batch"));
  // Map each output matrix to its A and B matrices by walking the broadcast batch index.
  size_t r = batch.size();
  Shape a_stride(r, 0), b_stride(r, 0);
  int64_t sa = 1, sb = 1;
  for (size_t i = r; i-- > 0;) {
    size_t ia = i + ab.size() - r, ib = i + bb.size() - r;
    bool has_a = i >= r - ab.size(), has_b = i >= r - bb.size();
    if (has_a) {
      a_stride[i] = ab[ia] == 1 ? 0 : sa;
      sa *= ab[ia];
    }
    if (has_b) {
      b_stride[i] = bb[ib] == 1 ? 0 : sb;
      sb *= bb[ib];
    }
  }
  d.a_index = BatchIndex(batch, a_stride);
  d.b_index = BatchIndex(batch, b_stride);
  d.out = batch;
  if (!squeeze_m) d.out.push_back(d.M);
  if (!squeeze_n) d.out.push_back(d.N);
  return d;
}

Result<GemmDims> ComputeGemmDims(const Node& node, const Shape& a, const Shape& b, const Tensor* c) {
  if (a.size() != 2 || b.size() != 2)
    return InvalidArgument(node.Describe(), ": Gemm needs 2-D A and B, got ", ShapeToString(a), " and ",
                           ShapeToString(b));
  GemmDims d;
  d.trans_a = node.GetInt("transA", 0) != 0;
  d.trans_b = node.GetInt("transB", 0) != 0;
  d.alpha = node.GetFloat("alpha", 1.0f);
  d.beta = node.GetFloat("beta", 1.0f);
  d.M = d.trans_a ? a[1] : a[0];
  d.K = d.trans_a ? a[0] : a[1];
  int64_t kb = d.trans_b ? b[1] : b[0];
  d.N = d.trans_b ? b[0] : b[1];
  if (kb != d.K)
    return InvalidArgument(node.Describe(), ": Gemm inner dimensions differ: A ", ShapeToString(a),
                           (d.trans_a ? " (transposed)" : ""), " gives K=", d.K, ", B ", ShapeToString(b),
                           (d.trans_b ? " (transposed)" : ""), " gives K=", kb);
  if (c) {
    const Shape& cs = c->shape();
    bool ok = cs.size() <= 2;
    if (ok && cs.size() == 1) ok = cs[0] == 1 || cs[0] == d.N;
    if (ok && cs.size() == 2) ok = (cs[0] == 1 || cs[0] == d.M) && (cs[1] == 1 || cs[1] == d.N);
    // Opsets 1-6: without broadcast=1, C must already be [M, N].
    if (ok && node.opset < 7 && node.GetInt("broadcast", 0) == 0)
      ok = cs.size() == 2 && cs[0] == d.M && cs[1] == d.N;
    if (!ok)
      return InvalidArgument(node.Describe(), ": Gemm C of shape ", ShapeToString(cs),
                             " cannot be broadcast to [", d.M, ",", d.N, "]");
  }
  return d;
}

Result<Fp32MatMulCall> BeginFp32MatMul(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b) return InvalidArgument(node.Describe(), ": MatMul needs inputs A and B");
  if (a->dtype() != DataType::kFloat || b->dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": MatMul dtypes differ: A ", DataTypeName(a->dtype()), ", B ",
                           DataTypeName(b->dtype()));
  Fp32MatMulCall c;
  ASSIGN_OR_RETURN(c.d, ComputeMatMulDims(a->shape(), b->shape(), node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, c.d.out));
  c.a = a->data<float>();
  c.b = b->data<float>();
  c.y = y->mutable_data<float>();
  return c;
}

namespace {

template <typename T>
void RefMatMulTyped(const T* a, const T* b, T* y, const MatMulDims& d, const FusedActivation& act) {
  using A = typename AccType<T>::type;
  for (int64_t t = 0; t < d.batch; ++t) {
    const T* am = a + d.a_index[t] * d.M * d.K;
    const T* bm = b + d.b_index[t] * d.K * d.N;
    T* ym = y + t * d.M * d.N;
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        // Integer products wrap (numpy's and ORT's int32 result) instead of overflowing.
        A acc = 0;
        for (int64_t k = 0; k < d.K; ++k)
          acc = WrapAdd(acc, WrapMul(static_cast<A>(am[m * d.K + k]), static_cast<A>(bm[k * d.N + n])));
        ym[m * d.N + n] = FromAcc<T>(acc);
      }
  }
  if constexpr (!std::is_integral_v<T>) ApplyActivation(y, d.batch * d.M * d.N, act);
}

Status CheckSameType(const Node& node, const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype())
    return InvalidArgument(node.Describe(), ": ", what, " dtype ", DataTypeName(b.dtype()), " differs from A's ",
                           DataTypeName(a.dtype()));
  return Status::Ok();
}

class RefMatMulKernel final : public OpKernel {
 public:
  explicit RefMatMulKernel(FusedActivation act) : act_(act) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b) return InvalidArgument(node.Describe(), ": MatMul needs inputs A and B");
    RETURN_IF_ERROR(CheckSameType(node, *a, *b, "B"));
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(a->shape(), b->shape(), node));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), d.out));
    bool handled = false;
    DispatchNumeric(a->dtype(), [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        RefMatMulTyped<T>(a->data<T>(), b->data<T>(), y->mutable_data<T>(), d, act_);
        handled = true;
      }
    });
    if (!handled) return Unsupported(node.Describe(), ": MatMul does not support dtype ", DataTypeName(a->dtype()));
    return Status::Ok();
  }

 private:
  FusedActivation act_;
};

// alpha or beta as an integer Gemm's scale: truncated toward zero (so 2.5 scales by 2).
// NaN, infinities and values outside int64 would make the conversion undefined.
Result<int64_t> IntegerScale(const Node& node, const char* name, float v) {
  if (!(std::fabs(v) < 9.2233720368547758e18f))
    return InvalidArgument(node.Describe(), ": ", name, " ", v,
                           " is not a finite value within int64, which an integer Gemm scales by");
  return static_cast<int64_t>(v);
}

template <typename T>
void RefGemmTyped(const T* a, const T* b, const Tensor* c, T* y, const GemmDims& d, const FusedActivation& act,
                  int64_t alpha_i, int64_t beta_i) {
  using A = typename AccType<T>::type;
  // alpha/beta are floats; integer Gemm scales in the accumulator type, wrapping like the
  // products (int64 -> uint64 is modulo 2^64, defined).
  const A alpha = std::is_integral_v<T> ? static_cast<A>(alpha_i) : static_cast<A>(d.alpha);
  const A beta = std::is_integral_v<T> ? static_cast<A>(beta_i) : static_cast<A>(d.beta);
  for (int64_t m = 0; m < d.M; ++m)
    for (int64_t n = 0; n < d.N; ++n) {
      A acc = 0;
      for (int64_t k = 0; k < d.K; ++k) {
        A av = static_cast<A>(d.trans_a ? a[k * d.M + m] : a[m * d.K + k]);
        A bv = static_cast<A>(d.trans_b ? b[n * d.K + k] : b[k * d.N + n]);
        acc = WrapAdd(acc, WrapMul(av, bv));
      }
      A v = WrapMul(alpha, acc);
      if (c && d.beta != 0.0f)
        v = WrapAdd(v, WrapMul(beta, static_cast<A>(c->data<T>()[GemmCIndex(c->shape(), m, n)])));
      y[m * d.N + n] = FromAcc<T>(v);
    }
  if constexpr (!std::is_integral_v<T>) ApplyActivation(y, d.M * d.N, act);
}

class RefGemmKernel final : public OpKernel {
 public:
  explicit RefGemmKernel(FusedActivation act) : act_(act) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    const Tensor* c = ctx.input(2);
    if (!a || !b) return InvalidArgument(node.Describe(), ": Gemm needs inputs A and B");
    if (!c && node.opset < 11) return InvalidArgument(node.Describe(), ": Gemm before opset 11 requires input C");
    RETURN_IF_ERROR(CheckSameType(node, *a, *b, "B"));
    if (c) RETURN_IF_ERROR(CheckSameType(node, *a, *c, "C"));
    ASSIGN_OR_RETURN(GemmDims d, ComputeGemmDims(node, a->shape(), b->shape(), c));
    int64_t alpha_i = 0, beta_i = 0;
    if (!IsFloatType(a->dtype())) {
      ASSIGN_OR_RETURN(alpha_i, IntegerScale(node, "alpha", d.alpha));
      if (c) {
        ASSIGN_OR_RETURN(beta_i, IntegerScale(node, "beta", d.beta));
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a->dtype(), {d.M, d.N}));
    bool handled = false;
    DispatchNumeric(a->dtype(), [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        RefGemmTyped<T>(a->data<T>(), b->data<T>(), c, y->mutable_data<T>(), d, act_, alpha_i, beta_i);
        handled = true;
      }
    });
    if (!handled) return Unsupported(node.Describe(), ": Gemm does not support dtype ", DataTypeName(a->dtype()));
    return Status::Ok();
  }

 private:
  FusedActivation act_;
};

const std::vector<DataType> kGemmTypes = {DataType::kFloat,  DataType::kDouble, DataType::kFloat16,
                                          DataType::kBFloat16, DataType::kInt32, DataType::kInt64,
                                          DataType::kUInt32, DataType::kUInt64};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeRefMatMul(const KernelInit& init) {
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  return std::unique_ptr<OpKernel>(std::make_unique<RefMatMulKernel>(act));
}

Result<std::unique_ptr<OpKernel>> MakeRefGemm(const KernelInit& init) {
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  return std::unique_ptr<OpKernel>(std::make_unique<RefGemmKernel>(act));
}

void RegisterGemmKernels(KernelRegistry& r) {
  r.Register({.domain = "", .op_type = "MatMul", .since_version = 1, .types = kGemmTypes, .factory = MakeRefMatMul});
  r.Register({.domain = "", .op_type = "Gemm", .since_version = 1, .types = kGemmTypes, .factory = MakeRefGemm});
  r.Register({.domain = "", .op_type = "MatMul", .since_version = 1, .types = {DataType::kFloat}, .factory = MakeFastMatMul,
              .reference = false, .impl = "xnnpack"});
  r.Register({.domain = "", .op_type = "Gemm", .since_version = 1, .types = {DataType::kFloat}, .factory = MakeFastGemm,
              .reference = false, .impl = "xnnpack"});
}

}  // namespace strata
