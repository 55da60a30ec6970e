// bf16 pieces of the fused inverted-residual block (see conv_nhwc_block_bf16.h).
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/conv_nhwc_block_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/bf16_simd.h"
#include "cpu/bf16_target.h"

namespace strata::block_bf16 {

int64_t RowWords(int64_t pairs) { return bf16_internal::AmxAvailable() ? (pairs + 15) / 16 * 16 : pairs; }

STRATA_BF16_TARGET_BEGIN

using bf16_internal::LaneMask;

// Zeroes words [used, ldp) of a pair row (the AMX pad, see RowWords).
inline void ZeroPad(uint32_t* d, int64_t used, int64_t ldp) {
  for (int64_t f = used; f < ldp; f += 16) _mm512_mask_storeu_epi32(d + f, LaneMask(ldp - f), _mm512_setzero_si512());
}

// Writes 32 floats' hi and lo pairs (see RoundRowsSplit) at d, d + kp and d + 2 kp.
inline void SplitStore(__m512 v0, __m512 v1, uint32_t* d, int64_t kp, __mmask16 store) {
  const __m512bh hi = _mm512_cvtne2ps_pbh(v1, v0);
  const __m512i hi_bits = reinterpret_cast<__m512i>(hi);
  // hi back in fp32: each bf16 shifted into the top half of its float (low bf16 = even lane).
  const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(hi_bits, 16));
  const __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512(hi_bits, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  // h0 holds elements 0, 2, 4, ... of the 32 (v0's then v1's pairs), h1 elements 1, 3, ...:
  // the residuals are taken in that order and paired back the same way.
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 e = _mm512_permutex2var_ps(v0, even_idx, v1), o = _mm512_permutex2var_ps(v0, odd_idx, v1);
  // fpclass 0x99: QNaN | +Inf | -Inf | SNaN.
  const __mmask16 f0 = static_cast<__mmask16>(~_mm512_fpclass_ps_mask(h0, 0x99));
  const __mmask16 f1 = static_cast<__mmask16>(~_mm512_fpclass_ps_mask(h1, 0x99));
  const __m512i lo = bf16_internal::PairsFrom(_mm512_maskz_sub_ps(f0, e, h0), _mm512_maskz_sub_ps(f1, o, h1));
  // The third segment multiplies W's residual: a non-finite hi is 0 there, or Inf times a
  // residual of 0 or of the other sign would turn the row's Inf into NaN.
  const __m512i hi_finite =
      bf16_internal::PairsFrom(_mm512_maskz_mov_ps(f0, h0), _mm512_maskz_mov_ps(f1, h1));  // exact: h0, h1 are bf16
  _mm512_mask_storeu_epi32(d, store, hi_bits);
  _mm512_mask_storeu_epi32(d + kp, store, lo);
  _mm512_mask_storeu_epi32(d + 2 * kp, store, hi_finite);
}

// Rows of k floats, 32 at a time, as pair rows ldp words apart: one segment of rounded pairs,
// or with kSplit the three of RoundRowsSplit; words [used, ldp) of each row are zeroed.
template <bool kSplit>
void ToPairRows(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp, int64_t used) {
  const int64_t kp = PairsPerRow(k);
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = a + i * lda;
    uint32_t* d = dst + i * ldp;
    for (int64_t f = 0; f < k; f += 32) {
      const __m512 v0 = _mm512_maskz_loadu_ps(LaneMask(k - f), src + f);
      const __m512 v1 = _mm512_maskz_loadu_ps(LaneMask(k - f - 16), src + f + 16);
      const __mmask16 store = LaneMask((k - f + 1) / 2);
      if constexpr (kSplit) {
        SplitStore(v0, v1, d + f / 2, kp, store);
      } else {
        // 32 bf16 = 16 pairs in order; an odd tail's high half is a rounded zero.
        _mm512_mask_storeu_epi32(d + f / 2, store, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0)));
      }
    }
    ZeroPad(d, used, ldp);
  }
}

void RoundRows(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp) {
  // Dense rows of an even length are one long row: no per-pixel loop for few channels.
  if (rows > 1 && lda == k && k % 2 == 0 && ldp == k / 2) {
    ToPairRows<false>(a, k * rows, 1, k * rows, dst, k * rows / 2, k * rows / 2);
    return;
  }
  ToPairRows<false>(a, lda, rows, k, dst, ldp, PairsPerRow(k));
}

void RoundRowsSplit(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp) {
  ToPairRows<true>(a, lda, rows, k, dst, ldp, SplitPairsPerRow(k));
}

void PairRowsGemm(int64_t m, const uint32_t* a, int64_t ldp, const PackedBf16B& b, float* c, int64_t ldc,
                  const Bf16Epilogue& ep) {
  bf16_internal::PairRowsProduct(a, ldp, m, b, 0, b.N, c, ldc, ep, 0);
}

STRATA_BF16_TARGET_END

namespace {

// One weight row of k floats as its split row [v | v | v - bf16(v)], each segment seg floats
// (k rounded up to even, zero padded): the pack rounds the first two to hi.
struct SplitRowLayout {
  int64_t k, seg;
};
void SplitRow(const float* src, float* dst, const void* ctx) {
  const SplitRowLayout& l = *static_cast<const SplitRowLayout*>(ctx);
  std::fill(dst, dst + 3 * l.seg, 0.0f);
  for (int64_t j = 0; j < l.k; ++j) {
    const float v = src[j], hi = Bf16ToFloat(FloatToBf16(v));
    dst[j] = v;
    dst[l.seg + j] = v;
    dst[2 * l.seg + j] = std::isfinite(hi) ? v - hi : 0.0f;
  }
}

}  // namespace

Result<PackedBf16B> PackSplitWeights(const sgemm::WeightRows& w, int64_t n, int64_t k, ThreadPool* pool) {
  const SplitRowLayout layout{k, 2 * PairsPerRow(k)};  // floats per segment: k, even
  return PackBf16Rows(w, k, SplitRow, &layout, 3 * layout.seg, n, /*trans=*/true, 1.0f, pool);
}

Result<PackedBf16B> PackSplitWeights(const float* w, int64_t n, int64_t k) {
  return PackSplitWeights(sgemm::WeightRows{w, nullptr}, n, k);
}

}  // namespace strata::block_bf16
