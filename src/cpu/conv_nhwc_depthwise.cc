// Depthwise NhwcConv (group == C == M, multiplier 1) with AVX-512F on the session pool, at
// every thread count: one kernel and one pool (XNNPACK's depthwise kernel ran on its own
// pthreadpool beside the session's, whose spinning workers cost more than the kernel).
//
// The row kernel (dw::ConvRow) computes one output row per call from KH input row
// pointers, so the fused inverted-residual block (conv_nhwc_block.cc) runs it on rows of
// its strip buffer. Per 16-channel vector it keeps the 3x3 weights and bias in registers
// (5x5, 7x7: RowKxK) and sweeps the row in blocks of 4 output pixels: each input vector loaded feeds every
// output of the block that reads it (stride 1: 18 loads for 36 FMAs instead of 36 + 9
// weight loads), and the 4 independent accumulators hide the FMA latency. Taps in the
// vertical padding are dropped by the caller (null rows); the horizontal edge pixels and
// other kernel shapes take a per-pixel loop over their in-bounds taps.
#include "cpu/conv_nhwc_depthwise.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/kernel_stop.h"
#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_gemm.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/sgemm.h"
#include "cpu/simd_clamp.h"

namespace strata {
namespace dw {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// One output pixel's channels [c0, c0 + 16) (masked by m) over its in-bounds taps, weights
// read from memory: the edge pixels and any kernel shape.
STRATA_AVX512 inline __m512 PixelAnyShape(const Weights& wt, const RowGeometry& g, const float* const* rows, int64_t ox,
                                          int64_t c0, __mmask16 m) {
  const int64_t ix0 = ox * g.stride - g.pad_left, c = wt.c;
  int64_t kx0, kx1;
  TapRange(ix0, g.dilation, wt.kw, g.in_w, &kx0, &kx1);
  __m512 acc = _mm512_loadu_ps(wt.bias.data() + c0);  // padded to cp
  for (int64_t ky = 0; ky < wt.kh; ++ky) {
    const float* r = rows[ky];
    if (!r) continue;
    const float* wr = wt.w.data() + ky * wt.kw * wt.cp + c0;
    for (int64_t kx = kx0; kx < kx1; ++kx)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r + (ix0 + kx * g.dilation) * c + c0),
                            _mm512_loadu_ps(wr + kx * wt.cp), acc);
  }
  return acc;
}

STRATA_AVX512 inline void EdgePixel(const Weights& wt, const RowGeometry& g, const float* const* rows, int64_t ox,
                                    int64_t c0, __mmask16 m, __m512 lo, __m512 hi, float* y) {
  const __m512 acc = PixelAnyShape(wt, g, rows, ox, c0, m);
  _mm512_mask_storeu_ps(y + ox * wt.c + c0, m, simd::Clamp(acc, lo, hi));
}

STRATA_AVX512 void RowAnyShape(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y) {
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t ox = 0; ox < g.out_w; ++ox)
    for (int64_t c0 = 0; c0 < wt.c; c0 += 16) EdgePixel(wt, g, rows, ox, c0, TailMask(wt.c - c0), lo, hi, y);
}

// A 16-channel vector of the row (kFull: all 16 lanes, the plain load/store, or masked by m).
template <bool kFull>
STRATA_AVX512 inline __m512 LoadLanes(__mmask16 m, const float* p) {
  return kFull ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
template <bool kFull>
STRATA_AVX512 inline void StoreLanes(float* p, __mmask16 m, __m512 v) {
  if constexpr (kFull) {
    _mm512_storeu_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, m, v);
  }
}

// kJ adjacent interior output pixels (all kK taps of each in bounds) of a kK x kK kernel
// (3x3, and the 5x5 / 7x7 of MobileNetV3, EfficientNet, MnasNet and ConvNeXt) with stride kS
// over kR in-bounds kernel rows: input column i of the block feeds output j at tap
// kx = i - j * kS, so each input vector is loaded once per row. (At 5x5 and 7x7 the kR * kK
// weight vectors do not all fit in registers: the compiler reads the rest from the stack
// copy, one FMA operand each.)
// kL / kRt: the block's first / last input column lies in the horizontal padding (the
// row's first / last pixel): it is never loaded, and its taps are left out, as EdgePixel
// leaves them (the same FMAs in the same order, so the same bits).
template <int kK, int kS, int kR, int kJ, bool kFull, bool kL = false, bool kRt = false>
STRATA_AVX512 __attribute__((always_inline)) inline void BlockKxK(const float* const* r, const __m512* w, __m512 bias,
                                                                  int64_t off, int64_t c, __mmask16 m, __m512 lo,
                                                                  __m512 hi, float* y) {
  constexpr int kCols = (kJ - 1) * kS + kK;
  __m512 acc[kJ];
#pragma GCC unroll 8
  for (int j = 0; j < kJ; ++j) acc[j] = bias;
#pragma GCC unroll 7
  for (int ky = 0; ky < kR; ++ky) {
    const float* xr = r[ky] + off;
#pragma GCC unroll 16
    for (int i = 0; i < kCols; ++i) {
      if ((kL && i == 0) || (kRt && i == kCols - 1)) continue;
      const __m512 xv = LoadLanes<kFull>(m, xr + i * c);
#pragma GCC unroll 8
      for (int j = 0; j < kJ; ++j) {
        const int kx = i - j * kS;
        if (kx >= 0 && kx < kK) acc[j] = _mm512_fmadd_ps(xv, w[ky * kK + kx], acc[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < kJ; ++j) StoreLanes<kFull>(y + j * c, m, simd::Clamp(acc[j], lo, hi));
}

template <int kS, int kR, int kJ, bool kFull, bool kL = false, bool kRt = false>
STRATA_AVX512 __attribute__((always_inline)) inline void Block3x3(const float* const* r, const __m512* w, __m512 bias,
                                                                  int64_t off, int64_t c, __mmask16 m, __m512 lo,
                                                                  __m512 hi, float* y) {
  BlockKxK<3, kS, kR, kJ, kFull, kL, kRt>(r, w, bias, off, c, m, lo, hi, y);
}

// Interior output pixels [ox0, ox1) of channels [c0, c0 + 16): 4-pixel blocks, then single ones.
template <int kS, int kR, bool kFull>
STRATA_AVX512 void Interior3x3(const float* const* rows, const __m512* w, __m512 bias, const RowGeometry& g, int64_t c,
                               int64_t c0, __mmask16 m, __m512 lo, __m512 hi, int64_t ox0, int64_t ox1, float* y) {
  int64_t ox = ox0;
  for (; ox + 4 <= ox1; ox += 4)
    Block3x3<kS, kR, 4, kFull>(rows, w, bias, (ox * kS - g.pad_left) * c + c0, c, m, lo, hi, y + ox * c + c0);
  for (; ox < ox1; ++ox)
    Block3x3<kS, kR, 1, kFull>(rows, w, bias, (ox * kS - g.pad_left) * c + c0, c, m, lo, hi, y + ox * c + c0);
}

// Output columns [*ox_lo, *ox_hi) of a kw-wide (3 unless given), dilation-1 row with stride
// `stride` whose kw taps all lie inside the input row; the columns outside take EdgePixel.
inline void InteriorColumns(const RowGeometry& g, int64_t stride, int64_t* ox_lo, int64_t* ox_hi, int64_t kw = 3) {
  *ox_lo = std::min(g.out_w, (g.pad_left + stride - 1) / stride);
  const int64_t last = g.in_w - kw + g.pad_left;  // largest ox * stride with the right tap inside
  *ox_hi = last < 0 ? *ox_lo : std::max(*ox_lo, std::min(g.out_w, last / stride + 1));
}

// Whether a 3x3, dilation-1 row with stride `stride` can be swept in whole blocks of 4
// pixels from its first pixel: at most one input column of padding at each end, so only the
// first pixel's first tap and the last pixel's last tap lie outside the row (*left, *right:
// whether they do). Then no pixel takes EdgePixel's per-tap loop and no tail pixel is left
// alone (a single pixel's FMAs are one latency-bound chain): on mobilenet_v2's rows (7-112
// pixels) those were about a third of the depthwise rows' time.
inline bool WholeBlocks(const RowGeometry& g, int64_t stride, bool* left, bool* right) {
  const int64_t right_pad = (g.out_w - 1) * stride - g.pad_left + 3 - g.in_w;
  if (g.out_w < 1 || g.pad_left < 0 || g.pad_left > 1 || right_pad > 1) return false;
  *left = g.pad_left == 1;
  *right = right_pad == 1;
  return true;
}

// Calls f(integral_constant<int, n>{}) for a block width n of 1-4.
template <typename F>
STRATA_AVX512 __attribute__((always_inline)) inline void WithBlockWidth(int64_t n, F&& f) {
  using std::integral_constant;
  switch (n) {
    case 4:
      return f(integral_constant<int, 4>{});
    case 3:
      return f(integral_constant<int, 3>{});
    case 2:
      return f(integral_constant<int, 2>{});
    default:
      return f(integral_constant<int, 1>{});
  }
}

// Calls f(integral_constant kJ, L, R) for a block of n (1-4) pixels with padding flags L, R.
template <typename F>
STRATA_AVX512 inline void DispatchBlock(int64_t n, bool left, bool right, F&& f) {
  WithBlockWidth(n, [&](auto j) STRATA_AVX512 {
    if (left && right) return f(j, std::true_type{}, std::true_type{});
    if (left) return f(j, std::true_type{}, std::false_type{});
    if (right) return f(j, std::false_type{}, std::true_type{});
    return f(j, std::false_type{}, std::false_type{});
  });
}

// Sweeps a WholeBlocks row of out_w pixels 4 at a time, all inline, so the weights and row
// pointers stay in registers across the blocks: block(j, l, r, ox) runs the kJ-pixel block at
// ox (integral constants j; l, r: whether it holds the row's padded first / last tap). Only
// a row of a single block (at most 4 pixels) takes DispatchBlock's 16-way dispatch. With every
// block behind DispatchBlock, GCC kept its lambda out of line: each block was a call that
// reloaded its operands, and a row took 1.5-3x as long (rows in L1 or L2, 16-960 channels).
template <typename F>
STRATA_AVX512 __attribute__((always_inline)) inline void SweepBlocks(int64_t out_w, bool left, bool right, F&& block) {
  using std::false_type;
  using std::integral_constant;
  using std::true_type;
  using J4 = integral_constant<int, 4>;
  if (out_w <= 4) {
    DispatchBlock(out_w, left, right, [&](auto j, auto l, auto r) STRATA_AVX512 { block(j, l, r, int64_t{0}); });
    return;
  }
  if (left) {
    block(J4{}, true_type{}, false_type{}, int64_t{0});
  } else {
    block(J4{}, false_type{}, false_type{}, int64_t{0});
  }
  int64_t ox = 4;
  for (; ox + 4 < out_w; ox += 4) block(J4{}, false_type{}, false_type{}, ox);
  WithBlockWidth(
      out_w - ox, [&](auto j) STRATA_AVX512 __attribute__((always_inline)) {
        if (right) {
          block(j, false_type{}, true_type{}, ox);
        } else {
          block(j, false_type{}, false_type{}, ox);
        }
      });
}

// Every output pixel of channels [c0, c0 + 16) of a WholeBlocks row, 4 at a time.
template <int kS, int kR, bool kFull>
STRATA_AVX512 void RowBlocks3x3(const float* const* rows, const __m512* w_in, __m512 bias, const RowGeometry& g,
                                int64_t c, int64_t c0, __mmask16 m, __m512 lo, __m512 hi, bool left, bool right,
                                float* y) {
  // Local copies, so they stay in registers across the inline blocks.
  __m512 w[kR * 3];
#pragma GCC unroll 9
  for (int t = 0; t < kR * 3; ++t) w[t] = w_in[t];
  const float* r[kR];
#pragma GCC unroll 3
  for (int t = 0; t < kR; ++t) r[t] = rows[t];
  SweepBlocks(
      g.out_w, left, right, [&](auto j, auto l, auto rt, int64_t ox) STRATA_AVX512 __attribute__((always_inline)) {
        Block3x3<kS, kR, decltype(j)::value, kFull, decltype(l)::value, decltype(rt)::value>(
            r, w, bias, (ox * kS - g.pad_left) * c + c0, c, m, lo, hi, y + ox * c + c0);
      });
}

// A 3x3, dilation-1 row with stride kS whose in-bounds kernel rows are rows[0, kR) (the
// caller dropped the padded ones and offset the weights to match).
template <int kS, int kR>
STRATA_AVX512 void Row3x3(const Weights& wt, const RowGeometry& g, const float* const* rows, const float* wbase,
                          const float* const* all_rows, float* y) {
  const int64_t c = wt.c, ow = g.out_w;
  int64_t ox_lo, ox_hi;
  InteriorColumns(g, kS, &ox_lo, &ox_hi);
  bool left = false, right = false;
  const bool whole = WholeBlocks(g, kS, &left, &right);
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = TailMask(c - c0);
    __m512 w[kR * 3];
#pragma GCC unroll 9
    for (int t = 0; t < kR * 3; ++t) w[t] = _mm512_loadu_ps(wbase + t * wt.cp + c0);
    const __m512 bias = _mm512_loadu_ps(wt.bias.data() + c0);
    if (whole) {
      // Whole vectors (every C a multiple of 16) take plain loads and stores.
      if (m == 0xFFFF) {
        RowBlocks3x3<kS, kR, true>(rows, w, bias, g, c, c0, m, lo, hi, left, right, y);
      } else {
        RowBlocks3x3<kS, kR, false>(rows, w, bias, g, c, c0, m, lo, hi, left, right, y);
      }
      continue;
    }
    int64_t ox = 0;
    for (; ox < ox_lo; ++ox) EdgePixel(wt, g, all_rows, ox, c0, m, lo, hi, y);
    if (m == 0xFFFF) {
      Interior3x3<kS, kR, true>(rows, w, bias, g, c, c0, m, lo, hi, ox, ox_hi, y);
    } else {
      Interior3x3<kS, kR, false>(rows, w, bias, g, c, c0, m, lo, hi, ox, ox_hi, y);
    }
    for (ox = ox_hi; ox < ow; ++ox) EdgePixel(wt, g, all_rows, ox, c0, m, lo, hi, y);
  }
}

// Two vertically adjacent output rows of a 3x3, stride-1 (both ways), dilation-1 conv with
// all 4 input rows r[0..3] in bounds: y0 from r[0..2], y1 from r[1..3]. Each input vector
// loaded feeds both rows' accumulators (4 rows read for 2 outputs instead of 6, and 8
// independent FMA chains: it pays where the rows stream from L3), in the same FMA order as
// Block3x3 (so the results are bit for bit those of two Row3x3 calls).
template <int kJ, bool kFull, bool kL = false, bool kRt = false>
STRATA_AVX512 inline void Block3x3Pair(const float* const* r, const __m512* w, __m512 bias, int64_t off, int64_t c,
                                       __mmask16 m, __m512 lo, __m512 hi, float* y0, float* y1) {
  __m512 acc0[kJ], acc1[kJ];
#pragma GCC unroll 4
  for (int j = 0; j < kJ; ++j) acc0[j] = acc1[j] = bias;
#pragma GCC unroll 4
  for (int ir = 0; ir < 4; ++ir) {
    const float* xr = r[ir] + off;
#pragma GCC unroll 6
    for (int i = 0; i < kJ + 2; ++i) {
      if ((kL && i == 0) || (kRt && i == kJ + 1)) continue;  // see Block3x3
      const __m512 xv = LoadLanes<kFull>(m, xr + i * c);
#pragma GCC unroll 4
      for (int j = 0; j < kJ; ++j) {
        const int kx = i - j;
        if (kx < 0 || kx >= 3) continue;
        if (ir < 3) acc0[j] = _mm512_fmadd_ps(xv, w[ir * 3 + kx], acc0[j]);
        if (ir > 0) acc1[j] = _mm512_fmadd_ps(xv, w[(ir - 1) * 3 + kx], acc1[j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < kJ; ++j) {
    StoreLanes<kFull>(y0 + j * c, m, simd::Clamp(acc0[j], lo, hi));
    StoreLanes<kFull>(y1 + j * c, m, simd::Clamp(acc1[j], lo, hi));
  }
}

template <bool kFull>
STRATA_AVX512 void InteriorPair(const float* const* rows, const __m512* w, __m512 bias, const RowGeometry& g, int64_t c,
                                int64_t c0, __mmask16 m, __m512 lo, __m512 hi, int64_t ox0, int64_t ox1, float* y0,
                                float* y1) {
  int64_t ox = ox0;
  for (; ox + 4 <= ox1; ox += 4) {
    const int64_t off = (ox - g.pad_left) * c + c0;
    Block3x3Pair<4, kFull>(rows, w, bias, off, c, m, lo, hi, y0 + ox * c + c0, y1 + ox * c + c0);
  }
  for (; ox < ox1; ++ox) {
    const int64_t off = (ox - g.pad_left) * c + c0;
    Block3x3Pair<1, kFull>(rows, w, bias, off, c, m, lo, hi, y0 + ox * c + c0, y1 + ox * c + c0);
  }
}

// RowBlocks3x3 for two adjacent output rows (Block3x3Pair).
template <bool kFull>
STRATA_AVX512 void RowBlocksPair(const float* const* rows, const __m512* w_in, __m512 bias, const RowGeometry& g,
                                 int64_t c, int64_t c0, __mmask16 m, __m512 lo, __m512 hi, bool left, bool right,
                                 float* y0, float* y1) {
  __m512 w[9];  // as in RowBlocks3x3
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) w[t] = w_in[t];
  const float* r[4] = {rows[0], rows[1], rows[2], rows[3]};
  SweepBlocks(
      g.out_w, left, right, [&](auto j, auto l, auto rt, int64_t ox) STRATA_AVX512 __attribute__((always_inline)) {
        Block3x3Pair<decltype(j)::value, kFull, decltype(l)::value, decltype(rt)::value>(
            r, w, bias, (ox - g.pad_left) * c + c0, c, m, lo, hi, y0 + ox * c + c0, y1 + ox * c + c0);
      });
}

// Row3x3<1, 3> for two adjacent output rows (see Block3x3Pair); rows[0..3] all non-null.
STRATA_AVX512 void Row3x3Pair(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y0, float* y1) {
  const int64_t c = wt.c, ow = g.out_w;
  int64_t ox_lo, ox_hi;
  InteriorColumns(g, 1, &ox_lo, &ox_hi);
  bool left = false, right = false;
  const bool whole = WholeBlocks(g, 1, &left, &right);
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = TailMask(c - c0);
    __m512 w[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) w[t] = _mm512_loadu_ps(wt.w.data() + t * wt.cp + c0);
    const __m512 bias = _mm512_loadu_ps(wt.bias.data() + c0);
    if (whole) {
      if (m == 0xFFFF) {
        RowBlocksPair<true>(rows, w, bias, g, c, c0, m, lo, hi, left, right, y0, y1);
      } else {
        RowBlocksPair<false>(rows, w, bias, g, c, c0, m, lo, hi, left, right, y0, y1);
      }
      continue;
    }
    int64_t ox = 0;
    for (; ox < ox_lo; ++ox) {
      EdgePixel(wt, g, rows, ox, c0, m, lo, hi, y0);
      EdgePixel(wt, g, rows + 1, ox, c0, m, lo, hi, y1);
    }
    if (m == 0xFFFF) {
      InteriorPair<true>(rows, w, bias, g, c, c0, m, lo, hi, ox, ox_hi, y0, y1);
    } else {
      InteriorPair<false>(rows, w, bias, g, c, c0, m, lo, hi, ox, ox_hi, y0, y1);
    }
    for (ox = ox_hi; ox < ow; ++ox) {
      EdgePixel(wt, g, rows, ox, c0, m, lo, hi, y0);
      EdgePixel(wt, g, rows + 1, ox, c0, m, lo, hi, y1);
    }
  }
}

// A kK x kK, dilation-1 row with stride kS whose in-bounds kernel rows are rows[0, kR) (the
// caller dropped the padded ones and offset the weights to match): interior pixels in
// blocks of 4, the edge pixels (taps in the padding) through EdgePixel.
template <int kK, int kS, int kR>
STRATA_AVX512 void RowKxK(const Weights& wt, const RowGeometry& g, const float* const* rows, const float* wbase,
                          const float* const* all_rows, float* y) {
  const int64_t c = wt.c, ow = g.out_w;
  int64_t ox_lo, ox_hi;
  InteriorColumns(g, kS, &ox_lo, &ox_hi, kK);
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = TailMask(c - c0);
    __m512 w[kR * kK];
#pragma GCC unroll 49
    for (int t = 0; t < kR * kK; ++t) w[t] = _mm512_loadu_ps(wbase + t * wt.cp + c0);
    const __m512 bias = _mm512_loadu_ps(wt.bias.data() + c0);
    int64_t ox = 0;
    for (; ox < ox_lo; ++ox) EdgePixel(wt, g, all_rows, ox, c0, m, lo, hi, y);
    for (; ox + 4 <= ox_hi; ox += 4) {
      const int64_t off = (ox * kS - g.pad_left) * c + c0;
      if (m == 0xFFFF) {
        BlockKxK<kK, kS, kR, 4, true>(rows, w, bias, off, c, m, lo, hi, y + ox * c + c0);
      } else {
        BlockKxK<kK, kS, kR, 4, false>(rows, w, bias, off, c, m, lo, hi, y + ox * c + c0);
      }
    }
    for (; ox < ox_hi; ++ox) {
      const int64_t off = (ox * kS - g.pad_left) * c + c0;
      if (m == 0xFFFF) {
        BlockKxK<kK, kS, kR, 1, true>(rows, w, bias, off, c, m, lo, hi, y + ox * c + c0);
      } else {
        BlockKxK<kK, kS, kR, 1, false>(rows, w, bias, off, c, m, lo, hi, y + ox * c + c0);
      }
    }
    for (ox = std::max(ox, ox_hi); ox < ow; ++ox) EdgePixel(wt, g, all_rows, ox, c0, m, lo, hi, y);
  }
}

// RowKxK for the nr in-bounds kernel rows from ky0 (1 <= nr <= kK).
template <int kK, int kS, int kR = kK>
void RowKxKDispatch(const Weights& wt, const RowGeometry& g, const float* const* rows, int64_t ky0, int64_t nr,
                    float* y) {
  if constexpr (kR > 1) {
    if (nr < kR) return RowKxKDispatch<kK, kS, kR - 1>(wt, g, rows, ky0, nr, y);
  }
  RowKxK<kK, kS, kR>(wt, g, rows + ky0, wt.w.data() + ky0 * kK * wt.cp, rows, y);
}

template <int kS>
void Row3x3Dispatch(const Weights& wt, const RowGeometry& g, const float* const* rows, int64_t ky0, int64_t nr,
                    float* y) {
  const float* wb = wt.w.data() + ky0 * 3 * wt.cp;
  switch (nr) {
    case 3:
      return Row3x3<kS, 3>(wt, g, rows + ky0, wb, rows, y);
    case 2:
      return Row3x3<kS, 2>(wt, g, rows + ky0, wb, rows, y);
    default:
      return Row3x3<kS, 1>(wt, g, rows + ky0, wb, rows, y);
  }
}

}  // namespace

Weights PackWeights(const Tensor& w, const Tensor* b) {
  Weights p;
  p.c = w.dim(0);
  p.kh = w.dim(2);
  p.kw = w.dim(3);
  p.cp = (p.c + 15) / 16 * 16;
  const int64_t taps = p.kh * p.kw;
  p.w.assign(static_cast<size_t>(taps * p.cp), 0.0f);
  p.bias.assign(static_cast<size_t>(p.cp), 0.0f);
  const float* src = w.data<float>();
  for (int64_t ch = 0; ch < p.c; ++ch)
    for (int64_t t = 0; t < taps; ++t) p.w[t * p.cp + ch] = src[ch * taps + t];
  if (b) std::copy(b->data<float>(), b->data<float>() + p.c, p.bias.begin());
  return p;
}

void ConvRow(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y) {
  const int64_t k = wt.kh;
  if ((k == 3 || k == 5 || k == 7) && wt.kw == k && g.dilation == 1 && (g.stride == 1 || g.stride == 2)) {
    // The in-bounds kernel rows must be one run (always, unless the caller skips a middle row).
    int64_t ky0 = 0, ky1 = k;
    while (ky0 < k && !rows[ky0]) ++ky0;
    while (ky1 > ky0 && !rows[ky1 - 1]) --ky1;
    bool run = ky0 < ky1;
    for (int64_t r = ky0; r < ky1; ++r) run = run && rows[r];
    if (run && k == 3) {
      if (g.stride == 1) return Row3x3Dispatch<1>(wt, g, rows, ky0, ky1 - ky0, y);
      return Row3x3Dispatch<2>(wt, g, rows, ky0, ky1 - ky0, y);
    }
    if (run && k == 5) {
      if (g.stride == 1) return RowKxKDispatch<5, 1>(wt, g, rows, ky0, ky1 - ky0, y);
      return RowKxKDispatch<5, 2>(wt, g, rows, ky0, ky1 - ky0, y);
    }
    if (run) {
      if (g.stride == 1) return RowKxKDispatch<7, 1>(wt, g, rows, ky0, ky1 - ky0, y);
      return RowKxKDispatch<7, 2>(wt, g, rows, ky0, ky1 - ky0, y);
    }
  }
  RowAnyShape(wt, g, rows, y);
}

void ConvRowPair(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y0, float* y1) {
  if (wt.kh == 3 && wt.kw == 3 && g.dilation == 1 && g.stride == 1 && rows[0] && rows[1] && rows[2] && rows[3])
    return Row3x3Pair(wt, g, rows, y0, y1);
  ConvRow(wt, g, rows, y0);
  ConvRow(wt, g, rows + 1, y1);
}

bool Available() { return sgemm::Available(); }

}  // namespace dw

namespace {

// sums[ch] = sum over the `pixels` pixels of one output row of y[px * c + ch] (the row is
// still in L1: it was just written).
__attribute__((target("avx512f"))) void RowChannelSums(const float* y, int64_t pixels, int64_t c, float* sums) {
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = c - c0 >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (c - c0)) - 1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t px = 0; px < pixels; ++px) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, y + px * c + c0));
    _mm512_mask_storeu_ps(sums + c0, m, acc);
  }
}

class NhwcDepthwiseKernel final : public OpKernel {
 public:
  const char* ImplName() const override { return "nhwc-depthwise"; }
  NhwcDepthwiseKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act),
        wt_(dw::PackWeights(w, b)) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const int64_t n = xin.n, h = xin.h, w = xin.w, c = xin.c;
    const SpatialGeometry& g = xin.shapes.geo;
    const int64_t oh = g.out[0], ow = g.out[1];
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, oh, ow, c}));
    // Output 1 (FuseDepthwiseGlobalPool): the channel means of Y, what a GlobalAveragePool of
    // Y gives ([N, C, 1, 1], or [N, C] for pool_keepdims 0), summed from each row while the
    // row is in L1 instead of in a pass of their own over Y.
    Tensor* pooled = nullptr;
    if (ctx.output_requested(1)) {
      const Shape ps = node.GetInt("pool_keepdims", 1) != 0 ? Shape{n, c, 1, 1} : Shape{n, c};
      ASSIGN_OR_RETURN(pooled, ctx.AllocateOutput(1, DataType::kFloat, ps));
    }
    if (y->num_elements() == 0) {
      if (pooled) std::fill_n(pooled->mutable_data<float>(), pooled->num_elements(), 0.0f);
      return Status::Ok();
    }
    // One row of channel sums per output row, added in row order after the rows: the same
    // bits at any thread count.
    Tensor row_sums;
    if (pooled) {
      auto t = Tensor::Allocate(DataType::kFloat, {n * oh, c}, ctx.allocator());
      if (!t.ok()) return MakeStatus(t.status().code(), node.Describe(), ": pooled sums: ", t.status().message());
      row_sums = std::move(t).value();
    }
    float* sums = pooled ? row_sums.mutable_data<float>() : nullptr;
    const dw::RowGeometry rg{w, ow, g.strides[1], g.dilations[1], g.pad_begin[1], act_.min, act_.max};
    const float* xd = x->data<float>();
    float* yd = y->mutable_data<float>();
    const int64_t kh = wt_.kh, sh = g.strides[0], dh = g.dilations[0], pt = g.pad_begin[0];
    // A row's cost is its kernel's (as large as the padded image, in a hostile model): the
    // run's deadline and terminate calls are checked between rows.
    KernelStop stop(node);
    const int64_t row_work = ow * c * std::min(kh, h) * std::min(wt_.kw, w);
    auto rows_fn = [&](int64_t begin, int64_t end) {
      int64_t pending = 0;
      // Kernel heights above 16 are rare enough to pay for a heap table.
      const float* small[17];
      std::vector<const float*> big(kh > 16 ? kh + 1 : 0);
      const float** rows = kh > 16 ? big.data() : small;
      for (int64_t row = begin; row < end;) {
        if (!stop.Continue(pending, 2 * row_work)) return;
        const int64_t b = row / oh, oy = row - b * oh, iy0 = oy * sh - pt;
        // Two rows of one image at a time where they share input rows (see ConvRowPair).
        const int64_t n = sh == 1 && dh == 1 && row + 1 < end && oy + 1 < oh ? 2 : 1;
        for (int64_t ky = 0; ky < kh + n - 1; ++ky) {
          const int64_t iy = iy0 + ky * dh;
          rows[ky] = iy >= 0 && iy < h ? xd + ((b * h + iy) * w) * c : nullptr;
        }
        if (n == 2) {
          dw::ConvRowPair(wt_, rg, rows, yd + row * ow * c, yd + (row + 1) * ow * c);
        } else {
          dw::ConvRow(wt_, rg, rows, yd + row * ow * c);
        }
        // SiLU / HardSwish over the rows just written, while they are in L1/L2 (the row
        // kernels' stores take only the clamp, which is then open).
        if (act_.kind != ActKind::kClamp) simd::ActivateSpan(yd + row * ow * c, n * ow * c, act_.kind);
        if (sums)
          for (int64_t r = row; r < row + n; ++r) RowChannelSums(yd + r * ow * c, ow, c, sums + r * c);
        row += n;
      }
    };
    const int64_t rows = n * oh;
    // ~64 KiB of output per chunk: enough work to amortise a pool wake-up.
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ow * c));
    if (ctx.pool()) {
      // Row regions on fixed CPUs, as the SGEMM's M blocks: a CPU reads the input rows it
      // wrote as the expand conv (stride 1: the same rows), and the projection conv after
      // this one reads the output rows from the same CPU. With dynamic chunks the rows a
      // thread took changed from run to run, and on 2 vCPUs a read of what the other one
      // wrote runs at about half the rate.
      ParallelRangeByCpu(ctx.pool(), rows, grain, rows_fn);
    } else {
      rows_fn(0, rows);
    }
    RETURN_IF_ERROR(stop.status());
    if (pooled) {
      const float scale = 1.0f / static_cast<float>(oh * ow);
      float* pd = pooled->mutable_data<float>();
      for (int64_t b = 0; b < n; ++b) {
        float* out = pd + b * c;
        std::copy_n(sums + b * oh * c, c, out);
        for (int64_t oy = 1; oy < oh; ++oy)
          for (int64_t ch = 0; ch < c; ++ch) out[ch] += sums[(b * oh + oy) * c + ch];
        for (int64_t ch = 0; ch < c; ++ch) out[ch] *= scale;
      }
    }
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  dw::Weights wt_;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcDepthwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                        const FusedActivation& act) {
  const Node& node = init.node;
  // Faster than XNNPACK's depthwise kernel at one thread too (see docs/cpu-kernels.md), and it
  // runs on the session pool.
  if (!dw::Available()) return Unsupported(node.Describe(), ": the NHWC depthwise kernel needs AVX-512F");
  if (w.rank() != 4 || w.dim(1) != 1 || node.GetInt("group", 1) != w.dim(0))
    return Unsupported(node.Describe(), ": not a depthwise conv with multiplier 1");
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcDepthwiseKernel>(init, w, b, act));
}

}  // namespace strata
