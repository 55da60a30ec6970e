// The NHWC depthwise row kernel (conv_nhwc_depthwise.cc), shared by the depthwise NhwcConv
// and the fused inverted-residual block (conv_nhwc_block.cc), which feeds it rows of an
// L2-sized strip buffer instead of the whole input.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace strata::dw {

// Depthwise weights (multiplier 1) reordered OIHW [C][1][KH][KW] -> [KH*KW][cp] and bias
// [cp], with cp = C rounded up to 16 and zeros in the padding lanes, so a 16-channel
// vector of one tap is one aligned-size load.
struct Weights {
  int64_t c = 0, cp = 0, kh = 0, kw = 0;
  std::vector<float> w, bias;
};
// w: float32 [C, 1, KH, KW]; b: float32 [C] or nullptr.
Weights PackWeights(const Tensor& w, const Tensor* b);

// The horizontal geometry of one output row and the fused clamp.
struct RowGeometry {
  int64_t in_w = 0, out_w = 0, stride = 1, dilation = 1, pad_left = 0;
  float lo = 0, hi = 0;
};

// One output row: y[ox * C + c] = clamp(bias[c] + sum over ky, kx of rows[ky][ix * C + c] *
// w[ky * KW + kx][c]) with ix = ox * stride - pad_left + kx * dilation over the in-bounds ix.
// rows[ky] is the input row for kernel row ky (in_w pixels of C channels, pixel stride C), or
// nullptr where that row lies in the vertical padding. Needs AVX-512F (see Available()).
void ConvRow(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y);

// Two vertically adjacent output rows at vertical stride and dilation 1: rows[0, KH] are
// KH + 1 input rows (nullptr in the vertical padding), y0 computed from rows[0, KH) and y1
// from rows[1, KH]. The same values as two ConvRow calls; 3x3 rows with stride 1 and no
// padded row load each input vector once for both output rows.
void ConvRowPair(const Weights& wt, const RowGeometry& g, const float* const* rows, float* y0, float* y1);

// True when the CPU has AVX-512F (the kernel's requirement) and STRATA_SGEMM is not 0.
bool Available();

}  // namespace strata::dw
