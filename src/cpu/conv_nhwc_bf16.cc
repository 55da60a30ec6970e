// bf16 fast-math NhwcConv (session option precision=bf16): the ungrouped NHWC conv as
// Y[N*OH*OW, M] = im2col(X)[N*OH*OW, K] x W' on the bf16 GEMM (gemm_bf16.cc).
// W' ([M][KH][S], S = KW*C rounded up to even, K = KH*S: an NHWC pixel's receptive field in
// storage order, each kernel row padded to whole bf16 pairs) is packed to bf16 32-column
// panels once here and the fp32 weight is released. A 1x1 stride-1 unpadded conv with even
// C reads X as a plain [N*H*W, C] matrix. Other shapes round X once per run into a
// zero-padded bf16 NHWC copy (each input rounded once, not once per tap that reads it):
// with even C the GEMM reads each kernel row of a receptive field in place through row
// pointers (no im2col copy); with odd C each 12-pixel tile's rows are copied out as bf16
// pairs. Bias, the fused Relu/Clip and the residual input (input 3) are applied in the
// GEMM's store, as in the fp32 NhwcConv (conv_nhwc_gemm.cc).
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/constant_release.h"
#include "core/fusion_util.h"
#include "core/inverted_residual_fusion.h"
#include "cpu/bf16_simd.h"
#include "cpu/bf16_target.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/gemm_bf16.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// One Compute's gather geometry over the bf16 copy of X (lives on Compute's stack).
struct Bf16Window : NhwcWindow {
  const uint16_t* xh;  // X rounded to bf16, [N][H][W][C]
  int64_t seg;         // elements per kernel row of the packed K: KW*C rounded up to even
};

// The gather is reached only through GemmBf16GatheredPairs, after Bf16GemmAvailable().
STRATA_BF16_TARGET_BEGIN

using bf16_internal::LaneMask;

// The first n of 32 lanes (n clamped to [0, 32]).
inline __mmask32 LaneMask32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xFFFFFFFFu) : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1);
}

// Runs are often short (a 3-channel stem: 21 values), where library memcpy/memset calls
// cost more than the copy: masked 32-value moves instead.
inline void CopyRun(uint16_t* d, const uint16_t* s, int64_t n) {
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m = LaneMask32(n - i);
    _mm512_mask_storeu_epi16(d + i, m, _mm512_maskz_loadu_epi16(m, s + i));
  }
}
inline void ZeroRun(uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 32) _mm512_mask_storeu_epi16(d + i, LaneMask32(n - i), _mm512_setzero_si512());
}

// Columns [lo, hi) of `row` (indexed by im2col column) from the segment whose in-image part
// [a, b) starts at input address `src` (column a); the rest is padding.
inline void FillSegment(uint16_t* row, int64_t lo, int64_t hi, int64_t a, int64_t b, const uint16_t* src) {
  const int64_t z0 = std::min(hi, a);
  if (lo < z0) ZeroRun(row + lo, z0 - lo);
  const int64_t c0 = std::max(lo, a), c1 = std::min(hi, b);
  if (c0 < c1) CopyRun(row + c0, src + (c0 - a), c1 - c0);
  const int64_t z1 = std::max(lo, b);
  if (z1 < hi) ZeroRun(row + z1, hi - z1);
}

// Rounds n floats to bf16 (round to nearest even, as the GEMM's own packing does).
void RoundToBf16(const float* x, int64_t n, uint16_t* d) {
  for (int64_t i = 0; i < n; i += 32) {
    const __m512 lo = _mm512_maskz_loadu_ps(LaneMask(n - i), x + i);
    const __m512 hi = _mm512_maskz_loadu_ps(LaneMask(n - i - 16), x + i + 16);
    _mm512_mask_storeu_epi16(d + i, LaneMask32(n - i), reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
}

// Bf16PairRowsFn: im2col rows [row0, row0 + rows), K pairs [kp0, kp0 + kpc); column k is
// channel (k % S) % C of tap (k / S, (k % S) / C), and column S-1 of a kernel row with odd
// KW*C is a zero pad. Walks one kernel row at a time: with dilation 1 its in-image taps are
// one contiguous run of input pixels, the rest padding zeros.
void GatherPairRows(const void* ctx, int64_t row0, int64_t rows, int64_t kp0, int64_t kpc, uint32_t* dst, int64_t ldp) {
  const Bf16Window& g = *static_cast<const Bf16Window*>(ctx);
  const int64_t c = g.c, kwc = g.kw * c, s = g.seg, k0 = 2 * kp0, end = 2 * (kp0 + kpc);
  PixelCursor px(row0, g.oh, g.ow);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t iy0 = px.oy * g.sh - g.pt, ix0 = px.ox * g.sw - g.pl;
    const uint16_t* ximg = g.xh + px.img * g.h * g.w * c;
    uint16_t* row = reinterpret_cast<uint16_t*>(dst + r * ldp) - k0;  // row[k] is column k
    for (int64_t ky = k0 / s, seg = ky * s; seg < end; ++ky, seg += s) {
      const int64_t lo = std::max(k0, seg), hi = std::min(end, seg + s), iy = iy0 + ky * g.dh;
      if (iy < 0 || iy >= g.h) {
        ZeroRun(row + lo, hi - lo);
        continue;
      }
      const uint16_t* xrow = ximg + iy * g.w * c;
      if (g.dw == 1) {
        // Taps kx in [kx_a, kx_b) fall inside the image: columns [a, b) of this segment.
        const int64_t kx_a = std::clamp<int64_t>(-ix0, 0, g.kw), kx_b = std::clamp<int64_t>(g.w - ix0, 0, g.kw);
        const int64_t a = seg + kx_a * c, b = seg + std::max(kx_a, kx_b) * c;
        FillSegment(row, lo, hi, a, b, xrow + (ix0 + kx_a) * c);
        continue;
      }
      for (int64_t kx = 0, tap = seg; kx < g.kw; ++kx, tap += c) {
        const int64_t tlo = std::max(lo, tap), thi = std::min(hi, tap + c);
        if (tlo >= thi) continue;
        const int64_t ix = ix0 + kx * g.dw;
        if (ix < 0 || ix >= g.w) {
          ZeroRun(row + tlo, thi - tlo);
        } else {
          CopyRun(row + tlo, xrow + ix * c + (tlo - tap), thi - tlo);
        }
      }
      const int64_t pad = std::max(lo, seg + kwc);  // the odd-KW*C pad column
      if (pad < hi) ZeroRun(row + pad, hi - pad);
    }
    px.Next();
  }
}

// A zero-padded bf16 copy of X: every tap of every output pixel lies inside it, so with
// dilation 1 along W a kernel row of a receptive field is one contiguous run of KW*C values
// and the gather is one unconditional copy per kernel row (a 7x7 RGB stem's 21 values and
// its zero pad column: one masked load and store). kw and seg are for that gather (odd C);
// even C reads kernel rows in place (PaddedKernelRowPointers).
struct PaddedBf16Image : PaddedNhwcImage<uint16_t> {
  int64_t kw, seg;
};

// Writes n values at d: the first ncopy from s, the rest zeros.
inline void CopyPadRun(uint16_t* d, const uint16_t* s, int64_t ncopy, int64_t n) {
  for (int64_t i = 0; i < n; i += 32)
    _mm512_mask_storeu_epi16(d + i, LaneMask32(n - i), _mm512_maskz_loadu_epi16(LaneMask32(ncopy - i), s + i));
}

// Bf16PairRowsFn over a PaddedBf16Image (same columns as GatherPairRows).
void GatherPaddedPairRows(const void* ctx, int64_t row0, int64_t rows, int64_t kp0, int64_t kpc, uint32_t* dst,
                          int64_t ldp) {
  const PaddedBf16Image& g = *static_cast<const PaddedBf16Image*>(ctx);
  const int64_t c = g.c, kwc = g.kw * c, s = g.seg, k0 = 2 * kp0, end = 2 * (kp0 + kpc);
  const int64_t ky_step = g.dh * g.wp * c;
  PixelCursor px(row0, g.oh, g.ow);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = g.xp + ((px.img * g.hp + px.oy * g.sh) * g.wp + px.ox * g.sw) * c;
    uint16_t* row = reinterpret_cast<uint16_t*>(dst + r * ldp) - k0;  // row[k] is column k
    for (int64_t ky = k0 / s, seg = ky * s; seg < end; ++ky, seg += s) {
      const int64_t lo = std::max(k0, seg), hi = std::min(end, seg + s);
      // Column k of this segment is kernel-row value k - seg (the pad column past kwc: zero).
      CopyPadRun(row + lo, src + ky * ky_step + (lo - seg), std::max<int64_t>(0, seg + kwc - lo), hi - lo);
    }
    px.Next();
  }
}

STRATA_BF16_TARGET_END

// Kernel rows of the packed K are padded to whole bf16 pairs: then no pair straddles two
// kernel rows, and each row's in-image run is one copy from the bf16 image (a 7x7 RGB stem
// pads 21 values to 22).
int64_t SegmentLength(const Tensor& w) { return (w.dim(3) * w.dim(1) + 1) / 2 * 2; }

// X rounded to bf16 once per run (split over the pool when large).
void RoundInput(const float* x, int64_t n, uint16_t* xh, ThreadPool* pool) {
  constexpr int64_t kChunk = int64_t{1} << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const auto body = [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      RoundToBf16(x + i * kChunk, std::min(kChunk, n - i * kChunk), xh + i * kChunk);
  };
  if (pool && pool->num_threads() > 1 && chunks > 1)
    pool->Run(chunks, 1, body);
  else
    body(0, chunks);
}

// Bf16IndirectA rows over a PaddedBf16Image with even C (no pad column, every kernel row
// starts on a whole pair): kernel row ky of an output pixel is read in place.
void PaddedSegmentPointers(const void* ctx, int64_t row0, int64_t n, const uint32_t** dst) {
  PaddedKernelRowPointers<kBf16MR>(*static_cast<const PaddedBf16Image*>(ctx), row0, n, dst);
}

// What the bf16 NHWC conv kernels share: W packed and B copied at creation (neither
// constant is read afterwards), the fused activation, the residual input, and Compute's
// checks, output and store.
class NhwcBf16ConvBase : public bf16_internal::Bf16KernelBase, public PacksConstantInputs {
 public:
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }
  // The sum may overwrite the residual: the bf16 GEMM then accumulates into it.
  int InPlaceInput() const override { return has_residual_ ? 3 : -1; }

 protected:
  NhwcBf16ConvBase(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act,
                   PackedBf16B packed)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act),
        packed_(std::move(packed)),
        has_residual_(init.node.inputs.size() > 3 && init.node.inputs[3] >= 0) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + w.dim(0));
  }

  struct Run {
    const Tensor* x = nullptr;
    NhwcConvInput xin;
    Tensor* y = nullptr;  // null: the output is empty, nothing to compute
    Bf16Epilogue ep;
  };
  // Checks X and the residual, allocates Y [N, OH, OW, M] and makes its store.
  Result<Run> Start(KernelContext& ctx) const {
    Run r;
    r.x = ctx.input(0);
    ASSIGN_OR_RETURN(r.xin, CheckNhwcConvInput(ctx.node(), r.x, nchw_node_, w_shape_, &known_));
    const SpatialGeometry& g = r.xin.shapes.geo;
    const int64_t m = w_shape_[0];
    const Shape out_shape = {r.xin.n, g.out[0], g.out[1], m};
    ASSIGN_OR_RETURN(const Tensor* res, NhwcConvResidual(ctx, has_residual_, out_shape));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return r;
    r.y = y;
    r.ep = NhwcConvEpilogue<Bf16Epilogue>(bias_.empty() ? nullptr : bias_.data(), act_.min, act_.max, act_.kind, res, y, m);
    return r;
  }

  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  PackedBf16B packed_;
  std::vector<float> bias_;
  bool has_residual_ = false;
};

class NhwcBf16ConvKernel final : public NhwcBf16ConvBase {
 public:
  // Even-C kernel rows are read in place (GemmBf16Indirect), on AMX only in whole steps.
  const char* ImplName() const override {
    const int64_t c = w_shape_[1], kw = w_shape_[3];
    if (c % 2 == 0 && kw * w_shape_[2] > 1 && !bf16_internal::AmxTakesSegments(kw * c / 2)) return "avx512_bf16";
    return Bf16KernelBase::ImplName();
  }

  NhwcBf16ConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act,
                     PackedBf16B packed)
      : NhwcBf16ConvBase(init, w, b, act, std::move(packed)), seg_(SegmentLength(w)) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Run run, Start(ctx));
    if (!run.y) return Status::Ok();
    const Tensor* x = run.x;
    const NhwcConvInput& xin = run.xin;
    const SpatialGeometry& g = xin.shapes.geo;
    const int64_t m = w_shape_[0], oh = g.out[0], ow = g.out[1];
    Tensor* y = run.y;
    const Bf16Epilogue& ep = run.ep;
    const int64_t rows = xin.n * oh * ow;
    float* out = y->mutable_data<float>();
    // The plain-matrix path needs K == C (an odd C pads each pixel's K to whole pairs).
    if (IsPointwiseNhwc(g) && packed_.K == xin.c)
      return GemmBf16(node, rows, x->data<float>(), xin.c, false, packed_, out, m, ep, ctx.pool());
    const int64_t xn = x->num_elements(), h = xin.h, w = xin.w, c = xin.c;
    // Padded extent: every row / column any output pixel's window reaches, and X itself.
    const int64_t hp = std::max(g.pad_begin[0] + h, (oh - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1);
    const int64_t wp = std::max(g.pad_begin[1] + w, (ow - 1) * g.strides[1] + g.kernel[1]);
    const double padded = static_cast<double>(xin.n) * static_cast<double>(hp) * static_cast<double>(wp) * c;
    // Padding the copy costs nothing extra (X is rounded either way) unless it is much
    // larger than X; dilated kernel rows are not contiguous runs, so they gather per tap.
    const bool use_padded = g.dilations[1] == 1 && padded <= 2.0 * static_cast<double>(xn) + 65536.0;
    Allocator* alloc = ctx.allocator() ? ctx.allocator() : DefaultAllocator();
    auto buf = alloc->Allocate(static_cast<size_t>(use_padded ? padded : static_cast<double>(xn)) * sizeof(uint16_t));
    if (!buf.ok())
      return MakeStatus(buf.status().code(), node.Describe(), ": bf16 input copy: ", buf.status().message());
    uint16_t* xh = static_cast<uint16_t*>((*buf)->data());
    if (use_padded) {
      PadNhwcImage(x->data<float>(), xin.n, h, w, c, g.pad_begin[0], g.pad_begin[1], hp, wp, xh, ctx.pool(),
                   RoundToBf16);
      const PaddedBf16Image pimg{
          {xh, hp, wp, c, oh, ow, g.kernel[0], g.strides[0], g.strides[1], g.dilations[0]}, g.kernel[1], seg_};
      // Even C: the GEMM reads A's kernel rows in place. Odd C (RGB stems): the pad column
      // is not in the image, so tiles are copied out.
      if (c % 2 == 0) {
        const Bf16IndirectA ia{PaddedSegmentPointers, &pimg, g.kernel[0], g.kernel[1] * c / 2};
        return GemmBf16Indirect(node, rows, ia, packed_, out, m, ep, ctx.pool());
      }
      return GemmBf16GatheredPairs(node, rows, GatherPaddedPairRows, &pimg, packed_, out, m, ep, ctx.pool());
    }
    RoundInput(x->data<float>(), xn, xh, ctx.pool());
    Bf16Window geo;
    static_cast<NhwcWindow&>(geo) = MakeNhwcWindow(x->data<float>(), xin);
    geo.xh = xh;
    geo.seg = seg_;
    return GemmBf16GatheredPairs(node, rows, GatherPairRows, &geo, packed_, out, m, ep, ctx.pool());
  }

 private:
  int64_t seg_;  // packed K elements per kernel row (KW*C rounded up to even)
};

// Output rows (pixels) per block of the split-row 1x1 conv: the block's split rows stay in
// L2 (at C = 256, 3 x 128 pairs a row, 128 rows are 192 KiB) while every column panel of W
// passes over them.
constexpr int64_t kSplitBlockBytes = 192 * 1024;

// A 1x1 unpadded conv that must keep fp32's accuracy in a bf16 session (an early conv of a
// deep net: past kBf16ConvMaxConvsAfter), on AMX: split rows, the bf16x3
// scheme of the fused inverted-residual block (block_bf16::RoundRowsSplit, PackSplitWeights),
// three bf16 products per fp32 one, each exact to about 2^-16 relative. Per block of output
// pixels the rows are rounded into a thread's L2 scratch and multiplied in place
// (block_bf16::PairRowsGemm, AmxRowsGemm), with bias, clamp and residual in the store.
class NhwcSplitPointwiseKernel final : public NhwcBf16ConvBase {
 public:
  const char* ImplName() const override { return "amx_bf16x3"; }

  NhwcSplitPointwiseKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act,
                           PackedBf16B packed)
      : NhwcBf16ConvBase(init, w, b, act, std::move(packed)) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Run run, Start(ctx));
    if (!run.y) return Status::Ok();
    const NhwcConvInput& xin = run.xin;
    const SpatialGeometry& g = xin.shapes.geo;
    if (g.pad_begin[0] || g.pad_begin[1] || g.pad_end[0] || g.pad_end[1])
      return InternalError(node.Describe(), ": the split-row 1x1 conv was built for an unpadded conv");
    const int64_t m = w_shape_[0], c = xin.c, oh = g.out[0], ow = g.out[1];
    const Bf16Epilogue& ep = run.ep;
    const Tensor* x = run.x;
    Tensor* y = run.y;
    const int64_t ldp = block_bf16::RowWords(block_bf16::SplitPairsPerRow(c));
    const int64_t rows = xin.n * oh * ow;
    const int64_t block = std::max<int64_t>(32, kSplitBlockBytes / (ldp * 4) / 32 * 32);
    const int64_t blocks = (rows + block - 1) / block;
    const float* xd = x->data<float>();
    float* out = y->mutable_data<float>();
    const int64_t sh = g.strides[0], sw = g.strides[1], h = xin.h, w = xin.w;
    const auto body = [&](int64_t b0, int64_t b1) {
      thread_local std::vector<uint32_t> split;  // kept across runs: a steady run allocates nothing
      split.resize(static_cast<size_t>(block * ldp));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t r0 = blk * block, n = std::min(block, rows - r0);
        // Rows of one output row at a time: the pixels of a strided conv are sw * C apart.
        for (int64_t r = r0; r < r0 + n;) {
          const int64_t img = r / (oh * ow), oy = r / ow % oh, ox = r % ow, run = std::min(ow - ox, r0 + n - r);
          const float* src = xd + ((img * h + oy * sh) * w + ox * sw) * c;
          block_bf16::RoundRowsSplit(src, sw * c, run, c, split.data() + (r - r0) * ldp, ldp);
          r += run;
        }
        Bf16Epilogue eb = ep;
        if (eb.residual) eb.residual += r0 * eb.ldr;
        block_bf16::PairRowsGemm(n, split.data(), ldp, packed_, out + r0 * m, m, eb);
      }
    };
    if (ctx.pool() && ctx.pool()->num_threads() > 1 && blocks > 1) {
      ctx.pool()->Run(blocks, 1, body);
    } else {
      body(0, blocks);
    }
    return Status::Ok();
  }
};

}  // namespace

namespace {
// The nodes a bf16 rounding error is amplified through (kBf16ConvMaxConvsAfter).
bool IsConvNode(const Node& n) {
  return n.op_type == "Conv" || n.op_type == "NhwcConv" || n.op_type == "ConvTranspose" ||
         n.op_type == kInvertedResidualOp;
}

// One OIHW output channel [C][KH][KW] as a row of B^T in im2col order: [KH][S], kx * C + c,
// each kernel row padded to S with zeros.
struct ConvRowLayout {
  int64_t c, kh, kw, seg;
};
void ReorderConvRow(const float* src, float* dst, const void* ctx) {
  const ConvRowLayout& l = *static_cast<const ConvRowLayout*>(ctx);
  std::fill(dst, dst + l.kh * l.seg, 0.0f);
  for (int64_t i = 0; i < l.c; ++i)
    for (int64_t ky = 0; ky < l.kh; ++ky)
      for (int64_t kx = 0; kx < l.kw; ++kx) dst[ky * l.seg + kx * l.c + i] = src[(i * l.kh + ky) * l.kw + kx];
}

// A 1x1 conv with no explicit padding (auto_pad pads a 1x1 kernel by nothing).
bool SplitPointwiseFits(const Node& node, const Tensor& w) {
  if (w.dim(2) != 1 || w.dim(3) != 1) return false;
  for (int64_t p : node.GetInts("pads"))
    if (p != 0) return false;
  return true;
}

Result<std::unique_ptr<OpKernel>> MakeSplitPointwise(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                     const FusedActivation& act) {
  auto packed = block_bf16::PackSplitWeights(sgemm::WeightRows::Of(w), w.dim(0), w.dim(1), init.pool);
  if (!packed.ok()) return MakeStatus(packed.status().code(), init.node.Describe(), ": ", packed.status().message());
  return std::unique_ptr<OpKernel>(
      std::make_unique<NhwcSplitPointwiseKernel>(init, w, b, act, std::move(packed).value()));
}

// bf16 fast math applies to this node: the session asks for it, the CPU has it, and
// STRATA_BF16_NODES (if set) selects the node.
bool Bf16MathFor(const KernelInit& init) {
  return init.config.bf16_fast_math && !init.config.prefer_reference && Bf16GemmAvailable() &&
         Bf16NodeSelected(init.node);
}

bool WithinDepthBound(const KernelInit& init) {
  return LongestChainAfter(init.graph, init.node, IsConvNode) <= kBf16ConvMaxConvsAfter;
}

}  // namespace

bool NhwcBf16ConvTakes(const KernelInit& init) { return Bf16MathFor(init) && WithinDepthBound(init); }

Result<std::unique_ptr<OpKernel>> MakeNhwcBf16Conv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act) {
  const Node& node = init.node;
  if (!Bf16MathFor(init)) return Unsupported(node.Describe(), ": bf16 fast math is off or the CPU lacks avx512_bf16");
  // Grouped (depthwise) convs stay fp32: they are memory-bound, bf16 saves no FLOPs there.
  if (node.GetInt("group", 1) != 1 || w.dtype() != DataType::kFloat || w.rank() != 4 || w.num_elements() == 0)
    return Unsupported(node.Describe(), ": the bf16 NHWC conv needs group 1 and a float32 OIHW weight");
  // The AMX stores apply only clamps; there a SiLU / HardSwish conv takes the fp32 SGEMM.
  if (act.kind != ActKind::kClamp && bf16_internal::AmxAvailable())
    return Unsupported(node.Describe(), ": fused ", act.kind == ActKind::kSilu ? "SiLU" : "HardSwish",
                       " on AMX stays fp32");
  if (!WithinDepthBound(init)) {
    if (SplitPointwiseFits(node, w) && bf16_internal::AmxAvailable() && Bf16SplitRowsEnabled())
      return MakeSplitPointwise(init, w, b, act);
    return Unsupported(node.Describe(), ": an early conv of a deep net (more than ", kBf16ConvMaxConvsAfter,
                       " convs after it) stays fp32 in bf16 sessions");
  }
  // OIHW -> [M][KH][S] (B^T with K in im2col order, kernel rows padded to S with zeros),
  // one panel's rows at a time while they are packed (read from the file when the weight
  // is still there: sgemm::WeightRows).
  const int64_t m = w.dim(0), c = w.dim(1), kh = w.dim(2), kw = w.dim(3), seg = SegmentLength(w);
  const ConvRowLayout layout{c, kh, kw, seg};
  auto packed = PackBf16Rows(sgemm::WeightRows::Of(w), c * kh * kw, ReorderConvRow, &layout, kh * seg, m,
                             /*trans=*/true, 1.0f, init.pool);
  if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcBf16ConvKernel>(init, w, b, act, std::move(packed).value()));
}

}  // namespace strata
