// The data movement around the VNNI GEMM (int8_gemm.h) that turns it into ConvInteger and
// QLinearConv: NCHW images of 8-bit values to NHWC and back, NHWC images to im2col rows (one
// row per output position, K ordered kernel position major, channel minor) packed as the
// GEMM's A, and the int32 product [positions, M] back to NCHW, requantized (QLinearConv) or
// as is (ConvInteger). (The NHWC QLinearConv requantizes in the GEMM's own store.)
//
// Values are moved as bytes: the signedness of x matters only to the GEMM, which is told.
#pragma once

#include <cstdint>

#include "cpu/conv_geometry.h"

namespace strata {
class ThreadPool;
}

namespace strata::int8conv {

// xt[p][c] = x[c][p] for an image of C channels of `positions` bytes each.
void ToNhwc(const uint8_t* x, int64_t C, int64_t positions, uint8_t* xt, ThreadPool* pool);

// x[c][p] = xt[p][c]: the inverse of ToNhwc.
void ToNchw(const uint8_t* xt, int64_t C, int64_t positions, uint8_t* x, ThreadPool* pool);

// Im2col straight into the VNNI GEMM's packed A (int8gemm::PackTile's layout, kp = K rounded
// up to 4, K = taps * C), tiles [t0, t1) of int8gemm::kTileRows output positions: row o holds
// xt[input position of (o, tap k)][c] at k * C + c, or `pad` (the zero point's byte) where tap
// k of output position o falls in the padding. Each tile is gathered into `buf` (kTileRows *
// K + kIm2RowSlack bytes, the calling thread's own) and packed at once. rowsum (a value per
// position) is written when not null. xt is one NHWC image of g.in.
inline constexpr int64_t kIm2RowSlack = 64;
void Im2RowTiles(const uint8_t* xt, int64_t C, const SpatialGeometry& g, uint8_t pad, bool a_signed, int64_t kp,
                 uint32_t* tiles, int32_t* rowsum, uint8_t* buf, int64_t t0, int64_t t1);

// QLinearConv's output stage: y[m][o] = saturate(round(float(acc[o][m] + bias[m]) * mult[m]) + z),
// rounding half to even, NaN to 0, saturating to uint8 or int8: the float operations of the
// reference kernel in the same order, so the bytes are the same.
struct Requant {
  const float* mult = nullptr;    // [M]
  const int32_t* bias = nullptr;  // [M] or nullptr
  float z = 0;                    // y_zero_point
  bool y_signed = false;
};

// acc [positions, M] (row stride M) -> y [M, positions], requantized.
void StoreRequantized(const int32_t* acc, int64_t positions, int64_t M, const Requant& rq, uint8_t* y,
                      ThreadPool* pool);

// acc [positions, M] (row stride M) -> y [M, positions].
void StoreTransposed(const int32_t* acc, int64_t positions, int64_t M, int32_t* y, ThreadPool* pool);

}  // namespace strata::int8conv
