// MatMulNBits accuracy_level 4: A quantized to int8 per row and K block (symmetric, one
// scale per block, as ONNX Runtime's MLAS SQNBit CompInt8), integer dot products of the
// unsigned 4/8-bit codes with the signed int8 activations through AVX512-VNNI vpdpbusd,
// and fp32 accumulation of the per-block results:
//
//   y[m, n] = sum_b sa[m, b] * (sb[n, b] * sum_k qa[m, k] * q[n, k] + offset[n, b] * sum_k qa[m, k])
//
// with offset = -zero_point * sb. The weights use the same repacked layout as the fp32
// kernels (nbits::Pack); A's int8 row is laid out to match how one 32-byte load of 4-bit
// codes unpacks into a 64-byte vector, so B needs no byte shuffles.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/matmul_nbits.h"

namespace strata::nbits {

namespace {

// Codes are consumed in spans of 64 (one zmm of bytes); a k_pad that is an odd number of
// 32-code chunks ends in a 32-code tail handled with ymm.
constexpr int64_t kSpan = 64;

// Within a 64-code span, the 16 int32 lanes of vpdpbusd come in four groups of four lanes
// (16 codes each). For 4-bit codes, one 32-byte load holds chunks c0 and c1 as
// [c0 lo | c1 lo] and [c0 hi | c1 hi] nibbles, i.e. K offsets {0, 32, 16, 48} per group.
// 8-bit codes are in K order: {0, 16, 32, 48}.
inline int64_t GroupOffset(int bits, int g) {
  static constexpr int64_t k4[4] = {0, 32, 16, 48};
  return bits == 4 ? k4[g] : 16 * g;
}

// Position of code k (relative to its span start) in the vector layout described above.
inline int64_t SpanPos(int bits, int64_t k) {
  if (bits != 4) return k;
  const int64_t c = k / 32, j = k % 32;
  return (j < 16 ? 0 : 32) + c * 16 + (j % 16);
}

}  // namespace

bool HasAvx512Vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

void QuantizeA(const Packed& w, const float* a, int64_t M, QuantA* qa) {
  const Params& p = w.p;
  const int64_t bs = p.block_size, nb = w.k_pad / bs, spans = w.k_pad / kSpan;
  const bool tail = (w.k_pad % kSpan) != 0;
  qa->M = M;
  qa->lane_stride = spans * 16 + (tail ? 8 : 0);
  qa->q.assign(static_cast<size_t>(M * w.k_pad), 0);
  qa->lane_scale.assign(static_cast<size_t>(M * qa->lane_stride), 0.0f);
  qa->bsum.assign(static_cast<size_t>(M * w.nb_stride), 0.0f);
  std::vector<float> sa(static_cast<size_t>(nb));
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * w.k_pad;
    int8_t* q = qa->q.data() + m * w.k_pad;
    float* bsum = qa->bsum.data() + m * w.nb_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const float* ab = row + b * bs;
      float amax = 0;
      for (int64_t i = 0; i < bs; ++i) amax = std::max(amax, std::fabs(ab[i]));
      // Symmetric: the block's largest magnitude maps to 127 (no -128, so sums stay symmetric).
      const float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
      sa[b] = scale;
      int32_t isum = 0;
      for (int64_t i = 0; i < bs; ++i) {
        const int64_t k = b * bs + i, span0 = k / kSpan * kSpan;
        const bool in_tail = tail && span0 + kSpan > w.k_pad;
        const int32_t v = std::clamp(static_cast<int32_t>(std::lrintf(ab[i] * inv)), -127, 127);
        q[in_tail ? k : span0 + SpanPos(p.bits, k - span0)] = static_cast<int8_t>(v);
        isum += v;
      }
      // The zero-point term uses the sum of the quantized block, consistent with the dot.
      bsum[b] = scale * static_cast<float>(isum);
    }
    float* lanes = qa->lane_scale.data() + m * qa->lane_stride;
    for (int64_t s = 0; s < spans; ++s)
      for (int l = 0; l < 16; ++l) lanes[16 * s + l] = sa[(s * kSpan + GroupOffset(p.bits, l / 4)) / bs];
    if (tail)  // ymm lanes 0-3: codes 0-15, 4-7: codes 16-31 of the last chunk (K order)
      for (int l = 0; l < 8; ++l) lanes[16 * spans + l] = sa[(spans * kSpan + 16 * (l / 4)) / bs];
  }
}

#define STRATA_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

namespace {

STRATA_VNNI inline float Hsum256Vnni(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

STRATA_VNNI inline float OffsetDotVnni(const float* o, const float* bsum, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(o + i), _mm512_loadu_ps(bsum + i), acc);
  return _mm512_reduce_add_ps(acc);
}

// 64 codes of one column starting at k0, in the lane layout that A's int8 row uses.
STRATA_VNNI inline __m512i SpanCodes(const uint8_t* col, int bits, int64_t k0) {
  if (bits == 8) return _mm512_loadu_si512(col + k0);
  // [c0 | c1] in both halves, then the upper half shifted to the high nibbles.
  const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + k0 / 2)));
  return _mm512_and_si512(_mm512_mask_srli_epi16(x, 0xFFFF0000u, x, 4), _mm512_set1_epi8(0x0F));
}

// The 32 codes of the tail chunk at kt in K order.
STRATA_VNNI inline __m256i TailCodes(const uint8_t* col, int bits, int64_t kt) {
  if (bits == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + kt));
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + kt / 2));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
}

// The weight scales of the span's lanes. Lane group g covers codes k0 + GroupOffset(g);
// `idx` maps each lane to its block relative to k0 / bs.
STRATA_VNNI inline __m512 SpanScales(const float* s, int64_t bs, int64_t k0, __m512i idx) {
  if (bs >= kSpan) return _mm512_set1_ps(s[k0 / bs]);
  const __m128 v = bs == 32 ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + k0 / bs)))
                            : _mm_loadu_ps(s + k0 / bs);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

STRATA_VNNI inline __m256 TailScales(const float* s, int64_t bs, int64_t kt) {
  if (bs >= 32) return _mm256_set1_ps(s[kt / bs]);
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(s[kt / bs])), _mm_set1_ps(s[kt / bs + 1]), 1);
}

// Rows [m0, m0 + MR) x columns [n0, n0 + cols), cols <= 4, over all of K.
template <int MR>
STRATA_VNNI void TileInt8(const Packed& w, const QuantA& qa, int64_t m0, int64_t n0, int64_t cols, float* y) {
  const Params& p = w.p;
  const int bits = static_cast<int>(p.bits);
  const int64_t bs = p.block_size, spans = w.k_pad / kSpan;
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
  __m512i idx = _mm512_setzero_si512();
  if (bs < kSpan) {
    alignas(64) int32_t lanes[16];
    for (int l = 0; l < 16; ++l) lanes[l] = static_cast<int32_t>(GroupOffset(bits, l / 4) / bs);
    idx = _mm512_load_si512(lanes);
  }
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t s = 0; s < spans; ++s) {
    const int64_t k0 = s * kSpan;
    __m512i av[MR];
    for (int r = 0; r < MR; ++r) av[r] = _mm512_loadu_si512(arow[r] + k0);
    for (int j = 0; j < 4; ++j) {
      const __m512i b = SpanCodes(col[j], bits, k0);
      const __m512 sb = SpanScales(sc[j], bs, k0, idx);
      for (int r = 0; r < MR; ++r) {
        const __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, b, av[r]));
        acc[r][j] = _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_loadu_ps(alane[r] + 16 * s), sb), acc[r][j]);
      }
    }
  }
  float tail[MR][4] = {};
  if (w.k_pad % kSpan) {
    const int64_t kt = spans * kSpan;
    for (int j = 0; j < 4; ++j) {
      const __m256i b = TailCodes(col[j], bits, kt);
      const __m256 sb = TailScales(sc[j], bs, kt);
      for (int r = 0; r < MR; ++r) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arow[r] + kt));
        const __m256 d = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), b, av));
        tail[r][j] = Hsum256Vnni(_mm256_mul_ps(d, _mm256_mul_ps(_mm256_loadu_ps(alane[r] + 16 * spans), sb)));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    const float* bsum = qa.bsum.data() + (m0 + r) * w.nb_stride;
    for (int j = 0; j < cols; ++j) {
      const int64_t n = n0 + j;
      y[(m0 + r) * p.N + n] = _mm512_reduce_add_ps(acc[r][j]) + tail[r][j] +
                              OffsetDotVnni(w.offset.data() + n * w.nb_stride, bsum, w.nb_stride) + w.bias[n];
    }
  }
}

}  // namespace

STRATA_VNNI void MatMulInt8Vnni(const Packed& w, const QuantA& qa, int64_t n0, int64_t n1, float* y) {
  for (int64_t n = n0; n < n1; n += 4) {
    const int64_t cols = std::min<int64_t>(4, n1 - n);
    int64_t m = 0;
    for (; m + 4 <= qa.M; m += 4) TileInt8<4>(w, qa, m, n, cols, y);
    switch (qa.M - m) {
      case 3:
        TileInt8<3>(w, qa, m, n, cols, y);
        break;
      case 2:
        TileInt8<2>(w, qa, m, n, cols, y);
        break;
      case 1:
        TileInt8<1>(w, qa, m, n, cols, y);
        break;
      default:
        break;
    }
  }
}

}  // namespace strata::nbits
