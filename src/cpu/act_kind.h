// The function a fused activation applies before its clamp (cpu/simd_clamp.h has the
// AVX-512 forms, FusedActivation and the GEMM epilogues carry it).
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

// Nothing (Relu, Clip: the clamp is all), SiLU = x * sigmoid(x) (com.microsoft QuickGelu with
// alpha 1, which FuseSilu makes of Mul(x, Sigmoid(x))) or HardSwish = x * clip(x / 6 + 0.5,
// 0, 1) (ONNX HardSwish). Only NhwcConv nodes carry the last two (FuseNhwcConvActivation).
enum class ActKind : uint8_t { kClamp = 0, kSilu = 1, kHardSwish = 2 };

// kind's function on one value (scalar paths: an empty K, the reference conv).
inline float ActivateScalar(float v, ActKind kind) {
  if (kind == ActKind::kSilu) return v / (1.0f + std::exp(-v));
  if (kind == ActKind::kHardSwish) {
    float t = v / 6.0f + 0.5f;
    t = t < 0.0f ? 0.0f : t;
    return v * (1.0f < t ? 1.0f : t);
  }
  return v;
}

}  // namespace strata
