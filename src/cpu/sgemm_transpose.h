// In-register 16x16 fp32 transpose, shared by the SGEMM's A packing (sgemm_avx512.cc) and
// MatMulNBits' panel dequantization (matmul_nbits_gemm.cc). Include only from files whose
// callers run after an AVX-512F check; the function carries its own target attribute.
#pragma once

#include <immintrin.h>

namespace strata::sgemm::internal {

// In-register transpose of 16 rows of 16 floats: afterwards r[j] holds column j.
__attribute__((target("avx512f"))) inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(u[h + i], u[h + 4 + i], 0x88);
      t[h + 4 + i] = _mm512_shuffle_f32x4(u[h + i], u[h + 4 + i], 0xDD);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}

}  // namespace strata::sgemm::internal
