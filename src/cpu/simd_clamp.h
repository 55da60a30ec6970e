// The fused Relu/Clip clamp on AVX-512 registers, shared by every kernel that applies an
// activation in its store: the SGEMM, bf16 and AMX epilogues, the NHWC depthwise, stem and
// Winograd convs, the GEMV and the LSTM cell. The function carries its target attribute, so
// including this header needs no -mavx512f; callers check the CPU first.
#pragma once

#include <immintrin.h>

namespace strata::simd {

// min(hi, max(lo, v)), in this operand order: vmaxps/vminps return their second operand when
// either is NaN, so a NaN stays NaN as the unfused Relu/Clip keep it (max(v, lo) gave lo).
__attribute__((target("avx512f"), always_inline)) inline __m512 Clamp(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
}

}  // namespace strata::simd
