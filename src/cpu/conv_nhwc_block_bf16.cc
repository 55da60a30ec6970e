// bf16 pieces of the fused inverted-residual block (see conv_nhwc_block_bf16.h).
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "cpu/conv_nhwc_block_bf16.h"

#include <immintrin.h>

#include <algorithm>

#include "cpu/bf16_simd.h"
#include "cpu/bf16_target.h"

namespace strata::block_bf16 {

// Cache blocking as in gemm_bf16.cc's driver: a K chunk of 192 pairs keeps a B panel chunk
// (24 KiB) in L1 while 96-row blocks of A stream past it.
constexpr int64_t kKcPairs = 192;
constexpr int64_t kMc = 96;

STRATA_BF16_TARGET_BEGIN

using bf16_internal::LaneMask;

void RoundRows(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp) {
  // Dense rows of an even length are one long row: no per-pixel loop for few channels.
  if (rows > 1 && lda == k && k % 2 == 0 && ldp == k / 2) {
    k *= rows;
    rows = 1;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = a + i * lda;
    uint32_t* d = dst + i * ldp;
    for (int64_t f = 0; f < k; f += 32) {
      const __m512 v0 = _mm512_maskz_loadu_ps(LaneMask(k - f), src + f);
      const __m512 v1 = _mm512_maskz_loadu_ps(LaneMask(k - f - 16), src + f + 16);
      // 32 bf16 = 16 pairs in order; an odd tail's high half is a rounded zero.
      const __m512i pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0));
      _mm512_mask_storeu_epi32(d + f / 2, LaneMask((k - f + 1) / 2), pairs);
    }
  }
}

void PairRowsGemm(int64_t m, const uint32_t* a, int64_t ldp, const PackedBf16B& b, float* c, int64_t ldc,
                  const Bf16Epilogue& ep) {
  for (int64_t m0 = 0; m0 < m; m0 += kMc) {
    const int64_t rows = std::min(kMc, m - m0);
    for (int64_t kp0 = 0; kp0 < b.kp; kp0 += kKcPairs) {
      const int64_t kpc = std::min(kKcPairs, b.kp - kp0);
      const bool last = kp0 + kpc == b.kp;
      bf16_internal::BlockRows(a + m0 * ldp + kp0, ldp, rows, b.panel(0) + kp0 * kBf16NR, b.panel_stride(), b.N, kpc,
                               c + m0 * ldc, ldc, kp0 > 0, last ? &ep : nullptr, m0, 0);
    }
  }
}

STRATA_BF16_TARGET_END

}  // namespace strata::block_bf16
