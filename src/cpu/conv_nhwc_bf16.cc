// bf16 fast-math NhwcConv (session option precision=bf16): the ungrouped NHWC conv as
// Y[N*OH*OW, M] = im2col(X)[N*OH*OW, KH*KW*C] x W' on the bf16 GEMM (gemm_bf16.cc).
// W' ([M][KH][KW][C], K in the order an NHWC pixel's receptive field is stored) is packed
// to bf16 32-column panels once here and the fp32 weight is released. A 1x1 stride-1
// unpadded conv reads X as a plain [N*H*W, C] matrix; other shapes gather each 12-pixel
// tile's im2col rows into an L1 scratch, rounded to bf16 pairs right away. Bias, the fused
// Relu/Clip and the residual input (input 3) are applied in the GEMM's store, as in the
// fp32 NhwcConv (conv_nhwc_gemm.cc).
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/constant_release.h"
#include "cpu/bf16_simd.h"
#include "cpu/conv_kernels.h"
#include "cpu/gemm_bf16.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// One Compute's gather geometry (lives on Compute's stack).

// GCC takes a target pragma; clang (the fuzz and sanitizer builds) an attribute push. The
// gather is reached only through GemmBf16Gathered, after Bf16GemmAvailable().
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#endif

using bf16_internal::LaneMask;

// Runs are often short (a 3-channel stem: 3 to 21 floats), where library memcpy/memset
// calls cost more than the copy: masked 16-float moves instead.
inline void CopyRun(float* d, const float* s, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = LaneMask(n - i);
    _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, s + i));
  }
}
inline void ZeroRun(float* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(d + i, LaneMask(n - i), _mm512_setzero_ps());
}

// Columns [lo, hi) of `row` (indexed by im2col column) from the segment [seg, seg_end) whose
// in-image part [a, b) starts at input address `src` (column a); the rest is padding.
inline void FillSegment(float* row, int64_t lo, int64_t hi, int64_t a, int64_t b, const float* src) {
  const int64_t z0 = std::min(hi, a);
  if (lo < z0) ZeroRun(row + lo, z0 - lo);
  const int64_t c0 = std::max(lo, a), c1 = std::min(hi, b);
  if (c0 < c1) CopyRun(row + c0, src + (c0 - a), c1 - c0);
  const int64_t z1 = std::max(lo, b);
  if (z1 < hi) ZeroRun(row + z1, hi - z1);
}

// Bf16RowsFn: im2col rows [row0, row0 + rows), columns [k0, k0 + kc), column k being
// channel k % C of tap k / C. Walks one kernel row (KW*C columns) at a time: with dilation
// 1 its in-image taps are one contiguous run of input pixels, the rest padding zeros.
void GatherIm2colRows(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
  const NhwcWindow& g = *static_cast<const NhwcWindow*>(ctx);
  const int64_t c = g.c, kwc = g.kw * c, end = k0 + kc, ohw = g.oh * g.ow;
  int64_t img = row0 / ohw, q = row0 - img * ohw, oy = q / g.ow, ox = q - oy * g.ow;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
    const float* ximg = g.x + img * g.h * g.w * c;
    float* row = dst + r * ld - k0;  // row[k] is column k
    for (int64_t ky = k0 / kwc, seg = ky * kwc; seg < end; ++ky, seg += kwc) {
      const int64_t lo = std::max(k0, seg), hi = std::min(end, seg + kwc), iy = iy0 + ky * g.dh;
      if (iy < 0 || iy >= g.h) {
        ZeroRun(row + lo, hi - lo);
        continue;
      }
      const float* xrow = ximg + iy * g.w * c;
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
    }
    if (++ox == g.ow) {
      ox = 0;
      if (++oy == g.oh) {
        oy = 0;
        ++img;
      }
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

class NhwcBf16ConvKernel final : public bf16_internal::Bf16KernelBase, public PacksConstantInputs {
 public:
  // W is packed and B copied at creation: neither constant is read afterwards.
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }

  NhwcBf16ConvKernel(const Node& node, const Tensor& w, const Tensor* b, const FusedActivation& act, PackedBf16B packed)
      : nchw_node_(OriginalNode(node, "Conv")),
        w_shape_(w.shape()),
        act_(act),
        packed_(std::move(packed)),
        has_residual_(node.inputs.size() > 3 && node.inputs[3] >= 0) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + w.dim(0));
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_));
    const SpatialGeometry& g = xin.shapes.geo;
    const int64_t m = w_shape_[0], oh = g.out[0], ow = g.out[1];
    const Shape out_shape = {xin.n, oh, ow, m};
    ASSIGN_OR_RETURN(const Tensor* res, NhwcConvResidual(ctx, has_residual_, out_shape));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();

    Bf16Epilogue ep;
    ep.bias = bias_.empty() ? nullptr : bias_.data();
    ep.min = act_.min;
    ep.max = act_.max;
    if (res) {
      ep.residual = res->data<float>();
      ep.ldr = m;
    }
    const int64_t rows = xin.n * oh * ow;
    float* out = y->mutable_data<float>();
    if (IsPointwiseNhwc(g))
      return GemmBf16(node, rows, x->data<float>(), xin.c, false, packed_, out, m, ep, ctx.pool());
    const NhwcWindow geo = MakeNhwcWindow(x->data<float>(), xin);
    return GemmBf16Gathered(node, rows, GatherIm2colRows, &geo, packed_, out, m, ep, ctx.pool());
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  FusedActivation act_;
  PackedBf16B packed_;
  std::vector<float> bias_;
  bool has_residual_ = false;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcBf16Conv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act) {
  const Node& node = init.node;
  if (!init.config.bf16_fast_math || init.config.prefer_reference || !Bf16GemmAvailable())
    return Unsupported(node.Describe(), ": bf16 fast math is off or the CPU lacks avx512_bf16");
  // Grouped (depthwise) convs stay fp32: they are memory-bound, bf16 saves no FLOPs there.
  if (node.GetInt("group", 1) != 1 || w.dtype() != DataType::kFloat || w.rank() != 4 || w.num_elements() == 0)
    return Unsupported(node.Describe(), ": the bf16 NHWC conv needs group 1 and a float32 OIHW weight");
  // OIHW -> [M][KH*KW][C] (B^T with K in im2col order); the fp32 copy lives only until packed.
  const int64_t m = w.dim(0), c = w.dim(1), taps = w.dim(2) * w.dim(3);
  std::vector<float> ohwi(static_cast<size_t>(m * taps * c));
  const float* src = w.data<float>();
  for (int64_t o = 0; o < m; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t t = 0; t < taps; ++t) ohwi[(o * taps + t) * c + i] = src[(o * c + i) * taps + t];
  auto packed = PackBf16(ohwi.data(), taps * c, m, /*trans=*/true);
  if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcBf16ConvKernel>(node, w, b, act, std::move(packed).value()));
}

}  // namespace strata
