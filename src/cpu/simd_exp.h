// The Cephes expf polynomial on AVX2 and AVX-512 registers, shared by Softmax
// (norm_softmax.cc) and the LSTM gates (rnn_simd_avx512.h). Callers clamp the argument
// first, each to its own range and underflow rule. Functions carry target attributes, so
// including this header does not require building with -mavx2/-mavx512f; callers must
// check the CPU before calling them.
#pragma once

#include <immintrin.h>

namespace strata {
namespace simd_exp {

// e^x for x in [-87.3, 88.3]: x = n ln2 + r (ln2 split in two for precision), then a
// degree-6 polynomial in r scaled by 2^n; ~2 ulp.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 ExpClamped256(__m256 x) {
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

__attribute__((target("avx512f"), always_inline)) inline __m512 ExpClamped512(__m512 x) {
  __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, fx);
}

}  // namespace simd_exp
}  // namespace strata
