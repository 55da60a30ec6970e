// MatMulNBits GEMM (M >= 4) at accuracy level 0 on AVX-512: each K block x 32-column
// panel of W is dequantized once per M block into a small fp32 buffer (32 KiB, stays in
// L1) laid out as the SGEMM's packed B panel, and the rows of A run through the SGEMM's
// 12x32 register-tiled micro-kernel (sgemm::internal::TileAvx512). Dequantization thus
// costs O(K * N) per M block of up to kMc rows instead of per row, and the products run
// at the SGEMM's rate.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu/matmul_nbits.h"
#include "cpu/matmul_nbits_parallel.h"
#include "cpu/sgemm_internal.h"
#include "cpu/sgemm_transpose.h"

namespace strata::nbits {

namespace {

namespace si = sgemm::internal;
constexpr int64_t kPanel = 32;  // the micro-kernel's column width

#define STRATA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

// 16 dequantized weights of column n at k (k a multiple of 16: one block, one load).
STRATA_AVX512 inline __m512 Dequant16(const Packed& w, int64_t n, int64_t k) {
  const uint8_t* col = w.codes.data() + n * w.col_bytes;
  __m512i v;
  if (w.p.bits == 8) {
    v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + k)));
  } else {
    v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + (k / 32) * 16)));
    v = (k & 16) ? _mm512_srli_epi32(v, 4) : _mm512_and_si512(v, _mm512_set1_epi32(0x0F));
  }
  const int64_t blk = n * w.nb_stride + (k >> __builtin_ctzll(static_cast<uint64_t>(w.p.block_size)));  // no division
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(w.scale[blk]), _mm512_set1_ps(w.offset[blk]));
}

// panel[(k - k0) * 32 + j] = W[n0 + j][k] for k in [k0, k0 + kc), j < 32 (zero past N).
STRATA_AVX512 void DequantKPanel(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel) {
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t nh = n0 + 16 * half;
    const int64_t cols = std::clamp<int64_t>(w.p.N - nh, 0, 16);
    for (int64_t k = k0; k < k0 + kc; k += 16) {
      __m512 r[16];
      for (int j = 0; j < 16; ++j) r[j] = j < cols ? Dequant16(w, nh + j, k) : _mm512_setzero_ps();
      si::Transpose16x16(r);
      float* dst = panel + (k - k0) * kPanel + 16 * half;
      for (int t = 0; t < 16; ++t) _mm512_store_ps(dst + t * kPanel, r[t]);
    }
  }
}

// The same for 4 bits, without a float transpose: per 16 columns and 128 k (k0 and kc are
// multiples of 128), the 16 columns' 64 code bytes are transposed as bytes, four 16x16
// byte transposes at once (one per 128-bit lane, 4 unpack stages), so each panel row of 16
// columns is widened straight from one 16-byte group, then converted and scaled with the
// 16 columns' scales and offsets (gathered once per block). In-process A/B at M = 128,
// 2048^2: the float-transpose version cost 12% over the plain SGEMM.
STRATA_AVX512 void DequantKPanel4(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel) {
  const int log2_bs = __builtin_ctzll(static_cast<uint64_t>(w.p.block_size));
  const int64_t nbs = w.nb_stride;
  alignas(64) uint8_t tb[16 * 64];
  const __m512i lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int32_t>(nbs)));
  const __m512i nib = _mm512_set1_epi32(0x0F);
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t nh = n0 + 16 * half;
    const int64_t cols = std::clamp<int64_t>(w.p.N - nh, 0, 16);
    if (cols == 0) {
      for (int64_t k = 0; k < kc; ++k) _mm512_store_ps(panel + k * kPanel + 16 * half, _mm512_setzero_ps());
      continue;
    }
    // Missing columns read the first column's codes with zero scale and offset: zeros.
    const __mmask16 live = static_cast<__mmask16>((1u << cols) - 1);
    const uint8_t* col[16];
    for (int j = 0; j < 16; ++j) col[j] = w.codes.data() + (nh + (j < cols ? j : 0)) * w.col_bytes;
    const float* sbase = w.scale.data() + nh * nbs;
    const float* obase = w.offset.data() + nh * nbs;
    for (int64_t k = k0; k < k0 + kc; k += kInt8Step) {
      __m512i r[16], t[16];
      for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_si512(col[j] + k / 2);
      // Four interleave stages transpose each lane's 16x16 bytes: row t, byte j = column j's byte t.
      for (int stage = 0; stage < 4; ++stage) {
        __m512i* src = (stage & 1) ? t : r;
        __m512i* dst = (stage & 1) ? r : t;
        for (int m = 0; m < 8; ++m) {
          dst[2 * m] = _mm512_unpacklo_epi8(src[m], src[m + 8]);
          dst[2 * m + 1] = _mm512_unpackhi_epi8(src[m], src[m + 8]);
        }
      }
      for (int b = 0; b < 16; ++b) _mm512_store_si512(tb + 64 * b, r[b]);
      for (int i = 0; i < 4; ++i) {
        // Byte b of lane i holds codes k + 32i + b (low nibble) and k + 32i + 16 + b (high).
        const int64_t kl = k + 32 * i, kh = kl + 16;
        const __m512i il = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(kl >> log2_bs)));
        const __m512i ih = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(kh >> log2_bs)));
        const __m512 sl = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, il, sbase, 4);
        const __m512 ol = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, il, obase, 4);
        const __m512 sh = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, ih, sbase, 4);
        const __m512 oh = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, ih, obase, 4);
        float* lo_row = panel + (kl - k0) * kPanel + 16 * half;
        float* hi_row = panel + (kh - k0) * kPanel + 16 * half;
        for (int b = 0; b < 16; ++b) {
          const __m512i x =
              _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(tb + 64 * b + 16 * i)));
          _mm512_store_ps(lo_row + b * kPanel, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(x, nib)), sl, ol));
          _mm512_store_ps(hi_row + b * kPanel, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x, 4)), sh, oh));
        }
      }
    }
  }
}

// ---- 4-bit, few rows: register tiles on table-dequantized weights ----

// The 16 dequantized values (q - zp) * scale of block blk of a column: vpermps looks codes
// up by their low 4 bits (no mask, no int->float conversion), as the AVX-512 GEMV.
STRATA_AVX512 inline __m512 BlockTable(const Packed& w, int64_t n, int64_t blk) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int64_t at = n * w.nb_stride + blk;
  return _mm512_fmadd_ps(iota, _mm512_set1_ps(w.scale[at]), _mm512_set1_ps(w.offset[at]));
}

// Rows [m0, m0 + MR) x columns [n0, n0 + cols), cols <= 4, over all of K: each 32-code
// chunk of a column is dequantized once into two vectors and used by MR rows.
template <int MR>
STRATA_AVX512 void TableTile(const Packed& w, const float* a, int64_t m0, int64_t n0, int64_t cols, float* y) {
  const int64_t N = w.p.N, K = w.k_pad, bs = w.p.block_size;
  const int log2_bs = __builtin_ctzll(static_cast<uint64_t>(bs));  // no division per chunk
  const uint8_t* col[4];
  int64_t cn[4];
  for (int c = 0; c < 4; ++c) {
    cn[c] = n0 + std::min<int64_t>(c, cols - 1);  // missing columns repeat the last one
    col[c] = w.codes.data() + cn[c] * w.col_bytes;
  }
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_setzero_ps();
  __m512 tlo[4], thi[4];
  for (int64_t k = 0; k < K; k += 32) {
    // Blocks of 16: the chunk's halves have their own blocks; otherwise new tables per block.
    if (bs == 16 || (k & (bs - 1)) == 0) {
      for (int c = 0; c < 4; ++c) {
        tlo[c] = BlockTable(w, cn[c], k >> log2_bs);
        thi[c] = bs == 16 ? BlockTable(w, cn[c], (k >> log2_bs) + 1) : tlo[c];
      }
    }
    __m512 lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col[c] + k / 2)));
      lo[c] = _mm512_permutexvar_ps(x, tlo[c]);
      hi[c] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), thi[c]);
    }
    for (int r = 0; r < MR; ++r) {
      const float* ar = a + (m0 + r) * K + k;
      const __m512 a0 = _mm512_loadu_ps(ar), a1 = _mm512_loadu_ps(ar + 16);
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(hi[c], a1, _mm512_fmadd_ps(lo[c], a0, acc[r][c]));
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < cols; ++c) y[(m0 + r) * N + n0 + c] = _mm512_reduce_add_ps(acc[r][c]) + w.bias[n0 + c];
}

STRATA_AVX512 void TableColumns(const Packed& w, const float* a, int64_t M, float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    const int64_t cols = std::min<int64_t>(4, n1 - n);
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) TableTile<4>(w, a, m, n, cols, y);
    switch (M - m) {
      case 3:
        TableTile<3>(w, a, m, n, cols, y);
        break;
      case 2:
        TableTile<2>(w, a, m, n, cols, y);
        break;
      case 1:
        TableTile<1>(w, a, m, n, cols, y);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void PackedGemmTableAvx512(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool) {
  if (M <= 0) return;
  const int64_t groups = (w.p.N + 3) / 4;
  ParallelRange(pool, groups, 4,
                [&](int64_t g0, int64_t g1) { TableColumns(w, a, M, y, g0 * 4, std::min(w.p.N, g1 * 4)); });
}

int64_t GemmAvx512ScratchFloats(const Packed& w, int64_t M) {
  // A packed once into the micro-kernel's tiles: per K block, ceil(M / kMr) tiles of
  // [kc][kMr] (the last K block may be shorter; it still gets kKc * kMr per tile).
  const int64_t kb_count = (w.k_pad + si::kKc - 1) / si::kKc, tiles = (M + si::kMr - 1) / si::kMr;
  return kb_count * tiles * si::kMr * si::kKc;
}

void PackedGemmAvx512(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool, float* scratch) {
  const int64_t N = w.p.N, K = w.k_pad;
  if (M <= 0) return;
  const int64_t kc_max = si::kKc, mc_max = si::kMc, kb_count = (K + kc_max - 1) / kc_max;
  const int64_t tiles = (M + si::kMr - 1) / si::kMr;
  const int64_t kb_stride = tiles * si::kMr * kc_max;
  std::vector<float> own;  // callers without scratch (tests, benchmarks)
  if (!scratch) {
    own.resize(static_cast<size_t>(GemmAvx512ScratchFloats(w, M)));
    scratch = own.data();
  }
  float* apack = scratch;
  ParallelRange(pool, kb_count, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t kb = b0; kb < b1; ++kb) {
      const int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t m0 = t * si::kMr;
        si::PackAAvx512(a + m0 * K + k0, K, std::min<int64_t>(si::kMr, M - m0), kc,
                        apack + kb * kb_stride + t * si::kMr * kc_max);
      }
    }
  });
  // 4 bits: the byte-transposing dequantization, when the gathers' int32 offsets (16
  // columns x nb_stride) cannot overflow.
  const bool byte_transpose = w.p.bits == 4 && 16 * w.nb_stride < (int64_t{1} << 31) && kc_max % kInt8Step == 0;
  // Threads own disjoint ranges of 32-column panels: no two write the same outputs. Split
  // by CPU (matmul_nbits_parallel.h) so each CPU dequantizes the same panels' codes, kept in
  // its own caches, and writes the same y columns every run: 2-thread M = 128 int4 2048^2
  // 3.14-3.36 vs 3.27-3.60 ms median with dynamic chunks (5 alternating processes each).
  const int64_t panels = (N + kPanel - 1) / kPanel;
  ParallelRangeByCpu(pool, panels, 1, [&](int64_t p0, int64_t p1) {
    // One [kc][32] panel slice (32 KiB), 64-byte aligned for the micro-kernel's aligned
    // loads; on the stack, so a task allocates nothing.
    alignas(64) float panel[si::kKc * kPanel];
    for (int64_t mb = 0; mb < M; mb += mc_max) {
      const int64_t mrows = std::min(mc_max, M - mb);
      for (int64_t kb = 0; kb < kb_count; ++kb) {
        const int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
        for (int64_t pn = p0; pn < p1; ++pn) {
          const int64_t n0 = pn * kPanel;
          const int cols = static_cast<int>(std::min(kPanel, N - n0));
          if (byte_transpose) {
            DequantKPanel4(w, n0, k0, kc, panel);
          } else {
            DequantKPanel(w, n0, k0, kc, panel);
          }
          si::TileEpilogue ep;
          ep.load_c = kb > 0;  // the first K block stores, later ones accumulate
          ep.bias = kb + 1 == kb_count ? w.bias.data() + n0 : nullptr;
          for (int64_t m = 0; m < mrows; m += si::kMr) {
            const int rows = static_cast<int>(std::min<int64_t>(si::kMr, mrows - m));
            const float* ap = apack + kb * kb_stride + ((mb + m) / si::kMr) * si::kMr * kc_max;
            si::TileAvx512(rows, cols, kc, ap, panel, y + (mb + m) * N + n0, N, ep);
          }
        }
      }
    }
  });
}

}  // namespace strata::nbits
