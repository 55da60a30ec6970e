// The RGB stem conv (see conv_nhwc_stem.h). Through the SGEMM the stem gathered im2col rows
// of K = 27 (3x3x3) per tile, and such a short K left the GEMM at ~45 GFLOP/s. Here the
// weights are [KH*KW*C][M] rows of output-channel vectors (L1-resident: 3.4 KiB for
// 3x3x3x32); an interior block of kPix output pixels keeps kPix x NV accumulators (NV
// 16-channel vectors) and per tap broadcasts one input value per pixel against NV weight
// vectors. Pixels whose window crosses the padding take the same loop with bounds checks.
#include "cpu/conv_nhwc_stem.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/constant_release.h"
#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/simd_clamp.h"

namespace strata {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

constexpr int64_t kMaxStemChannels = 4;

struct StemGeo {
  const float* x;  // [N, H, W, C]
  float* y;        // [N, OH, OW, M]
  const float* w;  // [KH * KW * C][mp]
  const float* bias;
  int64_t h, wd, c, m, mp, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
  ActKind kind;  // before the clamp
};

// kPix interior output pixels (every tap in bounds) starting at (oy, ox), output channels
// [m0, m0 + 16 * kNV) masked by `last` on the final vector.
// kKH, kKW, kC, kSW: the kernel height and width, the input channels and the horizontal
// stride when known at compile time (0: read from g), so the tap loops unroll and every
// input address is a constant offset.
template <int kNV, int kPix, int kKH = 0, int kKW = 0, int kC = 0, int kSW = 0>
STRATA_AVX512 inline void InteriorBlock(const StemGeo& g, const float* xn, int64_t oy, int64_t ox, int64_t m0,
                                        __mmask16 last, float* yrow) {
  const int64_t kh = kKH ? kKH : g.kh, kw = kKW ? kKW : g.kw, c = kC ? kC : g.c, sw = kSW ? kSW : g.sw;
  __m512 acc[kPix][kNV];
#pragma GCC unroll 4
  for (int v = 0; v < kNV; ++v) {
    const __m512 b = _mm512_loadu_ps(g.bias + m0 + 16 * v);  // padded to mp
#pragma GCC unroll 8
    for (int j = 0; j < kPix; ++j) acc[j][v] = b;
  }
  const int64_t iy0 = oy * g.sh - g.pt, ix0 = ox * sw - g.pl, pstep = sw * c;
  const float* wt = g.w + m0;
#pragma GCC unroll 7
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* xr = xn + ((iy0 + ky * g.dh) * g.wd + ix0) * c;
#pragma GCC unroll 7
    for (int64_t kx = 0; kx < kw; ++kx) {
      const float* xp = xr + kx * (kKW ? 1 : g.dw) * c;
#pragma GCC unroll 4
      for (int64_t ci = 0; ci < c; ++ci, wt += g.mp) {
        __m512 wv[kNV];
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) wv[v] = _mm512_loadu_ps(wt + 16 * v);
#pragma GCC unroll 8
        for (int j = 0; j < kPix; ++j) {
          const __m512 xv = _mm512_set1_ps(xp[j * pstep + ci]);
#pragma GCC unroll 4
          for (int v = 0; v < kNV; ++v) acc[j][v] = _mm512_fmadd_ps(xv, wv[v], acc[j][v]);
        }
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
#pragma GCC unroll 8
  for (int j = 0; j < kPix; ++j) {
    float* yp = yrow + (ox + j) * g.m + m0;
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v)
      _mm512_mask_storeu_ps(yp + 16 * v, v == kNV - 1 ? last : static_cast<__mmask16>(0xFFFF),
                            simd::Activate(acc[j][v], lo, hi, g.kind));
  }
}

// One output pixel whose window may cross the padding: out-of-bounds taps are skipped.
template <int kNV>
STRATA_AVX512 inline void EdgePixel(const StemGeo& g, const float* xn, int64_t oy, int64_t ox, int64_t m0,
                                    __mmask16 last, float* yrow) {
  __m512 acc[kNV];
#pragma GCC unroll 4
  for (int v = 0; v < kNV; ++v) acc[v] = _mm512_loadu_ps(g.bias + m0 + 16 * v);
  const int64_t iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl, c = g.c;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = iy0 + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = ix0 + kx * g.dw;
      if (ix < 0 || ix >= g.wd) continue;
      const float* xp = xn + (iy * g.wd + ix) * c;
      const float* wt = g.w + ((ky * g.kw + kx) * c) * g.mp + m0;
      for (int64_t ci = 0; ci < c; ++ci, wt += g.mp) {
        const __m512 xv = _mm512_set1_ps(xp[ci]);
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) acc[v] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wt + 16 * v), acc[v]);
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  float* yp = yrow + ox * g.m + m0;
#pragma GCC unroll 4
  for (int v = 0; v < kNV; ++v)
    _mm512_mask_storeu_ps(yp + 16 * v, v == kNV - 1 ? last : static_cast<__mmask16>(0xFFFF),
                          simd::Activate(acc[v], lo, hi, g.kind));
}

// Output rows [r0, r1) of the flattened [N * OH], channels [m0, m0 + 16 * kNV).
template <int kNV>
STRATA_AVX512 void StemRows(const StemGeo& g, int64_t r0, int64_t r1, int64_t m0) {
  // kPix x kNV accumulators plus kNV weight vectors and a broadcast fit the 32 registers.
  // With 4 vectors (64 channels), 3 pixels per block left the loop load-bound on Zen 4 (its
  // 512-bit loads issue one per cycle: 4 weights + 3 broadcasts per 12 FMAs): 6 pixels took
  // SqueezeNet's 3x3 stride-2 64-channel stem from 0.73-0.77 to 0.45-0.49 ms alone (~57 ->
  // ~90 GFLOP/s), the 7x7 one level.
  constexpr int kPix = kNV == 1 ? 8 : kNV == 2 ? 6 : kNV == 4 ? 6 : 3;
  const int64_t left = g.m - m0 - 16 * (kNV - 1);
  const __mmask16 last = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
  // Columns whose horizontal taps are all inside the image.
  const int64_t span = (g.kw - 1) * g.dw;
  const int64_t ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int64_t ox_hi =
      g.wd - 1 - span + g.pl < 0 ? ox_lo : std::max(ox_lo, std::min(g.ow, (g.wd - 1 - span + g.pl) / g.sw + 1));
  // The 3x3 stride-2 RGB stem (mobilenet's) takes the compile-time taps (dilation 1: kx * c
  // apart): 0.27-0.42 -> 0.17-0.31 ms alone. Resnet's 7x7 one unrolled so was slower
  // (1.73-2.38 -> 1.83-2.90 ms: 147 taps of code), so it keeps the loops, and so do 3 or 4
  // vectors (SqueezeNet's 64 channels: fully unrolled 0.50-0.64 ms, the loops 0.43-0.46).
  const bool stem3 = g.c == 3 && g.sw == 2 && g.dw == 1 && g.kh == 3 && g.kw == 3;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / g.oh, oy = row - n * g.oh;
    const float* xn = g.x + n * g.h * g.wd * g.c;
    float* yrow = g.y + row * g.ow * g.m;
    const int64_t iy0 = oy * g.sh - g.pt;
    const bool rows_in = iy0 >= 0 && iy0 + (g.kh - 1) * g.dh < g.h;
    int64_t ox = 0;
    if (rows_in) {
      for (; ox < ox_lo; ++ox) EdgePixel<kNV>(g, xn, oy, ox, m0, last, yrow);
      if (stem3 && kNV <= 2) {
        for (; ox + kPix <= ox_hi; ox += kPix) InteriorBlock<kNV, kPix, 3, 3, 3, 2>(g, xn, oy, ox, m0, last, yrow);
      } else {
        for (; ox + kPix <= ox_hi; ox += kPix) InteriorBlock<kNV, kPix>(g, xn, oy, ox, m0, last, yrow);
      }
      for (; ox < ox_hi; ++ox) InteriorBlock<kNV, 1>(g, xn, oy, ox, m0, last, yrow);
    }
    for (; ox < g.ow; ++ox) EdgePixel<kNV>(g, xn, oy, ox, m0, last, yrow);
  }
}

class NhwcStemConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }
  const char* ImplName() const override { return "nhwc-stem"; }

  NhwcStemConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act) {
    const int64_t m = w.dim(0), c = w.dim(1), taps = w.dim(2) * w.dim(3);
    mp_ = (m + 15) / 16 * 16;
    // OIHW -> [(ky * KW + kx) * C + c][mp], zero-padded columns.
    weights_.assign(static_cast<size_t>(taps * c * mp_), 0.0f);
    const float* src = w.data<float>();
    for (int64_t o = 0; o < m; ++o)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t t = 0; t < taps; ++t) weights_[(t * c + ci) * mp_ + o] = src[(o * c + ci) * taps + t];
    bias_.assign(static_cast<size_t>(mp_), 0.0f);
    if (b) std::copy(b->data<float>(), b->data<float>() + m, bias_.begin());
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const SpatialGeometry& s = xin.shapes.geo;
    const int64_t m = w_shape_[0];
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {xin.n, s.out[0], s.out[1], m}));
    if (y->num_elements() == 0) return Status::Ok();
    const StemGeo g{x->data<float>(),
                    y->mutable_data<float>(),
                    weights_.data(),
                    bias_.data(),
                    xin.h,
                    xin.w,
                    xin.c,
                    m,
                    mp_,
                    s.out[0],
                    s.out[1],
                    s.kernel[0],
                    s.kernel[1],
                    s.strides[0],
                    s.strides[1],
                    s.dilations[0],
                    s.dilations[1],
                    s.pad_begin[0],
                    s.pad_begin[1],
                    act_.min,
                    act_.max,
                    act_.kind};
    auto rows = [&](int64_t r0, int64_t r1) {
      // Groups of up to 64 output channels (4 vectors), each over the whole row range.
      for (int64_t m0 = 0; m0 < m; m0 += 64) {
        const int64_t nv = std::min<int64_t>(4, (m - m0 + 15) / 16);
        switch (nv) {
          case 1:
            StemRows<1>(g, r0, r1, m0);
            break;
          case 2:
            StemRows<2>(g, r0, r1, m0);
            break;
          case 3:
            StemRows<3>(g, r0, r1, m0);
            break;
          default:
            StemRows<4>(g, r0, r1, m0);
        }
      }
    };
    const int64_t total = xin.n * s.out[0];
    if (ctx.pool()) {
      ctx.pool()->Run(total, 1, rows);
    } else {
      rows(0, total);
    }
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  int64_t mp_ = 0;
  std::vector<float> weights_, bias_;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcStemConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act) {
  const Node& node = init.node;
  if (!sgemm::Available() || node.GetInt("group", 1) != 1 || w.rank() != 4 || w.dim(1) > kMaxStemChannels ||
      init.has_input(3))
    return Unsupported(node.Describe(), ": the stem kernel takes ungrouped convs with C <= 4 and no residual");
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcStemConvKernel>(init, w, b, act));
}

}  // namespace strata
