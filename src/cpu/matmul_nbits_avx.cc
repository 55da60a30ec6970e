// MatMulNBits inner loops: portable, AVX2+FMA and AVX-512 versions of the GEMV (codes
// streamed once, dequantized in registers), the panel dequantizer and the dot-product
// tile of the GEMM. Each SIMD function carries its own target attribute; the file as a
// whole is compiled for baseline x86-64 and matmul_nbits.cc picks a version at run time.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same, in _mm512_reduce_add_ps

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/matmul_nbits.h"

namespace strata::nbits {

namespace {

// Code k of a packed column (see Packed in matmul_nbits.h).
inline int PackedCode(const uint8_t* col, int bits, int64_t k) {
  if (bits == 8) return col[k];
  const int64_t j = k & 31;
  const uint8_t byte = col[(k >> 5) * 16 + (j & 15)];
  return j < 16 ? (byte & 0x0F) : (byte >> 4);
}

}  // namespace

// ---------------------------------------------------------------- portable

void GemvScalar(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1) {
  const Params& p = w.p;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* col = w.codes.data() + n * w.col_bytes;
    const float* s = w.scale.data() + n * w.nb_stride;
    const float* o = w.offset.data() + n * w.nb_stride;
    float acc = 0;
    for (int64_t blk = 0; blk < p.n_blocks; ++blk) {
      float dot = 0;
      const int64_t k1 = std::min(p.K, (blk + 1) * p.block_size);
      for (int64_t k = blk * p.block_size; k < k1; ++k) dot += a[k] * static_cast<float>(PackedCode(col, p.bits, k));
      acc += dot * s[blk] + o[blk] * asum[blk];
    }
    y[n] = acc;
  }
}

void DequantPanelScalar(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel) {
  const Params& p = w.p;
  for (int64_t j = 0; j < 4; ++j) {
    float* dst = panel + j * kc;
    const int64_t n = n0 + j;
    if (n >= p.N) {
      std::memset(dst, 0, kc * sizeof(float));
      continue;
    }
    const uint8_t* col = w.codes.data() + n * w.col_bytes;
    const float* s = w.scale.data() + n * w.nb_stride;
    const float* o = w.offset.data() + n * w.nb_stride;
    for (int64_t k = k0; k < k0 + kc; ++k) {
      const int64_t blk = k / p.block_size;
      dst[k - k0] = static_cast<float>(PackedCode(col, p.bits, k)) * s[blk] + o[blk];
    }
  }
}

void DotTileScalar(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc, int64_t cols, float* y,
                   int64_t ldy) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < cols; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < kc; ++k) acc += a[m * lda + k] * panel[j * kc + k];
      y[m * ldy + j] += acc;
    }
}

// ---------------------------------------------------------------- AVX2 + FMA

#define STRATA_AVX2 __attribute__((target("avx2,fma")))

namespace {

STRATA_AVX2 inline float Hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

STRATA_AVX2 inline __m256 Cvt8(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }

// 32 4-bit codes of one chunk as four vectors of 8, in K order.
STRATA_AVX2 inline void Nibbles256(const uint8_t* p, __m256 q[4]) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(x, m);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
  q[0] = Cvt8(lo);
  q[1] = Cvt8(_mm_unpackhi_epi64(lo, lo));
  q[2] = Cvt8(hi);
  q[3] = Cvt8(_mm_unpackhi_epi64(hi, hi));
}

STRATA_AVX2 inline __m256 Bytes256(const uint8_t* p) {
  return Cvt8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Dot of the per-block offsets with the per-block sums of A (the zero-point term).
STRATA_AVX2 inline float OffsetDot256(const float* o, const float* asum, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(o + i), _mm256_loadu_ps(asum + i), acc);
  return Hsum256(acc);
}

template <int NC>
STRATA_AVX2 void Gemv256Cols(const Packed& w, const float* a, const float* asum, float* y, int64_t n) {
  const Params& p = w.p;
  const uint8_t* col[NC];
  const float* sc[NC];
  __m256 tot[NC];
  for (int j = 0; j < NC; ++j) {
    col[j] = w.codes.data() + (n + j) * w.col_bytes;
    sc[j] = w.scale.data() + (n + j) * w.nb_stride;
    tot[j] = _mm256_setzero_ps();
  }
  const int64_t bs = p.block_size, nb = w.k_pad / bs;
  if (p.bits == 4 && bs == 16) {
    for (int64_t c = 0; c < w.k_pad / 32; ++c) {
      const float* ak = a + 32 * c;
      for (int j = 0; j < NC; ++j) {
        __m256 q[4];
        Nibbles256(col[j] + 16 * c, q);
        __m256 d0 = _mm256_mul_ps(q[0], _mm256_loadu_ps(ak));
        d0 = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(ak + 8), d0);
        __m256 d1 = _mm256_mul_ps(q[2], _mm256_loadu_ps(ak + 16));
        d1 = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(ak + 24), d1);
        tot[j] = _mm256_fmadd_ps(d0, _mm256_broadcast_ss(sc[j] + 2 * c), tot[j]);
        tot[j] = _mm256_fmadd_ps(d1, _mm256_broadcast_ss(sc[j] + 2 * c + 1), tot[j]);
      }
    }
  } else if (p.bits == 4) {
    for (int64_t b = 0; b < nb; ++b) {
      __m256 acc0[NC], acc1[NC];
      for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
      for (int64_t k = b * bs; k < (b + 1) * bs; k += 32) {
        const __m256 a0 = _mm256_loadu_ps(a + k), a1 = _mm256_loadu_ps(a + k + 8);
        const __m256 a2 = _mm256_loadu_ps(a + k + 16), a3 = _mm256_loadu_ps(a + k + 24);
        for (int j = 0; j < NC; ++j) {
          __m256 q[4];
          Nibbles256(col[j] + k / 2, q);
          acc0[j] = _mm256_fmadd_ps(q[0], a0, acc0[j]);
          acc1[j] = _mm256_fmadd_ps(q[1], a1, acc1[j]);
          acc0[j] = _mm256_fmadd_ps(q[2], a2, acc0[j]);
          acc1[j] = _mm256_fmadd_ps(q[3], a3, acc1[j]);
        }
      }
      for (int j = 0; j < NC; ++j)
        tot[j] = _mm256_fmadd_ps(_mm256_add_ps(acc0[j], acc1[j]), _mm256_broadcast_ss(sc[j] + b), tot[j]);
    }
  } else {
    for (int64_t b = 0; b < nb; ++b) {
      __m256 acc0[NC], acc1[NC];
      for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
      for (int64_t k = b * bs; k < (b + 1) * bs; k += 16) {
        const __m256 a0 = _mm256_loadu_ps(a + k), a1 = _mm256_loadu_ps(a + k + 8);
        for (int j = 0; j < NC; ++j) {
          acc0[j] = _mm256_fmadd_ps(Bytes256(col[j] + k), a0, acc0[j]);
          acc1[j] = _mm256_fmadd_ps(Bytes256(col[j] + k + 8), a1, acc1[j]);
        }
      }
      for (int j = 0; j < NC; ++j)
        tot[j] = _mm256_fmadd_ps(_mm256_add_ps(acc0[j], acc1[j]), _mm256_broadcast_ss(sc[j] + b), tot[j]);
    }
  }
  for (int j = 0; j < NC; ++j)
    y[n + j] = Hsum256(tot[j]) + OffsetDot256(w.offset.data() + (n + j) * w.nb_stride, asum, w.nb_stride);
}

template <int MR>
STRATA_AVX2 void Tile256(const float* a, int64_t lda, const float* panel, int64_t kc, int64_t cols, float* y,
                         int64_t ldy) {
  __m256 acc[MR][4];
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < 4; ++j) acc[m][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; k += 8) {
    __m256 b[4];
    for (int j = 0; j < 4; ++j) b[j] = _mm256_loadu_ps(panel + j * kc + k);
    for (int m = 0; m < MR; ++m) {
      const __m256 av = _mm256_loadu_ps(a + m * lda + k);
      for (int j = 0; j < 4; ++j) acc[m][j] = _mm256_fmadd_ps(av, b[j], acc[m][j]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < cols; ++j) y[m * ldy + j] += Hsum256(acc[m][j]);
}

}  // namespace

STRATA_AVX2 void GemvAvx2(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) Gemv256Cols<4>(w, a, asum, y, n);
  for (; n < n1; ++n) Gemv256Cols<1>(w, a, asum, y, n);
}

STRATA_AVX2 void DequantPanelAvx2(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel) {
  const Params& p = w.p;
  const int64_t bs = p.block_size;
  for (int64_t j = 0; j < 4; ++j) {
    float* dst = panel + j * kc - k0;
    const int64_t n = n0 + j;
    if (n >= p.N) {
      std::memset(panel + j * kc, 0, kc * sizeof(float));
      continue;
    }
    const uint8_t* col = w.codes.data() + n * w.col_bytes;
    const float* s = w.scale.data() + n * w.nb_stride;
    const float* o = w.offset.data() + n * w.nb_stride;
    for (int64_t k = k0; k < k0 + kc; k += 32) {
      const __m256 s0 = _mm256_broadcast_ss(s + k / bs), o0 = _mm256_broadcast_ss(o + k / bs);
      const __m256 s1 = _mm256_broadcast_ss(s + (k + 16) / bs), o1 = _mm256_broadcast_ss(o + (k + 16) / bs);
      __m256 q[4];
      if (p.bits == 4) {
        Nibbles256(col + k / 2, q);
      } else {
        for (int i = 0; i < 4; ++i) q[i] = Bytes256(col + k + 8 * i);
      }
      _mm256_storeu_ps(dst + k, _mm256_fmadd_ps(q[0], s0, o0));
      _mm256_storeu_ps(dst + k + 8, _mm256_fmadd_ps(q[1], s0, o0));
      _mm256_storeu_ps(dst + k + 16, _mm256_fmadd_ps(q[2], s1, o1));
      _mm256_storeu_ps(dst + k + 24, _mm256_fmadd_ps(q[3], s1, o1));
    }
  }
}

STRATA_AVX2 void DotTileAvx2(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc, int64_t cols,
                             float* y, int64_t ldy) {
  switch (rows) {
    case 4:
      Tile256<4>(a, lda, panel, kc, cols, y, ldy);
      break;
    case 3:
      Tile256<3>(a, lda, panel, kc, cols, y, ldy);
      break;
    case 2:
      Tile256<2>(a, lda, panel, kc, cols, y, ldy);
      break;
    default:
      Tile256<1>(a, lda, panel, kc, cols, y, ldy);
      break;
  }
}

// ---------------------------------------------------------------- AVX-512

#define STRATA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

namespace {

STRATA_AVX512 inline __m512 Cvt16(__m128i bytes) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)); }

// 32 4-bit codes of one chunk as two vectors of 16, in K order.
STRATA_AVX512 inline void Nibbles512(const uint8_t* p, __m512* lo, __m512* hi) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  *lo = Cvt16(_mm_and_si128(x, m));
  *hi = Cvt16(_mm_and_si128(_mm_srli_epi16(x, 4), m));
}

STRATA_AVX512 inline __m512 Bytes512(const uint8_t* p) {
  return Cvt16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

STRATA_AVX512 inline float OffsetDot512(const float* o, const float* asum, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(o + i), _mm512_loadu_ps(asum + i), acc);
  return _mm512_reduce_add_ps(acc);
}

// The GEMV's prefetch of the next group of 4 columns (the fp32 layout stores columns one
// after another, so a group is one contiguous run of codes and of scales and offsets).
// Without it, each column's codes (4 KiB at K = 8192, 4 bits) are a new page for the
// hardware prefetcher and the GEMV past the L3 waited on memory: in-process A/B (1 thread,
// int4, min CPU time) 8192^2 3.3 -> 1.9-2.0 ms, 4096x8192 1.6 -> 0.9 ms; at 4096x2048
// (in the L3) no loss. T1/NTA hints and prefetching two groups ahead measured the same.
// The prefetches are written out in the loops on purpose: with the scale prefetch in a
// helper that returned early on 3 of 4 blocks, GCC 12 dropped it from the binary (and the
// GEMV ran ~1.5x slower past the L3): check `objdump -d` for prefetcht0 after changing them.
struct Prefetch {
  const uint8_t* codes;         // the next group's codes (or line 0 of the weights)
  const float *scale, *offset;  // the next group's scales and offsets
  int64_t code_step;            // bytes per 64-byte line: 64, or 0 without a whole next group (the same line again)
  int64_t scale_step;           // floats per block: 4 (4 columns), or 0
};

// 8 bits: widen, convert, FMA with A, one FMA per block with the scale; the zero-point term
// as the offsets' dot with A's per-block sums.
template <int NC, bool kPrefetch>
STRATA_AVX512 void Gemv8Cols(const Packed& w, const float* a, const float* asum, float* y, int64_t n,
                             const Prefetch& pf) {
  const uint8_t* col[NC];
  const float* sc[NC];
  __m512 tot[NC];
  for (int j = 0; j < NC; ++j) {
    col[j] = w.codes.data() + (n + j) * w.col_bytes;
    sc[j] = w.scale.data() + (n + j) * w.nb_stride;
    tot[j] = _mm512_setzero_ps();
  }
  const int64_t bs = w.p.block_size, nb = w.k_pad / bs, lines = bs / 16;  // a group: 4 * bs bytes per block
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kPrefetch) {
      for (int64_t l = 0; l < lines; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(pf.codes + pf.code_step * (b * lines + l)), _MM_HINT_T0);
      if ((b & 3) == 0) {  // 4 columns' scales and offsets: 4 floats per block
        _mm_prefetch(reinterpret_cast<const char*>(pf.scale + pf.scale_step * b), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(pf.offset + pf.scale_step * b), _MM_HINT_T0);
      }
    }
    __m512 acc0[NC], acc1[NC];
    for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
    int64_t k = b * bs;
    for (; k + 32 <= (b + 1) * bs; k += 32) {
      const __m512 a0 = _mm512_loadu_ps(a + k), a1 = _mm512_loadu_ps(a + k + 16);
      for (int j = 0; j < NC; ++j) {
        acc0[j] = _mm512_fmadd_ps(Bytes512(col[j] + k), a0, acc0[j]);
        acc1[j] = _mm512_fmadd_ps(Bytes512(col[j] + k + 16), a1, acc1[j]);
      }
    }
    if (k < (b + 1) * bs) {  // block_size 16
      const __m512 a0 = _mm512_loadu_ps(a + k);
      for (int j = 0; j < NC; ++j) acc0[j] = _mm512_fmadd_ps(Bytes512(col[j] + k), a0, acc0[j]);
    }
    for (int j = 0; j < NC; ++j)
      tot[j] = _mm512_fmadd_ps(_mm512_add_ps(acc0[j], acc1[j]), _mm512_set1_ps(sc[j][b]), tot[j]);
  }
  for (int j = 0; j < NC; ++j)
    y[n + j] = _mm512_reduce_add_ps(tot[j]) + OffsetDot512(w.offset.data() + (n + j) * w.nb_stride, asum, w.nb_stride);
}

// 4 bits: per block and column, a 16-entry table of the block's dequantized values
// ((q - zp) * scale = q * scale + offset); vpermps looks the codes up by their low 4 bits,
// so no masking, int-to-float conversion or per-block rescaling is needed and the
// zero-point term is already included. A group reads 64 bytes of codes per 32-code chunk:
// one line of the next group is prefetched per chunk.
template <int NC>
STRATA_AVX512 void Gemv4Cols(const Packed& w, const float* a, float* y, int64_t n, const Prefetch& pf) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const uint8_t* col[NC];
  const float *sc[NC], *of[NC];
  __m512 acc0[NC], acc1[NC];
  for (int j = 0; j < NC; ++j) {
    col[j] = w.codes.data() + (n + j) * w.col_bytes;
    sc[j] = w.scale.data() + (n + j) * w.nb_stride;
    of[j] = w.offset.data() + (n + j) * w.nb_stride;
    acc0[j] = acc1[j] = _mm512_setzero_ps();
  }
  const int64_t bs = w.p.block_size;
  if (bs == 16) {  // two blocks, two tables per chunk
    for (int64_t c = 0; c < w.k_pad / 32; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(pf.codes + pf.code_step * c), _MM_HINT_T0);
      if ((c & 1) == 0) {  // blocks 2c and 2c + 1: 2c + 1 never starts a line
        _mm_prefetch(reinterpret_cast<const char*>(pf.scale + pf.scale_step * 2 * c), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(pf.offset + pf.scale_step * 2 * c), _MM_HINT_T0);
      }
      const __m512 a0 = _mm512_loadu_ps(a + 32 * c), a1 = _mm512_loadu_ps(a + 32 * c + 16);
      for (int j = 0; j < NC; ++j) {
        const __m512 t0 = _mm512_fmadd_ps(iota, _mm512_set1_ps(sc[j][2 * c]), _mm512_set1_ps(of[j][2 * c]));
        const __m512 t1 = _mm512_fmadd_ps(iota, _mm512_set1_ps(sc[j][2 * c + 1]), _mm512_set1_ps(of[j][2 * c + 1]));
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col[j] + 16 * c)));
        acc0[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(x, t0), a0, acc0[j]);
        acc1[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), t1), a1, acc1[j]);
      }
    }
  } else {
    const int64_t nb = w.k_pad / bs, cpb = bs / 32;  // chunks per block
    for (int64_t b = 0; b < nb; ++b) {
      if ((b & 3) == 0) {  // 4 columns' scales and offsets: 4 floats per block
        _mm_prefetch(reinterpret_cast<const char*>(pf.scale + pf.scale_step * b), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(pf.offset + pf.scale_step * b), _MM_HINT_T0);
      }
      __m512 t[NC];
      for (int j = 0; j < NC; ++j) t[j] = _mm512_fmadd_ps(iota, _mm512_set1_ps(sc[j][b]), _mm512_set1_ps(of[j][b]));
      for (int64_t c = b * cpb; c < (b + 1) * cpb; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(pf.codes + pf.code_step * c), _MM_HINT_T0);
        const __m512 a0 = _mm512_loadu_ps(a + 32 * c), a1 = _mm512_loadu_ps(a + 32 * c + 16);
        for (int j = 0; j < NC; ++j) {
          const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col[j] + 16 * c)));
          acc0[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(x, t[j]), a0, acc0[j]);
          acc1[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), t[j]), a1, acc1[j]);
        }
      }
    }
  }
  for (int j = 0; j < NC; ++j) y[n + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
}

template <int MR>
STRATA_AVX512 void Tile512(const float* a, int64_t lda, const float* panel, int64_t kc, int64_t cols, float* y,
                           int64_t ldy) {
  __m512 acc[MR][4];
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < 4; ++j) acc[m][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k += 16) {
    __m512 b[4];
    for (int j = 0; j < 4; ++j) b[j] = _mm512_loadu_ps(panel + j * kc + k);
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_loadu_ps(a + m * lda + k);
      for (int j = 0; j < 4; ++j) acc[m][j] = _mm512_fmadd_ps(av, b[j], acc[m][j]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < cols; ++j) y[m * ldy + j] += _mm512_reduce_add_ps(acc[m][j]);
}

}  // namespace

STRATA_AVX512 void GemvAvx512(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    // The next group of 4 columns, read linearly over this group's K; without a whole next
    // group (the end of the weights), line 0 of the weights again.
    const bool next = n + 8 <= w.p.N;
    const int64_t at = next ? n + 4 : 0;
    const Prefetch pf{w.codes.data() + at * w.col_bytes, w.scale.data() + at * w.nb_stride,
                      w.offset.data() + at * w.nb_stride, next ? 64 : 0, next ? 4 : 0};
    const int64_t cols = std::min<int64_t>(4, n1 - n);
    if (w.p.bits == 4) {
      if (cols == 4) {
        Gemv4Cols<4>(w, a, y, n, pf);
      } else {
        for (int64_t j = n; j < n + cols; ++j) Gemv4Cols<1>(w, a, y, j, pf);
      }
    } else {
      if (cols == 4) {
        w.gemv_streams ? Gemv8Cols<4, true>(w, a, asum, y, n, pf) : Gemv8Cols<4, false>(w, a, asum, y, n, pf);
      } else {
        for (int64_t j = n; j < n + cols; ++j)
          w.gemv_streams ? Gemv8Cols<1, true>(w, a, asum, y, j, pf) : Gemv8Cols<1, false>(w, a, asum, y, j, pf);
      }
    }
  }
}

STRATA_AVX512 void DequantPanelAvx512(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel) {
  const Params& p = w.p;
  const int64_t bs = p.block_size;
  for (int64_t j = 0; j < 4; ++j) {
    float* dst = panel + j * kc - k0;
    const int64_t n = n0 + j;
    if (n >= p.N) {
      std::memset(panel + j * kc, 0, kc * sizeof(float));
      continue;
    }
    const uint8_t* col = w.codes.data() + n * w.col_bytes;
    const float* s = w.scale.data() + n * w.nb_stride;
    const float* o = w.offset.data() + n * w.nb_stride;
    for (int64_t k = k0; k < k0 + kc; k += 32) {
      __m512 lo, hi;
      if (p.bits == 4) {
        Nibbles512(col + k / 2, &lo, &hi);
      } else {
        lo = Bytes512(col + k);
        hi = Bytes512(col + k + 16);
      }
      _mm512_storeu_ps(dst + k, _mm512_fmadd_ps(lo, _mm512_set1_ps(s[k / bs]), _mm512_set1_ps(o[k / bs])));
      _mm512_storeu_ps(dst + k + 16,
                       _mm512_fmadd_ps(hi, _mm512_set1_ps(s[(k + 16) / bs]), _mm512_set1_ps(o[(k + 16) / bs])));
    }
  }
}

STRATA_AVX512 void DotTileAvx512(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc,
                                 int64_t cols, float* y, int64_t ldy) {
  switch (rows) {
    case 4:
      Tile512<4>(a, lda, panel, kc, cols, y, ldy);
      break;
    case 3:
      Tile512<3>(a, lda, panel, kc, cols, y, ldy);
      break;
    case 2:
      Tile512<2>(a, lda, panel, kc, cols, y, ldy);
      break;
    default:
      Tile512<1>(a, lda, panel, kc, cols, y, ldy);
      break;
  }
}

}  // namespace strata::nbits
