// MatMul/Gemm kernels on the AVX-512 SGEMM. Constant B is packed at session creation;
// run-time B (attention products, Gemm on computed operands) is packed per call into a
// per-thread scratch buffer by sgemm::GemmUnpacked.
#include "cpu/sgemm_ops.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/constant_release.h"
#include "cpu/gemm_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

sgemm::Epilogue ClampEpilogue(const FusedActivation& act) {
  sgemm::Epilogue ep;
  ep.min = act.min;
  ep.max = act.max;
  return ep;
}

Status WithNode(const Node& node, Status st) {
  if (st.ok()) return st;
  return Status(st.code(), node.Describe() + ": " + st.message());
}

class SgemmConstMatMul final : public OpKernel, public PacksConstantInputs {
 public:
  std::vector<size_t> PackedConstantInputs() const override { return {1}; }
  SgemmConstMatMul(sgemm::PackedB b, FusedActivation act) : b_(std::move(b)), act_(act) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    if (!a) return InvalidArgument(node.Describe(), ": MatMul needs input A");
    if (a->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from B's float32");
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(a->shape(), {b_.k(), b_.n()}, node));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, d.out));
    // With a 2-D B every A matrix meets the same B: all batches are one tall product.
    return WithNode(node, sgemm::Gemm(d.batch * d.M, a->data<float>(), d.K, b_, y->mutable_data<float>(), d.N,
                                      ClampEpilogue(act_), ctx.pool()));
  }

 private:
  sgemm::PackedB b_;
  FusedActivation act_;
};

constexpr double kMinBatchParallelFlops = 4.0e6;

class SgemmMatMul final : public OpKernel {
 public:
  explicit SgemmMatMul(FusedActivation act) : act_(act) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(Fp32MatMulCall call, BeginFp32MatMul(ctx));
    const MatMulDims& d = call.d;
    const float* ap = call.a;
    const float* bp = call.b;
    float* yp = call.y;
    const int64_t M = d.M, N = d.N, K = d.K;
    const sgemm::Epilogue ep = ClampEpilogue(act_);
    if (d.batch == 0 || M == 0 || N == 0) return Status::Ok();
    // One B for consecutive A matrices (B 2-D, A batched): a single tall product.
    bool one_b = true;
    for (int64_t t = 0; t < d.batch; ++t) one_b = one_b && d.b_index[t] == 0 && d.a_index[t] == t;
    if (one_b)
      return WithNode(node, sgemm::GemmUnpacked(d.batch * M, N, K, ap, K, bp, N, false, yp, N, ep, ctx.pool()));
    ThreadPool* pool = ctx.pool();
    const int64_t threads = pool ? pool->num_threads() : 1;
    // Enough matrices for every thread: one whole product per task, each on its own
    // thread (attention heads). Otherwise each product uses the pool itself. Products
    // too small to repay a thread hand-off (the same bound sgemm::Gemm uses) stay on
    // this thread, which also keeps the pool threads' lazily created SGEMM scratch out
    // of small models' runs (docs/hardening.md "Real-time use").
    const double flops = 2.0 * static_cast<double>(M) * N * K * d.batch;
    if (threads > 1 && d.batch >= threads && flops >= kMinBatchParallelFlops) {
      // Only the first failing product is remembered (no per-call Status table); it is
      // re-run alone afterwards to report its error. Success is the only hot path.
      std::atomic<int64_t> failed{d.batch};
      pool->ParallelFor(d.batch, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          if (!sgemm::GemmUnpacked(M, N, K, ap + d.a_index[t] * M * K, K, bp + d.b_index[t] * K * N, N, false,
                                   yp + t * M * N, N, ep, nullptr)
                   .ok()) {
            int64_t cur = failed.load();
            while (t < cur && !failed.compare_exchange_weak(cur, t)) {
            }
          }
      });
      const int64_t t = failed.load();
      if (t < d.batch)
        return WithNode(node, sgemm::GemmUnpacked(M, N, K, ap + d.a_index[t] * M * K, K, bp + d.b_index[t] * K * N, N,
                                                  false, yp + t * M * N, N, ep, nullptr));
      return Status::Ok();
    }
    for (int64_t t = 0; t < d.batch; ++t)
      RETURN_IF_ERROR(
          WithNode(node, sgemm::GemmUnpacked(M, N, K, ap + d.a_index[t] * M * K, K, bp + d.b_index[t] * K * N, N, false,
                                             yp + t * M * N, N, ep, pool)));
    return Status::Ok();
  }

 private:
  FusedActivation act_;
};

// Gemm: Y = clamp(alpha * op(A) op(B) + beta * C). B is either packed at creation
// (constant) or per call. A constant C that is a row vector becomes the bias; any
// other C is written into Y first (times beta) and the product accumulated onto it.
class SgemmGemm final : public OpKernel, public PacksConstantInputs {
 public:
  SgemmGemm(GemmDims d, FusedActivation act) : d_(d), act_(act) {}
  // Compute reads C's data only when it was not folded into bias_ (its shape always).
  std::vector<size_t> PackedConstantInputs() const override {
    std::vector<size_t> slots;
    if (packed_) slots.push_back(1);
    if (!bias_.empty()) slots.push_back(2);
    return slots;
  }
  Status Init(const Node& node, const float* b, const Tensor* c_const, ThreadPool* pool) {
    if (b) {
      ASSIGN_OR_RETURN(b_, sgemm::PackB(b, d_.K, d_.N, d_.trans_b, 0, pool));
      packed_ = true;
    }
    if (c_const && d_.beta != 0.0f) {
      const Shape& cs = c_const->shape();
      const int64_t last = cs.empty() ? 1 : cs.back();
      // A C that does not fit [M, N] is left to Compute, where ComputeGemmDims names it.
      const bool fits = cs.size() <= 2 && (last == 1 || last == d_.N);
      if (fits && (cs.size() < 2 || cs[0] == 1)) {
        bias_.resize(d_.N);
        for (int64_t i = 0; i < d_.N; ++i) bias_[i] = d_.beta * c_const->data<float>()[GemmCIndex(cs, 0, i)];
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    const Tensor* c = ctx.input(2);
    if (!a || (!packed_ && !b)) return InvalidArgument(node.Describe(), ": Gemm needs inputs A and B");
    if (!c && node.opset < 11) return InvalidArgument(node.Describe(), ": Gemm before opset 11 requires input C");
    for (const Tensor* t : {a, packed_ ? nullptr : b, c})
      if (t && t->dtype() != DataType::kFloat)
        return InvalidArgument(node.Describe(), ": Gemm operands must all be float32, got ", DataTypeName(t->dtype()));
    if (a->rank() != 2) return InvalidArgument(node.Describe(), ": Gemm needs 2-D A, got ", ShapeToString(a->shape()));
    const Shape bshape = packed_ ? (d_.trans_b ? Shape{d_.N, d_.K} : Shape{d_.K, d_.N}) : b->shape();
    ASSIGN_OR_RETURN(GemmDims d, ComputeGemmDims(node, a->shape(), bshape, c));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {d.M, d.N}));
    if (d.M == 0 || d.N == 0) return Status::Ok();
    float* yp = y->mutable_data<float>();

    sgemm::Epilogue ep = ClampEpilogue(act_);
    ep.alpha = d.alpha;
    if (!bias_.empty()) {
      ep.bias = bias_.data();
    } else if (c && d.beta != 0.0f) {
      const float* cp = c->data<float>();
      for (int64_t m = 0; m < d.M; ++m)
        for (int64_t n = 0; n < d.N; ++n) yp[m * d.N + n] = d.beta * cp[GemmCIndex(c->shape(), m, n)];
      ep.accumulate = true;
    }

    const float* ap = a->data<float>();
    Tensor scratch;
    if (d.trans_a && d.K > 0) {
      // A is [K, M]; the kernel reads rows of [M, K].
      ASSIGN_OR_RETURN(scratch, AllocateScratch(d.M * d.K, ctx.allocator(), node));
      TransposeNchwToNhwc(ap, scratch.mutable_data<float>(), 1, d.K, d.M, ctx.pool());
      ap = scratch.data<float>();
    }
    if (packed_) return WithNode(node, sgemm::Gemm(d.M, ap, d.K, b_, yp, d.N, ep, ctx.pool()));
    return WithNode(node, sgemm::GemmUnpacked(d.M, d.N, d.K, ap, d.K, b->data<float>(), d.trans_b ? d.K : d.N,
                                              d.trans_b, yp, d.N, ep, ctx.pool()));
  }

 private:
  GemmDims d_;
  FusedActivation act_;
  bool packed_ = false;
  sgemm::PackedB b_;
  std::vector<float> bias_;  // beta * C for a constant row-vector C
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeSgemmMatMul(const KernelInit& init) {
  if (!sgemm::Available()) return std::unique_ptr<OpKernel>();
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  const Tensor* b = init.constant_input(1);
  if (b && b->dtype() != DataType::kFloat) return std::unique_ptr<OpKernel>();
  // A constant batched B is packed per call like a run-time one.
  if (b && b->rank() == 2) {
    auto packed = sgemm::PackB(b->data<float>(), b->dim(0), b->dim(1), false, 0, init.pool);
    if (!packed.ok()) return WithNode(init.node, packed.status());
    return std::unique_ptr<OpKernel>(std::make_unique<SgemmConstMatMul>(std::move(packed).value(), act));
  }
  return std::unique_ptr<OpKernel>(std::make_unique<SgemmMatMul>(act));
}

Result<std::unique_ptr<OpKernel>> MakeSgemmGemm(const KernelInit& init) {
  if (!sgemm::Available()) return std::unique_ptr<OpKernel>();
  const Node& node = init.node;
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  const Tensor* b = init.constant_input(1);
  const Tensor* c = init.constant_input(2);
  if ((b && (b->dtype() != DataType::kFloat || b->rank() != 2)) || (c && c->dtype() != DataType::kFloat))
    return std::unique_ptr<OpKernel>();
  GemmDims d;
  d.trans_a = node.GetInt("transA", 0) != 0;
  d.trans_b = node.GetInt("transB", 0) != 0;
  d.alpha = node.GetFloat("alpha", 1.0f);
  d.beta = node.GetFloat("beta", 1.0f);
  if (b) {
    d.K = d.trans_b ? b->dim(1) : b->dim(0);
    d.N = d.trans_b ? b->dim(0) : b->dim(1);
  }
  auto k = std::make_unique<SgemmGemm>(d, act);
  RETURN_IF_ERROR(k->Init(node, b ? b->data<float>() : nullptr, b ? c : nullptr, init.pool));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace strata
