// Internals shared by the SGEMM driver (sgemm.cc) and its AVX-512 micro-kernels
// (sgemm_avx512.cc): blocking constants and the tile entry points.
#pragma once

#include <cstdint>

#include "cpu/act_kind.h"

namespace strata::sgemm::internal {

// Sizes past 2^60 are refused as well as true int64 overflow: products of them still feed
// byte counts (x4) and pointer offsets.
inline bool MulOverflows(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) || r > (int64_t{1} << 60);
}

// Micro-tile: kMr rows x 32 columns = 24 zmm accumulators, leaving 8 registers for the
// two B vectors and the A broadcasts.
inline constexpr int kMr = 12;
// K block: a 32-column B micro-panel slice (kKc x 32 floats = 32 KiB) stays in L1 while
// the M block's A tiles stream past it from L2.
inline constexpr int64_t kKc = 256;
// M block (multiple of kMr): the packed A block (kMc x kKc floats = 204 KiB) stays in L2.
// 17 tiles, so that a 14x14 map's 196 rows are one block: as two (108 + 88 rows) every B
// panel was streamed twice, and at 2 threads, where each thread streams its half of a
// ResNet layer3 1x1 conv's 1-2 MiB B from memory, those convs took ~7% longer
// (resnext50_32x4d, per node).
inline constexpr int64_t kMc = 204;

// What one tile store does. Intermediate K blocks only accumulate; the last one adds the
// bias and clamps.
struct TileEpilogue {
  float alpha = 1.0f;
  bool load_c = false;          // add the tile's current C (accumulating or a later K block)
  const float* bias = nullptr;  // at the tile's first column; nullptr: none
  bool clamp = false;  // apply kind, then the clamp (the last K block)
  float min = 0.0f, max = 0.0f;
  ActKind kind = ActKind::kClamp;
  const float* residual = nullptr;  // tile's first element of R (added with the bias); nullptr: none
  int64_t ldr = 0;
  // B the task reads next (the following panel slice), prefetched along this tile's k loop,
  // 128 bytes per k step, instead of the current panel's rows kPrefetchK ahead: the first tile
  // over a slice then streams the next one from DRAM while it computes (resnet50's late 1x1
  // convs read 1-4 MB of cold B with few rows). The next slice may have fewer k rows (the last
  // K block); prefetching past it is harmless, prefetches never fault. nullptr: the current
  // panel ahead.
  const float* next_b = nullptr;
};

// C[rows, cols] (= or +=) alpha * Apack x Bpanel for rows in [1, kMr], cols in [1, 32].
// ap: [kc][kMr] packed A tile; bp: [kc][32] B panel slice (64-byte aligned).
void TileAvx512(int rows, int cols, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                const TileEpilogue& e);

// Same with A read through pointers (sgemm::IndirectA): K = taps * seg, and the tile's row
// i, segment t starts at a[t * kMr + i]. Covers the whole K in one call.
void TileIndirectAvx512(int rows, int cols, int64_t taps, int64_t seg, const float* const* a, const float* bp, float* c,
                        int64_t ldc, const TileEpilogue& e);

// Rows of the two-panel indirect tile (TileIndirectWideAvx512): 4 x 6 = 24 accumulators.
inline constexpr int kWideRows = 6;

// TileIndirectAvx512 over two adjacent panels (bp0, bp1 = bp0 + K * 32) for rows in [1,
// kWideRows] and cols in (32, 64]: the table's rows start at a[t * kMr + i] as there.
// Same results as two TileIndirectAvx512 calls.
void TileIndirectWideAvx512(int rows, int cols, int64_t taps, int64_t seg, const float* const* a, const float* bp0,
                            const float* bp1, float* c, int64_t ldc, const TileEpilogue& e);

// Packs A[rows, kc] (row stride lda) into ceil(rows/kMr) tiles of [kc][kMr]; rows past
// the end of the last tile are zero.
void PackAAvx512(const float* a, int64_t lda, int64_t rows, int64_t kc, float* dst);

}  // namespace strata::sgemm::internal
