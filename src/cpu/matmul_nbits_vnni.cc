// MatMulNBits accuracy_level 4: A quantized to int8 per row and K block (symmetric, one
// scale per block, as ONNX Runtime's MLAS SQNBit CompInt8), integer dot products of the
// unsigned 4/8-bit codes with the signed int8 activations through AVX512-VNNI vpdpbusd,
// and fp32 accumulation of the per-block results:
//
//   y[m, n] = sum_b sa[m, b] * (sb[n, b] * sum_k qa[m, k] * q[n, k] + offset[n, b] * sum_k qa[m, k])
//
// with offset = -zero_point * sb. K is consumed in steps of 128 codes: one 64-byte load of
// 4-bit codes gives two byte vectors (low and high nibbles); 8-bit codes are packed in the
// same order (Packed::int8_order), two 64-byte loads. In both, 128-bit lane i of vector h
// holds K offsets 32i + 16h + [0, 16) of the step, and A's int8 row is stored in that order,
// so B needs no shuffles and, for blocks of 32 or more, both vectors' lanes belong to the
// same block: two vpdpbusd into one int32 accumulator, then one convert and one fma per step.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"        // (_mm512_reduce_add_ps on an array of vectors)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/matmul_nbits.h"

namespace strata::nbits {

namespace {

// Lanes of vector h (0: low nibbles / first 64 bytes) group i cover K offset 32i + 16h.
inline int64_t LaneK(int h, int i) { return 32 * i + 16 * h; }

// With blocks of 16 the two vectors of a step belong to different blocks: they are scaled
// separately ("split"); otherwise they share the lane scales.
inline bool SplitSteps(const Packed& w) { return w.p.block_size < 32; }

}  // namespace

bool HasAvx512Vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

#define STRATA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

STRATA_VNNI void QuantizeA(const Packed& w, const float* a, int64_t M, QuantA* qa) {
  const Params& p = w.p;
  const int64_t bs = p.block_size, nb = w.k_pad / bs, steps = w.k_pad / kInt8Step;
  const bool split = SplitSteps(w);
  qa->M = M;
  qa->lane_stride = steps * (split ? 32 : 16);
  // resize, not assign: every entry below nb / k_pad is written, and runs reuse the buffers.
  qa->q.resize(static_cast<size_t>(M * w.k_pad));
  qa->lane_scale.resize(static_cast<size_t>(M * qa->lane_stride));
  qa->bsum.assign(static_cast<size_t>(M * w.nb_stride), 0.0f);
  qa->sa.resize(static_cast<size_t>(nb));
  float* sa = qa->sa.data();
  const int log2_bs = __builtin_ctzll(static_cast<uint64_t>(bs));  // bs is a power of two; no division per lane
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * w.k_pad;
    int8_t* q = qa->q.data() + m * w.k_pad;
    float* bsum = qa->bsum.data() + m * w.nb_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const float* ab = row + b * bs;
      __m512 vmax = _mm512_setzero_ps();
      for (int64_t i = 0; i < bs; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(ab + i)));
      const float amax = _mm512_reduce_max_ps(vmax);
      // Symmetric: the block's largest magnitude maps to 127 (no -128, so sums stay symmetric).
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      sa[b] = amax / 127.0f;
      const __m512 vinv = _mm512_set1_ps(inv);
      __m512i isum = _mm512_setzero_si512();
      for (int64_t i = 0; i < bs; i += 16) {
        // Round to nearest even (the MXCSR default), as lrintf; |v| <= 127 by construction
        // and the saturating narrow keeps it there even after rounding.
        const __m512i v =
            _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(ab + i), vinv)), _mm512_set1_epi32(-127));
        isum = _mm512_add_epi32(isum, v);
        const int64_t k = b * bs + i, s = k / kInt8Step, r = k % kInt8Step;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + s * kInt8Step + 64 * ((r % 32) / 16) + 16 * (r / 32)),
                         _mm512_cvtsepi32_epi8(v));
      }
      // The zero-point term uses the sum of the quantized block, consistent with the dot.
      bsum[b] = sa[b] * static_cast<float>(_mm512_reduce_add_epi32(isum));
    }
    float* lanes = qa->lane_scale.data() + m * qa->lane_stride;
    for (int64_t s = 0; s < steps; ++s)
      for (int h = 0; h < (split ? 2 : 1); ++h)
        for (int l = 0; l < 16; ++l) *lanes++ = sa[(s * kInt8Step + LaneK(h, l / 4)) >> log2_bs];
  }
}

namespace {

STRATA_VNNI inline float OffsetDotVnni(const float* o, const float* bsum, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(o + i), _mm512_loadu_ps(bsum + i), acc);
  return _mm512_reduce_add_ps(acc);
}

// The two code vectors of step s of one column (see the file comment).
template <int kBits>
STRATA_VNNI inline void StepCodes(const uint8_t* col, int64_t s, __m512i* b0, __m512i* b1) {
  if constexpr (kBits == 8) {
    *b0 = _mm512_loadu_si512(col + s * kInt8Step);
    *b1 = _mm512_loadu_si512(col + s * kInt8Step + 64);
  } else {
    const __m512i x = _mm512_loadu_si512(col + s * (kInt8Step / 2));
    const __m512i m = _mm512_set1_epi8(0x0F);
    *b0 = _mm512_and_si512(x, m);
    *b1 = _mm512_and_si512(_mm512_srli_epi16(x, 4), m);
  }
}

// Rows [m0, m0 + MR) x columns [n0, n0 + cols), cols <= 4, over all of K. kSplit: blocks
// of 16, the two vectors of a step are scaled separately.
template <int kBits, bool kSplit, int MR>
STRATA_VNNI void TileInt8(const Packed& w, const QuantA& qa, int64_t m0, int64_t n0, int64_t cols, float* y) {
  const Params& p = w.p;
  const int64_t bs = p.block_size, steps = w.k_pad / kInt8Step;
  constexpr int64_t kColStep = kInt8Step * kBits / 8;  // code bytes per step
  const uint8_t* col[4];
  const float* sc[4];
  for (int j = 0; j < 4; ++j) {
    const int64_t n = n0 + std::min<int64_t>(j, cols - 1);  // missing columns repeat the last one
    col[j] = w.codes.data() + n * w.col_bytes;
    sc[j] = w.scale.data() + n * w.nb_stride;
  }
  const int8_t* arow[MR];
  const float* alane[MR];
  for (int r = 0; r < MR; ++r) {
    arow[r] = qa.q.data() + (m0 + r) * w.k_pad;
    alane[r] = qa.lane_scale.data() + (m0 + r) * qa.lane_stride;
  }
  // The B scales of a step: the blocks it touches (at most 8), loaded once and spread
  // over the lanes by vpermps with these per-lane block indices.
  alignas(64) int32_t lanes[2][16];
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 16; ++l) lanes[h][l] = static_cast<int32_t>(LaneK(h, l / 4) / bs);
  const __m512i idx0 = _mm512_load_si512(lanes[0]), idx1 = _mm512_load_si512(lanes[1]);
  const int64_t blocks_per_step = std::max<int64_t>(1, kInt8Step / bs);
  const __mmask16 smask = static_cast<__mmask16>((1u << blocks_per_step) - 1);
  constexpr int64_t kLanes = kSplit ? 32 : 16;
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  // bs is a power of two: the step's first block by a shift (a division here costs more
  // than the rest of the step).
  const int log2_bs = __builtin_ctzll(static_cast<uint64_t>(bs));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t blk0 = (s * kInt8Step) >> log2_bs;
    __m512i a0[MR], a1[MR];
    for (int r = 0; r < MR; ++r) {
      a0[r] = _mm512_loadu_si512(arow[r] + s * kInt8Step);
      a1[r] = _mm512_loadu_si512(arow[r] + s * kInt8Step + 64);
    }
    for (int j = 0; j < 4; ++j) {
      // The codes stream from memory for a GEMV: ask for them a few steps ahead.
      _mm_prefetch(reinterpret_cast<const char*>(col[j] + (s + 6) * kColStep), _MM_HINT_T0);
      if constexpr (kBits == 8)
        _mm_prefetch(reinterpret_cast<const char*>(col[j] + (s + 6) * kColStep + 64), _MM_HINT_T0);
      __m512i b0, b1;
      StepCodes<kBits>(col[j], s, &b0, &b1);
      const __m512 sv = _mm512_maskz_loadu_ps(smask, sc[j] + blk0);
      const __m512 sb0 = _mm512_permutexvar_ps(idx0, sv);
      if constexpr (kSplit) {
        const __m512 sb1 = _mm512_permutexvar_ps(idx1, sv);
        for (int r = 0; r < MR; ++r) {
          const __m512 d0 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, b0, a0[r]));
          const __m512 d1 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, b1, a1[r]));
          acc[r][j] = _mm512_fmadd_ps(d0, _mm512_mul_ps(_mm512_loadu_ps(alane[r] + kLanes * s), sb0), acc[r][j]);
          acc[r][j] = _mm512_fmadd_ps(d1, _mm512_mul_ps(_mm512_loadu_ps(alane[r] + kLanes * s + 16), sb1), acc[r][j]);
        }
      } else {
        for (int r = 0; r < MR; ++r) {
          const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, b0, a0[r]), b1, a1[r]);
          acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(_mm512_loadu_ps(alane[r] + kLanes * s), sb0),
                                      acc[r][j]);
        }
      }
    }
  }
  // Reduce with constant indices only: an accumulator indexed by a run-time bound would be
  // kept in memory and stored on every step of the loop above.
  float sums[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) sums[r][j] = _mm512_reduce_add_ps(acc[r][j]);
  for (int r = 0; r < MR; ++r) {
    const float* bsum = qa.bsum.data() + (m0 + r) * w.nb_stride;
    for (int j = 0; j < cols; ++j) {
      const int64_t n = n0 + j;
      y[(m0 + r) * p.N + n] =
          sums[r][j] + OffsetDotVnni(w.offset.data() + n * w.nb_stride, bsum, w.nb_stride) + w.bias[n];
    }
  }
}

template <int kBits, bool kSplit>
STRATA_VNNI void MatMulInt8Cols(const Packed& w, const QuantA& qa, int64_t n0, int64_t n1, float* y) {
  for (int64_t n = n0; n < n1; n += 4) {
    const int64_t cols = std::min<int64_t>(4, n1 - n);
    int64_t m = 0;
    // Rows per tile: 4-bit codes need two more registers to unpack, and at 4 rows the tile
    // spills accumulators (measured: 3 rows are 10-15% faster for 4 bits, 4 rows for 8 bits).
    constexpr int kRows = kBits == 4 ? 3 : 4;
    for (; m + kRows <= qa.M; m += kRows) TileInt8<kBits, kSplit, kRows>(w, qa, m, n, cols, y);
    switch (qa.M - m) {
      case 3:
        TileInt8<kBits, kSplit, 3>(w, qa, m, n, cols, y);
        break;
      case 2:
        TileInt8<kBits, kSplit, 2>(w, qa, m, n, cols, y);
        break;
      case 1:
        TileInt8<kBits, kSplit, 1>(w, qa, m, n, cols, y);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void MatMulInt8Vnni(const Packed& w, const QuantA& qa, int64_t n0, int64_t n1, float* y) {
  const bool split = SplitSteps(w);
  if (w.p.bits == 4) {
    split ? MatMulInt8Cols<4, true>(w, qa, n0, n1, y) : MatMulInt8Cols<4, false>(w, qa, n0, n1, y);
  } else {
    split ? MatMulInt8Cols<8, true>(w, qa, n0, n1, y) : MatMulInt8Cols<8, false>(w, qa, n0, n1, y);
  }
}

}  // namespace strata::nbits
