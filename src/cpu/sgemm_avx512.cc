// AVX-512F micro-kernels of the SGEMM (see sgemm.h). Compiled for baseline x86-64 like
// the rest of the core: every function here carries target("avx512f") and is reached
// only after sgemm::Available() said yes.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <array>
#include <utility>

#include "cpu/sgemm_internal.h"
#include "cpu/sgemm_transpose.h"
#include "cpu/simd_clamp.h"

namespace strata::sgemm::internal {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

// How many k steps ahead the B panel is prefetched (one step = 128 bytes).
constexpr int64_t kPrefetchK = 24;
// T1 measured the same as T0 on the cold-B products (BM_SgemmColdB).
constexpr auto kPrefetchHint = _MM_HINT_T0;

// The tile store shared by both A sources: alpha, C (when loading it), bias, residual,
// clamp, masked to the tile's columns.
template <int MR>
STRATA_AVX512 __attribute__((always_inline)) inline void StoreTile(const __m512 (&acc0)[MR], const __m512 (&acc1)[MR],
                                                                   int cols, float* c, int64_t ldc,
                                                                   const TileEpilogue& e) {
  const __mmask16 m0 = cols >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32  ? static_cast<__mmask16>(0xFFFF)
                       : cols > 16 ? static_cast<__mmask16>((1u << (cols - 16)) - 1)
                                   : static_cast<__mmask16>(0);
  const __m512 alpha = _mm512_set1_ps(e.alpha);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (e.bias) {
    bias0 = _mm512_maskz_loadu_ps(m0, e.bias);
    bias1 = _mm512_maskz_loadu_ps(m1, e.bias + 16);
  }
  const __m512 lo = _mm512_set1_ps(e.min), hi = _mm512_set1_ps(e.max);
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    float* cr = c + i * ldc;
    __m512 v0, v1;
    if (e.load_c) {
      v0 = _mm512_fmadd_ps(acc0[i], alpha, _mm512_maskz_loadu_ps(m0, cr));
      v1 = _mm512_fmadd_ps(acc1[i], alpha, _mm512_maskz_loadu_ps(m1, cr + 16));
    } else {
      v0 = _mm512_mul_ps(acc0[i], alpha);
      v1 = _mm512_mul_ps(acc1[i], alpha);
    }
    if (e.bias) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
    }
    if (e.residual) {
      const float* rr = e.residual + i * e.ldr;
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, rr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, rr + 16));
    }
    if (e.clamp) {
      v0 = simd::Activate(v0, lo, hi, e.kind);
      v1 = simd::Activate(v1, lo, hi, e.kind);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

// Prefetches what the tile store reads or writes (both cache lines of each C row, and of
// the residual's rows), so the store at the end of the k loop does not stall on misses:
// ResNet's 1x1 convs with short K write and read a 12 x 32 tile every few hundred cycles.
template <int MR>
STRATA_AVX512 __attribute__((always_inline)) inline void PrefetchTileOperands(int cols, const float* c, int64_t ldc,
                                                                              const TileEpilogue& e) {
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    if (cols > 16) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
  if (e.residual) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(e.residual + i * e.ldr), _MM_HINT_T0);
      if (cols > 16) _mm_prefetch(reinterpret_cast<const char*>(e.residual + i * e.ldr + 16), _MM_HINT_T0);
    }
  }
}

// One MR x 32 tile: 2*MR accumulators, B from the packed panel (two aligned loads per
// k), A broadcast from the packed tile (folded into the FMA as an embedded broadcast).
// kHalf: a last panel of at most 16 columns (N = 16, 144, ...) only touches the first
// half of each panel row, so the padding columns cost no FMAs; acc1 stays zero and its
// store is fully masked.
template <int MR, bool kHalf>
STRATA_AVX512 void Tile(int cols, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                        const TileEpilogue& e) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  PrefetchTileOperands<MR>(cols, c, ldc, e);
  // The B panel streams from L3/DRAM on the first tile of a block: fetch ahead (or the next slice).
  const float* pf = e.next_b ? e.next_b : bp + kPrefetchK * 32;

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k, pf += 32) {
    const __m512 b0 = _mm512_load_ps(bp);
    _mm_prefetch(reinterpret_cast<const char*>(pf), kPrefetchHint);
    if constexpr (kHalf) {
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) acc0[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[i]), b0, acc0[i]);
    } else {
      const __m512 b1 = _mm512_load_ps(bp + 16);
      _mm_prefetch(reinterpret_cast<const char*>(pf + 16), kPrefetchHint);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(ap[i]);
        acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
      }
    }
    ap += kMr;
    bp += 32;
  }
  StoreTile<MR>(acc0, acc1, cols, c, ldc, e);
}

// The same tile with A read through per-row segment pointers (IndirectA): each k
// broadcasts row i's value straight from its source (the conv input), so nothing is
// gathered or packed. One pass over all of K, so sums differ from Tile's per-K-block ones
// in rounding only. kHalf as in Tile.
template <int MR, bool kHalf, bool kNext>
STRATA_AVX512 void TileIndirect(int cols, int64_t taps, int64_t seg, const float* const* ptrs, const float* bp,
                                float* c, int64_t ldc, const TileEpilogue& e) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  PrefetchTileOperands<MR>(cols, c, ldc, e);
  // As in Tile, but in its own instantiation: tiles without a next panel (most calls) then
  // compile as before, without one more live pointer beside the 12 row pointers (the 12-row
  // tile already spills some of them in the k loop).
  const float* pf = kNext ? e.next_b : nullptr;
  for (int64_t t = 0; t < taps; ++t, ptrs += kMr) {
    const float* a[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) a[i] = ptrs[i];
#pragma GCC unroll 4
    for (int64_t k = 0; k < seg; ++k) {
      const __m512 b0 = _mm512_load_ps(bp);
      const float* pk = kNext ? pf : bp + kPrefetchK * 32;
      _mm_prefetch(reinterpret_cast<const char*>(pk), kPrefetchHint);
      if constexpr (kHalf) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) acc0[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i][k]), b0, acc0[i]);
      } else {
        const __m512 b1 = _mm512_load_ps(bp + 16);
        _mm_prefetch(reinterpret_cast<const char*>(pk + 16), kPrefetchHint);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
          const __m512 av = _mm512_set1_ps(a[i][k]);
          acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
          acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
        }
      }
      bp += 32;
      if constexpr (kNext) pf += 32;
    }
  }
  StoreTile<MR>(acc0, acc1, cols, c, ldc, e);
}

// TileIndirect over two adjacent panels at once (64 columns, 4 x MR accumulators) for MR
// <= kWideRows rows: per k, MR broadcasts feed 4 * MR FMAs instead of 2 * MR, and the six
// row pointers (plus the two panel pointers) stay in registers, where the 12-row tile
// spills some of its twelve. Each C element gets the same FMA sequence as in
// TileIndirect, so the results are identical. cols in (32, 64].
template <int MR>
STRATA_AVX512 void TileIndirectWide(int cols, int64_t taps, int64_t seg, const float* const* ptrs, const float* bp0,
                                    const float* bp1, float* c, int64_t ldc, const TileEpilogue& e) {
  __m512 acc0[MR], acc1[MR], acc2[MR], acc3[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
    acc2[i] = _mm512_setzero_ps();
    acc3[i] = _mm512_setzero_ps();
  }
  TileEpilogue e1 = e;  // the second panel's columns
  if (e1.bias) e1.bias += 32;
  if (e1.residual) e1.residual += 32;
  PrefetchTileOperands<MR>(32, c, ldc, e);
  PrefetchTileOperands<MR>(cols - 32, c + 32, ldc, e1);
  for (int64_t t = 0; t < taps; ++t, ptrs += kMr) {
    const float* a[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) a[i] = ptrs[i];
#pragma GCC unroll 4
    for (int64_t k = 0; k < seg; ++k) {
      const __m512 b0 = _mm512_load_ps(bp0), b1 = _mm512_load_ps(bp0 + 16);
      const __m512 b2 = _mm512_load_ps(bp1), b3 = _mm512_load_ps(bp1 + 16);
      _mm_prefetch(reinterpret_cast<const char*>(bp0 + kPrefetchK * 32), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(bp0 + kPrefetchK * 32 + 16), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(bp1 + kPrefetchK * 32), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(bp1 + kPrefetchK * 32 + 16), _MM_HINT_T0);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a[i][k]);
        acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
        acc2[i] = _mm512_fmadd_ps(av, b2, acc2[i]);
        acc3[i] = _mm512_fmadd_ps(av, b3, acc3[i]);
      }
      bp0 += 32;
      bp1 += 32;
    }
  }
  StoreTile<MR>(acc0, acc1, 32, c, ldc, e);
  StoreTile<MR>(acc2, acc3, cols - 32, c + 32, ldc, e1);
}

template <int... R>
constexpr auto MakeWideTable(std::integer_sequence<int, R...>) {
  return std::array<decltype(&TileIndirectWide<1>), sizeof...(R)>{{&TileIndirectWide<R + 1>...}};
}
constexpr auto kWideTiles = MakeWideTable(std::make_integer_sequence<int, kWideRows>());

// The tile for a row count in [1, kMr] and a panel of `cols` columns: a table of the
// instantiations, indexed [half][rows - 1].
template <template <int, bool> class Fn, int... R>
constexpr auto MakeTable(std::integer_sequence<int, R...>) {
  using F = decltype(&Fn<1, false>::Run);
  return std::array<std::array<F, sizeof...(R)>, 2>{{{&Fn<R + 1, false>::Run...}, {&Fn<R + 1, true>::Run...}}};
}
template <int MR, bool kHalf>
struct PackedTile {
  static void Run(int cols, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                  const TileEpilogue& e) {
    Tile<MR, kHalf>(cols, kc, ap, bp, c, ldc, e);
  }
};
template <int MR, bool kHalf>
struct IndirectTile {
  static void Run(int cols, int64_t taps, int64_t seg, const float* const* a, const float* bp, float* c, int64_t ldc,
                  const TileEpilogue& e) {
    // A half panel is always the last one: nothing follows it to prefetch.
    if (!kHalf && e.next_b) {
      TileIndirect<MR, false, true>(cols, taps, seg, a, bp, c, ldc, e);
    } else {
      TileIndirect<MR, kHalf, false>(cols, taps, seg, a, bp, c, ldc, e);
    }
  }
};
constexpr auto kPackedTiles = MakeTable<PackedTile>(std::make_integer_sequence<int, kMr>());
constexpr auto kIndirectTiles = MakeTable<IndirectTile>(std::make_integer_sequence<int, kMr>());

}  // namespace

void TileAvx512(int rows, int cols, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                const TileEpilogue& e) {
  if (rows < 1 || rows > kMr) return;  // the driver never asks for other row counts
  kPackedTiles[cols <= 16][rows - 1](cols, kc, ap, bp, c, ldc, e);
}

void TileIndirectAvx512(int rows, int cols, int64_t taps, int64_t seg, const float* const* a, const float* bp, float* c,
                        int64_t ldc, const TileEpilogue& e) {
  if (rows < 1 || rows > kMr) return;  // the driver never asks for other row counts
  kIndirectTiles[cols <= 16][rows - 1](cols, taps, seg, a, bp, c, ldc, e);
}

void TileIndirectWideAvx512(int rows, int cols, int64_t taps, int64_t seg, const float* const* a, const float* bp0,
                            const float* bp1, float* c, int64_t ldc, const TileEpilogue& e) {
  if (rows < 1 || rows > kWideRows || cols <= 32 || cols > 64) return;  // the driver never asks for others
  kWideTiles[rows - 1](cols, taps, seg, a, bp0, bp1, c, ldc, e);
}

STRATA_AVX512 void PackAAvx512(const float* a, int64_t lda, int64_t rows, int64_t kc, float* dst) {
  static_assert(kMr <= 16, "one transpose covers a tile");
  const __mmask16 tile_mask = static_cast<__mmask16>((1u << kMr) - 1);
  for (int64_t r0 = 0; r0 < rows; r0 += kMr, dst += kc * kMr) {
    const int64_t nr = rows - r0 < kMr ? rows - r0 : kMr;
    const float* src = a + r0 * lda;
    // 16 k at a time: load up to 12 rows (missing rows are zero), transpose, and store
    // each k's 12 values contiguously.
    for (int64_t k = 0; k < kc; k += 16) {
      const int64_t nk = kc - k < 16 ? kc - k : 16;
      const __mmask16 kmask = nk == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << nk) - 1);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        r[i] = i < nr ? _mm512_maskz_loadu_ps(kmask, src + i * lda + k) : _mm512_setzero_ps();
      Transpose16x16(r);
      for (int64_t j = 0; j < nk; ++j) _mm512_mask_storeu_ps(dst + (k + j) * kMr, tile_mask, r[j]);
    }
  }
}

}  // namespace strata::sgemm::internal
