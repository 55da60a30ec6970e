// AVX512-VNNI 8-bit GEMM (see int8_gemm.h for the arithmetic).
//
// Micro-tile: 12 rows x 2 panels (32 columns) = 24 int32 accumulators; per group of 4 k, two
// 64-byte B loads and one 4-byte broadcast per row feed 24 vpdpbusd. Work is split over panel
// pairs (each thread reads only its share of B); within a share, blocks of panel pairs whose
// bytes fit half of L2 are swept by every row tile before the next block, so B is read from
// memory once per call and A from L2 once per block.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/kernel_stop.h"
#include "core/large_pages.h"
#include "core/threadpool.h"
#include "cpu/matmul_nbits.h"
#include "cpu/parallel_by_cpu.h"

namespace strata::int8gemm {

namespace {

constexpr int kRows = 12;                   // rows per micro-tile
constexpr int64_t kBlockBytes = 256 << 10;  // B bytes per block of panel pairs (a quarter of a 1 MiB L2)

bool Mul(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r) || *r > (int64_t{1} << 60); }

#define STRATA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

// out[m][p * 16 + c] = A row m . panel p column c, for MR rows and NP panels. A is a packed
// tile: [kq][kRows] groups of 4 bytes, so one pointer serves every row (12 row pointers
// made GCC spill registers in the loop); or, kDirect, MR rows of K bytes lda apart read in
// place (a 1x1 conv's NHWC image: unsigned, K a multiple of 4, no row sums needed), row m's 4
// bytes at step q at a + m * lda + 4q: three moving bases (rows 0, 4, 8) plus lda and 3 * lda
// address all twelve rows. The accumulators are two arrays with the loops unrolled, as in
// the bf16 GEMM, which keeps all 2 * MR of them in registers.
// kDirect reads K as `ntaps` blocks of kq / ntaps groups, block t at row + taps[t] (AMatrix::
// tap_offsets; taps null: one block at 0).
template <int MR, int NP, bool kDirect>
STRATA_VNNI void Tile(const void* a, int64_t lda, int64_t kq, const int8_t* bp, int64_t panel_stride, int32_t* out,
                      const int8_t* pf, const int64_t* taps, int ntaps) {
  __m512i acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc0[m] = acc1[m] = _mm512_setzero_si512();
  const auto* packed = static_cast<const uint32_t*>(a);
  const int64_t lda3 = 3 * lda;
  const int64_t kq_tap = kDirect ? kq / ntaps : kq;
  for (int t = 0; t < (kDirect ? ntaps : 1); ++t) {
    const auto* rows = static_cast<const uint8_t*>(a) + (kDirect && taps ? taps[t] : 0);
    const uint8_t* base[3] = {rows, rows + 4 * lda, rows + 8 * lda};
    const int8_t* bp0 = bp + t * kq_tap * 64;
    const int8_t* bp1 = bp0 + panel_stride;
    const int8_t* pft = pf ? pf + t * kq_tap * 128 : nullptr;
    for (int64_t q = 0; q < kq_tap; ++q) {
      const __m512i b0 = _mm512_load_si512(bp0 + q * 64);
      const __m512i b1 = NP == 2 ? _mm512_load_si512(bp1 + q * 64) : b0;
      if (pft) {
        _mm_prefetch(reinterpret_cast<const char*>(pft + q * 128), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(pft + q * 128 + 64), _MM_HINT_T0);
      }
#pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) {
        int32_t v;
        if constexpr (kDirect) {
          const int64_t off = m % 4 == 0 ? 0 : m % 4 == 1 ? lda : m % 4 == 2 ? 2 * lda : lda3;
          std::memcpy(&v, base[m / 4] + 4 * q + off, 4);
        } else {
          v = static_cast<int32_t>(packed[q * kRows + m]);
        }
        const __m512i av = _mm512_set1_epi32(v);
        acc0[m] = _mm512_dpbusd_epi32(acc0[m], av, b0);
        if constexpr (NP == 2) acc1[m] = _mm512_dpbusd_epi32(acc1[m], av, b1);
      }
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
    _mm512_store_si512(out + m * 32, acc0[m]);
    if constexpr (NP == 2) _mm512_store_si512(out + m * 32 + 16, acc1[m]);
  }
}

using TileFn = void (*)(const void*, int64_t, int64_t, const int8_t*, int64_t, int32_t*, const int8_t*, const int64_t*,
                        int);
template <int NP, bool kDirect, int... MR>
constexpr std::array<TileFn, sizeof...(MR)> TileTable(std::integer_sequence<int, MR...>) {
  return {&Tile<MR + 1, NP, kDirect>...};
}
// [rows - 1]: a tile of exactly the rows there are (a GEMV runs 1-row tiles).
constexpr std::array<TileFn, kRows> kTiles1 = TileTable<1, false>(std::make_integer_sequence<int, kRows>{});
constexpr std::array<TileFn, kRows> kTiles2 = TileTable<2, false>(std::make_integer_sequence<int, kRows>{});
constexpr std::array<TileFn, kRows> kDirect1 = TileTable<1, true>(std::make_integer_sequence<int, kRows>{});
constexpr std::array<TileFn, kRows> kDirect2 = TileTable<2, true>(std::make_integer_sequence<int, kRows>{});

// Whether Gemm reads A where it lies (AMatrix::read_in_place and what the in-place tile needs:
// unsigned A, K a multiple of 4, no row sums).
bool ReadsInPlace(const AMatrix& a, const PackedB& b) {
  return a.read_in_place && !a.packed && !a.produce && !a.a_signed && !b.any_offset() && b.k() == b.kp() &&
         a.taps >= 1 && (a.taps == 1 || (a.tap_offsets && b.k() % (4 * int64_t{a.taps}) == 0));
}

// QuantOut::skip's residual sum on 16 requantized bytes f (integer-valued floats in the type's
// range) and the skip bytes at s: QdqAdd's operations. The products are explicitly rounded so
// they cannot be contracted into the sum (see qdq_add.cc).
// The sum's float before its quantization: relu?((f - za) * sa + (s - zb) * sb) / so.
STRATA_VNNI inline __m512 SkipSum(__m512 f, const uint8_t* s, __mmask16 mask, const QuantOut& q) {
  constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m128i sb = _mm_maskz_loadu_epi8(mask, s);
  const __m512i si = q.skip_signed ? _mm512_cvtepi8_epi32(sb) : _mm512_cvtepu8_epi32(sb);
  // f - za is exact: both are integers of at most 9 bits.
  const __m512 fa = _mm512_mul_round_ps(_mm512_sub_ps(f, _mm512_set1_ps(q.add_za)), _mm512_set1_ps(q.add_sa), kRn);
  const __m512 fb = _mm512_mul_round_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(si, _mm512_set1_epi32(q.add_zb))),
                                        _mm512_set1_ps(q.add_sb), kRn);
  __m512 v = _mm512_add_ps(fa, fb);
  if (q.add_relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
  return _mm512_div_ps(v, _mm512_set1_ps(q.add_so));
}

STRATA_VNNI inline __m512 AddSkip(__m512 f, const uint8_t* s, __mmask16 mask, const QuantOut& q) {
  constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 zero = _mm512_setzero_ps();
  __m512 v = SkipSum(f, s, mask, q);
  v = _mm512_add_ps(_mm512_roundscale_ps(v, kRn), _mm512_set1_ps(q.add_zo));
  v = _mm512_roundscale_ps(v, kRn);
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zero);  // NaN -> 0
  return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(q.add_out_signed ? -128.0f : 0.0f)),
                       _mm512_set1_ps(q.add_out_signed ? 127.0f : 255.0f));
}

// Row r, columns [j0, j0 + cols) of C from the tile's raw dots: the zero-point terms, then a
// masked store of the int32 sums or of their float form (FloatOut).
STRATA_VNNI void StoreRow(const int32_t* raw, const PackedB& b, int64_t j0, int64_t cols, uint32_t za, uint32_t rowterm,
                          int32_t* c, const FloatOut* fout, float* y, const QuantOut* qout = nullptr,
                          uint8_t* yq = nullptr, const uint8_t* skip = nullptr) {
  const __m512i vza = _mm512_set1_epi32(static_cast<int32_t>(za));
  const __m512i vrt = _mm512_set1_epi32(static_cast<int32_t>(rowterm));
  for (int64_t j = 0; j < cols; j += 16) {
    const int64_t n = std::min<int64_t>(16, cols - j);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    __m512i v = _mm512_loadu_si512(raw + j);
    v = _mm512_sub_epi32(v, _mm512_mullo_epi32(vza, _mm512_loadu_si512(b.colsum() + j0 + j)));
    if (b.any_offset()) v = _mm512_add_epi32(v, _mm512_mullo_epi32(vrt, _mm512_loadu_si512(b.offset() + j0 + j)));
    if (qout) {
      const __m512 lo = _mm512_set1_ps(qout->y_signed ? -128.0f : 0.0f);
      const __m512 hi = _mm512_set1_ps(qout->y_signed ? 127.0f : 255.0f);
      if (qout->bias) v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask, qout->bias + j0 + j));
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_maskz_loadu_ps(mask, qout->mult + j0 + j));
      f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_roundscale_ps(_mm512_add_ps(f, _mm512_set1_ps(qout->z)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      if (skip) f = AddSkip(f, skip + j, mask, *qout);
      _mm512_mask_cvtepi32_storeu_epi8(yq + j, mask, _mm512_cvtps_epi32(f));
      continue;
    }
    if (!fout) {
      _mm512_mask_storeu_epi32(c + j, mask, v);
      continue;
    }
    // Explicitly rounded products: never contracted with the additions into FMAs (the nodes this
    // store replaces round each product).
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512 f = _mm512_mul_round_ps(_mm512_cvtepi32_ps(v), _mm512_maskz_loadu_ps(mask, fout->scale + j0 + j), kRn);
    if (fout->bias) f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(mask, fout->bias + j0 + j));
    if (fout->requant) {
      const __m512 zero = _mm512_setzero_ps();
      f = _mm512_div_ps(f, _mm512_set1_ps(fout->q_scale));
      f = _mm512_add_ps(_mm512_roundscale_ps(f, kRn), _mm512_set1_ps(fout->q_zero));
      f = _mm512_roundscale_ps(f, kRn);
      f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), zero);  // NaN -> 0
      f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(fout->q_signed ? -128.0f : 0.0f)),
                        _mm512_set1_ps(fout->q_signed ? 127.0f : 255.0f));
      // float(q - zero) * scale: q - zero is exact (integers of at most 9 bits).
      f = _mm512_mul_round_ps(_mm512_sub_ps(f, _mm512_set1_ps(fout->dq_zero)), _mm512_set1_ps(fout->dq_scale), kRn);
      if (fout->post_bias) f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(mask, fout->post_bias + j0 + j));
    }
    _mm512_mask_storeu_ps(y + j, mask, f);
  }
}

// r[g] <- dword g of each r[i] (a 16 x 16 transpose of 32-bit elements): unpacks within the
// 128-bit lanes, then lane shuffles across groups of four rows.
STRATA_VNNI inline void Transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4q + e], lane L: dword 4L + e of rows 4q .. 4q + 3.
  for (int q = 0; q < 4; ++q) {
    u[4 * q + 0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
    u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i s0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44), s1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44),
                  s3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
    r[e] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + e] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
    r[8 + e] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
  }
}

struct Job {
  const AMatrix* a;
  const PackedB* b;
  int32_t* c;
  int64_t ldc;
  const uint32_t* atiles;  // A packed: tile t at atiles + t * kRows * kq; null: A read in place
  const int32_t* rowsum;   // nullptr: B has no column offset
  int64_t pairs;           // panel pairs (the last may hold one panel)
  int64_t block_pairs;     // pairs per L2 block
  const FloatOut* fout;    // nullptr: int32 into c
  const QuantOut* qout;    // nullptr: int32 into c (or float)
  // qout without per-row terms (one zero point for A, no column offset in B) and with finite
  // multipliers (no NaN to map): QuantRows' short epilogue.
  bool quick_q;
  // quick_q without a residual sum and with every |multiplier| < 0.5 (|x * m| < 2^30: the
  // rounded int32 and its sum with the zero point cannot overflow): the bytes by the pack
  // instructions' saturation instead of float clamps and two narrowing stores.
  bool pack_q;
  // quick_q with a residual sum whose scales are finite and > 0 and keep its float under 2^30
  // (no NaN, no int32 overflow): the sum's bytes saturated by the packs likewise.
  bool pack_skip;
  KernelStop* stop;  // the run's limits, read every 2^20 multiply-adds of a task
};

// The requantizing store of rows [0, nr) of a tile's raw sums for columns [j0, j0 + cols) when
// job.quick_q: the zero-point and bias terms are one per column (za * colsum - bias, mod 2^32
// as StoreRow's sum), the multipliers finite (no NaN fixup), and round(x * m) + z is already
// an integer (no second rounding). The same bytes as StoreRow's QuantOut path.
STRATA_VNNI void QuantRows(const Job& job, const int32_t* raw, int64_t nr, const int64_t* orow, int64_t j0,
                           int64_t cols) {
  const QuantOut& q = *job.qout;
  const PackedB& b = *job.b;
  const int32_t za = job.a->za + (job.a->a_signed ? 128 : 0);
  const __m512 lo = _mm512_set1_ps(q.y_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(q.y_signed ? 127.0f : 255.0f);
  const __m512 vz = _mm512_set1_ps(q.z);
  __mmask16 mask[2];
  __m512i zc[2];
  __m512 mult[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t left = cols - 16 * h;
    mask[h] = left >= 16 ? __mmask16{0xFFFF} : left <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << left) - 1);
    const int64_t j = j0 + 16 * h;
    zc[h] = _mm512_mullo_epi32(_mm512_set1_epi32(za), _mm512_maskz_loadu_epi32(mask[h], b.colsum() + j));
    if (q.bias) zc[h] = _mm512_sub_epi32(zc[h], _mm512_maskz_loadu_epi32(mask[h], q.bias + j));
    mult[h] = _mm512_maskz_loadu_ps(mask[h], q.mult + j);
  }
  const int halves = cols > 16 ? 2 : 1;
  if (job.pack_q || job.pack_skip) {
    // round(x) + z saturated to the type: clamping after the rounding to integer bounds is
    // the same as the float path's clamp (and its second rounding a no-op on integers). The
    // packs interleave 128-bit lanes: dword 4k of the result holds columns 4k..4k+3, dword
    // 4k+1 columns 16+4k..; the permute puts the 32 bytes in order in the low half.
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const bool out_signed = job.pack_skip ? q.add_out_signed : q.y_signed;
    const __m512i vzi = _mm512_set1_epi32(static_cast<int32_t>(job.pack_skip ? q.add_zo : q.z));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const __mmask32 smask = static_cast<__mmask32>(mask[0]) | (static_cast<__mmask32>(mask[1]) << 16);
    for (int64_t m = 0; m < nr; ++m) {
      if (orow[m] < 0) continue;
      const uint8_t* skip = q.skip ? q.skip + orow[m] * q.ldskip + j0 : nullptr;
      __m512i i[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i v = _mm512_sub_epi32(_mm512_load_si512(raw + m * 32 + 16 * h), zc[h]);
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), mult[h]);
        if (job.pack_skip) {  // the conv's byte as the float path makes it, then the sum's float
          f = _mm512_add_ps(_mm512_roundscale_ps(f, kRn), vz);
          f = SkipSum(_mm512_min_ps(_mm512_max_ps(f, lo), hi), skip + 16 * h, mask[h], q);
        }
        i[h] = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, kRn), vzi);
      }
      // Signed to int16 first either way: packus_epi16 reads its words as signed.
      const __m512i w = _mm512_packs_epi32(i[0], i[1]);
      const __m512i bytes = out_signed ? _mm512_packs_epi16(w, w) : _mm512_packus_epi16(w, w);
      const __m256i row = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, bytes));
      // A full row of 32 without the mask: masked byte stores are slow on AMD's cores.
      if (cols >= 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.y + orow[m] * q.ldy + j0), row);
      } else {
        _mm256_mask_storeu_epi8(q.y + orow[m] * q.ldy + j0, smask, row);
      }
    }
    return;
  }
  for (int64_t m = 0; m < nr; ++m) {
    if (orow[m] < 0) continue;
    uint8_t* y = q.y + orow[m] * q.ldy + j0;
    const uint8_t* skip = q.skip ? q.skip + orow[m] * q.ldskip + j0 : nullptr;
    for (int h = 0; h < halves; ++h) {
      const __m512i v = _mm512_sub_epi32(_mm512_load_si512(raw + m * 32 + 16 * h), zc[h]);
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), mult[h]);
      f = _mm512_add_ps(_mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      if (skip) f = AddSkip(f, skip + 16 * h, mask[h], q);
      _mm512_mask_cvtepi32_storeu_epi8(y + 16 * h, mask[h], _mm512_cvtps_epi32(f));
    }
  }
}

STRATA_VNNI void RunPairs(const Job& job, int64_t pair0, int64_t pair1, int64_t row0, int64_t row1) {
  const PackedB& b = *job.b;
  const AMatrix& a = *job.a;
  const int64_t kq = b.kp() / 4, panel_stride = b.kp() * kPanel, panels = b.panels();
  alignas(64) int32_t raw[kRows * 32];
  int64_t pending = 0;
  for (int64_t blk = pair0; blk < pair1; blk += job.block_pairs) {
    const int64_t blk_end = std::min(pair1, blk + job.block_pairs);
    for (int64_t r0 = row0; r0 < row1; r0 += kRows) {
      const int64_t nr = std::min<int64_t>(kRows, row1 - r0);
      if (!job.stop->Continue(pending, nr * b.kp() * (blk_end - blk) * 2 * kPanel)) return;
      const uint32_t* tile = job.atiles ? job.atiles + (r0 / kRows) * kRows * kq : nullptr;
      // The rows of y (QuantOut) the tile's rows go to, -1 for none (QuantOut::row_group).
      int64_t orow[kRows];
      for (int64_t m = 0; m < nr; ++m) {
        const int64_t r = r0 + m;
        const QuantOut* q = job.qout;
        orow[m] = !q || q->row_group <= 0           ? r
                  : r % q->row_group < q->row_valid ? r / q->row_group * q->row_valid + r % q->row_group
                                                    : -1;
      }
      for (int64_t pr = blk; pr < blk_end; ++pr) {
        const int64_t p = pr * 2;
        // The first row tile of a block brings its B in (from memory when the model's weights
        // outgrow the L3): it prefetches the next pair's bytes, contiguous after this pair's,
        // as it goes (a past-the-end prefetch of a lone last panel never faults). Not with a
        // single row tile: a GEMV streams B once, bound by its loads, and the prefetches
        // took their slots (mlp_dynq at 1 thread 0.024-0.028 -> 0.030-0.045 ms with them).
        // gpt2_dynq at 1 thread, alternating processes: 10.7-12.0 -> 9.0-11.1 ms.
        const int8_t* pf = r0 == row0 && row1 - row0 > kRows && pr + 1 < pair1 ? b.panel(p + 2) : nullptr;
        const size_t fn = static_cast<size_t>(nr - 1);
        if (job.atiles) {
          (p + 1 < panels ? kTiles2 : kTiles1)[fn](tile, 0, kq, b.panel(p), panel_stride, raw, pf, nullptr, 1);
        } else {
          (p + 1 < panels ? kDirect2 : kDirect1)[fn](static_cast<const uint8_t*>(a.a) + r0 * a.lda, a.lda, kq,
                                                     b.panel(p), panel_stride, raw, pf, a.tap_offsets, a.taps);
        }
        const int64_t j0 = p * kPanel, cols = std::min<int64_t>(2 * kPanel, b.n() - j0);
        if (job.quick_q) {
          QuantRows(job, raw, nr, orow, j0, cols);
          continue;
        }
        for (int64_t m = 0; m < nr; ++m) {
          const int64_t r = r0 + m;
          const int32_t za = (a.za_rows ? a.za_rows[r] : a.za) + (a.a_signed ? 128 : 0);
          const uint32_t zu = static_cast<uint32_t>(za);
          const uint32_t rowterm =
              job.rowsum ? static_cast<uint32_t>(job.rowsum[r]) - static_cast<uint32_t>(b.k()) * zu : 0;
          if (job.qout) {
            if (orow[m] < 0) continue;
            StoreRow(raw + m * 32, b, j0, cols, zu, rowterm, nullptr, nullptr, nullptr, job.qout,
                     job.qout->y + orow[m] * job.qout->ldy + j0,
                     job.qout->skip ? job.qout->skip + orow[m] * job.qout->ldskip + j0 : nullptr);
          } else if (job.fout) {
            StoreRow(raw + m * 32, b, j0, cols, zu, rowterm, nullptr, job.fout, job.fout->y + r * job.fout->ldy + j0);
          } else {
            StoreRow(raw + m * 32, b, j0, cols, zu, rowterm, job.c + r * job.ldc + j0, nullptr, nullptr);
          }
        }
      }
    }
  }
}

// Panel q of B: 16 columns, K in groups of 4 bytes ([kp / 4][16][4], zero padded), s8 B as is,
// u8 B as B - 128 (the flip of its top bit), and the panel's column sums. Four rows of 16
// bytes are interleaved into one 64-byte group with byte and word unpacks.
STRATA_VNNI void PackPanel(const uint8_t* b, bool b_signed, int64_t k, int64_t n, int64_t kp, int64_t q, int8_t* data,
                           int32_t* colsum) {
  const int64_t j0 = q * kPanel, cols = std::min<int64_t>(kPanel, n - j0);
  const __mmask16 cmask = static_cast<__mmask16>((1u << cols) - 1);
  const __m128i flip = _mm_set1_epi8(b_signed ? 0 : static_cast<char>(0x80));
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i sum = _mm512_setzero_si512();
  int8_t* dst = data + q * kp * kPanel;
  for (int64_t kk = 0; kk < kp; kk += 4) {
    __m128i r[4];
    for (int t = 0; t < 4; ++t)
      r[t] = kk + t < k
                 ? _mm_maskz_mov_epi8(cmask, _mm_xor_si128(_mm_maskz_loadu_epi8(cmask, b + (kk + t) * n + j0), flip))
                 : _mm_setzero_si128();
    const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i t2 = _mm_unpacklo_epi8(r[2], r[3]), t3 = _mm_unpackhi_epi8(r[2], r[3]);
    const __m512i g = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_unpackhi_epi16(t0, t2), _mm_unpacklo_epi16(t0, t2))),
        _mm256_set_m128i(_mm_unpackhi_epi16(t1, t3), _mm_unpacklo_epi16(t1, t3)), 1);
    _mm512_store_si512(dst + kk * kPanel, g);
    sum = _mm512_dpbusd_epi32(sum, ones, g);  // each column's 4 signed bytes
  }
  _mm512_store_si512(colsum + j0, sum);
}

}  // namespace

void PackedB::FreeData::operator()(int8_t* p) const {
  if (mapped) {
    FreeLargePages(p, mapped);
  } else {
    std::free(p);
  }
}

bool Available() {
  static const bool ok = [] {
    const char* env = std::getenv("STRATA_INT8_GEMM");
    if (env && std::strcmp(env, "0") == 0) return false;
    return nbits::HasAvx512Vnni();  // the CPU check MatMulNBits' int8 path uses
  }();
  return ok;
}

Result<PackedB> Pack(const void* b, bool b_signed, int64_t k, int64_t n, const void* zb, int64_t zb_count,
                     ThreadPool* pool) {
  if (k < 0 || n < 0 || (zb_count != 0 && zb_count != 1 && zb_count != n))
    return InvalidArgument("int8 GEMM: bad B geometry k=", k, " n=", n, " zero points=", zb_count);
  PackedB p;
  p.k_ = k;
  p.n_ = n;
  p.kp_ = (k + 3) / 4 * 4;
  const int64_t cols = p.panels() * kPanel;
  int64_t bytes = 0;
  if (Mul(p.kp_, cols, &bytes)) return InvalidArgument("int8 GEMM: B of ", k, " x ", n, " is too large");
  const auto alloc = [](int64_t nbytes) {
    return std::aligned_alloc(64, static_cast<size_t>((nbytes + 63) / 64 * 64));
  };
  {
    // Not zeroed: PackPanel writes every byte.
    size_t mapped = 0;
    void* d = nullptr;
    if (static_cast<size_t>(bytes) >= kLargePagesMinBytes)
      d = AllocateLargePages(static_cast<size_t>(bytes), &mapped, /*zeroed=*/false);
    if (!d) {
      mapped = 0;
      d = alloc(std::max<int64_t>(bytes, 64));
    }
    p.data_ = std::unique_ptr<int8_t[], PackedB::FreeData>(static_cast<int8_t*>(d), PackedB::FreeData{mapped});
  }
  p.colsum_.reset(static_cast<int32_t*>(alloc(std::max<int64_t>(cols * 4, 64))));
  p.offset_.reset(static_cast<int32_t*>(alloc(std::max<int64_t>(cols * 4, 64))));
  if (!p.data_ || !p.colsum_ || !p.offset_)
    return MakeStatus(StatusCode::kOutOfMemory, "int8 GEMM: cannot allocate ", bytes, " bytes of packed B");
  const auto* bu = static_cast<const uint8_t*>(b);
  const auto zero_point = [&](int64_t j) -> int32_t {
    if (zb_count == 0) return 0;
    const int64_t i = zb_count == 1 ? 0 : j;
    return b_signed ? static_cast<const int8_t*>(zb)[i] : static_cast<const uint8_t*>(zb)[i];
  };
  // Panels over the pool, each written whole (padding included), so no memset first.
  const auto panels = [&](int64_t p0, int64_t p1) {
    for (int64_t q = p0; q < p1; ++q) PackPanel(bu, b_signed, k, n, p.kp_, q, p.data_.get(), p.colsum_.get());
  };
  if (pool && pool->num_threads() > 1 && p.panels() > 1) {
    pool->Run(p.panels(), 1, panels);
  } else {
    panels(0, p.panels());
  }
  for (int64_t j = 0; j < cols; ++j) {
    p.offset_[j] = j < n ? (b_signed ? 0 : 128) - zero_point(j) : 0;
    if (p.offset_[j] != 0) p.any_offset_ = true;
  }
  return p;
}

STRATA_VNNI void PackTile(const uint8_t* const* rows, int n, int64_t k, int64_t kp, bool a_signed, uint32_t* tile,
                          int32_t* rowsum) {
  const __m512i flip = _mm512_set1_epi8(a_signed ? static_cast<char>(0x80) : 0);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i sums[kRows];
  for (int i = 0; i < kRows; ++i) sums[i] = _mm512_setzero_si512();
  for (int64_t j = 0; j < kp; j += 64) {
    const int64_t nb = std::min<int64_t>(64, k - j);
    const __mmask64 mask = nb >= 64 ? ~__mmask64{0} : nb > 0 ? (__mmask64{1} << nb) - 1 : 0;
    __m512i r[16];
    for (int i = 0; i < 16; ++i) {
      // Padding bytes are 0: B's padding is 0 too, and the sum skips them.
      r[i] = i < n ? _mm512_maskz_mov_epi8(mask, _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, rows[i] + j), flip))
                   : _mm512_setzero_si512();
    }
    if (rowsum)
      for (int i = 0; i < n; ++i) sums[i] = _mm512_dpbusd_epi32(sums[i], r[i], ones);
    Transpose16x16(r);
    const int64_t groups = std::min<int64_t>(16, (kp - j) / 4);
    for (int64_t g = 0; g < groups; ++g) _mm512_mask_storeu_epi32(tile + (j / 4 + g) * kRows, 0x0FFF, r[g]);
  }
  if (rowsum)
    for (int i = 0; i < n; ++i) rowsum[i] = _mm512_reduce_add_epi32(sums[i]);
}

Result<int64_t> ScratchBytes(const AMatrix& a, const PackedB& b) {
  if (a.packed || ReadsInPlace(a, b)) return 0;
  const int64_t tiles = (a.rows + kRows - 1) / kRows;
  int64_t total = 0;
  if (Mul(tiles * kRows, b.kp(), &total)) return InvalidArgument("int8 GEMM: A of ", a.rows, " rows is too large");
  total = (total + 63) / 64 * 64;
  if (b.any_offset()) total += a.rows * 4;
  return total;
}

Status Gemm(const AMatrix& a, const PackedB& b, int32_t* c, int64_t ldc, void* scratch, ThreadPool* pool,
            const FloatOut* fout, const QuantOut* qout) {
  if (a.rows == 0 || b.n() == 0) return Status::Ok();
  KernelStop stop;
  auto* bytes = static_cast<uint8_t*>(scratch);
  auto* atiles = reinterpret_cast<uint32_t*>(bytes);
  const int64_t tiles = (a.rows + kRows - 1) / kRows;
  int32_t* rowsum = b.any_offset() && !a.packed
                        ? reinterpret_cast<int32_t*>(bytes + (tiles * kRows * b.kp() + 63) / 64 * 64)
                        : nullptr;
  const int threads = pool ? pool->num_threads() : 1;
  // A read where it lies (Tile<..., kDirect>) instead of packed: no packing pass.
  const bool in_place = ReadsInPlace(a, b);
  Job job{&a, &b, c, ldc, atiles, rowsum, (b.panels() + 1) / 2, 1, fout, qout, false, false, false, &stop};
  if (qout && !a.za_rows && !b.any_offset()) {
    job.quick_q = true;
    job.pack_q = !qout->skip;
    for (int64_t j = 0; j < b.n() && job.quick_q; ++j) {
      job.quick_q = std::isfinite(qout->mult[j]);
      job.pack_q = job.pack_q && std::fabs(qout->mult[j]) < 0.5f;
    }
    job.pack_q = job.pack_q && job.quick_q;
    if (job.quick_q && qout->skip) {
      // |(f - za) * sa + (s - zb) * sb| <= 383 (sa + sb): its quotient by so under 2^30.
      const float sa = qout->add_sa, sb = qout->add_sb, so = qout->add_so;
      job.pack_skip = std::isfinite(sa) && std::isfinite(sb) && std::isfinite(so) && sa > 0 && sb > 0 && so > 0 &&
                      384.0 * (static_cast<double>(sa) + sb) / so < 1073741824.0;
    }
  }
  job.block_pairs = std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(1, b.kp() * 2 * kPanel));
  const double macs =
      static_cast<double>(a.rows) * static_cast<double>(b.kp()) * static_cast<double>(b.panels() * kPanel);
  // Packs A's tiles [t0, t1) into the scratch (atiles, rowsum as they are when it runs).
  const auto pack = [&](int64_t t0, int64_t t1) {
    const auto* base = static_cast<const uint8_t*>(a.a);
    const uint8_t* rows[kRows];
    for (int64_t t = t0; t < t1; ++t) {
      const int n = static_cast<int>(std::min<int64_t>(kRows, a.rows - t * kRows));
      for (int i = 0; i < n; ++i) rows[i] = base + (t * kRows + i) * a.lda;
      PackTile(rows, n, b.k(), b.kp(), a.a_signed, atiles + t * kRows * (b.kp() / 4),
               rowsum ? rowsum + t * kRows : nullptr);
    }
  };
  // Many rows against a B that fits in a core's L2 (a conv's positions against its weights):
  // row tiles in fixed regions per CPU, each packed and multiplied by the thread that owns
  // it, in one parallel region. A thread then reads the activation rows it wrote in the
  // previous layer (on 2 vCPUs a read of what the other one wrote runs at about half the
  // rate), and there is no second fork-join for the packing. Column shares would have each
  // thread read all of A.
  if (threads > 1 && macs > 262144.0 && tiles >= 8 * threads && b.kp() * b.panels() * kPanel <= (int64_t{1} << 20)) {
    if (a.packed) {
      atiles = const_cast<uint32_t*>(a.packed);
      rowsum = b.any_offset() ? const_cast<int32_t*>(a.packed_rowsum) : nullptr;
    }
    job.atiles = in_place ? nullptr : atiles;
    job.rowsum = rowsum;
    ParallelRangeByCpu(pool, tiles, 2, [&](int64_t t0, int64_t t1) {
      if (stop.stopped()) return;  // not even A's tiles (a conv's im2col can cost as much)
      if (a.produce) {
        a.produce(a.produce_ctx, t0, t1);
      } else if (!a.packed && !in_place) {
        pack(t0, t1);
      }
      RunPairs(job, 0, job.pairs, t0 * kRows, std::min(a.rows, t1 * kRows));
    });
    return stop.status();
  }
  if (a.packed) {
    atiles = const_cast<uint32_t*>(a.packed);
    rowsum = b.any_offset() ? const_cast<int32_t*>(a.packed_rowsum) : nullptr;
    if (a.produce) {
      if (threads > 1 && tiles > 1) {
        pool->Run(tiles, 1, [&](int64_t t0, int64_t t1) { a.produce(a.produce_ctx, t0, t1); });
      } else {
        a.produce(a.produce_ctx, 0, tiles);
      }
    }
  } else {
    // Whole tiles per task: rows of one tile share cache lines, and two threads writing one
    // tile made a 128 x 3072 A cost more than the GEMM gained from the second thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, kRows * b.kp()));
    if (in_place) {
      // nothing to pack
    } else if (threads > 1 && tiles > grain) {
      pool->Run(tiles, grain, pack);
    } else {
      pack(0, tiles);
    }
  }
  job.atiles = in_place ? nullptr : atiles;
  job.rowsum = rowsum;
  // Small products (under ~256K multiply-adds: a GEMV over 256 KiB of B) stay on the calling
  // thread; past that a GEMV is bound by reading B from L3, which two cores do twice as fast.
  if (threads <= 1 || macs <= 262144.0) {
    RunPairs(job, 0, job.pairs, 0, a.rows);
  } else if (job.pairs >= 2 * threads || a.rows < 2 * kRows) {
    // Over the columns: each thread reads its share of B.
    pool->Run(job.pairs, 1, [&](int64_t p0, int64_t p1) {
      if (!stop.stopped()) RunPairs(job, p0, p1, 0, a.rows);
    });
  } else {
    // Few columns: over the row tiles.
    pool->Run(tiles, 1, [&](int64_t t0, int64_t t1) {
      if (!stop.stopped()) RunPairs(job, 0, job.pairs, t0 * kRows, std::min(a.rows, t1 * kRows));
    });
  }
  return stop.status();
}

}  // namespace strata::int8gemm
