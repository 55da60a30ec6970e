// AVX-512 exp/sigmoid/tanh shared by the LSTM kernels (rnn_lstm_fast.cc, rnn_lstm_fused.cc).
// Functions carry target attributes, so including this header does not require building
// the translation unit with -mavx512f; callers must check the CPU before calling them.
#pragma once

#include <immintrin.h>

#include "cpu/simd_exp.h"

namespace strata {
namespace rnn_simd {

// exp with inputs clamped to the finite float range; ~2 ulp (Cephes polynomial).
__attribute__((target("avx512f"), always_inline)) inline __m512 Exp512(__m512 x) {
  return simd_exp::ExpClamped512(_mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f)));
}
__attribute__((target("avx512f"), always_inline)) inline __m512 Sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, Exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
// tanh(x) = 2 sigmoid(2x) - 1; absolute error ~1e-7 (relative error grows only near 0).
__attribute__((target("avx512f"), always_inline)) inline __m512 Tanh512(__m512 x) {
  const __m512 two = _mm512_set1_ps(2.0f);
  return _mm512_fmsub_ps(two, Sigmoid512(_mm512_mul_ps(two, x)), _mm512_set1_ps(1.0f));
}

}  // namespace rnn_simd
}  // namespace strata
