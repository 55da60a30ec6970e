// NhwcMaxPool (2-D, fp32, and uint8/int8 for static int8 models) on the session's own pool: output rows (image, oy) are
// split between the threads. XNNPACK's NHWC max pooling ran on its pthreadpool beside the session pool, whose workers
// had to be woken for it: resnet18's 3x3/2 pool over 112x112x64 got slower at 2 threads than at 1 (0.14 -> 0.18 ms).
//
// Every attribute MaxPool has in 2-D is covered here (pads, strides, dilations, ceil_mode,
// auto_pad), so there is no fallback. The result equals the NCHW reference kernel's
// (pool.cc) bit for bit: taps are visited in the same row-major order, the first in-image
// tap starts the maximum and a later one replaces it only when greater, which is what
// vmaxps(v, best) computes (it returns `best` when either is NaN). A window with no
// in-image tap (not possible with valid pads) gives -inf, as in the reference.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "core/kernel_stop.h"
#include "cpu/conv_geometry.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/pool_kernels.h"
#include "cpu/sgemm.h"

namespace strata {
namespace {

std::atomic<bool> g_plain_for_testing{false};

// One Compute's geometry: X [N][H][W][C] -> Y [N][OH][OW][C].
struct MaxPoolGeometry {
  int64_t h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};

// Plain C++: CPUs without AVX-512F (tests run it through SetNhwcMaxPoolPlainForTesting).
void MaxPoolRowPlain(const MaxPoolGeometry& g, const float* ximg, int64_t oy, float* yrow) {
  int64_t ky0, ky1;
  TapRange(oy * g.sh - g.pt, g.dh, g.kh, g.h, &ky0, &ky1);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t ix0 = ox * g.sw - g.pl;
    int64_t kx0, kx1;
    TapRange(ix0, g.dw, g.kw, g.w, &kx0, &kx1);
    float* y = yrow + ox * g.c;
    if (ky0 == ky1 || kx0 == kx1) {
      std::fill(y, y + g.c, -std::numeric_limits<float>::infinity());
      continue;
    }
    bool first = true;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* xrow = ximg + (oy * g.sh - g.pt + ky * g.dh) * g.w * g.c;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const float* x = xrow + (ix0 + kx * g.dw) * g.c;
        if (first) {
          std::copy(x, x + g.c, y);
          first = false;
          continue;
        }
        for (int64_t ch = 0; ch < g.c; ++ch) y[ch] = x[ch] > y[ch] ? x[ch] : y[ch];
      }
    }
  }
}

#define STRATA_AVX512 __attribute__((target("avx512f")))

STRATA_AVX512 inline __mmask16 Lanes(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
}

// Channels [c0, c0 + 64) of one output pixel (lanes past C masked off): four independent
// max chains, one per 16-channel vector.
STRATA_AVX512 inline void PixelBlock64(const MaxPoolGeometry& g, const float* ximg, int64_t iy0, int64_t ky0,
                                       int64_t ky1, int64_t ix0, int64_t kx0, int64_t kx1, int64_t c0, float* y) {
  const __mmask16 m0 = Lanes(g.c - c0), m1 = Lanes(g.c - c0 - 16), m2 = Lanes(g.c - c0 - 32), m3 = Lanes(g.c - c0 - 48);
  const float* x = ximg + ((iy0 + ky0 * g.dh) * g.w + ix0 + kx0 * g.dw) * g.c + c0;
  __m512 a0 = _mm512_maskz_loadu_ps(m0, x), a1 = _mm512_maskz_loadu_ps(m1, x + 16),
         a2 = _mm512_maskz_loadu_ps(m2, x + 32), a3 = _mm512_maskz_loadu_ps(m3, x + 48);
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* xrow = ximg + (iy0 + ky * g.dh) * g.w * g.c + c0;
    for (int64_t kx = ky == ky0 ? kx0 + 1 : kx0; kx < kx1; ++kx) {
      const float* p = xrow + (ix0 + kx * g.dw) * g.c;
      a0 = _mm512_max_ps(_mm512_maskz_loadu_ps(m0, p), a0);
      a1 = _mm512_max_ps(_mm512_maskz_loadu_ps(m1, p + 16), a1);
      a2 = _mm512_max_ps(_mm512_maskz_loadu_ps(m2, p + 32), a2);
      a3 = _mm512_max_ps(_mm512_maskz_loadu_ps(m3, p + 48), a3);
    }
  }
  _mm512_mask_storeu_ps(y, m0, a0);
  _mm512_mask_storeu_ps(y + 16, m1, a1);
  _mm512_mask_storeu_ps(y + 32, m2, a2);
  _mm512_mask_storeu_ps(y + 48, m3, a3);
}

// A 3x3 window wholly inside X with dilation 1 (all but the edge pixels of ResNet's pool):
// the nine taps unrolled, C a multiple of 16, taps in row-major order as the reference.
STRATA_AVX512 inline void PixelInterior3x3(const float* x, int64_t row_stride, int64_t c, float* y) {
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const float* p = x + c0;
    __m512 a = _mm512_loadu_ps(p);
    a = _mm512_max_ps(_mm512_loadu_ps(p + c), a);
    a = _mm512_max_ps(_mm512_loadu_ps(p + 2 * c), a);
    p += row_stride;
    a = _mm512_max_ps(_mm512_loadu_ps(p), a);
    a = _mm512_max_ps(_mm512_loadu_ps(p + c), a);
    a = _mm512_max_ps(_mm512_loadu_ps(p + 2 * c), a);
    p += row_stride;
    a = _mm512_max_ps(_mm512_loadu_ps(p), a);
    a = _mm512_max_ps(_mm512_loadu_ps(p + c), a);
    a = _mm512_max_ps(_mm512_loadu_ps(p + 2 * c), a);
    _mm512_storeu_ps(y + c0, a);
  }
}

STRATA_AVX512 void MaxPoolRowAvx512(const MaxPoolGeometry& g, const float* ximg, int64_t oy, float* yrow) {
  const int64_t iy0 = oy * g.sh - g.pt;
  int64_t ky0, ky1;
  TapRange(iy0, g.dh, g.kh, g.h, &ky0, &ky1);
  const bool interior3x3 = g.kh == 3 && g.kw == 3 && g.dh == 1 && g.dw == 1 && g.c % 16 == 0 && ky0 == 0 && ky1 == 3;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t ix0 = ox * g.sw - g.pl;
    int64_t kx0, kx1;
    TapRange(ix0, g.dw, g.kw, g.w, &kx0, &kx1);
    float* y = yrow + ox * g.c;
    if (interior3x3 && kx0 == 0 && kx1 == 3) {
      PixelInterior3x3(ximg + (iy0 * g.w + ix0) * g.c, g.w * g.c, g.c, y);
      continue;
    }
    if (ky0 == ky1 || kx0 == kx1) {
      std::fill(y, y + g.c, -std::numeric_limits<float>::infinity());
      continue;
    }
    for (int64_t c0 = 0; c0 < g.c; c0 += 64) PixelBlock64(g, ximg, iy0, ky0, ky1, ix0, kx0, kx1, c0, y + c0);
  }
}

// 8-bit NHWC max pooling (static int8 models, where core/qdq_fusion.cc moves a
// DequantizeLinear after the pool): the same windows, maxima of the bytes as integers.
template <typename T>
void MaxPoolRowBytesPlain(const MaxPoolGeometry& g, const T* ximg, int64_t oy, T* yrow) {
  int64_t ky0, ky1;
  TapRange(oy * g.sh - g.pt, g.dh, g.kh, g.h, &ky0, &ky1);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t ix0 = ox * g.sw - g.pl;
    int64_t kx0, kx1;
    TapRange(ix0, g.dw, g.kw, g.w, &kx0, &kx1);
    T* y = yrow + ox * g.c;
    std::fill(y, y + g.c, std::numeric_limits<T>::lowest());
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const T* xrow = ximg + (oy * g.sh - g.pt + ky * g.dh) * g.w * g.c;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const T* x = xrow + (ix0 + kx * g.dw) * g.c;
        for (int64_t ch = 0; ch < g.c; ++ch) y[ch] = std::max(y[ch], x[ch]);
      }
    }
  }
}

template <bool kSigned>
__attribute__((target("avx512f,avx512bw"))) void MaxPoolRowBytesAvx512(const MaxPoolGeometry& g, const uint8_t* ximg,
                                                                       int64_t oy, uint8_t* yrow) {
  const int64_t iy0 = oy * g.sh - g.pt;
  int64_t ky0, ky1;
  TapRange(iy0, g.dh, g.kh, g.h, &ky0, &ky1);
  const __m512i lowest = _mm512_set1_epi8(kSigned ? static_cast<char>(-128) : 0);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t ix0 = ox * g.sw - g.pl;
    int64_t kx0, kx1;
    TapRange(ix0, g.dw, g.kw, g.w, &kx0, &kx1);
    uint8_t* y = yrow + ox * g.c;
    for (int64_t c0 = 0; c0 < g.c; c0 += 64) {
      const int64_t left = g.c - c0;
      const __mmask64 m = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
      __m512i a = lowest;
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const uint8_t* xrow = ximg + (iy0 + ky * g.dh) * g.w * g.c + c0;
        for (int64_t kx = kx0; kx < kx1; ++kx) {
          const __m512i v = _mm512_maskz_loadu_epi8(m, xrow + (ix0 + kx * g.dw) * g.c);
          a = kSigned ? _mm512_max_epi8(a, v) : _mm512_max_epu8(a, v);
        }
      }
      _mm512_mask_storeu_epi8(y + c0, m, a);
    }
  }
}

bool HasAvx512Bw() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return ok;
}

class NhwcMaxPoolKernel final : public OpKernel {
 public:
  explicit NhwcMaxPoolKernel(Node nchw_node) : nchw_node_(std::move(nchw_node)) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const bool bytes = x && (x->dtype() == DataType::kUInt8 || x->dtype() == DataType::kInt8);
    if (!x || (x->dtype() != DataType::kFloat && !bytes) || x->rank() != 4)
      return InvalidArgument(node.Describe(), ": input X must be a float32, uint8 or int8 NHWC tensor of rank 4");
    const std::vector<int64_t>* ks = FindInts(nchw_node_, "kernel_shape");  // in place: no copy per run
    if (!ks) return InvalidModel(node.Describe(), ": missing required attribute kernel_shape");
    const Shape kernel(*ks);
    if (kernel.size() != 2)
      return InvalidArgument(node.Describe(), ": kernel_shape ", ShapeToString(kernel), " must have 2 dims");
    const int64_t n = x->dim(0), c = x->dim(3);
    const Shape in = {x->dim(1), x->dim(2)};
    const bool ceil_mode = nchw_node_.GetInt("ceil_mode", 0) != 0;
    ASSIGN_OR_RETURN(SpatialGeometry sg, ComputeWindowGeometry(nchw_node_, in, kernel, ceil_mode, /*dilations*/ true));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {n, sg.out[0], sg.out[1], c}));
    if (y->num_elements() == 0) return Status::Ok();
    const MaxPoolGeometry g{in[0],           in[1],           c,
                            sg.out[0],       sg.out[1],       kernel[0],
                            kernel[1],       sg.strides[0],   sg.strides[1],
                            sg.dilations[0], sg.dilations[1], sg.pad_begin[0],
                            sg.pad_begin[1]};
    const bool plain = g_plain_for_testing.load(std::memory_order_relaxed);
    const bool avx512 = sgemm::Available() && !plain;
    const bool s8 = x->dtype() == DataType::kInt8;
    // A row's cost is its windows', which the input does not bound (the window may be as
    // large as the padded image): the run's deadline and terminate calls are checked.
    const double row_work = static_cast<double>(g.ow) * static_cast<double>(c) *
                            static_cast<double>(std::min(kernel[0], in[0])) *
                            static_cast<double>(std::min(kernel[1], in[1]));
    const int64_t row_units = static_cast<int64_t>(std::min(row_work, 0x1p62));
    KernelStop stop(node);
    const auto rows = [&](int64_t begin, int64_t end) {
      int64_t pending = 0;
      for (int64_t r = begin; r < end; ++r) {
        if (!stop.Continue(pending, row_units)) return;
        const int64_t img = r / g.oh, oy = r - img * g.oh, xo = img * g.h * g.w * c, yo = r * g.ow * c;
        if (!bytes) {
          (avx512 ? MaxPoolRowAvx512 : MaxPoolRowPlain)(g, x->data<float>() + xo, oy, y->mutable_data<float>() + yo);
        } else if (HasAvx512Bw() && !plain) {
          const auto* xb = static_cast<const uint8_t*>(x->raw_data()) + xo;
          auto* yb = static_cast<uint8_t*>(y->raw_mutable_data()) + yo;
          (s8 ? MaxPoolRowBytesAvx512<true> : MaxPoolRowBytesAvx512<false>)(g, xb, oy, yb);
        } else if (s8) {
          MaxPoolRowBytesPlain(g, x->data<int8_t>() + xo, oy, y->mutable_data<int8_t>() + yo);
        } else {
          MaxPoolRowBytesPlain(g, x->data<uint8_t>() + xo, oy, y->mutable_data<uint8_t>() + yo);
        }
      }
    };
    // Split only when each thread gets enough taps to pay for waking the pool (~16K).
    const int64_t row_taps = g.ow * c * kernel[0] * kernel[1];
    const int64_t total_rows = n * g.oh;
    ThreadPool* pool = ctx.pool();
    if (pool && pool->num_threads() > 1 && total_rows > 1 && row_taps * total_rows >= (int64_t{1} << 15)) {
      pool->Run(total_rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, row_taps)), rows);
    } else {
      rows(0, total_rows);
    }
    return stop.status();
  }

 private:
  Node nchw_node_;  // the ONNX MaxPool node: attributes as the geometry helpers read them
};

}  // namespace

void SetNhwcMaxPoolPlainForTesting(bool plain) { g_plain_for_testing.store(plain); }

Result<std::unique_ptr<OpKernel>> MakeNhwcMaxPool(const KernelInit& init) {
  const Node& node = init.node;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.outputs[i] >= 0) return InvalidModel(node.Describe(), ": NHWC pooling has no Indices output");
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcMaxPoolKernel>(OriginalNode(node, "MaxPool")));
}

}  // namespace strata
