// MatMulInteger and QLinearMatMul: numpy-batched [.., M, K] x [.., K, N] products of 8-bit
// integers with exact int32 (mod 2^32) accumulation after subtracting the zero points.
// QLinearMatMul requantizes each sum with the float multiplier a_scale * b_scale / y_scale,
// rounding half to even and saturating, like ONNX Runtime's reference path.
//
// B is packed transposed as int16 (b - b_zero_point), [N, K] per B matrix, with its column
// sums: sum_k (a_k - za) * b'_k = sum_k a_k * b'_k - za * colsum, so A is read in place and
// its zero point costs one multiply per output. A constant B (with a constant or absent zero
// point) is packed once at session creation; a run-time B is packed per run into scratch
// from the session allocator. Nothing in Compute touches the heap in the steady state.
//
// On CPUs with AVX512-VNNI a constant B is also packed for the vpdpbusd GEMM (int8_gemm.h),
// which then computes every product of a uint8/int8 A with it: the same int32 results (both
// are exact mod 2^32), ~20x faster than the int16 dot products. A run-time B keeps them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/gemm_kernels.h"
#include "cpu/int8_gemm.h"
#include "cpu/quantize_common.h"
#include "cpu/target_clones.h"

namespace strata {

// |a[k] * b[k]| <= 255 * 255 fits int32; the sum wraps (defined) like int32 hardware
// accumulators. Cloned so that the loop vectorises where the CPU allows.
STRATA_TARGET_CLONES("avx512f", "avx2", "default")
uint32_t DotU8(const uint8_t* a, const int16_t* b, int64_t n) {
  uint32_t acc = 0;
  for (int64_t k = 0; k < n; ++k) acc += static_cast<uint32_t>(static_cast<int32_t>(a[k]) * b[k]);
  return acc;
}
STRATA_TARGET_CLONES("avx512f", "avx2", "default")
uint32_t DotS8(const int8_t* a, const int16_t* b, int64_t n) {
  uint32_t acc = 0;
  for (int64_t k = 0; k < n; ++k) acc += static_cast<uint32_t>(static_cast<int32_t>(a[k]) * b[k]);
  return acc;
}

namespace {

// B viewed as `count` matrices [K, N] (a 1-D B [K] is one [K, 1] matrix).
struct BLayout {
  int64_t count = 1, K = 0, N = 0;
};
BLayout LayoutOf(const Shape& b) {
  BLayout l;
  if (b.size() == 1) {
    l.K = b[0];
    l.N = 1;
    return l;
  }
  l.K = b[b.size() - 2];
  l.N = b.back();
  for (size_t i = 0; i + 2 < b.size(); ++i) l.count *= b[i];
  return l;
}

// Writes bt[m][j][k] = b[m][k][j] - zb[j] and colsum[m][j] = sum_k bt[m][j][k] (mod 2^32).
template <typename T>
void PackBTyped(const T* b, const Tensor* bzp, const BLayout& l, int16_t* bt, int32_t* colsum) {
  for (int64_t m = 0; m < l.count; ++m) {
    const T* bm = b + m * l.K * l.N;
    for (int64_t j = 0; j < l.N; ++j) {
      const int32_t zb = ZeroPointAt(bzp, j);
      int16_t* dst = bt + (m * l.N + j) * l.K;
      uint32_t sum = 0;
      for (int64_t k = 0; k < l.K; ++k) {
        dst[k] = static_cast<int16_t>(static_cast<int32_t>(bm[k * l.N + j]) - zb);
        sum += static_cast<uint32_t>(dst[k]);
      }
      colsum[m * l.N + j] = static_cast<int32_t>(sum);
    }
  }
}
void PackB(const Tensor& b, const Tensor* bzp, const BLayout& l, int16_t* bt, int32_t* colsum) {
  if (b.dtype() == DataType::kUInt8) {
    PackBTyped(b.data<uint8_t>(), bzp, l, bt, colsum);
  } else {
    PackBTyped(b.data<int8_t>(), bzp, l, bt, colsum);
  }
}

// Calls emit(o, i, j, acc) for every output element o = (t * M + i) * N + j, rows split over the pool.
// A run-time B's product costs M x N x K, bounded by no one operand: the run's limits are
// read every 2^20 multiply-adds of a task (`stop`, the caller's; the output is then partly
// written).
template <typename TA, typename Emit>
void IntMatMulRows(const TA* a, const MatMulDims& d, const int16_t* bt, const int32_t* colsum, const Tensor* azp,
                   ThreadPool* pool, KernelStop& stop, const Emit& emit) {
  const int64_t rows = d.batch * d.M, K = d.K, N = d.N;
  auto body = [&](int64_t r0, int64_t r1) {
    int64_t pending = 0;
    for (int64_t r = r0; r < r1; ++r) {
      if (!stop.Continue(pending, N * K)) return;
      const int64_t t = r / d.M, i = r % d.M;
      const TA* arow = a + (d.a_index[t] * d.M + i) * K;
      const int64_t bm = d.b_index[t] * N;
      const uint32_t za = static_cast<uint32_t>(ZeroPointAt(azp, i));
      for (int64_t j = 0; j < N; ++j) {
        const uint32_t acc = Dot(arow, bt + (bm + j) * K, K) - za * static_cast<uint32_t>(colsum[bm + j]);
        emit(r * N + j, i, j, static_cast<int32_t>(acc));
      }
    }
  };
  // About 64K multiply-adds per chunk: small products stay on the calling thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, N * K));
  if (pool && rows > grain) {
    pool->ParallelFor(rows, grain, body);
  } else {
    body(0, rows);
  }
}

// QLinearMatMul's requantization of output element o (row i of its matrix, column j) from its
// int32 sum: the float multiplier a_scale * b_scale / y_scale, rounding half to even and
// saturation, as ONNX Runtime's reference path. Shared by the int16 and the VNNI kernels.
struct Requantizer {
  Requantizer(KernelContext& ctx, Tensor* out)
      : as(*ctx.input(1)),
        bs(*ctx.input(4)),
        y(out),
        yt(out->dtype()),
        ys(LoadScale(*ctx.input(6), 0)),
        z(static_cast<float>(LoadQ(*ctx.input(7), 0))),
        as1(as.num_elements() == 1),
        bs1(bs.num_elements() == 1) {}
  void operator()(int64_t o, int64_t i, int64_t j, int32_t acc) const {
    const float mult = LoadScale(as, as1 ? 0 : i) * LoadScale(bs, bs1 ? 0 : j) / ys;
    StoreQ(*y, o, Saturate(std::nearbyint(static_cast<float>(acc) * mult) + z, yt));
  }
  const Tensor& as;
  const Tensor& bs;
  Tensor* y;
  DataType yt;
  float ys, z;
  bool as1, bs1;
};

class IntMatMulKernel final : public OpKernel, public PacksConstantInputs {
 public:
  // QLinearMatMul's inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
  // y_zero_point; MatMulInteger's: A, B, a_zero_point, b_zero_point.
  // vnni: a constant B also runs on the VNNI GEMM (the "avx512_vnni" entry; the reference
  // entry keeps the int16 loops for every B).
  IntMatMulKernel(bool qlinear, bool vnni)
      : qlinear_(qlinear), vnni_ok_(vnni), a_(0), b_(qlinear ? 3 : 1), azp_(2), bzp_(qlinear ? 5 : 3) {}

  // Packs a constant B whose zero point is constant or absent. Any problem with them is left
  // for Compute to report, with the same message as for a run-time B.
  void Init(const KernelInit& init) {
    const Tensor* b = init.constant_input(b_);
    if (!b || !IsQuant8(b->dtype()) || b->rank() < 1) return;
    const Tensor* bzp = init.has_input(bzp_) ? init.constant_input(bzp_) : nullptr;
    if (init.has_input(bzp_) && !bzp) return;
    const BLayout l = LayoutOf(b->shape());
    if (!CheckZeroPoint(bzp, b->dtype(), l.N, init.node, "b_zero_point").ok()) return;
    if (vnni_ok_ && int8gemm::Available()) {
      const bool s8 = b->dtype() == DataType::kInt8;
      const int64_t zn = bzp ? bzp->num_elements() : 0;
      const auto* bytes = static_cast<const uint8_t*>(b->raw_data());
      for (int64_t m = 0; m < l.count; ++m) {
        auto p = int8gemm::Pack(bytes + m * l.K * l.N, s8, l.K, l.N, bzp ? bzp->raw_data() : nullptr, zn, init.pool);
        if (!p.ok()) {  // the int16 kernel serves instead
          vnni_.clear();
          break;
        }
        vnni_.push_back(std::move(p).value());
      }
    }
    // The int16 packing only where the VNNI GEMM does not take this B.
    if (vnni_.empty()) {
      packed_bt_.resize(static_cast<size_t>(l.count * l.N * l.K));
      packed_colsum_.resize(static_cast<size_t>(l.count * l.N));
      PackB(*b, bzp, l, packed_bt_.data(), packed_colsum_.data());
    }
    packed_shape_ = b->shape();
    packed_dtype_ = b->dtype();
    packed_ = true;
  }

  // A packed B's data is not read again (its zero point is, for validation only).
  std::vector<size_t> PackedConstantInputs() const override {
    if (packed_) return {b_};
    return {};
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(a_);
    const Tensor* b = ctx.input(b_);
    if (!a || !b) return InvalidArgument(node.Describe(), ": inputs A and B are required");
    if (!IsQuant8(a->dtype()) || !IsQuant8(b->dtype()))
      return InvalidArgument(node.Describe(), ": A and B must be uint8 or int8, got ", DataTypeName(a->dtype()),
                             " and ", DataTypeName(b->dtype()));
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(a->shape(), b->shape(), node));
    const Tensor* azp = ctx.input(azp_);
    const Tensor* bzp = ctx.input(bzp_);
    RETURN_IF_ERROR(CheckZeroPoint(azp, a->dtype(), d.M, node, "a_zero_point"));
    RETURN_IF_ERROR(CheckZeroPoint(bzp, b->dtype(), d.N, node, "b_zero_point"));
    if (qlinear_) RETURN_IF_ERROR(CheckQLinearParams(ctx, d));

    const bool b_packed = packed_ && b->shape() == packed_shape_ && b->dtype() == packed_dtype_;
    if (b_packed && !vnni_.empty()) return RunVnni(ctx, *a, d, azp);
    const int16_t* bt = nullptr;
    const int32_t* colsum = nullptr;
    Tensor bt_scratch, colsum_scratch;
    if (b_packed && vnni_.empty()) {
      bt = packed_bt_.data();
      colsum = packed_colsum_.data();
    } else {
      const BLayout l = LayoutOf(b->shape());
      ASSIGN_OR_RETURN(bt_scratch, AllocateIntScratch(DataType::kInt16, l.count * l.N * l.K, ctx.allocator(), node));
      ASSIGN_OR_RETURN(colsum_scratch, AllocateIntScratch(DataType::kInt32, l.count * l.N, ctx.allocator(), node));
      PackB(*b, bzp, l, bt_scratch.mutable_data<int16_t>(), colsum_scratch.mutable_data<int32_t>());
      bt = bt_scratch.data<int16_t>();
      colsum = colsum_scratch.data<int32_t>();
    }
    if (a->dtype() == DataType::kUInt8) return Run(ctx, a->data<uint8_t>(), d, bt, colsum, azp);
    return Run(ctx, a->data<int8_t>(), d, bt, colsum, azp);
  }

 private:
  // Scales of QLinearMatMul: a_scale scalar or [M], b_scale scalar or [N], y_scale and
  // y_zero_point scalars.
  Status CheckQLinearParams(KernelContext& ctx, const MatMulDims& d) const {
    const Node& node = ctx.node();
    RETURN_IF_ERROR(CheckScale(ctx.input(1), node, "a_scale"));
    RETURN_IF_ERROR(CheckScale(ctx.input(4), node, "b_scale"));
    RETURN_IF_ERROR(CheckScale(ctx.input(6), node, "y_scale"));
    const Tensor* yzp = ctx.input(7);
    if (!yzp || !IsQuant8(yzp->dtype()) || yzp->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": y_zero_point must be a uint8/int8 scalar");
    const int64_t as = ctx.input(1)->num_elements(), bs = ctx.input(4)->num_elements();
    if ((as != 1 && as != d.M) || (bs != 1 && bs != d.N))
      return InvalidArgument(node.Describe(), ": a_scale must be scalar or [M] (M=", d.M,
                             "), b_scale scalar or [N] (N=", d.N, "), got ", ShapeToString(ctx.input(1)->shape()),
                             " and ", ShapeToString(ctx.input(4)->shape()));
    if (ctx.input(6)->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": y_scale must be a scalar, got shape ",
                             ShapeToString(ctx.input(6)->shape()));
    return Status::Ok();
  }

  template <typename TA>
  Status Run(KernelContext& ctx, const TA* a, const MatMulDims& d, const int16_t* bt, const int32_t* colsum,
             const Tensor* azp) const {
    KernelStop stop(ctx.node());
    if (!qlinear_) {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt32, d.out));
      int32_t* out = y->mutable_data<int32_t>();
      IntMatMulRows(a, d, bt, colsum, azp, ctx.pool(), stop,
                    [out](int64_t o, int64_t, int64_t, int32_t acc) { out[o] = acc; });
      return stop.status();
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, ctx.input(7)->dtype(), d.out));
    const Requantizer rq(ctx, y);
    IntMatMulRows(a, d, bt, colsum, azp, ctx.pool(), stop, rq);
    return stop.status();
  }

  // The VNNI GEMM against the packed B matrices: one call per output matrix, or one for all
  // rows when every output matrix uses B matrix 0 and the A matrices lie in order.
  Status RunVnni(KernelContext& ctx, const Tensor& a, const MatMulDims& d, const Tensor* azp) const {
    const Node& node = ctx.node();
    const bool per_row = azp && azp->num_elements() > 1;
    bool merged = !per_row && vnni_.size() == 1;
    for (int64_t t = 0; merged && t < d.batch; ++t) merged = d.a_index[t] == t;
    int32_t* out = nullptr;
    Tensor acc;
    // QLinearMatMul with one a_scale: requantized in the GEMM's store (int8gemm::QuantOut, the
    // Requantizer's float operations, so the same bytes), with no int32 pass.
    const bool store_q = qlinear_ && ctx.input(1)->num_elements() == 1;
    Tensor* yq = nullptr;
    Tensor mult;
    int8gemm::QuantOut qo;
    if (store_q) {
      ASSIGN_OR_RETURN(yq, ctx.AllocateOutput(0, ctx.input(7)->dtype(), d.out));
      ASSIGN_OR_RETURN(mult, Tensor::Allocate(DataType::kFloat, {d.N}, ctx.allocator()));
      const Tensor& bs = *ctx.input(4);
      const float as = LoadScale(*ctx.input(1), 0), ys = LoadScale(*ctx.input(6), 0);
      for (int64_t j = 0; j < d.N; ++j)
        mult.mutable_data<float>()[j] = as * LoadScale(bs, bs.num_elements() == 1 ? 0 : j) / ys;
      qo.ldy = d.N;
      qo.mult = mult.data<float>();
      qo.z = static_cast<float>(LoadQ(*ctx.input(7), 0));
      qo.y_signed = yq->dtype() == DataType::kInt8;
    } else if (qlinear_) {
      ASSIGN_OR_RETURN(acc, AllocateIntScratch(DataType::kInt32, d.batch * d.M * d.N, ctx.allocator(), node));
      out = acc.mutable_data<int32_t>();
    } else {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt32, d.out));
      out = y->mutable_data<int32_t>();
    }
    Tensor za_rows;
    if (per_row) {
      ASSIGN_OR_RETURN(za_rows, AllocateIntScratch(DataType::kInt32, d.M, ctx.allocator(), node));
      for (int64_t i = 0; i < d.M; ++i) za_rows.mutable_data<int32_t>()[i] = ZeroPointAt(azp, i);
    }
    int8gemm::AMatrix am;
    am.a_signed = a.dtype() == DataType::kInt8;
    am.lda = d.K;
    am.za = ZeroPointAt(azp, 0);
    am.za_rows = per_row ? za_rows.data<int32_t>() : nullptr;
    am.rows = merged ? d.batch * d.M : d.M;
    const auto* abytes = static_cast<const uint8_t*>(a.raw_data());
    int64_t scratch_bytes = 0;
    for (const auto& pb : vnni_) {
      ASSIGN_OR_RETURN(int64_t n, int8gemm::ScratchBytes(am, pb));
      scratch_bytes = std::max(scratch_bytes, n);
    }
    Tensor scratch;
    if (scratch_bytes > 0) {
      ASSIGN_OR_RETURN(scratch, AllocateIntScratch(DataType::kUInt8, scratch_bytes, ctx.allocator(), node));
    }
    void* sp = scratch_bytes > 0 ? scratch.mutable_data<uint8_t>() : nullptr;
    for (int64_t t = 0; t < (merged ? 1 : d.batch); ++t) {
      am.a = abytes + (merged ? 0 : d.a_index[t] * d.M * d.K);
      const auto& pb = vnni_[static_cast<size_t>(merged ? 0 : d.b_index[t])];
      if (store_q) {
        qo.y = static_cast<uint8_t*>(yq->raw_mutable_data()) + (merged ? 0 : t * d.M * d.N);
        RETURN_IF_ERROR(int8gemm::Gemm(am, pb, nullptr, 0, sp, ctx.pool(), nullptr, &qo));
      } else {
        RETURN_IF_ERROR(int8gemm::Gemm(am, pb, out + (merged ? 0 : t * d.M * d.N), d.N, sp, ctx.pool()));
      }
    }
    if (!qlinear_ || store_q) return Status::Ok();
    return Requantize(ctx, d, out);
  }

  // QLinearMatMul's output from the int32 products of RunVnni.
  Status Requantize(KernelContext& ctx, const MatMulDims& d, const int32_t* acc) const {
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, ctx.input(7)->dtype(), d.out));
    const Requantizer rq(ctx, y);
    const int64_t rows = d.batch * d.M;
    auto body = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < d.N; ++j) rq(r * d.N + j, r % d.M, j, acc[r * d.N + j]);
    };
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.N));
    if (ctx.pool() && rows > grain) {
      ctx.pool()->ParallelFor(rows, grain, body);
    } else {
      body(0, rows);
    }
    return Status::Ok();
  }

  bool qlinear_, vnni_ok_;
  size_t a_, b_, azp_, bzp_;
  bool packed_ = false;
  Shape packed_shape_;
  DataType packed_dtype_ = DataType::kUndefined;
  std::vector<int16_t> packed_bt_;       // [count, N, K]: b - b_zero_point, transposed
  std::vector<int32_t> packed_colsum_;   // [count, N]: sums over K of packed_bt_
  std::vector<int8gemm::PackedB> vnni_;  // [count]: for the VNNI GEMM (empty: not used)
};

// The VNNI entry covers nodes whose B is a constant (packed once); the reference entry, the
// int16 loops, every other node and reference sessions.
KernelDef IntMatMulDef(const char* op, bool qlinear, bool vnni) {
  KernelDef d;
  d.op_type = op;
  d.since_version = 10;
  d.type_input = -1;
  d.factory = [qlinear, vnni](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<IntMatMulKernel>(qlinear, vnni);
    k->Init(init);
    return std::unique_ptr<OpKernel>(std::move(k));
  };
  if (vnni) {
    const size_t b = qlinear ? 3 : 1;
    d.covers = [b](const KernelInit& init) { return int8gemm::Available() && init.constant_input(b) != nullptr; };
    d.reference = false;
    d.impl = "avx512_vnni";
  }
  return d;
}

}  // namespace

void RegisterIntMatMulKernels(KernelRegistry& r) {
  for (bool vnni : {false, true}) {
    r.Register(IntMatMulDef("MatMulInteger", false, vnni));
    r.Register(IntMatMulDef("QLinearMatMul", true, vnni));
  }
}

}  // namespace strata
