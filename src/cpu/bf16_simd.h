// AVX-512 BF16 register helpers shared by the bf16 GEMM (gemm_bf16.cc) and Conv
// (conv_bf16.cc). Functions carry their target attribute, so including this header needs
// no -mavx512bf16; callers check Bf16GemmAvailable() before reaching them.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define STRATA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), always_inline))

namespace strata::bf16_internal {

// Rounds 16 floats of row k (lo) and row k+1 (hi) to bf16 and interleaves them into the
// 16 pairs vdpbf16ps multiplies (element k in the low half, k+1 in the high half).
STRATA_BF16_TARGET inline __m512i PairsFrom(__m512 lo, __m512 hi) {
  __m256i blo = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo));
  __m256i bhi = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(hi));
  return _mm512_or_si512(_mm512_cvtepu16_epi32(blo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(bhi), 16));
}

// The first n of 16 lanes (n clamped to [0, 16]).
STRATA_BF16_TARGET inline __mmask16 LaneMask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace strata::bf16_internal

#undef STRATA_BF16_TARGET
