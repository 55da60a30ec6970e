#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/int_conv_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/threadpool.h"
#include "cpu/int8_gemm.h"

namespace strata::int8conv {
namespace {

#define STRATA_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

// Runs body(b, e) over [0, n) split over the pool when there is more than `grain` of it.
template <typename F>
void Split(ThreadPool* pool, int64_t n, int64_t grain, const F& body) {
  if (pool && n > grain) {
    pool->ParallelFor(n, grain, body);
  } else if (n > 0) {
    body(0, n);
  }
}

constexpr int64_t kTile = 64;  // transpose tile: 64 positions x 64 channels (8 KiB in, 8 KiB out)

// Short runs (a 7x7 stem's 21-byte tap rows, a 3-channel tap) as one 64-byte move: a libc call
// per run, or a masked store, cost more than the copy. The store is whole: it may write up to
// 63 bytes past the run, which the caller writes next (runs go in order) or which is the
// slack kImRowSlack its buffer has. The load is masked: it must not read past the input.
// (Im2Row runs only where the VNNI GEMM does, so AVX512-BW is there.)
STRATA_AVX512BW inline void Copy(uint8_t* d, const uint8_t* s, int64_t n) {
  if (n > 64) {
    std::memcpy(d, s, static_cast<size_t>(n));
    return;
  }
  const __mmask64 m = n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  _mm512_storeu_si512(d, _mm512_maskz_loadu_epi8(m, s));
}
STRATA_AVX512BW inline void Fill(uint8_t* d, uint8_t v, int64_t n) {
  if (n > 64) {
    std::memset(d, v, static_cast<size_t>(n));
    return;
  }
  _mm512_storeu_si512(d, _mm512_set1_epi8(static_cast<char>(v)));
}

// dst[j * dst_stride + i] = src[i * src_stride + j] for a 16 x 16 block of bytes: four rounds of
// SSE2 unpacks (8-, 16-, 32-, 64-bit), 64 shuffles instead of 256 single-byte moves.
inline void Transpose16x16Bytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride) {
  __m128i r[16], t[16], u[16], v[2][8];
  for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * src_stride));
  for (int k = 0; k < 8; ++k) {  // t[2k], t[2k + 1]: rows 2k, 2k + 1 interleaved, columns 0-7 and 8-15
    t[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
  }
  for (int m = 0; m < 4; ++m) {  // u[4m + j]: rows 4m .. 4m + 3, columns 4j .. 4j + 3
    u[4 * m] = _mm_unpacklo_epi16(t[4 * m], t[4 * m + 2]);
    u[4 * m + 1] = _mm_unpackhi_epi16(t[4 * m], t[4 * m + 2]);
    u[4 * m + 2] = _mm_unpacklo_epi16(t[4 * m + 1], t[4 * m + 3]);
    u[4 * m + 3] = _mm_unpackhi_epi16(t[4 * m + 1], t[4 * m + 3]);
  }
  for (int g = 0; g < 2; ++g)  // v[g][2j (+1)]: rows 8g .. 8g + 7, columns 4j, 4j + 1 (4j + 2, 4j + 3)
    for (int j = 0; j < 4; ++j) {
      v[g][2 * j] = _mm_unpacklo_epi32(u[8 * g + j], u[8 * g + 4 + j]);
      v[g][2 * j + 1] = _mm_unpackhi_epi32(u[8 * g + j], u[8 * g + 4 + j]);
    }
  for (int x = 0; x < 8; ++x) {  // columns lo and lo + 1, all 16 rows
    const int lo = (x / 2) * 4 + (x % 2) * 2;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + lo * dst_stride), _mm_unpacklo_epi64(v[0][x], v[1][x]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (lo + 1) * dst_stride), _mm_unpackhi_epi64(v[0][x], v[1][x]));
  }
}

bool HasVbmi() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
  }();
  return ok;
}

// 2-4 channels (an RGB image's stem, where the 16 x 16 transposes have no whole block): 16
// positions of every channel in one vector, interleaved by one byte permute (AVX512-VBMI).
// Positions [p0, p1).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void ToNhwcFewChannels(const uint8_t* x, int64_t C,
                                                                              int64_t positions, int64_t p0, int64_t p1,
                                                                              uint8_t* xt) {
  alignas(64) uint8_t order[64];
  for (int j = 0; j < 64; ++j) order[j] = static_cast<uint8_t>(j < 16 * C ? (j % C) * 16 + j / C : 0);
  const __m512i idx = _mm512_load_si512(order);
  const __mmask64 out_mask = C == 4 ? ~__mmask64{0} : (__mmask64{1} << (16 * C)) - 1;
  auto lane = [&](int64_t c, int64_t p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + c * positions + p));
  };
  int64_t p = p0;
  for (; p + 16 <= p1; p += 16) {
    __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(lane(0, p)), lane(1, p), 1);
    if (C > 2) v = _mm512_inserti32x4(v, lane(2, p), 2);
    if (C > 3) v = _mm512_inserti32x4(v, lane(3, p), 3);
    _mm512_mask_storeu_epi8(xt + p * C, out_mask, _mm512_permutexvar_epi8(idx, v));
  }
  for (; p < p1; ++p)
    for (int64_t c = 0; c < C; ++c) xt[p * C + c] = x[c * positions + p];
}

}  // namespace

void ToNhwc(const uint8_t* x, int64_t C, int64_t positions, uint8_t* xt, ThreadPool* pool) {
  if (C == 1) {
    std::memcpy(xt, x, static_cast<size_t>(positions));
    return;
  }
  if (C <= 4 && HasVbmi()) {
    // About 64 KiB of bytes per chunk.
    Split(pool, (positions + 4095) / 4096, 16 / C, [&](int64_t b0, int64_t b1) {
      ToNhwcFewChannels(x, C, positions, b0 * 4096, std::min(positions, b1 * 4096), xt);
    });
    return;
  }
  const int64_t blocks = (positions + kTile - 1) / kTile;
  // About 32 KiB of bytes per chunk: small images stay on this thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, kTile * C));
  Split(pool, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t p0 = b * kTile, p1 = std::min(positions, p0 + kTile);
      // Whole 16 x 16 blocks by SSE2 transposes, the edges one byte at a time.
      const int64_t pf = p0 + (p1 - p0) / 16 * 16, cf = C / 16 * 16;
      for (int64_t c0 = 0; c0 < cf; c0 += 16)
        for (int64_t p = p0; p < pf; p += 16)
          Transpose16x16Bytes(x + c0 * positions + p, positions, xt + p * C + c0, C);
      for (int64_t p = p0; p < p1; ++p) {
        uint8_t* dst = xt + p * C;
        for (int64_t c = p < pf ? cf : 0; c < C; ++c) dst[c] = x[c * positions + p];
      }
    }
  });
}

void ToNchw(const uint8_t* xt, int64_t C, int64_t positions, uint8_t* x, ThreadPool* pool) {
  // xt is [positions][C]: its transpose is ToNhwc's with the two dims swapped.
  ToNhwc(xt, positions, C, x, pool);
}

namespace {

// One masked move of a kernel row's run (n <= kBytes bytes), or kBytes of `pad`; the store is
// whole (kIm2RowSlack covers the excess past a tile's last row).
template <int kBytes>
STRATA_AVX512BW inline void MoveRun(uint8_t* d, const uint8_t* s, int64_t n, bool in, uint8_t pad) {
  if constexpr (kBytes == 16) {
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d),
                     in ? _mm_maskz_loadu_epi8(m, s) : _mm_set1_epi8(static_cast<char>(pad)));
  } else {
    const __mmask32 m = n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d),
                        in ? _mm256_maskz_loadu_epi8(m, s) : _mm256_set1_epi8(static_cast<char>(pad)));
  }
}

// Im2RowRange for 2-D taps whose kernel row is one run of at most 32 bytes (a 3x3 stem of 3
// channels: 9; a 7x7 one: 21): one masked 16- or 32-byte load and store per kernel row of an
// interior position, in a loop with few live values (the general loop's spills were most of
// such a stem's time).
template <int kBytes>
STRATA_AVX512BW void Im2RowShortRuns(const uint8_t* xt, int64_t C, const SpatialGeometry& g, uint8_t pad, uint8_t* rows,
                                     int64_t o0, int64_t o1) {
  const int64_t kl = g.kernel[1], kh = g.kernel[0], iw = g.in[1], ih = g.in[0], run = kl * C, K = kh * run;
  const int64_t sx = g.strides[1], sy = g.strides[0], px = g.pad_begin[1], py = g.pad_begin[0], ow = g.out[1];
  int64_t oy = o0 / ow, ox = o0 % ow;
  for (int64_t o = o0; o < o1; ++o) {
    uint8_t* dst = rows + (o - o0) * K;
    const int64_t ix0 = ox * sx - px, iy0 = oy * sy - py;
    if (ix0 >= 0 && ix0 + kl <= iw) {
      const uint8_t* src = xt + ix0 * C;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = iy0 + ky;
        const bool in = iy >= 0 && iy < ih;
        MoveRun<kBytes>(dst + ky * run, in ? src + iy * iw * C : src, run, in, pad);
      }
    } else {  // tap columns in the padding: the run's in-bounds part over a row of pad bytes
      const int64_t lo = std::min(kl, std::max<int64_t>(0, -ix0)), hi = std::max(lo, std::min(kl, iw - ix0));
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = iy0 + ky;
        MoveRun<kBytes>(dst + ky * run, nullptr, run, false, pad);
        if (iy >= 0 && iy < ih && hi > lo)
          std::memcpy(dst + ky * run + lo * C, xt + (iy * iw + ix0 + lo) * C, static_cast<size_t>((hi - lo) * C));
      }
    }
    if (++ox == ow) {
      ox = 0;
      ++oy;
    }
  }
}

// Im2col rows of output positions [o0, o1) into `rows` (row o0 first, K bytes each, then
// kIm2RowSlack bytes it may overwrite).
STRATA_AVX512BW void Im2RowRange(const uint8_t* xt, int64_t C, const SpatialGeometry& g, uint8_t pad, uint8_t* rows,
                                 int64_t o0, int64_t o1) {
  const size_t sp = g.rank(), last = sp - 1;
  const int64_t k_size = g.KernelSize();
  const int64_t kl = g.kernel[last], iw = g.in[last], st = g.strides[last], dl = g.dilations[last];
  const int64_t pb = g.pad_begin[last], K = k_size * C, outer_k = k_size / kl;
  if (sp == 2 && dl == 1 && kl * C <= 32 && g.dilations[0] == 1) {
    if (kl * C <= 16) return Im2RowShortRuns<16>(xt, C, g, pad, rows, o0, o1);
    return Im2RowShortRuns<32>(xt, C, g, pad, rows, o0, o1);
  }
  if (sp == 2) {  // the common case, with scalar counters
    const int64_t ow = g.out[1], kh = g.kernel[0], ih = g.in[0], sh = g.strides[0], dh = g.dilations[0];
    const int64_t ph = g.pad_begin[0];
    int64_t oy = o0 / ow, ox = o0 % ow;
    for (int64_t o = o0; o < o1; ++o) {
      uint8_t* dst = rows + (o - o0) * K;
      const int64_t ix0 = ox * st - pb;
      int64_t lo = 0, hi = kl;
      while (lo < kl && ix0 + lo * dl < 0) ++lo;
      while (hi > lo && ix0 + (hi - 1) * dl >= iw) --hi;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = oy * sh - ph + ky * dh;
        uint8_t* d = dst + ky * kl * C;
        if (iy < 0 || iy >= ih || lo >= hi) {
          Fill(d, pad, kl * C);
          continue;
        }
        if (lo > 0) Fill(d, pad, lo * C);
        const uint8_t* src = xt + iy * iw * C;
        if (dl == 1) {
          Copy(d + lo * C, src + (ix0 + lo) * C, (hi - lo) * C);
        } else {
          for (int64_t kx = lo; kx < hi; ++kx) Copy(d + kx * C, src + (ix0 + kx * dl) * C, C);
        }
        if (hi < kl) Fill(d + hi * C, pad, (kl - hi) * C);
      }
      if (++ox == ow) {
        ox = 0;
        ++oy;
      }
    }
    return;
  }
  // Output and tap coordinates as counters (a division per tap row was most of a 7x7 stem's time).
  Shape oc(sp, 0), kc(sp, 0);
  int64_t rem = o0;
  for (size_t d = sp; d-- > 0;) {
    oc[d] = rem % g.out[d];
    rem /= g.out[d];
  }
  for (int64_t o = o0; o < o1; ++o) {
    if (o > o0) {
      for (size_t d = sp; d-- > 0;) {
        if (++oc[d] < g.out[d]) break;
        oc[d] = 0;
      }
    }
    uint8_t* dst = rows + (o - o0) * K;
    const int64_t ix0 = oc[last] * st - pb;  // input column of kernel column 0
    // Kernel columns [lo, hi) read inside the input row.
    int64_t lo = 0, hi = kl;
    while (lo < kl && ix0 + lo * dl < 0) ++lo;
    while (hi > lo && ix0 + (hi - 1) * dl >= iw) --hi;
    std::fill(kc.begin(), kc.end(), 0);
    for (int64_t kk = 0; kk < outer_k; ++kk) {
      if (kk > 0) {
        for (size_t d = last; d-- > 0;) {
          if (++kc[d] < g.kernel[d]) break;
          kc[d] = 0;
        }
      }
      // Input row (all axes but the last) of this tap row, or -1 in the padding.
      int64_t base = 0;
      for (size_t d = 0; d < last && base >= 0; ++d) {
        const int64_t p = oc[d] * g.strides[d] - g.pad_begin[d] + kc[d] * g.dilations[d];
        base = p < 0 || p >= g.in[d] ? -1 : base * g.in[d] + p;
      }
      uint8_t* d = dst + kk * kl * C;
      if (base < 0 || lo >= hi) {
        Fill(d, pad, kl * C);
        continue;
      }
      Fill(d, pad, lo * C);
      const uint8_t* src = xt + base * iw * C;  // input row; column ix0 + kx * dl is in range for kx in [lo, hi)
      if (dl == 1) {                            // the taps in range are one run of the NHWC row
        Copy(d + lo * C, src + (ix0 + lo) * C, (hi - lo) * C);
      } else {
        for (int64_t kx = lo; kx < hi; ++kx) Copy(d + kx * C, src + (ix0 + kx * dl) * C, C);
      }
      Fill(d + hi * C, pad, (kl - hi) * C);
    }
  }
}

}  // namespace

void Im2RowTiles(const uint8_t* xt, int64_t C, const SpatialGeometry& g, uint8_t pad, bool a_signed, int64_t kp,
                 uint32_t* tiles, int32_t* rowsum, uint8_t* buf, int64_t t0, int64_t t1) {
  const int64_t out_size = g.OutSize(), K = g.KernelSize() * C, T = int8gemm::kTileRows;
  const uint8_t* ptrs[16];
  for (int64_t i = 0; i < T; ++i) ptrs[i] = buf + i * K;
  for (int64_t tile = t0; tile < t1; ++tile) {
    const int64_t o0 = tile * T, o1 = std::min(out_size, o0 + T);
    Im2RowRange(xt, C, g, pad, buf, o0, o1);
    int8gemm::PackTile(ptrs, static_cast<int>(o1 - o0), K, kp, a_signed, tiles + tile * T * (kp / 4),
                       rowsum ? rowsum + o0 : nullptr);
  }
}

namespace {

// Requantizes acc[p][m] for 16 positions p0.. (mask: those that exist) and channel m.
STRATA_AVX512BW inline __m512i RequantColumn(const int32_t* acc, __m512i idx, __mmask16 mask, int64_t m,
                                             const Requant& rq, __m512 lo, __m512 hi) {
  __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, idx, acc + m, 4);
  if (rq.bias) v = _mm512_add_epi32(v, _mm512_set1_epi32(rq.bias[m]));
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(rq.mult[m]));
  f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm512_add_ps(f, _mm512_set1_ps(rq.z));
  f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
  f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
  return _mm512_cvtps_epi32(f);
}

// Position blocks [b0, b1) of 16 (the last may be partial): per block and channel, one gather
// of 16 int32 from acc's rows and one store of 16 outputs into y's row m.
STRATA_AVX512BW void StoreRequantizedBlocks(const int32_t* acc, int64_t positions, int64_t M, const Requant& rq,
                                            uint8_t* y, int64_t b0, int64_t b1) {
  const __m512 lo = _mm512_set1_ps(rq.y_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(rq.y_signed ? 127.0f : 255.0f);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(M)));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t p0 = b * 16, n = std::min<int64_t>(16, positions - p0);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    const int32_t* a = acc + p0 * M;
    for (int64_t m = 0; m < M; ++m) {
      const __m512i q = RequantColumn(a, idx, mask, m, rq, lo, hi);
      // Values are already in range: the saturating narrowing only drops the high bytes.
      const __m128i bytes = rq.y_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q);
      _mm_mask_storeu_epi8(y + m * positions + p0, mask, bytes);
    }
  }
}

STRATA_AVX512BW void StoreTransposedBlocks(const int32_t* acc, int64_t positions, int64_t M, int32_t* y, int64_t b0,
                                           int64_t b1) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(M)));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t p0 = b * 16, n = std::min<int64_t>(16, positions - p0);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    const int32_t* a = acc + p0 * M;
    for (int64_t m = 0; m < M; ++m) {
      const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, idx, a + m, 4);
      _mm512_mask_storeu_epi32(y + m * positions + p0, mask, v);
    }
  }
}

// About 4K outputs per chunk.
int64_t StoreGrain(int64_t M) { return std::max<int64_t>(1, 256 / std::max<int64_t>(1, M)); }

}  // namespace

void StoreRequantized(const int32_t* acc, int64_t positions, int64_t M, const Requant& rq, uint8_t* y,
                      ThreadPool* pool) {
  Split(pool, (positions + 15) / 16, StoreGrain(M),
        [&](int64_t b0, int64_t b1) { StoreRequantizedBlocks(acc, positions, M, rq, y, b0, b1); });
}

void StoreTransposed(const int32_t* acc, int64_t positions, int64_t M, int32_t* y, ThreadPool* pool) {
  Split(pool, (positions + 15) / 16, StoreGrain(M),
        [&](int64_t b0, int64_t b1) { StoreTransposedBlocks(acc, positions, M, y, b0, b1); });
}

}  // namespace strata::int8conv
