// The fused activations on AVX-512 registers, shared by every kernel that applies one in its
// store: the Relu/Clip clamp (the SGEMM, bf16 and AMX epilogues, the NHWC depthwise, stem,
// grouped and Winograd convs, the GEMV and the LSTM cell) and, for NHWC convs, SiLU and
// HardSwish (FuseNhwcConvActivation). The functions carry their target attribute, so
// including this header needs no -mavx512f; callers check the CPU first.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/act_kind.h"

namespace strata {
namespace simd {

#define STRATA_SIMD_ACT __attribute__((target("avx512f"), always_inline)) inline

// min(hi, max(lo, v)), in this operand order: vmaxps/vminps return their second operand when
// either is NaN, so a NaN stays NaN as the unfused Relu/Clip keep it (max(v, lo) gave lo).
STRATA_SIMD_ACT __m512 Clamp(__m512 v, __m512 lo, __m512 hi) { return _mm512_min_ps(hi, _mm512_max_ps(lo, v)); }

// c where mask, else v.
STRATA_SIMD_ACT __m512 Where(__mmask16 mask, __m512 c, __m512 v) { return _mm512_mask_blend_ps(mask, v, c); }

// exp(x) with the elementwise kernels' polynomial (VExp in elementwise_simd.cc: Cephes-style
// range reduction, degree-6 polynomial, ~1 ulp), with n = round(x log2 e) from vrndscaleps
// and 2^n applied by vscalefps, which also gives +inf past the range, 0 (or a subnormal)
// below it and propagates NaN: 12 vector ops where VExp's clamps and exponent bit tricks
// took 20 (SiLU over 1.2M floats: 2.6 vs 4.4 ns per vector). Results agree with VExp to
// an ulp or two.
STRATA_SIMD_ACT __m512 Exp(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// x * sigmoid(x) = x / (1 + exp(-x)), as the QuickGelu kernel computes it; NaN stays NaN.
STRATA_SIMD_ACT __m512 Silu(__m512 x) {
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), Exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// x * clip(x / 6 + 0.5, 0, 1) with compare-and-select clamps, as the HardSwish kernel: NaN
// stays NaN.
STRATA_SIMD_ACT __m512 HardSwish(__m512 x) {
  const __m512 t = _mm512_add_ps(_mm512_div_ps(x, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
  const __m512 v = Where(_mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), t);
  return _mm512_mul_ps(x, Where(_mm512_cmp_ps_mask(_mm512_set1_ps(1.0f), v, _CMP_LT_OQ), _mm512_set1_ps(1.0f), v));
}

// The fused activation of a store: kind's function, then the clamp (lo = -inf, hi = +inf for
// SiLU and HardSwish, which have no range).
STRATA_SIMD_ACT __m512 Activate(__m512 v, __m512 lo, __m512 hi, ActKind kind) {
  if (kind == ActKind::kSilu) v = Silu(v);
  if (kind == ActKind::kHardSwish) v = HardSwish(v);
  return Clamp(v, lo, hi);
}

// Applies kind (not kClamp) to data[0, n) in place: the convs whose own store has no
// activation (XNNPACK's grouped convs) run it over their output.
__attribute__((target("avx512f"))) inline void ActivateSpan(float* data, int64_t n, ActKind kind) {
  const __m512 lo = _mm512_set1_ps(-__builtin_inff()), hi = _mm512_set1_ps(__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(data + i, m, Activate(_mm512_maskz_loadu_ps(m, data + i), lo, hi, kind));
  }
}

#undef STRATA_SIMD_ACT

}  // namespace simd
}  // namespace strata
