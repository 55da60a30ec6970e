// com.microsoft QGemm, ONNX Runtime's quantized Gemm (its quantizer writes it for a Gemm in the
// QOperator format):
//
//   QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?),
//   attributes transA, transB (0), alpha (1.0):
//     acc[m, n] = sum_k (A'[m, k] - a_zp) * (B'[k, n] - b_zp[n]) + C[m, n]   (int32, mod 2^32)
//     s[n] = alpha * a_scale * b_scale[n] (/ y_scale when given)
//     Y = saturate(round(acc * s[n]) + y_zp) with y_zero_point (Y of its type), else float acc * s[n]
//
// A' and B' are A and B transposed where asked; C is int32, a scalar, [N], [1, N], [M, 1] or
// [M, N] (added before scaling, so it is quantized with scale alpha * a_scale * b_scale[n]);
// b_scale and b_zero_point are scalars or per column; absent zero points are 0. The float
// operations and their order are ONNX Runtime's (its output scale, then MLAS's requantizing
// store: product, round half to even, zero point, saturation).
//
// B - b_zp is packed transposed as int16 [N, K] with its column sums (as int_matmul.cc does),
// once at creation for a constant B, else per run into scratch. On CPUs with AVX512-VNNI a
// constant B is packed for the VNNI GEMM instead (int8_gemm.h; the "avx512_vnni" entry), which
// gives the same int32 sums (both exact mod 2^32) and stores through the same float
// operations: the requantizing store (int8gemm::QuantOut) when C is absent or one value per
// column, the float one (FloatOut) when C is absent, else the int32 sums and the epilogue here.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/threadpool.h"
#include "cpu/int8_gemm.h"
#include "cpu/quantize_common.h"

namespace strata {
namespace {

constexpr size_t kA = 0, kAScale = 1, kAZp = 2, kB = 3, kBScale = 4, kBZp = 5, kC = 6, kYScale = 7, kYZp = 8;

// bt[n][k] = B'[k][n] - zb[n] and colsum[n] = sum_k bt[n][k] (mod 2^32), B' = B or B^T.
template <typename T>
void PackTyped(const T* b, bool trans_b, int64_t K, int64_t N, const Tensor* bzp, int16_t* bt, int32_t* colsum) {
  for (int64_t n = 0; n < N; ++n) {
    const int32_t zb = ZeroPointAt(bzp, n);
    uint32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t v = trans_b ? b[n * K + k] : b[k * N + n];
      bt[n * K + k] = static_cast<int16_t>(v - zb);
      sum += static_cast<uint32_t>(bt[n * K + k]);
    }
    colsum[n] = static_cast<int32_t>(sum);
  }
}
void Pack(const Tensor& b, bool trans_b, int64_t K, int64_t N, const Tensor* bzp, int16_t* bt, int32_t* colsum) {
  if (b.dtype() == DataType::kUInt8) {
    PackTyped(b.data<uint8_t>(), trans_b, K, N, bzp, bt, colsum);
  } else {
    PackTyped(b.data<int8_t>(), trans_b, K, N, bzp, bt, colsum);
  }
}

class QGemmKernel final : public OpKernel, public PacksConstantInputs {
 public:
  // vnni: a constant B runs on the VNNI GEMM (the "avx512_vnni" entry; the reference entry
  // keeps the int16 loops for every B).
  QGemmKernel(const KernelInit& init, bool vnni)
      : trans_a_(init.node.GetInt("transA", 0) != 0),
        trans_b_(init.node.GetInt("transB", 0) != 0),
        alpha_(init.node.GetFloat("alpha", 1.0f)) {
    // A constant B with a constant or absent zero point is packed now; any problem with them
    // is left for Compute to report, as for a run-time B.
    const Tensor* b = init.constant_input(kB);
    if (!b || !IsQuant8(b->dtype()) || b->rank() != 2) return;
    const Tensor* bzp = init.has_input(kBZp) ? init.constant_input(kBZp) : nullptr;
    if (init.has_input(kBZp) && !bzp) return;
    const int64_t K = b->dim(trans_b_ ? 1 : 0), N = b->dim(trans_b_ ? 0 : 1);
    if (!CheckZeroPoint(bzp, b->dtype(), N, init.node, "b_zero_point").ok()) return;
    if (vnni && int8gemm::Available()) PackVnni(*b, bzp, K, N, init.pool);
    PrepareConstantStore(init, N);
    if (!vnni_) {
      packed_bt_.resize(static_cast<size_t>(N * K));
      packed_colsum_.resize(static_cast<size_t>(N));
      Pack(*b, trans_b_, K, N, bzp, packed_bt_.data(), packed_colsum_.data());
    }
    packed_shape_ = b->shape();
    packed_dtype_ = b->dtype();
    packed_ = true;
  }

  std::vector<size_t> PackedConstantInputs() const override {
    if (packed_) return {kB};
    return {};
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(kA);
    const Tensor* b = ctx.input(kB);
    if (!a || !b) return InvalidArgument(node.Describe(), ": inputs A and B are required");
    if (!IsQuant8(a->dtype()) || !IsQuant8(b->dtype()))
      return InvalidArgument(node.Describe(), ": A and B must be uint8 or int8, got ", DataTypeName(a->dtype()),
                             " and ", DataTypeName(b->dtype()));
    if (a->rank() != 2 || b->rank() != 2)
      return InvalidArgument(node.Describe(), ": A and B must be matrices, got shapes ", ShapeToString(a->shape()),
                             " and ", ShapeToString(b->shape()));
    const int64_t M = a->dim(trans_a_ ? 1 : 0), K = a->dim(trans_a_ ? 0 : 1);
    const int64_t N = b->dim(trans_b_ ? 0 : 1);
    if (b->dim(trans_b_ ? 1 : 0) != K)
      return InvalidArgument(node.Describe(), ": A ", ShapeToString(a->shape()), (trans_a_ ? " (transposed)" : ""),
                             " and B ", ShapeToString(b->shape()), (trans_b_ ? " (transposed)" : ""),
                             " do not share an inner dimension");
    RETURN_IF_ERROR(CheckScalar(ctx.input(kAScale), node, "a_scale"));
    RETURN_IF_ERROR(CheckScale(ctx.input(kAScale), node, "a_scale"));
    if (ctx.input(kAZp)) RETURN_IF_ERROR(CheckScalar(ctx.input(kAZp), node, "a_zero_point"));
    RETURN_IF_ERROR(CheckZeroPoint(ctx.input(kAZp), a->dtype(), 1, node, "a_zero_point"));
    const Tensor* bs = ctx.input(kBScale);
    RETURN_IF_ERROR(CheckScale(bs, node, "b_scale"));
    if (bs->num_elements() != 1 && bs->num_elements() != N)
      return InvalidArgument(node.Describe(), ": b_scale must be a scalar or have ", N, " values, got shape ",
                             ShapeToString(bs->shape()));
    RETURN_IF_ERROR(CheckZeroPoint(ctx.input(kBZp), b->dtype(), N, node, "b_zero_point"));
    const Tensor* c = ctx.input(kC);
    RETURN_IF_ERROR(CheckBias(node, c, M, N));
    const Tensor* ys = ctx.input(kYScale);
    const Tensor* yzp = ctx.input(kYZp);
    if (ys) {
      RETURN_IF_ERROR(CheckScalar(ys, node, "y_scale"));
      RETURN_IF_ERROR(CheckScale(ys, node, "y_scale"));
    }
    if (yzp) {
      if (!ys) return InvalidArgument(node.Describe(), ": y_zero_point needs y_scale");
      RETURN_IF_ERROR(CheckScalar(yzp, node, "y_zero_point"));
      if (!IsQuant8(yzp->dtype()))
        return InvalidArgument(node.Describe(), ": y_zero_point must be uint8 or int8, got ",
                               DataTypeName(yzp->dtype()));
    }
    const DataType yt = yzp ? yzp->dtype() : DataType::kFloat;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, yt, Shape{M, N}));
    if (M == 0 || N == 0) return Status::Ok();

    const bool b_packed = packed_ && b->shape() == packed_shape_ && b->dtype() == packed_dtype_;
    const int16_t* bt = nullptr;
    const int32_t* colsum = nullptr;
    Tensor bt_scratch, colsum_scratch, at_scratch;
    if (b_packed && vnni_) {
      // (B's data is not read: it may have been released after packing)
    } else if (b_packed) {
      bt = packed_bt_.data();
      colsum = packed_colsum_.data();
    } else {
      ASSIGN_OR_RETURN(bt_scratch, AllocateIntScratch(DataType::kInt16, N * K, ctx.allocator(), node));
      ASSIGN_OR_RETURN(colsum_scratch, AllocateIntScratch(DataType::kInt32, N, ctx.allocator(), node));
      Pack(*b, trans_b_, K, N, ctx.input(kBZp), bt_scratch.mutable_data<int16_t>(),
           colsum_scratch.mutable_data<int32_t>());
      bt = bt_scratch.data<int16_t>();
      colsum = colsum_scratch.data<int32_t>();
    }
    const auto* ab = static_cast<const uint8_t*>(a->raw_data());
    if (trans_a_) {  // A^T [M, K] into scratch
      ASSIGN_OR_RETURN(at_scratch, AllocateIntScratch(DataType::kUInt8, M * K, ctx.allocator(), node));
      uint8_t* at = at_scratch.mutable_data<uint8_t>();
      for (int64_t k = 0; k < K; ++k)
        for (int64_t m = 0; m < M; ++m) at[m * K + k] = ab[k * M + m];
      ab = at;
    }
    if (b_packed && vnni_) return RunVnni(ctx, ab, a->dtype() == DataType::kInt8, M, K, N, y);
    if (a->dtype() == DataType::kUInt8) return Run(ctx, ab, M, K, N, bt, colsum, y);
    return Run(ctx, reinterpret_cast<const int8_t*>(ab), M, K, N, bt, colsum, y);
  }

 private:
  // C: int32, a scalar, [N], [1, N], [M, 1] or [M, N].
  static Status CheckBias(const Node& node, const Tensor* c, int64_t M, int64_t N) {
    if (!c) return Status::Ok();
    if (c->dtype() != DataType::kInt32)
      return InvalidArgument(node.Describe(), ": C must be int32, got ", DataTypeName(c->dtype()));
    const Shape& s = c->shape();
    const bool ok =
        c->num_elements() == 1 || (s.size() == 1 && s[0] == N) ||
        (s.size() == 2 && ((s[0] == 1 && s[1] == N) || (s[0] == M && s[1] == 1) || (s[0] == M && s[1] == N)));
    if (!ok)
      return InvalidArgument(node.Describe(), ": C of shape ", ShapeToString(s), " does not broadcast to [", M, ", ", N,
                             "]");
    return Status::Ok();
  }

  // The output's store of one sum: C added (int32, mod 2^32), the scale s[n], then the
  // requantizing store (round half to even, zero point, saturation) or the float.
  struct Epilogue {
    Tensor* y = nullptr;
    DataType yt = DataType::kFloat;
    bool quantized = false;
    float yz = 0;
    const float* sv = nullptr;  // [N]: alpha * a_scale * b_scale[n] (/ y_scale)
    const int32_t* cb = nullptr;
    int64_t c_row = 0, c_col = 0;  // C's strides over rows and columns (0 where broadcast)
    int64_t N = 0;
    void operator()(int64_t m, int64_t n, uint32_t acc) const {
      if (cb) acc += static_cast<uint32_t>(cb[m * c_row + n * c_col]);
      const float v = static_cast<float>(static_cast<int32_t>(acc)) * sv[n];
      if (quantized) {
        StoreQ(*y, m * N + n, Saturate(std::nearbyint(v) + yz, yt));
      } else {
        y->mutable_data<float>()[m * N + n] = v;
      }
    }
  };

  // The epilogue of this run, with the scales in `scales` (scratch of N floats).
  Result<Epilogue> MakeEpilogue(KernelContext& ctx, int64_t N, Tensor* y, Tensor* scales) const {
    Epilogue ep;
    const float as = LoadScale(*ctx.input(kAScale), 0);
    const Tensor& bs = *ctx.input(kBScale);
    const bool bs1 = bs.num_elements() == 1;
    const Tensor* ys = ctx.input(kYScale);
    const float ysv = ys ? LoadScale(*ys, 0) : 1.0f;
    const Tensor* c = ctx.input(kC);
    ep.cb = c ? c->data<int32_t>() : nullptr;
    if (c && c->num_elements() != 1) {
      const Shape& s = c->shape();
      if (s.size() == 1 || s[0] == 1) {  // [N] or [1, N]
        ep.c_col = 1;
      } else if (s[1] == 1) {  // [M, 1]
        ep.c_row = 1;
      } else {  // [M, N]
        ep.c_row = N;
        ep.c_col = 1;
      }
    }
    const Tensor* yzp = ctx.input(kYZp);
    ep.y = y;
    ep.yt = y->dtype();
    ep.quantized = yzp != nullptr;
    ep.yz = yzp ? static_cast<float>(LoadQ(*yzp, 0)) : 0.0f;
    ep.N = N;
    if (static_cast<int64_t>(const_sv_.size()) == N) {  // constant scales: made once
      ep.sv = const_sv_.data();
      return ep;
    }
    // ONNX Runtime's output scale per column: alpha * a_scale * b_scale[n], then / y_scale.
    ASSIGN_OR_RETURN(*scales, AllocateIntScratch(DataType::kFloat, N, ctx.allocator(), ctx.node()));
    float* sv = scales->mutable_data<float>();
    for (int64_t n = 0; n < N; ++n) {
      sv[n] = alpha_ * as * LoadScale(bs, bs1 ? 0 : n);
      if (ys) sv[n] /= ysv;
    }
    ep.sv = sv;
    return ep;
  }

  template <typename TA>
  Status Run(KernelContext& ctx, const TA* a, int64_t M, int64_t K, int64_t N, const int16_t* bt, const int32_t* colsum,
             Tensor* y) const {
    const uint32_t za = static_cast<uint32_t>(ZeroPointAt(ctx.input(kAZp), 0));
    Tensor scales;
    ASSIGN_OR_RETURN(const Epilogue ep, MakeEpilogue(ctx, N, y, &scales));
    // M x N x K, bounded by no one operand: the run's limits are read every 2^20
    // multiply-adds of a task, per output row.
    KernelStop stop(ctx.node());
    const auto rows = [&](int64_t m0, int64_t m1) {
      int64_t pending = 0;
      for (int64_t m = m0; m < m1; ++m) {
        if (!stop.Continue(pending, N * K)) return;
        const TA* arow = a + m * K;
        for (int64_t n = 0; n < N; ++n) ep(m, n, Dot(arow, bt + n * K, K) - za * static_cast<uint32_t>(colsum[n]));
      }
    };
    // About 64K multiply-adds per chunk: small products stay on the calling thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, N * K));
    if (ctx.pool() && M > grain) {
      ctx.pool()->ParallelFor(M, grain, rows);
    } else {
      rows(0, M);
    }
    return stop.status();
  }

  // With constant scales (a_scale, b_scale, y_scale or none), the output scales s[n] of
  // MakeEpilogue, made once; with a constant C of one value per column (a scalar, [N] or [1,
  // N]), its [N] bias for the VNNI store. Values that Compute would refuse are left to it (it
  // checks the inputs before any use of these). A GEMV's per-run scale loop and scratch were
  // a sixth of a 1024 x 1024 QGemm's time.
  void PrepareConstantStore(const KernelInit& init, int64_t N) {
    const Tensor* as = init.constant_input(kAScale);
    const Tensor* bs = init.constant_input(kBScale);
    const Tensor* ys = init.has_input(kYScale) ? init.constant_input(kYScale) : nullptr;
    // The types CheckScale accepts (LoadScale reads no other).
    const auto scale = [](const Tensor* t) {
      return t &&
             (t->dtype() == DataType::kFloat || t->dtype() == DataType::kFloat16 || t->dtype() == DataType::kDouble);
    };
    const bool scales =
        scale(as) && scale(bs) && as->num_elements() == 1 && (bs->num_elements() == 1 || bs->num_elements() == N);
    if (scales && (!init.has_input(kYScale) || (scale(ys) && ys->num_elements() == 1))) {
      const float a = LoadScale(*as, 0), y = ys ? LoadScale(*ys, 0) : 1.0f;
      const_sv_.resize(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) {
        const_sv_[n] = alpha_ * a * LoadScale(*bs, bs->num_elements() == 1 ? 0 : n);
        if (ys) const_sv_[n] /= y;
      }
    }
    const Tensor* c = init.has_input(kC) ? init.constant_input(kC) : nullptr;
    if (c && c->dtype() == DataType::kInt32 && N > 0) {
      const Shape& s = c->shape();
      const bool one = c->num_elements() == 1;
      if (one || (s.size() == 1 && s[0] == N) || (s.size() == 2 && s[0] == 1 && s[1] == N)) {
        const_bias_.resize(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n) const_bias_[n] = c->data<int32_t>()[one ? 0 : n];
      }
    }
  }

  // B' [K, N] (B transposed where asked) packed for the VNNI GEMM; on failure (memory) the
  // int16 packing serves instead.
  void PackVnni(const Tensor& b, const Tensor* bzp, int64_t K, int64_t N, ThreadPool* pool) {
    const auto* bytes = static_cast<const uint8_t*>(b.raw_data());
    std::vector<uint8_t> transposed;
    if (trans_b_) {  // B is [N, K]
      transposed.resize(static_cast<size_t>(K * N));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) transposed[static_cast<size_t>(k * N + n)] = bytes[n * K + k];
      bytes = transposed.data();
    }
    auto p = int8gemm::Pack(bytes, b.dtype() == DataType::kInt8, K, N, bzp ? bzp->raw_data() : nullptr,
                            bzp ? bzp->num_elements() : 0, pool);
    if (p.ok()) vnni_.emplace(std::move(p).value());
  }

  // The VNNI GEMM of A [M, K] (ab: A or A^T's bytes) against the packed B'. The store: the
  // GEMM's requantizing one when C is absent or per column (a bias), its float one when C is
  // absent, else int32 sums into scratch and the epilogue above.
  Status RunVnni(KernelContext& ctx, const uint8_t* ab, bool a_signed, int64_t M, int64_t K, int64_t N,
                 Tensor* y) const {
    const Node& node = ctx.node();
    Tensor scales;
    ASSIGN_OR_RETURN(const Epilogue ep, MakeEpilogue(ctx, N, y, &scales));
    int8gemm::AMatrix am;
    am.a = ab;
    am.a_signed = a_signed;
    am.rows = M;
    am.lda = K;
    am.za = ZeroPointAt(ctx.input(kAZp), 0);
    ASSIGN_OR_RETURN(const int64_t scratch_bytes, int8gemm::ScratchBytes(am, *vnni_));
    Tensor scratch;
    if (scratch_bytes > 0) {
      ASSIGN_OR_RETURN(scratch, AllocateIntScratch(DataType::kUInt8, scratch_bytes, ctx.allocator(), node));
    }
    void* sp = scratch_bytes > 0 ? scratch.mutable_data<uint8_t>() : nullptr;
    const bool c_per_column = ep.cb && ep.c_row == 0;  // a scalar, [N] or [1, N]
    if (ep.quantized && (!ep.cb || c_per_column)) {
      Tensor bias;
      int8gemm::QuantOut qo;
      if (ep.cb && static_cast<int64_t>(const_bias_.size()) == N) {
        qo.bias = const_bias_.data();
      } else if (ep.cb) {
        ASSIGN_OR_RETURN(bias, AllocateIntScratch(DataType::kInt32, N, ctx.allocator(), node));
        for (int64_t n = 0; n < N; ++n) bias.mutable_data<int32_t>()[n] = ep.cb[n * ep.c_col];
        qo.bias = bias.data<int32_t>();
      }
      qo.y = static_cast<uint8_t*>(y->raw_mutable_data());
      qo.ldy = N;
      qo.mult = ep.sv;
      qo.z = ep.yz;
      qo.y_signed = ep.yt == DataType::kInt8;
      return int8gemm::Gemm(am, *vnni_, nullptr, 0, sp, ctx.pool(), nullptr, &qo);
    }
    if (!ep.quantized && !ep.cb) {
      int8gemm::FloatOut fo;
      fo.y = y->mutable_data<float>();
      fo.ldy = N;
      fo.scale = ep.sv;
      return int8gemm::Gemm(am, *vnni_, nullptr, 0, sp, ctx.pool(), &fo);
    }
    ASSIGN_OR_RETURN(Tensor acc, AllocateIntScratch(DataType::kInt32, M * N, ctx.allocator(), node));
    const int32_t* sums = acc.data<int32_t>();
    RETURN_IF_ERROR(int8gemm::Gemm(am, *vnni_, acc.mutable_data<int32_t>(), N, sp, ctx.pool()));
    const auto rows = [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = 0; n < N; ++n) ep(m, n, static_cast<uint32_t>(sums[m * N + n]));
    };
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N));
    if (ctx.pool() && M > grain) {
      ctx.pool()->ParallelFor(M, grain, rows);
    } else {
      rows(0, M);
    }
    return Status::Ok();
  }

  bool trans_a_, trans_b_;
  float alpha_;
  bool packed_ = false;
  Shape packed_shape_;
  DataType packed_dtype_ = DataType::kUndefined;
  std::vector<int16_t> packed_bt_;         // [N, K]: B' - b_zero_point, transposed (not with vnni_)
  std::vector<int32_t> packed_colsum_;     // [N]: sums over K of packed_bt_
  std::optional<int8gemm::PackedB> vnni_;  // B' for the VNNI GEMM (empty: not used)
  std::vector<float> const_sv_;            // [N] output scales from constant scales (empty: per run)
  std::vector<int32_t> const_bias_;        // [N] a constant per-column C (empty: none, or per run)
};

}  // namespace

// The VNNI entry covers nodes whose B is a constant (packed once); the reference entry, the
// int16 loops, every other node and reference sessions.
void RegisterQGemmKernels(KernelRegistry& r) {
  for (bool vnni : {false, true}) {
    KernelDef d;
    d.domain = "com.microsoft";
    d.op_type = "QGemm";
    d.since_version = 1;
    d.type_input = -1;
    d.factory = [vnni](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
      return std::unique_ptr<OpKernel>(std::make_unique<QGemmKernel>(init, vnni));
    };
    if (vnni) {
      d.covers = [](const KernelInit& init) { return int8gemm::Available() && init.constant_input(kB) != nullptr; };
      d.reference = false;
      d.impl = "avx512_vnni";
    }
    r.Register(d);
  }
}

}  // namespace strata
