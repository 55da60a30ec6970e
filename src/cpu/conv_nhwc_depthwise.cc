// Depthwise NhwcConv (group == C == M) with AVX-512F on the session pool, used by
// multi-thread sessions (see MakeNhwcDepthwiseConv): XNNPACK's depthwise kernels would run
// on XNNPACK's pthreadpool while the SGEMM convs around them run on strata's pool, and on
// a loaded 2-vCPU machine handing the cores from one pool to the other dominated.
//
// Per output pixel and 16-channel vector: bias + sum over the in-bounds taps of
// x[iy, ix, c:c+16] * w[ky, kx, c:c+16]; the valid tap range is computed once per pixel,
// so padding costs no per-tap branches. Rows of output pixels are split over the pool.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_gemm.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"

namespace strata {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

struct DwGeo {
  const float* x;
  float* y;
  const float* w;     // [kh * kw][cp]
  const float* bias;  // [cp]
  int64_t h, wd, c, cp, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// First tap index t in [0, k) with 0 <= o + t * d < n, and one past the last.
inline void TapRange(int64_t o, int64_t d, int64_t k, int64_t n, int64_t* t0, int64_t* t1) {
  int64_t a = 0, b = k;
  if (o < 0) a = (-o + d - 1) / d;
  if (o + (k - 1) * d >= n) b = o >= n ? 0 : (n - 1 - o) / d + 1;
  *t0 = std::min(a, k);
  *t1 = std::max(b, *t0);
}

// One output pixel's channels [c0, c0 + 16) (masked by m) over taps [ky0, ky1) x [kx0, kx1).
STRATA_AVX512 inline __m512 DwPixel(const DwGeo& g, const float* xn, int64_t iy0, int64_t ix0, int64_t ky0, int64_t ky1,
                                    int64_t kx0, int64_t kx1, int64_t c0, __mmask16 m) {
  __m512 acc = _mm512_loadu_ps(g.bias + c0);  // bias and weights are padded to cp
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const int64_t xrow = (iy0 + ky * g.dh) * g.wd + ix0;  // pixel index of tap kx = 0 (may be < 0)
    const float* wr = g.w + ky * g.kw * g.cp + c0;
    for (int64_t kx = kx0; kx < kx1; ++kx)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xn + (xrow + kx * g.dw) * g.c + c0),
                            _mm512_loadu_ps(wr + kx * g.cp), acc);
  }
  return acc;
}

STRATA_AVX512 void DwRows(const DwGeo& g, int64_t row_begin, int64_t row_end) {
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  const int64_t c = g.c;
  // Output columns whose taps all lie inside the image: there, kPix pixels share each
  // weight load and give kPix independent FMA chains (one chain per pixel was FMA-latency
  // bound: ~1.7x XNNPACK's time on mobilenet_v2).
  constexpr int kPix = 4;
  const int64_t span = (g.kw - 1) * g.dw;
  const int64_t ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int64_t ox_hi =
      g.wd - 1 - span + g.pl < 0 ? ox_lo : std::max(ox_lo, std::min(g.ow, (g.wd - 1 - span + g.pl) / g.sw + 1));
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t n = row / g.oh, oy = row - n * g.oh;
    const int64_t iy0 = oy * g.sh - g.pt;
    int64_t ky0, ky1;
    TapRange(iy0, g.dh, g.kh, g.h, &ky0, &ky1);
    const float* xn = g.x + n * g.h * g.wd * c;
    float* yrow = g.y + row * g.ow * c;
    for (int64_t ox = 0; ox < g.ow;) {
      const int64_t ix0 = ox * g.sw - g.pl;
      if (ox >= ox_lo && ox + kPix <= ox_hi) {
        for (int64_t c0 = 0; c0 < c; c0 += 16) {
          const __mmask16 m =
              c - c0 >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (c - c0)) - 1);
          __m512 acc[kPix];
          for (int j = 0; j < kPix; ++j) acc[j] = _mm512_loadu_ps(g.bias + c0);
          for (int64_t ky = ky0; ky < ky1; ++ky) {
            const float* xr = xn + ((iy0 + ky * g.dh) * g.wd + ix0) * c + c0;
            const float* wr = g.w + ky * g.kw * g.cp + c0;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const __m512 wv = _mm512_loadu_ps(wr + kx * g.cp);
              const float* xp = xr + kx * g.dw * c;
#pragma GCC unroll 4
              for (int j = 0; j < kPix; ++j)
                acc[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xp + j * g.sw * c), wv, acc[j]);
            }
          }
          for (int j = 0; j < kPix; ++j)
            _mm512_mask_storeu_ps(yrow + (ox + j) * c + c0, m, _mm512_min_ps(_mm512_max_ps(acc[j], lo), hi));
        }
        ox += kPix;
        continue;
      }
      int64_t kx0, kx1;
      TapRange(ix0, g.dw, g.kw, g.wd, &kx0, &kx1);
      float* yp = yrow + ox * c;
      for (int64_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 m =
            c - c0 >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (c - c0)) - 1);
        const __m512 acc = DwPixel(g, xn, iy0, ix0, ky0, ky1, kx0, kx1, c0, m);
        _mm512_mask_storeu_ps(yp + c0, m, _mm512_min_ps(_mm512_max_ps(acc, lo), hi));
      }
      ++ox;
    }
  }
}

class NhwcDepthwiseKernel final : public OpKernel {
 public:
  NhwcDepthwiseKernel(const Node& node, const Tensor& w, const Tensor* b, const FusedActivation& act)
      : nchw_node_(OriginalNode(node, "Conv")), w_shape_(w.shape()), act_(act) {
    const int64_t c = w.dim(0), taps = w.dim(2) * w.dim(3);
    cp_ = (c + 15) / 16 * 16;
    weights_.assign(static_cast<size_t>(taps * cp_), 0.0f);
    bias_.assign(static_cast<size_t>(cp_), 0.0f);
    const float* src = w.data<float>();
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t t = 0; t < taps; ++t) weights_[t * cp_ + ch] = src[ch * taps + t];
    if (b) std::copy(b->data<float>(), b->data<float>() + c, bias_.begin());
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_));
    const int64_t n = xin.n, h = xin.h, w = xin.w, c = xin.c;
    const ConvShapes& s = xin.shapes;
    const SpatialGeometry& g = s.geo;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, g.out[0], g.out[1], c}));
    if (y->num_elements() == 0) return Status::Ok();
    const DwGeo geo{x->data<float>(),
                    y->mutable_data<float>(),
                    weights_.data(),
                    bias_.data(),
                    h,
                    w,
                    c,
                    cp_,
                    g.out[0],
                    g.out[1],
                    g.kernel[0],
                    g.kernel[1],
                    g.strides[0],
                    g.strides[1],
                    g.dilations[0],
                    g.dilations[1],
                    g.pad_begin[0],
                    g.pad_begin[1],
                    act_.min,
                    act_.max};
    const int64_t rows = n * g.out[0];
    // ~64 KiB of output per chunk: enough work to amortise a pool wake-up.
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.out[1] * c));
    if (ctx.pool()) {
      ctx.pool()->Run(rows, grain, [&](int64_t b, int64_t e) { DwRows(geo, b, e); });
    } else {
      DwRows(geo, 0, rows);
    }
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  FusedActivation act_;
  int64_t cp_ = 0;
  std::vector<float> weights_, bias_;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcDepthwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                        const FusedActivation& act) {
  const Node& node = init.node;
  // On one thread XNNPACK's depthwise kernel is faster (kernel bench dw3x3 112x112x32: ~1.7x
  // less CPU) and runs inline. With more threads it needs XNNPACK's own pool next to the
  // session's, and waking one pool's parked workers after the other's kernel costs more
  // than the kernel gains (mobilenet_v2, 2 threads, loaded VM, 3 alternating runs: median
  // 155-218 ms with XNNPACK's, 17-40 ms with this one), so multi-thread sessions use this
  // kernel. STRATA_NHWC_DW=1 / =0 forces it on / off (A/B comparisons).
  const char* env = std::getenv("STRATA_NHWC_DW");
  const bool multi_thread = init.pool && init.pool->num_threads() > 1;
  const bool on = env && *env ? std::strcmp(env, "1") == 0 : multi_thread;
  if (!on || !sgemm::Available())
    return Unsupported(node.Describe(), ": the NHWC depthwise kernel is off (1-thread session or STRATA_NHWC_DW=0)");
  if (w.rank() != 4 || w.dim(1) != 1 || node.GetInt("group", 1) != w.dim(0))
    return Unsupported(node.Describe(), ": not a depthwise conv with multiplier 1");
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcDepthwiseKernel>(node, w, b, act));
}

}  // namespace strata
