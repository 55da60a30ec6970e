// MatMulNBits accuracy_level 4: A quantized to int8 per row and K block (symmetric, one
// scale per block, as ONNX Runtime's MLAS SQNBit CompInt8), integer dot products of the
// unsigned 4/8-bit codes with the signed int8 activations through AVX512-VNNI vpdpbusd,
// and fp32 accumulation of the per-block results:
//
//   y[m, n] = sum_b sa[m, b] * sb[n, b] * (sum_{k in b} qa[m, k] * q[n, k] - zp[n, b] * sum_{k in b} qa[m, k])
//
// Weights are in the int8 layout (Packed, matmul_nbits.h): groups of 4 columns, K in steps
// of 128 codes. Per step and column, one 64-byte load of 4-bit codes (two of 8-bit) gives
// two byte vectors whose 128-bit lane i holds codes 32i + 16h + [0, 16); A's int8 row is
// stored in the same order, so two vpdpbusd give 16 int32 partial sums in which lane i
// belongs to codes 32i + [0, 32). The four columns' vectors are then reduced with in-lane
// unpacks to one vector whose slot 4i + c is column c's dot over those 32 codes: one
// convert, one FMA for the zero point (the slot's sum of A's int8 values is precomputed
// with A) and one FMA with the combined scales sa * sb cover 16 (block, column) pairs,
// whatever the block size (the packed scales are per slot). Blocks of 16 split each step
// into two such vectors. The zero point needs no fp32 offset array: zp8 is one byte per slot.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/matmul_nbits.h"

namespace strata::nbits {

namespace {

constexpr int64_t kGroup = 4;  // columns per group of the int8 layout

// Where a step's scales and zero points are (see Packed::group_slots): 16 per step (blocks
// of 32, 64), 32 per step (blocks of 16), or 4 per block (blocks >= 128, one per step).
constexpr int kSlotsPerStep = 0, kSlotsSplit = 1, kSlotsWide = 2;
inline int SlotMode(int64_t block_size) {
  return block_size == 16 ? kSlotsSplit : block_size >= kInt8Step ? kSlotsWide : kSlotsPerStep;
}

}  // namespace

bool HasAvx512Vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

#define STRATA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

namespace {

// 16 floats of a row of K at k; those past K (the padding to k_pad) read as zeros, so A
// needs no padded copy.
STRATA_VNNI inline __m512 LoadRow(const float* row, int64_t k, int64_t K) {
  const int64_t left = K - k;
  if (left >= 16) return _mm512_loadu_ps(row + k);
  return _mm512_maskz_loadu_ps(left > 0 ? static_cast<__mmask16>((1u << left) - 1) : 0, row + std::min(k, K));
}

}  // namespace

int64_t QuantAFloats(const Packed& w, int64_t M) {
  // q first: k_pad is a multiple of kInt8Step, so its M * k_pad bytes are whole floats and
  // sa starts 64-byte aligned.
  return M * (w.k_pad / 4 + 2 * w.steps * w.lane_slots);
}

STRATA_VNNI void QuantizeA(const Packed& w, const float* a, int64_t M, float* scratch, QuantA* qa) {
  const int64_t bs = w.p.block_size, nb = w.k_pad / bs, L = w.lane_slots;
  qa->M = M;
  qa->row_slots = w.steps * L;
  qa->q = reinterpret_cast<int8_t*>(scratch);
  qa->sa = scratch + M * w.k_pad / 4;
  qa->sq = qa->sa + M * qa->row_slots;
  // Every entry of q and sa is written below; sq is summed into (blocks >= 32: two chunks add into a slot).
  std::fill_n(qa->sq, M * qa->row_slots, 0.0f);
  const int64_t K = w.p.K;
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * K;
    int8_t* q = qa->q + m * w.k_pad;
    float* sa = qa->sa + m * qa->row_slots;
    float* sq = qa->sq + m * qa->row_slots;
    for (int64_t b = 0; b < nb; ++b) {
      __m512 vmax = _mm512_setzero_ps();
      for (int64_t i = 0; i < bs; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(LoadRow(row, b * bs + i, K)));
      const float amax = _mm512_reduce_max_ps(vmax);
      // Symmetric: the block's largest magnitude maps to 127 (no -128, so sums stay symmetric).
      const __m512 vinv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      const __m128 scale = _mm_set1_ps(amax / 127.0f);
      for (int64_t i = 0; i < bs; i += 16) {
        // Round to nearest even (the MXCSR default), as lrintf; |v| <= 127 by construction.
        const __m512i v = _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(LoadRow(row, b * bs + i, K), vinv)),
                                           _mm512_set1_epi32(-127));
        const int64_t k = b * bs + i, st = k / kInt8Step, r = k % kInt8Step, li = r / 32, h = (r % 32) / 16;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + st * kInt8Step + 64 * h + 16 * li), _mm512_cvtsepi32_epi8(v));
        // The slot's A scale (4 column copies) and the sum of its int8 values (the zero-point term
        // uses the quantized values, consistent with the dot).
        const int64_t slot = st * L + (L == 32 ? 16 * h : 0) + 4 * li;
        _mm_storeu_ps(sa + slot, scale);
        const __m128 cs = _mm_set1_ps(static_cast<float>(_mm512_reduce_add_epi32(v)));
        _mm_storeu_ps(sq + slot, _mm_add_ps(_mm_loadu_ps(sq + slot), cs));
      }
    }
  }
}

namespace {

// The two code vectors of one column and step (see Packed).
template <int kBits>
STRATA_VNNI inline void StepCodes(const uint8_t* p, __m512i* b0, __m512i* b1) {
  if constexpr (kBits == 8) {
    *b0 = _mm512_loadu_si512(p);
    *b1 = _mm512_loadu_si512(p + 64);
  } else {
    const __m512i x = _mm512_loadu_si512(p);
    const __m512i m = _mm512_set1_epi8(0x0F);
    *b0 = _mm512_and_si512(x, m);
    *b1 = _mm512_and_si512(_mm512_srli_epi16(x, 4), m);
  }
}

// Four columns' int32 vectors reduced to one: slot 4i + c = the sum of 128-bit lane i of d[c].
STRATA_VNNI inline __m512i Reduce4(__m512i d0, __m512i d1, __m512i d2, __m512i d3) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(d0, d1), _mm512_unpackhi_epi32(d0, d1));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(d2, d3), _mm512_unpackhi_epi32(d2, d3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

template <bool kFloatZp>
STRATA_VNNI inline __m512 LoadZp(const Packed& w, size_t at) {
  if constexpr (kFloatZp) {
    return _mm512_loadu_ps(w.zpf.data() + at);
  } else {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&w.zp8[at]))));
  }
}

template <bool kFloatZp>
STRATA_VNNI inline __m512 LoadZpWide(const Packed& w, size_t at) {
  if constexpr (kFloatZp) {
    return _mm512_broadcast_f32x4(_mm_loadu_ps(w.zpf.data() + at));
  } else {
    int32_t four;
    std::memcpy(&four, &w.zp8[at], 4);
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set1_epi32(four)));
  }
}

// Steps to prefetch the codes and scales ahead: a GEMV streams them from L3 or memory
// (measured: 6 steps beat 0, 3 and 12 by 5-15% on weights past the L3).
constexpr int64_t kPrefetchSteps = 6;

// Rows [m0, m0 + MR) x the 4 columns of each of groups [g, g + NG) over steps [s0, s1). The
// first K chunk (s0 == 0) stores its sums plus the bias, later chunks add theirs. NG > 1
// (GEMV) reads NG groups' weights side by side: NG concurrent streams keep more cache
// misses in flight than one, which a single core needs to approach the memory bandwidth.
template <int kBits, int kMode, bool kFloatZp, int MR, int NG = 1>
STRATA_VNNI void TileInt8(const Packed& w, const QuantA& qa, int64_t m0, int64_t g, int64_t s0, int64_t s1, float* y) {
  constexpr int64_t kStepBytes = kInt8Step * kBits / 8;  // code bytes per step and column
  constexpr bool kSplit = kMode == kSlotsSplit, kWide = kMode == kSlotsWide;
  constexpr int64_t L = kSplit ? 32 : 16;  // A's slots per step
  const int64_t N = w.p.N;
  const int log2_bs = __builtin_ctzll(static_cast<uint64_t>(w.p.block_size));  // no division per step
  const uint8_t* codes[NG];
  size_t slot0[NG];
  const float* sc[NG];
  for (int j = 0; j < NG; ++j) {
    codes[j] = w.codes.data() + (g + j) * w.steps * kGroup * kStepBytes;
    slot0[j] = static_cast<size_t>((g + j) * w.group_slots);
    sc[j] = w.scale.data() + slot0[j];
  }
  const int8_t* arow[MR];
  const float *sa[MR], *sq[MR];
  __m512 acc[NG][MR];
  for (int r = 0; r < MR; ++r) {
    arow[r] = qa.q + (m0 + r) * w.k_pad;
    sa[r] = qa.sa + (m0 + r) * qa.row_slots;
    sq[r] = qa.sq + (m0 + r) * qa.row_slots;
    for (int j = 0; j < NG; ++j) acc[j][r] = _mm512_setzero_ps();
  }
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t s = s0; s < s1; ++s) {
    for (int j = 0; j < NG; ++j) {
      const uint8_t* cs = codes[j] + s * kGroup * kStepBytes;
      for (int64_t line = 0; line < kGroup * kStepBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(cs + kPrefetchSteps * kGroup * kStepBytes + line), _MM_HINT_T0);
      if constexpr (!kWide)  // wide blocks: 16 bytes of scales per block, read from the same line for steps
        _mm_prefetch(reinterpret_cast<const char*>(sc[j] + (s + kPrefetchSteps) * L), _MM_HINT_T0);
      __m512i b[kGroup][2];
      for (int c = 0; c < kGroup; ++c) StepCodes<kBits>(cs + c * kStepBytes, &b[c][0], &b[c][1]);
      for (int h = 0; h < (kSplit ? 2 : 1); ++h) {
        __m512 sv, zv;
        if constexpr (kWide) {
          // The step lies in one block: its 4 columns' scales and zero points on every lane.
          const int64_t at = ((s * kInt8Step) >> log2_bs) * kGroup;
          sv = _mm512_broadcast_f32x4(_mm_loadu_ps(sc[j] + at));
          zv = LoadZpWide<kFloatZp>(w, slot0[j] + at);
        } else {
          sv = _mm512_loadu_ps(sc[j] + s * L + 16 * h);
          zv = LoadZp<kFloatZp>(w, slot0[j] + s * L + 16 * h);
        }
        for (int r = 0; r < MR; ++r) {
          __m512i d[kGroup];
          if constexpr (kSplit) {
            const __m512i av = _mm512_loadu_si512(arow[r] + s * kInt8Step + 64 * h);
            for (int c = 0; c < kGroup; ++c) d[c] = _mm512_dpbusd_epi32(zero, b[c][h], av);
          } else {
            const __m512i a0 = _mm512_loadu_si512(arow[r] + s * kInt8Step);
            const __m512i a1 = _mm512_loadu_si512(arow[r] + s * kInt8Step + 64);
            for (int c = 0; c < kGroup; ++c)
              d[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, b[c][0], a0), b[c][1], a1);
          }
          const int64_t at = s * L + 16 * h;
          __m512 f = _mm512_cvtepi32_ps(Reduce4(d[0], d[1], d[2], d[3]));
          f = _mm512_fnmadd_ps(zv, _mm512_loadu_ps(sq[r] + at), f);
          acc[j][r] = _mm512_fmadd_ps(f, _mm512_mul_ps(sv, _mm512_loadu_ps(sa[r] + at)), acc[j][r]);
        }
      }
    }
  }
  // Slot 4i + c holds column c: sum the four 128-bit lanes.
  for (int j = 0; j < NG; ++j) {
    const int64_t n0 = (g + j) * kGroup, cols = std::min<int64_t>(kGroup, N - n0);
    for (int r = 0; r < MR; ++r) {
      const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(acc[j][r]),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j][r]), 1)));
      const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
      alignas(16) float out[4];
      _mm_store_ps(out, h4);
      float* yr = y + (m0 + r) * N + n0;
      for (int c = 0; c < cols; ++c) yr[c] = s0 == 0 ? out[c] + w.bias[n0 + c] : yr[c] + out[c];
    }
  }
}

// Rows per register tile: 4 rows x 4 columns keep B's 8 code vectors in registers across rows.
constexpr int kRows = 4;
// A GEMV whose weights exceed kGemvStreamsBytes reads kGemvGroups groups side by side (see
// TileInt8). Measured (1 thread, int4/int8 8192x8192, in-process A/B, p10): 4 streams 11-28%
// faster than 1, 2 streams 2-14%; on weights that stay in the L3 (2048^2, 4096^2 int4) 4
// streams are 5-30% slower (the groups' power-of-two strides share L1 sets), hence the
// threshold kGemvStreamsBytes (matmul_nbits.h), half a 32 MiB L3 (the size the OS reports in
// a VM is not the guest's share).
constexpr int kGemvGroups = 4;

// B bytes of the groups that one pass over the row tiles reuses: they stay in L2 while a
// row tile's A (int8 values, scales and sums: 2 bytes per code and row) stays in L1.
constexpr int64_t kGroupBlockBytes = 256 << 10;

template <int kBits, int kMode, bool kFloatZp>
STRATA_VNNI void MatMulInt8Chunk(const Packed& w, const QuantA& qa, int64_t g0, int64_t g1, int64_t s0, int64_t s1,
                                 float* y, bool streams) {
  const int64_t zp_bytes = kFloatZp ? 4 : 1;
  const int64_t group_bytes = (s1 - s0) * (kGroup * kInt8Step * kBits / 8 + w.group_slots / w.steps * (4 + zp_bytes));
  // One row tile (M <= 4) reuses nothing: no blocking (it would split GEMV group pairs).
  const int64_t block = qa.M <= kRows ? g1 - g0 : std::max<int64_t>(1, kGroupBlockBytes / group_bytes);
  for (int64_t gb = g0; gb < g1; gb += block) {
    const int64_t ge = std::min(g1, gb + block);
    int64_t m = 0;
    for (; m + kRows <= qa.M; m += kRows)
      for (int64_t g = gb; g < ge; ++g) TileInt8<kBits, kMode, kFloatZp, kRows>(w, qa, m, g, s0, s1, y);
    int64_t g = gb;
    // A GEMV on weights that the last-level cache does not keep: groups side by side.
    if (qa.M == 1 && streams)
      for (; g + kGemvGroups <= ge; g += kGemvGroups)
        TileInt8<kBits, kMode, kFloatZp, 1, kGemvGroups>(w, qa, 0, g, s0, s1, y);
    for (; g < ge; ++g) {
      switch (qa.M - m) {
        case 3:
          TileInt8<kBits, kMode, kFloatZp, 3>(w, qa, m, g, s0, s1, y);
          break;
        case 2:
          TileInt8<kBits, kMode, kFloatZp, 2>(w, qa, m, g, s0, s1, y);
          break;
        case 1:
          TileInt8<kBits, kMode, kFloatZp, 1>(w, qa, m, g, s0, s1, y);
          break;
        default:
          break;
      }
    }
  }
}

// K steps per chunk when there are several row tiles: a 4-row tile's A then takes 16 KiB
// of L1 (K = 2048), whatever K is.
constexpr int64_t kChunkSteps = 16;

template <int kBits, int kMode, bool kFloatZp>
STRATA_VNNI void MatMulInt8Groups(const Packed& w, const QuantA& qa, int64_t g0, int64_t g1, float* y, bool streams) {
  // A GEMV has one row tile: nothing to reuse, so no chunks (each would store y again).
  const int64_t chunk = qa.M > kRows ? kChunkSteps : w.steps;
  for (int64_t s0 = 0; s0 < w.steps; s0 += chunk)
    MatMulInt8Chunk<kBits, kMode, kFloatZp>(w, qa, g0, g1, s0, std::min(w.steps, s0 + chunk), y, streams);
}

using GroupsFn = void (*)(const Packed&, const QuantA&, int64_t, int64_t, float*, bool);

GroupsFn GroupsFor(const Packed& w) {
  const int mode = SlotMode(w.p.block_size);
  const bool fzp = !w.zpf.empty();
#define STRATA_PICK(bits, mode) (fzp ? MatMulInt8Groups<bits, mode, true> : MatMulInt8Groups<bits, mode, false>)
#define STRATA_PICK_MODE(bits)                           \
  (mode == kSlotsSplit  ? STRATA_PICK(bits, kSlotsSplit) \
   : mode == kSlotsWide ? STRATA_PICK(bits, kSlotsWide)  \
                        : STRATA_PICK(bits, kSlotsPerStep))
  return w.p.bits == 4 ? STRATA_PICK_MODE(4) : STRATA_PICK_MODE(8);
#undef STRATA_PICK_MODE
#undef STRATA_PICK
}

}  // namespace

void MatMulInt8Vnni(const Packed& w, const QuantA& qa, int64_t n0, int64_t n1, float* y, bool streams) {
  if (n1 <= n0) return;
  GroupsFor(w)(w, qa, n0 / kGroup, (n1 + kGroup - 1) / kGroup, y, streams);
}

}  // namespace strata::nbits
