// bf16 fast-math 2-D Conv (group 1, constant weights) on NCHW: per image,
// Y[Cout, OH*OW] = W[Cout, Cin*KH*KW] x im2col(X). W is packed once into 12-row bf16
// tiles; im2col(X) is never materialised in fp32: each K chunk of a column block is
// gathered straight into bf16 pair panels (contiguous loads for 1x1/stride-1 rows,
// masked gathers where padding or strides break contiguity), then multiplied by the
// shared micro-kernel (gemm_bf16.cc). Bias and Relu/Clip are fused into the store.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/bf16_simd.h"
#include "cpu/bf16_target.h"
#include "cpu/conv_kernels.h"
#include "cpu/gemm_bf16.h"
#include "cpu/xnnpack_util.h"

namespace strata {

namespace {

constexpr int64_t kKcPairs = 192;  // K chunk: one B panel chunk (24 KiB) stays in L1
constexpr int64_t kNcCols = 128;   // columns (output pixels) per work item
constexpr size_t kBpackWords = (kNcCols / kBf16NR) * kKcPairs * kBf16NR;
// One work item's packed image columns, reused by every item a thread runs.
thread_local std::vector<uint32_t> t_bpack;

// Geometry of one Conv call, in the int32 lanes of the gather indices.
struct ConvGeo {
  int32_t cin, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow;
  bool pointwise;  // 1x1, stride 1, no padding: im2col(X) is X itself
};

STRATA_BF16_TARGET_BEGIN

using bf16_internal::LaneMask;
using bf16_internal::PairsFrom;

// 16 output columns starting at j: the top-left input coordinate of each window.
struct ColumnHalf {
  __m512i iy0, ix0;
  __mmask16 live;   // lanes that are real columns
  bool contiguous;  // stride 1 and all lanes in one output row: input pixels are consecutive
  int32_t y0, x0;   // lane 0's iy0 / ix0
};

ColumnHalf MakeHalf(const ConvGeo& g, int64_t j, int64_t n) {
  alignas(64) int32_t iy[16], ix[16];
  for (int l = 0; l < 16; ++l) {
    int64_t col = j + std::min<int64_t>(l, std::max<int64_t>(n - 1, 0));
    int32_t oy = static_cast<int32_t>(col / g.ow), ox = static_cast<int32_t>(col % g.ow);
    iy[l] = oy * g.sh - g.ph;
    ix[l] = ox * g.sw - g.pw;
  }
  ColumnHalf c;
  c.iy0 = _mm512_load_si512(iy);
  c.ix0 = _mm512_load_si512(ix);
  c.live = LaneMask(n);
  c.y0 = iy[0];
  c.x0 = ix[0];
  c.contiguous = g.sw == 1 && n > 0 && (j % g.ow) + n <= g.ow;
  return c;
}

// Row k of im2col(X) for the 16 columns of `c`.
inline __m512 Im2colRow(const float* x, const ConvGeo& g, const ColumnHalf& c, int64_t k) {
  const int32_t kk = g.kh * g.kw;
  const int32_t ci = static_cast<int32_t>(k / kk), r = static_cast<int32_t>(k % kk);
  const int32_t ky = r / g.kw, kx = r % g.kw;
  const int64_t plane = static_cast<int64_t>(ci) * g.h * g.w;
  const int32_t y = c.y0 + ky * g.dh, xx = c.x0 + kx * g.dw;
  if (c.contiguous && y >= 0 && y < g.h) {
    // One input row: a masked contiguous load (the mask also covers left/right padding).
    const int64_t lo = std::max<int64_t>(0, -xx), hi = std::min<int64_t>(16, g.w - static_cast<int64_t>(xx));
    if (hi <= lo) return _mm512_setzero_ps();
    const __mmask16 m = c.live & static_cast<__mmask16>(LaneMask(hi) & ~LaneMask(lo));
    const float* row = x + plane + static_cast<int64_t>(y) * g.w;
    // Lanes outside [lo, hi) are masked off: AVX-512 masked loads never touch them.
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(reinterpret_cast<intptr_t>(row) + xx * 4));
  }
  const __m512i iy = _mm512_add_epi32(c.iy0, _mm512_set1_epi32(ky * g.dh));
  const __m512i ix = _mm512_add_epi32(c.ix0, _mm512_set1_epi32(kx * g.dw));
  __mmask16 m = c.live;
  m &= _mm512_cmpge_epi32_mask(iy, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(iy, _mm512_set1_epi32(g.h));
  m &= _mm512_cmpge_epi32_mask(ix, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(ix, _mm512_set1_epi32(g.w));
  if (!m) return _mm512_setzero_ps();
  const __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(iy, _mm512_set1_epi32(g.w)), ix);
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x + plane, 4);
}

// Packs K pairs [kp0, kp0 + kpc) of im2col(X) columns [j0, j0 + cols) into 32-column
// bf16 pair panels ([kpc][32] each, panels kpc*32 apart).
void PackIm2col(const float* x, const ConvGeo& g, int64_t K, int64_t j0, int64_t cols, int64_t kp0, int64_t kpc,
                uint32_t* dst) {
  const int64_t hw = static_cast<int64_t>(g.h) * g.w;
  const int64_t panels = (cols + kBf16NR - 1) / kBf16NR;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t jp = j0 + p * kBf16NR, n = std::min<int64_t>(kBf16NR, cols - p * kBf16NR);
    uint32_t* panel = dst + p * kpc * kBf16NR;
    if (g.pointwise) {
      const __mmask16 m0 = LaneMask(n), m1 = LaneMask(n - 16);
      for (int64_t kp = 0; kp < kpc; ++kp) {
        const int64_t k = 2 * (kp0 + kp);
        const float* r0 = x + k * hw + jp;
        const float* r1 = r0 + hw;
        const bool has1 = k + 1 < K;
        for (int h = 0; h < 2; ++h) {
          const __mmask16 m = h ? m1 : m0;
          __m512 lo = _mm512_maskz_loadu_ps(m, r0 + 16 * h);
          __m512 hi = has1 ? _mm512_maskz_loadu_ps(m, r1 + 16 * h) : _mm512_setzero_ps();
          _mm512_storeu_si512(panel + kp * kBf16NR + 16 * h, PairsFrom(lo, hi));
        }
      }
      continue;
    }
    const ColumnHalf c0 = MakeHalf(g, jp, std::min<int64_t>(16, n));
    const ColumnHalf c1 = MakeHalf(g, jp + 16, n - 16);
    for (int64_t kp = 0; kp < kpc; ++kp) {
      const int64_t k = 2 * (kp0 + kp);
      const bool has1 = k + 1 < K;
      __m512 lo0 = Im2colRow(x, g, c0, k), hi0 = has1 ? Im2colRow(x, g, c0, k + 1) : _mm512_setzero_ps();
      _mm512_storeu_si512(panel + kp * kBf16NR, PairsFrom(lo0, hi0));
      __m512 lo1 = _mm512_setzero_ps(), hi1 = _mm512_setzero_ps();
      if (n > 16) {
        lo1 = Im2colRow(x, g, c1, k);
        if (has1) hi1 = Im2colRow(x, g, c1, k + 1);
      }
      _mm512_storeu_si512(panel + kp * kBf16NR + 16, PairsFrom(lo1, hi1));
    }
  }
}

STRATA_BF16_TARGET_END

class Bf16ConvKernel final : public bf16_internal::Bf16KernelBase {
 public:
  // Its [kpc][12] weight tiles run on the vdpbf16ps micro-kernel only (no AMX path).
  const char* ImplName() const override { return "avx512_bf16"; }
  Status Init(const Node& node, const Tensor& w, const Tensor* b, const FusedActivation& act) {
    w_shape_ = w.shape();
    const int64_t m = w.dim(0), k = w.dim(1) * w.dim(2) * w.dim(3);
    ASSIGN_OR_RETURN(w_, PackBf16A(w.data<float>(), m, k));
    if (b) bias_.assign(b->data<float>(), b->data<float>() + m);
    ep_.bias = bias_.empty() ? nullptr : bias_.data();
    ep_.bias_per_row = true;
    ep_.min = act.min;
    ep_.max = act.max;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(FloatConvIo io, StartFloatConv(ctx, w_shape_));
    if (io.y->num_elements() == 0) return Status::Ok();
    const Tensor* x = io.x;
    Tensor* y = io.y;
    const ConvShapes& s = io.shapes;
    const SpatialGeometry& sg = s.geo;
    const int64_t in_plane = s.in_channels * sg.in[0] * sg.in[1];
    if (in_plane >= (int64_t{1} << 31))
      return Unsupported(node.Describe(), ": bf16 Conv: an input image of ", in_plane,
                         " elements exceeds the 2^31 gather-index range");
    ConvGeo g{};
    g.cin = static_cast<int32_t>(s.in_channels);
    g.h = static_cast<int32_t>(sg.in[0]);
    g.w = static_cast<int32_t>(sg.in[1]);
    g.kh = static_cast<int32_t>(sg.kernel[0]);
    g.kw = static_cast<int32_t>(sg.kernel[1]);
    g.sh = static_cast<int32_t>(sg.strides[0]);
    g.sw = static_cast<int32_t>(sg.strides[1]);
    g.dh = static_cast<int32_t>(sg.dilations[0]);
    g.dw = static_cast<int32_t>(sg.dilations[1]);
    g.ph = static_cast<int32_t>(sg.pad_begin[0]);
    g.pw = static_cast<int32_t>(sg.pad_begin[1]);
    g.oh = static_cast<int32_t>(sg.out[0]);
    g.ow = static_cast<int32_t>(sg.out[1]);
    g.pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && sg.pad_end[0] == 0 &&
                  sg.pad_end[1] == 0;
    const int64_t M = s.out_channels, K = w_.K, ohw = sg.out[0] * sg.out[1];
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    if (K == 0) {
      for (int64_t i = 0; i < s.batch * M; ++i) {
        float v = std::min(std::max(ep_.bias ? ep_.bias[i % M] : 0.0f, ep_.min), ep_.max);
        std::fill(yp + i * ohw, yp + (i + 1) * ohw, v);
      }
      return Status::Ok();
    }

    // Work items: image x column block x row (output channel) block. Rows are split only
    // when the columns alone do not give every thread a few items (late, small layers).
    const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    const int64_t cb = (ohw + kNcCols - 1) / kNcCols;
    int64_t mrows = (M + kBf16MR - 1) / kBf16MR * kBf16MR;
    if (threads > 1 && s.batch * cb < 4 * threads) {
      int64_t splits = (4 * threads + s.batch * cb - 1) / (s.batch * cb);
      mrows = std::max<int64_t>(kBf16MR, ((M + splits - 1) / splits + kBf16MR - 1) / kBf16MR * kBf16MR);
    }
    const int64_t mb = (M + mrows - 1) / mrows;
    const PackedBf16A& w = w_;
    const Bf16Epilogue& ep = ep_;
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<uint32_t>& bpack = t_bpack;
      bpack.resize(kBpackWords);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t img = item / (cb * mb), rest = item % (cb * mb);
        const int64_t j0 = (rest / mb) * kNcCols, m0 = (rest % mb) * mrows;
        const int64_t cols = std::min(kNcCols, ohw - j0), rows = std::min(mrows, M - m0);
        const float* ximg = xp + img * in_plane;
        float* yblk = yp + (img * M + m0) * ohw + j0;
        for (int64_t kp0 = 0; kp0 < w.kp; kp0 += kKcPairs) {
          const int64_t kpc = std::min(kKcPairs, w.kp - kp0);
          PackIm2col(ximg, g, K, j0, cols, kp0, kpc, bpack.data());
          const bool last = kp0 + kpc == w.kp;
          bf16_internal::Block(w.tile(m0 / kBf16MR) + kp0 * kBf16MR, w.kp * kBf16MR, rows, bpack.data(), kpc * kBf16NR,
                               cols, kpc, yblk, ohw, kp0 > 0, last ? &ep : nullptr, m0, j0);
        }
      }
    };
    const int64_t items = s.batch * cb * mb;
    if (threads > 1 && items > 1) {
      ctx.pool()->ParallelFor(items, 1, body);
    } else {
      body(0, items);
    }
    return Status::Ok();
  }

 private:
  Shape w_shape_;
  PackedBf16A w_;
  std::vector<float> bias_;
  Bf16Epilogue ep_;
};

}  // namespace

bool Bf16ConvCovers(const KernelInit& init) {
  const Node& node = init.node;
  if (!init.config.bf16_fast_math || init.config.prefer_reference || !Bf16GemmAvailable()) return false;
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  bool usable =
      w && w->dtype() == DataType::kFloat && w->rank() == 4 && node.GetInt("group", 1) == 1 && w->num_elements() > 0;
  if (usable && init.has_input(2))
    usable = b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == w->dim(0);
  if (usable && node.HasAttr("kernel_shape"))
    usable = node.GetInts("kernel_shape") == std::vector<int64_t>(w->shape().begin() + 2, w->shape().end());
  // Depthwise/grouped convs, 1-D/3-D convs and run-time weights stay on the fp32 kernels.
  return usable;
}

Result<std::unique_ptr<OpKernel>> MakeBf16Conv(const KernelInit& init) {
  if (!Bf16ConvCovers(init)) return MakeXnnConv(init);
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  auto k = std::make_unique<Bf16ConvKernel>();
  RETURN_IF_ERROR(k->Init(init.node, *init.constant_input(1), init.constant_input(2), act));
  return std::unique_ptr<OpKernel>(std::move(k));
}

void PrepareBf16ConvThreadScratch() {
  if (Bf16GemmAvailable()) t_bpack.reserve(kBpackWords);
}

}  // namespace strata
