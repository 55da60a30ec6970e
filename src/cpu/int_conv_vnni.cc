#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/int_conv_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/threadpool.h"

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

}  // namespace

void ToNhwc(const uint8_t* x, int64_t C, int64_t positions, uint8_t* xt, ThreadPool* pool) {
  if (C == 1) {
    std::memcpy(xt, x, static_cast<size_t>(positions));
    return;
  }
  const int64_t blocks = (positions + kTile - 1) / kTile;
  // About 32 KiB of bytes per chunk: small images stay on this thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, kTile * C));
  Split(pool, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t p0 = b * kTile, p1 = std::min(positions, p0 + kTile);
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t c1 = std::min(C, c0 + kTile);
        for (int64_t p = p0; p < p1; ++p) {
          uint8_t* dst = xt + p * C;
          for (int64_t c = c0; c < c1; ++c) dst[c] = x[c * positions + p];
        }
      }
    }
  });
}

void ToNchw(const uint8_t* xt, int64_t C, int64_t positions, uint8_t* x, ThreadPool* pool) {
  if (C == 1) {
    std::memcpy(x, xt, static_cast<size_t>(positions));
    return;
  }
  const int64_t blocks = (positions + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, kTile * C));
  Split(pool, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t p0 = b * kTile, p1 = std::min(positions, p0 + kTile);
      for (int64_t c = 0; c < C; ++c) {
        uint8_t* dst = x + c * positions;
        for (int64_t p = p0; p < p1; ++p) dst[p] = xt[p * C + c];
      }
    }
  });
}

void Im2Row(const uint8_t* xt, int64_t C, const SpatialGeometry& g, uint8_t pad, uint8_t* rows, ThreadPool* pool) {
  const size_t sp = g.rank(), last = sp - 1;
  const int64_t out_size = g.OutSize(), k_size = g.KernelSize();
  const int64_t kl = g.kernel[last], iw = g.in[last], st = g.strides[last], dl = g.dilations[last];
  const int64_t pb = g.pad_begin[last], K = k_size * C, outer_k = k_size / kl;
  const size_t cb = static_cast<size_t>(C);
  // About 32 KiB of rows per chunk.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, K));
  Split(pool, out_size, grain, [&](int64_t o0, int64_t o1) {
    Shape oc(sp, 0), kc(sp, 0);
    for (int64_t o = o0; o < o1; ++o) {
      int64_t rem = o;
      for (size_t d = sp; d-- > 0;) {
        oc[d] = rem % g.out[d];
        rem /= g.out[d];
      }
      uint8_t* dst = rows + o * K;
      const int64_t ix0 = oc[last] * st - pb;  // input column of kernel column 0
      // Kernel columns [lo, hi) read inside the input row.
      int64_t lo = 0, hi = kl;
      while (lo < kl && ix0 + lo * dl < 0) ++lo;
      while (hi > lo && ix0 + (hi - 1) * dl >= iw) --hi;
      for (int64_t kk = 0; kk < outer_k; ++kk) {
        int64_t r = kk;
        for (size_t d = last; d-- > 0;) {
          kc[d] = r % g.kernel[d];
          r /= g.kernel[d];
        }
        // Input row (all axes but the last) of this tap row, or -1 in the padding.
        int64_t base = 0;
        for (size_t d = 0; d < last && base >= 0; ++d) {
          const int64_t p = oc[d] * g.strides[d] - g.pad_begin[d] + kc[d] * g.dilations[d];
          base = p < 0 || p >= g.in[d] ? -1 : base * g.in[d] + p;
        }
        uint8_t* d = dst + kk * kl * C;
        if (base < 0 || lo >= hi) {
          std::memset(d, pad, static_cast<size_t>(kl * C));
          continue;
        }
        std::memset(d, pad, static_cast<size_t>(lo * C));
        const uint8_t* src = xt + (base * iw + ix0) * C;
        if (dl == 1) {  // the taps in range are one run of the NHWC row
          std::memcpy(d + lo * C, src + lo * C, static_cast<size_t>((hi - lo) * C));
        } else {
          for (int64_t kx = lo; kx < hi; ++kx) std::memcpy(d + kx * C, src + kx * dl * C, cb);
        }
        std::memset(d + hi * C, pad, static_cast<size_t>((kl - hi) * C));
      }
    }
  });
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

// Rows [r0, r1) of acc requantized in place of order: 16 channels per vector.
STRATA_AVX512BW void StoreRequantizedRows(const int32_t* acc, int64_t M, const Requant& rq, uint8_t* y, int64_t r0,
                                          int64_t r1) {
  const __m512 lo = _mm512_set1_ps(rq.y_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(rq.y_signed ? 127.0f : 255.0f);
  const __m512 vz = _mm512_set1_ps(rq.z);
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t* a = acc + r * M;
    uint8_t* yr = y + r * M;
    for (int64_t m = 0; m < M; m += 16) {
      const __mmask16 mask = M - m >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (M - m)) - 1);
      __m512i v = _mm512_maskz_loadu_epi32(mask, a + m);
      if (rq.bias) v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask, rq.bias + m));
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_maskz_loadu_ps(mask, rq.mult + m));
      f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_roundscale_ps(_mm512_add_ps(f, vz), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      _mm512_mask_cvtepi32_storeu_epi8(yr + m, mask, _mm512_cvtps_epi32(f));
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

void StoreRequantizedNhwc(const int32_t* acc, int64_t positions, int64_t M, const Requant& rq, uint8_t* y,
                          ThreadPool* pool) {
  Split(pool, positions, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, M)),
        [&](int64_t r0, int64_t r1) { StoreRequantizedRows(acc, M, rq, y, r0, r1); });
}

void StoreTransposed(const int32_t* acc, int64_t positions, int64_t M, int32_t* y, ThreadPool* pool) {
  Split(pool, (positions + 15) / 16, StoreGrain(M),
        [&](int64_t b0, int64_t b1) { StoreTransposedBlocks(acc, positions, M, y, b0, b1); });
}

}  // namespace strata::int8conv
