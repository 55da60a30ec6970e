// A read-only AVX-512 pass over n floats (eight independent add chains): the bound a
// one-FMA-per-load kernel can reach on the same bytes. Shared by the kernel benchmarks
// and the standalone cache-read tool in bench/compare-ort.
#pragma once

#include <immintrin.h>

#include <cstddef>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 intrinsic temporaries
__attribute__((target("avx512f"))) inline float SumAvx512(const float* p, size_t n) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i + 128 <= n; i += 128)
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(p + i + 16 * j));
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}
#pragma GCC diagnostic pop
