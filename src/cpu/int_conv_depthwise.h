// Depthwise QLinearConv / ConvInteger (group == C == M, one W channel per group, 2-D) on
// NHWC 8-bit images, by way of the float depthwise row kernel (conv_nhwc_depthwise.h).
//
// The weights are packed as floats w - w_zero_point[c] and the taps summed in float FMAs.
// Every product is an integer of magnitude at most 255 * 255 and a pixel sums few of them,
// so every partial sum is an integer below 2^24: the float sums are exact, whatever their
// order, and equal the int32 sums of the integer reference loops. The int32 result is then
// requantized with the reference's float operations (int8conv::Requant), or stored as is
// (ConvInteger): the same bytes as the reference kernel.
//
// 3x3 kernels with stride 1 or 2 (all of MobileNet's) read the bytes in place: each 16-channel
// vector is converted to floats as it is loaded, the sum starts from -x_zero_point * sum(w')
// (and the int32 bias when the total provably stays below 2^24), padding taps read the zero
// point (so they cancel), and each block of 4 output pixels is requantized from registers.
// Other shapes convert each input row once to floats x - x_zero_point into a small ring of
// rows and run the float row kernel, padding taps left out (the reference's x - x_zero_point
// = 0 there).
//
// In static int8 (QDQ) CNNs the depthwise convs otherwise stay float convs between a
// DequantizeLinear and a QuantizeLinear pass over their activations (mobilenet_v2: 17 of its
// 52 convs).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "cpu/conv_geometry.h"
#include "cpu/conv_nhwc_depthwise.h"
#include "cpu/int_conv_vnni.h"

namespace strata {
class ThreadPool;
}

namespace strata::int8dw {

// Kernel taps (KH * KW) at most: 258 * 255 * 255 < 2^24 (see above).
inline constexpr int64_t kMaxTaps = 258;

// Whether the kernel takes a conv with this W shape ([M, C/group, KH, KW]) and group on this
// CPU: 2-D, depthwise with multiplier 1, at most kMaxTaps taps, AVX-512F/BW.
bool Covers(const Shape& w_shape, int64_t group);

struct Weights {
  dw::Weights taps;         // w - w_zero_point[c], [tap][cp]
  std::vector<float> wsum;  // [C]: sum over the taps of w - w_zero_point[c]
  std::vector<float> wabs;  // [C]: sum over the taps of |w - w_zero_point[c]|
};

// W [C, 1, KH, KW] (uint8 or int8) minus its zero point (absent, a scalar or [C]).
Weights Pack(const Tensor& w, const Tensor* wzp);

// One call's images and output.
struct Problem {
  const uint8_t* x = nullptr;  // [N, H, W, C] bytes (int8 when x_signed)
  bool x_signed = false;
  int32_t xz = 0;
  int64_t n = 0, h = 0, w = 0, c = 0;
  SpatialGeometry g;                      // 2-D geometry of the conv
  const int8conv::Requant* rq = nullptr;  // QLinearConv: y is [N, OH, OW, C] bytes
  uint8_t* yq = nullptr;
  int32_t* y32 = nullptr;  // ConvInteger (rq null): y is [N, OH, OW, C] int32
};

// Floats of scratch Run needs with this pool (per-band input-row rings and output rows).
int64_t ScratchFloats(const Problem& p, const Weights& wt, ThreadPool* pool);

// Runs the conv; `scratch` holds ScratchFloats(p, wt, pool) floats.
void Run(const Problem& p, const Weights& wt, float* scratch, ThreadPool* pool);

}  // namespace strata::int8dw
