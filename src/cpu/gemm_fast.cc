// Optimized fp32 MatMul/Gemm.
//  * Constant B (weights): packed ONCE in the factory (scaled by alpha) into GEMV column
//    panels (cpu/gemv.h); Gemm's C becomes the bias when it is a constant row vector,
//    otherwise beta*C is added after the product. Products with at most kGemvMaxRows
//    rows (batch-1 fully-connected layers) run on the GEMV kernel; larger ones on an
//    XNNPACK fully-connected operator built from the panels on first use, so models
//    that only ever run batch 1 keep a single copy of the weights.
//  * Run-time B (attention-style batched products, Gemm on computed B): OpenBLAS sgemm, single-threaded
//    inside each call, parallelised over matrices/row blocks by our own pool so it never
//    competes with pthreadpool for cores.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/constant_release.h"
#include "core/kernel_stop.h"
#include "cpu/gemm_kernels.h"
#include "cpu/gemv.h"
#include "cpu/sgemm_ops.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// Constant-B product: GEMV panels for small M, an XNNPACK fully-connected operator
// (created lazily from the panels) otherwise. An xnn_operator stores the pointers given
// to setup, so setup+run of one operator must not interleave between threads: the mutex
// serialises concurrent large-M runs of the same node (Compute is const and may be
// called from several sessions' runs at once). The GEMV path takes no lock.
class ConstantBProduct {
 public:
  // bias: N floats or null; the clamp [act.min, act.max] is applied after the bias.
  // pool: the session's, whose threads share the packing of a large matrix.
  Status Init(const Node& node, const sgemm::WeightRows& b, int64_t k, int64_t n, bool b_is_nk, float alpha,
              const float* bias, const FusedActivation& act, ThreadPool* pool) {
    auto w = GemvWeights::Pack(b, k, n, b_is_nk, alpha, bias, pool);
    if (!w.ok()) return MakeStatus(w.status().code(), node.Describe(), ": ", w.status().message());
    w_ = std::move(w).value();
    has_bias_ = bias != nullptr;
    act_ = act;
    return Status::Ok();
  }
  // Y[m, N] = act(A[m, K] . B + bias), A and Y contiguous.
  Status Run(const Node& node, int64_t m, const float* a, float* y, ThreadPool* pool) const {
    if (m == 0 || w_.n() == 0) return Status::Ok();
    if (m <= kGemvMaxRows) {
      Gemv(a, w_.k(), m, w_, y, w_.n(), act_.min, act_.max, pool);
      return Status::Ok();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!op_) RETURN_IF_ERROR(CreateXnn(node));
    pthreadpool_t tp = pool ? pool->handle() : nullptr;
    xnn_status s = xnn_setup_fully_connected_nc_f32(op_.get(), m, a, y, tp);
    if (s == xnn_status_success) s = xnn_run_operator(op_.get(), tp);
    // pthreadpool's workers would otherwise spin ~20 ms of CPU against strata's own pool.
    if (tp) ParkXnnWorkers(tp);
    if (s != xnn_status_success) return RuntimeError(node.Describe(), ": XNNPACK fully_connected: ", XnnStatusName(s));
    return Status::Ok();
  }

 private:
  Status CreateXnn(const Node& node) const {
    RETURN_IF_ERROR(EnsureXnnpackInitialized());
    const int64_t k = w_.k(), n = w_.n();
    // XNNPACK takes [N, K] weights; they come back out of the panels (already alpha-scaled).
    std::vector<float> w_nk(static_cast<size_t>(k * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) w_nk[i * k + j] = w_.at(j, i);
    xnn_operator_t op = nullptr;
    xnn_status s = xnn_create_fully_connected_nc_f32(k, n, k, n, w_nk.data(), has_bias_ ? w_.bias() : nullptr, act_.min,
                                                     act_.max, 0, &op);
    if (s != xnn_status_success)
      return Unsupported(node.Describe(), ": XNNPACK fully_connected rejected K=", k, " N=", n, ": ", XnnStatusName(s));
    op_.reset(op);
    return Status::Ok();
  }

  GemvWeights w_;
  bool has_bias_ = false;
  FusedActivation act_;
  mutable XnnOperatorPtr op_;
  mutable std::mutex mu_;
};

class FcMatMulKernel final : public OpKernel, public PacksConstantInputs {
 public:
  FcMatMulKernel(int64_t k, int64_t n) : k_(k), n_(n) {}
  std::vector<size_t> PackedConstantInputs() const override { return {1}; }
  Status Init(const Node& node, const float* b, const FusedActivation& act, ThreadPool* pool) {
    sgemm::WeightRows rows;
    rows.data = b;
    return fc_.Init(node, rows, k_, n_, /*b_is_nk=*/false, 1.0f, nullptr, act, pool);
  }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    if (!a) return InvalidArgument(node.Describe(), ": MatMul needs input A");
    if (a->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from B's float32");
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(a->shape(), {k_, n_}, node));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, d.out));
    return fc_.Run(node, d.batch * d.M, a->data<float>(), y->mutable_data<float>(), ctx.pool());
  }

 private:
  int64_t k_, n_;
  ConstantBProduct fc_;
};

class FcGemmKernel final : public OpKernel, public PacksConstantInputs {
 public:
  FcGemmKernel(GemmDims d, FusedActivation act) : d_(d), act_(act) {}
  // A constant C folded into the bias is not read again (only its shape).
  std::vector<size_t> PackedConstantInputs() const override {
    if (bias_folded_ && c_const_) return {1, 2};
    return {1};
  }
  // A constant row-vector C is folded into the bias; any other C is added (times beta) at run time.
  // B^T on disk is read a panel's rows at a time (sgemm::WeightRows).
  Status Init(const Node& node, const sgemm::WeightRows& b, bool has_c, const Tensor* c_const, ThreadPool* pool) {
    std::vector<float> bias;
    bool row_c = false;
    if (c_const) {
      const Shape& cs = c_const->shape();
      int64_t last = cs.empty() ? 1 : cs.back();
      if (cs.size() > 2 || (last != 1 && last != d_.N))
        return InvalidArgument(node.Describe(), ": Gemm C of shape ", ShapeToString(cs), " does not match N=", d_.N);
      row_c = cs.size() < 2 || cs[0] == 1;
    }
    bias_folded_ = !has_c || row_c || d_.beta == 0.0f;
    c_const_ = c_const != nullptr;
    if (row_c && d_.beta != 0.0f) {
      bias.resize(d_.N);
      for (int64_t i = 0; i < d_.N; ++i) bias[i] = d_.beta * c_const->data<float>()[GemmCIndex(c_const->shape(), 0, i)];
    }
    // With a run-time C the clamp must come after adding it, so XNNPACK does not clamp.
    FusedActivation op_act = bias_folded_ ? act_ : FusedActivation{};
    return fc_.Init(node, b, d_.K, d_.N, d_.trans_b, d_.alpha, bias.empty() ? nullptr : bias.data(), op_act, pool);
  }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* c = ctx.input(2);
    if (!a) return InvalidArgument(node.Describe(), ": Gemm needs input A");
    if (!c && node.opset < 11) return InvalidArgument(node.Describe(), ": Gemm before opset 11 requires input C");
    if (a->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from B's float32");
    Shape bshape = d_.trans_b ? Shape{d_.N, d_.K} : Shape{d_.K, d_.N};
    if (a->rank() != 2) return InvalidArgument(node.Describe(), ": Gemm needs 2-D A, got ", ShapeToString(a->shape()));
    ASSIGN_OR_RETURN(GemmDims d, ComputeGemmDims(node, a->shape(), bshape, c));
    if (c && c->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": C dtype ", DataTypeName(c->dtype()), " differs from A's float32");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {d.M, d.N}));
    const float* ap = a->data<float>();
    Tensor scratch;
    if (d.trans_a && d.M > 0 && d.K > 0) {
      ASSIGN_OR_RETURN(scratch, AllocateScratch(d.M * d.K, ctx.allocator(), node));
      // A is [K, M]; XNNPACK wants [M, K].
      TransposeNchwToNhwc(ap, scratch.mutable_data<float>(), 1, d.K, d.M, ctx.pool());
      ap = scratch.data<float>();
    }
    float* yp = y->mutable_data<float>();
    RETURN_IF_ERROR(fc_.Run(node, d.M, ap, yp, ctx.pool()));
    if (!bias_folded_ && c) {
      for (int64_t m = 0; m < d.M; ++m)
        for (int64_t n = 0; n < d.N; ++n) yp[m * d.N + n] += d.beta * c->data<float>()[GemmCIndex(c->shape(), m, n)];
      ApplyActivation(yp, d.M * d.N, act_);
    }
    return Status::Ok();
  }

 private:
  GemmDims d_;
  FusedActivation act_;
  bool bias_folded_ = true;
  bool c_const_ = false;
  ConstantBProduct fc_;
};

// OpenBLAS calls cannot be stopped, and a product's cost (M x N x K) is not bounded by any
// one operand: products of more than kSplitWork multiply-adds are cut into items of about
// kItemWork (tiles of at least 256 x 256, so each call still amortises its packing), and
// the run's deadline and terminate calls are checked between items. Smaller products keep
// their split. Returns {rows, cols} per item.
constexpr double kSplitWork = 0x1p30, kItemWork = 0x1p28;
std::pair<int64_t, int64_t> BlasItemShape(double work, int64_t M, int64_t N, int64_t K, int64_t rows) {
  if (work <= kSplitWork || K == 0) return {rows, N};
  const double row_work = static_cast<double>(N) * static_cast<double>(K);
  const int64_t min_rows = std::min<int64_t>({M, 256, rows});
  rows = std::clamp<int64_t>(static_cast<int64_t>(std::min(kItemWork / row_work, 1e18)), min_rows, rows);
  const double col_work = static_cast<double>(rows) * static_cast<double>(K);
  const int64_t cols =
      std::clamp<int64_t>(static_cast<int64_t>(std::min(kItemWork / col_work, 1e18)), std::min<int64_t>(N, 256), N);
  return {rows, cols};
}

class BlasMatMulKernel final : public OpKernel {
 public:
  explicit BlasMatMulKernel(FusedActivation act) : act_(act) { EnsureBlasSingleThreaded(); }
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(Fp32MatMulCall call, BeginFp32MatMul(ctx));
    const MatMulDims& d = call.d;
    const float* ap = call.a;
    const float* bp = call.b;
    float* yp = call.y;
    const int64_t M = d.M, N = d.N, K = d.K;
    if (d.batch == 0 || M == 0 || N == 0) return Status::Ok();
    if (K == 0) {
      std::fill(yp, yp + d.batch * M * N, 0.0f);
      ApplyActivation(yp, d.batch * M * N, act_);
      return Status::Ok();
    }
    // Work items: whole matrices when there are enough of them for every thread, else row
    // blocks (at least 16 rows, so each sgemm call still amortises its packing).
    int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    int64_t rows_per_item = M;
    if (d.batch < threads) {
      int64_t splits = (2 * threads + d.batch - 1) / d.batch;
      rows_per_item = std::max<int64_t>(std::min<int64_t>(M, 16), (M + splits - 1) / splits);
    }
    const double work = static_cast<double>(d.batch) * static_cast<double>(M) * static_cast<double>(N) * K;
    int64_t cols_per_item = N;
    std::tie(rows_per_item, cols_per_item) = BlasItemShape(work, M, N, K, rows_per_item);
    const int64_t blocks = (M + rows_per_item - 1) / rows_per_item;
    const int64_t col_blocks = (N + cols_per_item - 1) / cols_per_item;
    KernelStop stop(ctx.node());
    const int64_t item_work = rows_per_item * cols_per_item * K;
    auto body = [&](int64_t begin, int64_t end) {
      int64_t pending = 0;
      for (int64_t item = begin; item < end; ++item) {
        if (!stop.Continue(pending, item_work)) return;
        const int64_t cb = item % col_blocks, rest = item / col_blocks;
        const int64_t t = rest / blocks, m0 = (rest % blocks) * rows_per_item, n0 = cb * cols_per_item;
        const int64_t mm = std::min(M, m0 + rows_per_item) - m0, nn = std::min(N, n0 + cols_per_item) - n0;
        const float* am = ap + (d.a_index[t] * M + m0) * K;
        const float* bm = bp + d.b_index[t] * K * N + n0;
        float* ym = yp + (t * M + m0) * N + n0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(mm), static_cast<int>(nn),
                    static_cast<int>(K), 1.0f, am, static_cast<int>(K), bm, static_cast<int>(N), 0.0f, ym,
                    static_cast<int>(N));
        if (nn == N) {
          ApplyActivation(ym, mm * N, act_);
        } else {
          for (int64_t r = 0; r < mm; ++r) ApplyActivation(ym + r * N, nn, act_);
        }
      }
    };
    int64_t items = d.batch * blocks * col_blocks;
    if (ctx.pool() && ctx.pool()->num_threads() > 1 && items > 1 && d.batch * M * N * K > (1 << 16)) {
      ctx.pool()->ParallelFor(items, 1, body);
    } else {
      body(0, items);
    }
    return stop.status();
  }

 private:
  FusedActivation act_;
};

bool FitsInt(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// Gemm with a run-time B: Y is pre-filled with beta*C (broadcast), then one sgemm per row
// block accumulates alpha*op(A)*op(B) into it.
class BlasGemmKernel final : public OpKernel {
 public:
  explicit BlasGemmKernel(FusedActivation act) : act_(act) { EnsureBlasSingleThreaded(); }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    const Tensor* c = ctx.input(2);
    if (!a || !b) return InvalidArgument(node.Describe(), ": Gemm needs inputs A and B");
    if (!c && node.opset < 11) return InvalidArgument(node.Describe(), ": Gemm before opset 11 requires input C");
    for (const Tensor* t : {a, b, c})
      if (t && t->dtype() != DataType::kFloat)
        return InvalidArgument(node.Describe(), ": Gemm operands must all be float32, got ", DataTypeName(t->dtype()));
    ASSIGN_OR_RETURN(GemmDims d, ComputeGemmDims(node, a->shape(), b->shape(), c));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {d.M, d.N}));
    if (d.M == 0 || d.N == 0) return Status::Ok();
    for (int64_t v : {d.M, d.N, d.K})
      if (!FitsInt(v)) return Unsupported(node.Describe(), ": dimensions exceed the BLAS int range");
    float* yp = y->mutable_data<float>();
    const bool use_c = c && d.beta != 0.0f;
    const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    const double work = static_cast<double>(d.M) * static_cast<double>(d.N) * static_cast<double>(d.K);
    // Plain variables, not a structured binding: clang 14 (the sanitizer presets) cannot
    // capture those in the lambda below.
    const std::pair<int64_t, int64_t> shape = BlasItemShape(
        work, d.M, d.N, d.K, threads > 1 ? std::max<int64_t>(16, (d.M + 2 * threads - 1) / (2 * threads)) : d.M);
    const int64_t rows = shape.first, cols = shape.second;
    const int64_t blocks = (d.M + rows - 1) / rows, col_blocks = (d.N + cols - 1) / cols;
    const float* ap = a->data<float>();
    const float* bp = b->data<float>();
    KernelStop stop(node);
    auto body = [&](int64_t begin, int64_t end) {
      int64_t pending = 0;
      for (int64_t item = begin; item < end; ++item) {
        if (!stop.Continue(pending, rows * cols * d.K)) return;
        const int64_t m0 = item / col_blocks * rows, mm = std::min(d.M, m0 + rows) - m0;
        const int64_t n0 = item % col_blocks * cols, nn = std::min(d.N, n0 + cols) - n0;
        float* yb = yp + m0 * d.N + n0;
        for (int64_t m = 0; m < mm; ++m)
          for (int64_t n = 0; n < nn; ++n)
            yb[m * d.N + n] = use_c ? d.beta * c->data<float>()[GemmCIndex(c->shape(), m0 + m, n0 + n)] : 0.0f;
        if (d.K > 0) {
          // op(A) rows m0.. start at A + m0*K (row-major [M,K]) or at column m0 of [K,M];
          // op(B) columns n0.. at B + n0 ([K,N]) or at row n0 of [N,K].
          const float* ab = d.trans_a ? ap + m0 : ap + m0 * d.K;
          const float* bb = d.trans_b ? bp + n0 * d.K : bp + n0;
          cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans, d.trans_b ? CblasTrans : CblasNoTrans,
                      static_cast<int>(mm), static_cast<int>(nn), static_cast<int>(d.K), d.alpha, ab,
                      static_cast<int>(d.trans_a ? d.M : d.K), bb, static_cast<int>(d.trans_b ? d.K : d.N), 1.0f, yb,
                      static_cast<int>(d.N));
        }
        for (int64_t m = 0; m < mm; ++m) ApplyActivation(yb + m * d.N, nn, act_);
      }
    };
    const int64_t items = blocks * col_blocks;
    if (ctx.pool() && threads > 1 && items > 1 && d.M * d.N * d.K > (1 << 16)) {
      ctx.pool()->ParallelFor(items, 1, body);
    } else {
      body(0, items);
    }
    return stop.status();
  }

 private:
  FusedActivation act_;
};

}  // namespace

void EnsureBlasSingleThreaded() {
  static std::once_flag once;
  // OpenBLAS must stay single-threaded: parallelism comes from strata's pool. Its pthread
  // build also starts a worker per CPU when it is loaded, and each spins in sched_yield
  // for ~0.1 s before it sleeps: a process's first session creations ran next to it (lstm
  // creation 6.1-6.7 ms with it, 2.9-3.2 ms without, Xeon VM). Its own shutdown call joins
  // them; a later call for more threads starts them again. Looked up at run time: the
  // serial and OpenMP builds behind the same soname lack it.
  std::call_once(once, [] {
    openblas_set_num_threads(1);
    using Shutdown = int (*)();
    if (auto shutdown = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) shutdown();
  });
}

// True when B is a constant and A's declared shape says the product has at most
// kGemvMaxRows rows (batch-1 fully-connected layers): the GEMV path. Unknown shapes
// (dynamic batch) go to the SGEMM, which handles every M.
static bool KnownSmallProduct(const KernelInit& init, bool trans_a) {
  if (!init.constant_input(1)) return false;
  const TypeInfo& ta = init.input_type(0);
  if (!ta.has_shape || ta.dims.size() < 2) return false;
  int64_t rows = 1;
  const size_t row_dims_end = trans_a ? ta.dims.size() : ta.dims.size() - 1;
  for (size_t d = 0; d < row_dims_end; ++d) {
    if (trans_a && d == 0) continue;  // Gemm with transA: A is [K, M], rows = dims[1]
    if (ta.dims[d].value <= 0) return false;
    rows *= ta.dims[d].value;
  }
  return rows <= kGemvMaxRows;
}

Result<std::unique_ptr<OpKernel>> MakeFastMatMul(const KernelInit& init) {
  // strata's AVX-512 SGEMM when the CPU has it (nullptr: not applicable), except for
  // products known to have at most kGemvMaxRows rows, which the GEMV panels serve better.
  if (!KnownSmallProduct(init, /*trans_a=*/false)) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> sgemm_kernel, MakeSgemmMatMul(init));
    if (sgemm_kernel) return sgemm_kernel;
  }
  const Node& node = init.node;
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  const Tensor* b = init.constant_input(1);
  if (b && b->dtype() == DataType::kFloat && b->rank() == 2 && b->dim(0) > 0 && b->dim(1) > 0) {
    auto k = std::make_unique<FcMatMulKernel>(b->dim(0), b->dim(1));
    if (k->Init(node, b->data<float>(), act, init.pool).ok()) return std::unique_ptr<OpKernel>(std::move(k));
  }
  // BLAS takes int dimensions; use it whenever the declared shapes cannot overflow that.
  const TypeInfo& ta = init.input_type(0);
  const TypeInfo& tb = init.input_type(1);
  bool small = true;
  for (const TypeInfo* t : {&ta, &tb})
    for (const Dim& dim : t->dims) small = small && (!dim.known() || FitsInt(dim.value));
  if (small) return std::unique_ptr<OpKernel>(std::make_unique<BlasMatMulKernel>(act));
  return MakeRefMatMul(init);
}

Result<std::unique_ptr<OpKernel>> MakeFastGemm(const KernelInit& init) {
  if (!KnownSmallProduct(init, init.node.GetInt("transA", 0) != 0)) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> sgemm_kernel, MakeSgemmGemm(init));
    if (sgemm_kernel) return sgemm_kernel;
  }
  const Node& node = init.node;
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  const Tensor* b = init.constant_input(1);
  const Tensor* c = init.constant_input(2);
  bool c_ok = !init.has_input(2) || c == nullptr || c->dtype() == DataType::kFloat;
  if (b && b->dtype() == DataType::kFloat && b->rank() == 2 && c_ok) {
    // Validate with a placeholder A shape: only B's geometry matters here.
    GemmDims d;
    d.trans_a = node.GetInt("transA", 0) != 0;
    d.trans_b = node.GetInt("transB", 0) != 0;
    d.alpha = node.GetFloat("alpha", 1.0f);
    d.beta = node.GetFloat("beta", 1.0f);
    d.K = d.trans_b ? b->dim(1) : b->dim(0);
    d.N = d.trans_b ? b->dim(0) : b->dim(1);
    if (d.K > 0 && d.N > 0) {
      auto k = std::make_unique<FcGemmKernel>(d, act);
      if (k->Init(node, sgemm::WeightRows::Of(*b), init.has_input(2), c, init.pool).ok())
        return std::unique_ptr<OpKernel>(std::move(k));
    }
  }
  return std::unique_ptr<OpKernel>(std::make_unique<BlasGemmKernel>(act));
}

}  // namespace strata
