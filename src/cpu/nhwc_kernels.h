// Internal NHWC kernels (domain kInternalDomain, see core/layout_pass.h). Only the layout
// pass creates these nodes; their operands are NHWC [N, H, W, C] unless stated otherwise:
//   NchwToNhwc / NhwcToNchw   rank-4 layout changes at the edges of an NHWC region
//   NhwcConv                  Conv attributes and constant OIHW W / B, NHWC X and Y
//   NhwcMaxPool / NhwcAveragePool   the ONNX attributes, NHWC X and Y (no Indices output)
//   NhwcGlobalAveragePool     NHWC X -> NCHW-shaped [N, C, 1, 1] Y (the same bytes as NHWC
//                             [N, 1, 1, C]), so a following Flatten/Reshape needs no transpose
//   NhwcBatchNormalization    inference BatchNormalization, NHWC X and Y, constant [C] parameters
//   NhwcChannelShuffle        ShuffleNet's channel shuffle, attribute groups (also NCHW ChannelShuffle)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/kernel.h"
#include "cpu/conv_kernels.h"

namespace strata {

void RegisterNhwcConvKernels(KernelRegistry& r);        // conv_nhwc.cc: NhwcConv and the two layout changes
void RegisterNhwcPoolKernels(KernelRegistry& r);        // pool_nhwc.cc
void RegisterNhwcNormKernels(KernelRegistry& r);        // norm_nhwc.cc
void RegisterChannelShuffleKernels(KernelRegistry& r);  // channel_shuffle.cc (NCHW and NHWC)

// Runs an NCHW kernel `ref` (built for `nchw_node`, the original ONNX node) on NHWC input 0
// and writes its result to output 0 as NHWC: the exact fallback for parameters XNNPACK
// rejects. Inputs 1.. are passed through unchanged. *y_out (when given): the output written.
Status RunNchwFallback(KernelContext& ctx, const OpKernel& ref, const Node& nchw_node, Tensor** y_out = nullptr);

// The original ONNX node behind an internal NHWC node: same attributes and inputs, the
// ONNX op type, domain "" and the opset recorded by the pass. Used to build the fallbacks.
Node OriginalNode(const Node& nhwc_node, const char* onnx_op);
// Pixels of an NhwcConv's output map (OH * OW) from its statically inferred output type
// [N, OH, OW, M], or -1 when that is not known at session creation.
int64_t StaticNhwcOutputPixels(const KernelInit& init);

// Writes X [N][H][W][C] into the zero-padded image [N][hp][wp][C] of T with X at (pt, pl);
// copy(src, count, dst) writes one row of `count` floats as T. Rows of the padded image
// are split over the pool when the image is large.
template <typename T, typename RowCopy>
void PadNhwcImage(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt, int64_t pl, int64_t hp,
                  int64_t wp, T* xp, ThreadPool* pool, RowCopy copy) {
  const auto rows = [=](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / hp, iy = row - b * hp - pt;
      T* d = xp + row * wp * c;
      if (iy < 0 || iy >= h) {
        std::memset(d, 0, static_cast<size_t>(wp * c) * sizeof(T));
        continue;
      }
      std::memset(d, 0, static_cast<size_t>(pl * c) * sizeof(T));
      copy(x + (b * h + iy) * w * c, w * c, d + pl * c);
      std::memset(d + (pl + w) * c, 0, static_cast<size_t>((wp - pl - w) * c) * sizeof(T));
    }
  };
  if (pool && pool->num_threads() > 1 && n * hp * wp * c >= (int64_t{1} << 16))
    pool->Run(n * hp, 16, rows);
  else
    rows(0, n * hp);
}

// A zero-padded NHWC image [N][hp][wp][C] of T (PadNhwcImage's output) seen by a conv with
// OH x OW outputs, KH kernel rows, strides (sh, sw) and row dilation dh: every tap of every
// output pixel lies inside it, so with dilation 1 along W one kernel row of a receptive
// field is one contiguous run of KW * C values, in the packed weights' K order.
template <typename T>
struct PaddedNhwcImage {
  const T* xp;
  int64_t hp, wp, c, oh, ow, kh, sh, sw, dh;
};

// The indirect-A row pointers of the fp32 and bf16 GEMM convs over a PaddedNhwcImage: for
// output pixels [row0, row0 + n), the start of kernel row ky of pixel r's window goes to
// dst[ky * kRows + r] (kRows: the GEMM's row tile), as a P pointer (the bf16 GEMM reads
// uint16 values as uint32 pairs).
template <int64_t kRows, typename T, typename P = T>
void PaddedKernelRowPointers(const PaddedNhwcImage<T>& g, int64_t row0, int64_t n, const P** dst) {
  const int64_t row_step = g.dh * g.wp * g.c;
  PixelCursor px(row0, g.oh, g.ow);
  for (int64_t r = 0; r < n; ++r, px.Next()) {
    const T* src = g.xp + ((px.img * g.hp + px.oy * g.sh) * g.wp + px.ox * g.sw) * g.c;
    for (int64_t ky = 0; ky < g.kh; ++ky) dst[ky * kRows + r] = reinterpret_cast<const P*>(src + ky * row_step);
  }
}

// The taps of a sliding window that fall inside the image, for one axis: the first tap
// t in [0, k) with 0 <= o + t * d < n in *t0, one past the last in *t1 (t0 == t1: none).
// o is the window's first input coordinate (output index * stride - pad begin), d the
// dilation. Dilation 1 takes no division: per output pixel it cost as much as the loads.
inline void TapRange(int64_t o, int64_t d, int64_t k, int64_t n, int64_t* t0, int64_t* t1) {
  if (d == 1) {
    *t0 = std::clamp<int64_t>(-o, 0, k);
    *t1 = std::max(*t0, std::min(k, n - o));
    return;
  }
  const int64_t a = o < 0 ? (-o + d - 1) / d : 0;
  const int64_t b = o + (k - 1) * d < n ? k : o >= n ? 0 : (n - 1 - o) / d + 1;
  *t0 = std::min(a, k);
  *t1 = std::max(b, *t0);
}

}  // namespace strata
