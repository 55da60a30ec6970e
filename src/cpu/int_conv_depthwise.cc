#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/int_conv_depthwise.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/threadpool.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/quantize_common.h"
#include "cpu/scratch_slots.h"

namespace strata::int8dw {
namespace {

#define STRATA_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

inline __mmask16 Lanes(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// dst[i] = x[i] - xz as floats, n values.
STRATA_AVX512BW void ConvertRow(const uint8_t* x, bool x_signed, int32_t xz, int64_t n, float* dst) {
  const __m512i z = _mm512_set1_epi32(xz);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = Lanes(n - i);
    const __m128i b = _mm_maskz_loadu_epi8(m, x + i);
    const __m512i v = x_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, z)));
  }
}

// One output row of `pixels` x c exact float sums -> requantized bytes (int8conv::Requant's
// operations: those of the reference kernel, in its order) or int32.
STRATA_AVX512BW void StoreRow(const float* acc, int64_t pixels, int64_t c, const int8conv::Requant* rq, uint8_t* yq,
                              int32_t* y32) {
  if (!rq) {
    for (int64_t i = 0; i < pixels * c; i += 16) {
      const __mmask16 m = Lanes(pixels * c - i);
      _mm512_mask_storeu_epi32(y32 + i, m, _mm512_cvtps_epi32(_mm512_maskz_loadu_ps(m, acc + i)));
    }
    return;
  }
  const __m512 lo = _mm512_set1_ps(rq->y_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(rq->y_signed ? 127.0f : 255.0f);
  const __m512 z = _mm512_set1_ps(rq->z);
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = Lanes(c - c0);
    const __m512 mult = _mm512_maskz_loadu_ps(m, rq->mult + c0);
    const __m512i bias = rq->bias ? _mm512_maskz_loadu_epi32(m, rq->bias + c0) : _mm512_setzero_si512();
    for (int64_t px = 0; px < pixels; ++px) {
      const int64_t o = px * c + c0;
      // The sum is an exact integer: the conversion is exact; the bias add wraps as int32.
      const __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_maskz_loadu_ps(m, acc + o)), bias);
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), mult);
      f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_add_ps(f, z);
      f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      const __m512i q = _mm512_cvtps_epi32(f);
      const __m128i bytes = rq->y_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q);
      _mm_mask_storeu_epi8(yq + o, m, bytes);
    }
  }
}

// ---------------------------------------------------------------- 3x3, bytes read in place

// Requantization constants of one 16-channel vector.
struct VecQ {
  __m512 mult, z, lo, hi;
  __m512i bias;  // added in int32 unless folded into the sum's start
  bool folded, quick;
};

// 16 channels of one input pixel as floats (not shifted: the zero point is in the sum's start).
template <bool kSigned, bool kFull>
STRATA_AVX512BW inline __m512 LoadPixel(const uint8_t* p, __mmask16 m) {
  const __m128i b = kFull ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(m, p);
  return _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
}

// acc (an exact integer sum) -> 16 output bytes: Requant's operations. `quick` (every
// multiplier finite) leaves out the second rounding and the NaN test: round(v * mult) is then
// an integer or an infinity, and adding the integer z keeps it one (no NaN can arise).
// kFast: folded and quick, known at compile time (the common case: no branches per pixel).
template <bool kFull, bool kFast>
STRATA_AVX512BW inline void StorePixel(__m512 acc, const VecQ& q, uint8_t* y, __mmask16 m) {
  if (!kFast && !q.folded) acc = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_cvtps_epi32(acc), q.bias));
  __m512 f = _mm512_roundscale_ps(_mm512_mul_ps(acc, q.mult), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm512_add_ps(f, q.z);
  if (!kFast && !q.quick) {
    f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
  }
  const __m512i v = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(f, q.lo), q.hi));
  // In range already: the low byte is the uint8, or the int8's two's complement.
  const __m128i bytes = _mm512_cvtepi32_epi8(v);
  if (kFull) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
  } else {
    _mm_mask_storeu_epi8(y, m, bytes);
  }
}

// kJ adjacent output pixels: input column i of the block feeds output j at tap kx = i - j * kS,
// so each input vector is loaded and converted once. off: offset of the block's first input
// column and channel c0 in each row. kL / kR: the first / last column lies in the horizontal
// padding (the row's first / last pixel): it reads the zero point instead, which cancels.
// Fewer than 3 pixels keep 3 sums each (one per kernel row), added at the end (exact
// integers, any order): a lone pixel's 9 FMAs in one chain wait on each other.
template <int kS, int kJ, bool kSigned, bool kFull, bool kFast, bool kL = false, bool kR = false>
STRATA_AVX512BW inline void BlockQ(const uint8_t* const* r, const __m512* w, __m512 init, int64_t off, int64_t c,
                                   __mmask16 m, __m512 xz, const VecQ& q, uint8_t* y) {
  constexpr int kCols = (kJ - 1) * kS + 3;
  constexpr int kChains = kJ >= 3 ? 1 : 3;
  __m512 acc[kChains][kJ];
  for (int ch = 0; ch < kChains; ++ch)
    for (int j = 0; j < kJ; ++j) acc[ch][j] = ch == 0 ? init : _mm512_setzero_ps();
  for (int ky = 0; ky < 3; ++ky)
    for (int i = 0; i < kCols; ++i) {
      const bool pad = (kL && i == 0) || (kR && i == kCols - 1);
      const __m512 v = pad ? xz : LoadPixel<kSigned, kFull>(r[ky] + (off + i * c), m);
      for (int j = 0; j < kJ; ++j) {
        const int kx = i - j * kS;
        if (kx >= 0 && kx < 3) acc[ky % kChains][j] = _mm512_fmadd_ps(v, w[ky * 3 + kx], acc[ky % kChains][j]);
      }
    }
  for (int j = 0; j < kJ; ++j) {
    __m512 sum = acc[0][j];
    for (int ch = 1; ch < kChains; ++ch) sum = _mm512_add_ps(sum, acc[ch][j]);
    StorePixel<kFull, kFast>(sum, q, y + j * c, m);
  }
}

// Any pixel, taps in the horizontal padding checked one by one (they read the zero point).
template <bool kSigned, bool kFast>
STRATA_AVX512BW inline void EdgeQ(const uint8_t* const* r, const __m512* w, __m512 init, int64_t ix0, int64_t in_w,
                                  int64_t c, int64_t c0, __mmask16 m, __m512 xz, const VecQ& q, uint8_t* y) {
  __m512 acc[3] = {init, _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int ky = 0; ky < 3; ++ky)
    for (int kx = 0; kx < 3; ++kx) {
      const int64_t ix = ix0 + kx;
      const __m512 v = ix >= 0 && ix < in_w ? LoadPixel<kSigned, false>(r[ky] + ix * c + c0, m) : xz;
      acc[ky] = _mm512_fmadd_ps(v, w[ky * 3 + kx], acc[ky]);
    }
  StorePixel<false, kFast>(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), acc[2]), q, y, m);
}

// The pixels of one 16-channel vector of a row (kFull: all 16 lanes).
template <int kS, bool kSigned, bool kFull, bool kFast>
STRATA_AVX512BW inline void SweepRow(const uint8_t* const* r, const __m512* w, __m512 init, int64_t c, int64_t c0,
                                     __mmask16 m, __m512 xz, const VecQ& q, int64_t in_w, int64_t ow, int64_t pl,
                                     int64_t lo, int64_t hi, uint8_t* y) {
  int64_t ox = 0;
  for (; ox < lo; ++ox) {
    const int64_t ix0 = ox * kS - pl;
    if (ix0 == -1 && ix0 + 2 < in_w) {  // only the first column in the padding
      BlockQ<kS, 1, kSigned, kFull, kFast, true, false>(r, w, init, ix0 * c + c0, c, m, xz, q, y + ox * c + c0);
    } else {
      EdgeQ<kSigned, kFast>(r, w, init, ix0, in_w, c, c0, m, xz, q, y + ox * c + c0);
    }
  }
  for (; ox + 4 <= hi; ox += 4)
    BlockQ<kS, 4, kSigned, kFull, kFast>(r, w, init, (ox * kS - pl) * c + c0, c, m, xz, q, y + ox * c + c0);
  const int64_t off = (ox * kS - pl) * c + c0;
  switch (hi - ox) {
    case 3:
      BlockQ<kS, 3, kSigned, kFull, kFast>(r, w, init, off, c, m, xz, q, y + ox * c + c0);
      break;
    case 2:
      BlockQ<kS, 2, kSigned, kFull, kFast>(r, w, init, off, c, m, xz, q, y + ox * c + c0);
      break;
    case 1:
      BlockQ<kS, 1, kSigned, kFull, kFast>(r, w, init, off, c, m, xz, q, y + ox * c + c0);
      break;
    default:
      break;
  }
  for (ox = std::max(lo, hi); ox < ow; ++ox) {
    const int64_t ix0 = ox * kS - pl;
    if (ix0 >= 0 && ix0 + 2 == in_w) {  // only the last column in the padding
      BlockQ<kS, 1, kSigned, kFull, kFast, false, true>(r, w, init, ix0 * c + c0, c, m, xz, q, y + ox * c + c0);
    } else {
      EdgeQ<kSigned, kFast>(r, w, init, ix0, in_w, c, c0, m, xz, q, y + ox * c + c0);
    }
  }
}

// Everything a 3x3 row needs besides its rows.
struct RowArgs {
  const Weights* wt = nullptr;
  const float* init = nullptr;  // [cp]: the sums' start per channel
  const int8conv::Requant* rq = nullptr;
  bool folded = false, quick = false;
  int64_t in_w = 0, out_w = 0, pad_left = 0, c = 0;
  int32_t xz = 0;
};

// One output row of a 3x3 conv with stride kS from its three input rows (a padded row is a
// row of zero points).
template <int kS, bool kSigned, bool kFast>
STRATA_AVX512BW void Row3x3Q(const uint8_t* const* r, const RowArgs& a, uint8_t* y) {
  const int64_t c = a.c, cp = a.wt->taps.cp, ow = a.out_w;
  // Pixels [lo, hi) have every tap inside the row: ox * kS - pad_left >= 0 and
  // ox * kS - pad_left + 2 < in_w.
  const int64_t lo = std::min(ow, (a.pad_left + kS - 1) / kS);
  const int64_t hi = std::max(lo, std::min(ow, a.in_w - 3 + a.pad_left >= 0 ? (a.in_w - 3 + a.pad_left) / kS + 1 : 0));
  const __m512 xz = _mm512_set1_ps(static_cast<float>(a.xz));
  VecQ q;
  q.z = _mm512_set1_ps(a.rq->z);
  q.lo = _mm512_set1_ps(a.rq->y_signed ? -128.0f : 0.0f);
  q.hi = _mm512_set1_ps(a.rq->y_signed ? 127.0f : 255.0f);
  q.folded = a.folded;
  q.quick = a.quick;
  for (int64_t c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = Lanes(c - c0);
    __m512 w[9];
    for (int t = 0; t < 9; ++t) w[t] = _mm512_loadu_ps(a.wt->taps.w.data() + t * cp + c0);
    const __m512 init = _mm512_loadu_ps(a.init + c0);
    q.mult = _mm512_maskz_loadu_ps(m, a.rq->mult + c0);
    q.bias = a.rq->bias && !a.folded ? _mm512_maskz_loadu_epi32(m, a.rq->bias + c0) : _mm512_setzero_si512();
    if (m == 0xFFFF) {
      SweepRow<kS, kSigned, true, kFast>(r, w, init, c, c0, m, xz, q, a.in_w, ow, a.pad_left, lo, hi, y);
    } else {
      SweepRow<kS, kSigned, false, kFast>(r, w, init, c, c0, m, xz, q, a.in_w, ow, a.pad_left, lo, hi, y);
    }
  }
}

// The in-place path: QLinearConv, 3x3, stride 1 or 2 both ways, no dilation.
bool InPlace(const Problem& p, const Weights& wt) {
  const SpatialGeometry& g = p.g;
  return p.rq && wt.taps.kh == 3 && wt.taps.kw == 3 && g.dilations[0] == 1 && g.dilations[1] == 1 &&
         g.strides[0] == g.strides[1] && (g.strides[0] == 1 || g.strides[0] == 2);
}

// ---------------------------------------------------------------- other shapes: a ring of float rows

// Rows of the ring of converted input rows: a pair of output rows at vertical stride 1 reads
// (KH - 1) * dilation + 2 consecutive input rows, which then sit in distinct slots.
int64_t RingRows(const dw::Weights& wt, const SpatialGeometry& g) { return (wt.kh - 1) * g.dilations[0] + 2; }

int64_t SlotFloats(const Problem& p, const Weights& wt) {
  if (InPlace(p, wt)) return 0;
  return RingRows(wt.taps, p.g) * p.w * p.c + 2 * p.g.out[1] * p.c;
}

// The in-place path's per-call data after the slots: the sums' start [cp] and a row of zero
// points (the vertical padding), w * c bytes.
int64_t CallFloats(const Problem& p, const Weights& wt) {
  if (!InPlace(p, wt)) return 0;
  return wt.taps.cp + (p.w * p.c + 3) / 4;
}

}  // namespace

bool Covers(const Shape& w_shape, int64_t group) {
  static const bool cpu = dw::Available() && HasAvx512Bw();
  return cpu && w_shape.size() == 4 && w_shape[1] == 1 && group == w_shape[0] && group > 0 &&
         w_shape[2] * w_shape[3] <= kMaxTaps && w_shape[2] > 0 && w_shape[3] > 0;
}

Weights Pack(const Tensor& w, const Tensor* wzp) {
  const int64_t C = w.dim(0), taps = w.dim(2) * w.dim(3);
  std::vector<float> d(static_cast<size_t>(C * taps));
  Weights p;
  p.wsum.assign(static_cast<size_t>(C), 0.0f);
  p.wabs.assign(static_cast<size_t>(C), 0.0f);
  for (int64_t ch = 0; ch < C; ++ch) {
    const int32_t z = ZeroPointAt(wzp, ch);
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t v = LoadQ(w, ch * taps + t) - z;
      d[ch * taps + t] = static_cast<float>(v);
      p.wsum[ch] += static_cast<float>(v);  // exact: |sum| <= 258 * 255
      p.wabs[ch] += static_cast<float>(std::abs(v));
    }
  }
  p.taps = dw::PackWeights(Tensor::FromVector<float>(d, w.shape()), nullptr);
  return p;
}

int64_t ScratchFloats(const Problem& p, const Weights& wt, ThreadPool* pool) {
  return SlotsFor(pool) * SlotFloats(p, wt) + CallFloats(p, wt);
}

void Run(const Problem& p, const Weights& wt, float* scratch, ThreadPool* pool) {
  const SpatialGeometry& g = p.g;
  const int64_t oh = g.out[0], ow = g.out[1], c = p.c, kh = wt.taps.kh;
  if (p.n == 0 || oh == 0 || ow == 0 || c == 0) return;
  const int64_t sh = g.strides[0], dh = g.dilations[0], pt = g.pad_begin[0];
  const int64_t slot_floats = SlotFloats(p, wt), slots = SlotsFor(pool);
  const bool in_place = InPlace(p, wt);
  RowArgs ra;
  const uint8_t* pad_row = nullptr;
  if (in_place) {
    // The sums start at -xz * sum(w') (padding taps read xz, so they cancel), plus the bias
    // where every sum then provably stays below 2^24 in magnitude (exact, and no int32 wrap).
    float* init = scratch + slots * slot_floats;
    auto* pad = reinterpret_cast<uint8_t*>(init + wt.taps.cp);
    std::fill(pad, pad + p.w * c, static_cast<uint8_t>(p.xz));
    pad_row = pad;
    const float xmax = p.x_signed ? 128.0f : 255.0f, xz = static_cast<float>(p.xz);
    bool folded = true, quick = true;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float start = -xz * wt.wsum[ch];  // exact: |xz * sum| < 2^24
      const double with_bias = static_cast<double>(start) + (p.rq->bias ? p.rq->bias[ch] : 0);
      folded = folded && std::fabs(with_bias) + static_cast<double>(xmax) * wt.wabs[ch] < 16777216.0;
      quick = quick && std::isfinite(p.rq->mult[ch]);
      init[ch] = start;
    }
    if (folded && p.rq->bias)
      for (int64_t ch = 0; ch < c; ++ch) init[ch] += static_cast<float>(p.rq->bias[ch]);
    std::fill(init + c, init + wt.taps.cp, 0.0f);
    ra.wt = &wt;
    ra.init = init;
    ra.rq = p.rq;
    ra.folded = folded;
    ra.quick = quick;
    ra.in_w = p.w;
    ra.out_w = ow;
    ra.pad_left = g.pad_begin[1];
    ra.c = c;
    ra.xz = p.xz;
  }
  const dw::RowGeometry rg{p.w,
                           ow,
                           g.strides[1],
                           g.dilations[1],
                           g.pad_begin[1],
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::infinity()};
  // The row variant: stride, x's signedness, and whether the sums need the int32 bias or the
  // NaN handling (rarely: a bias near the int32 range, a non-finite multiplier).
  using RowFn = void (*)(const uint8_t* const*, const RowArgs&, uint8_t*);
  static constexpr RowFn kRowFns[2][2][2] = {
      {{Row3x3Q<1, false, false>, Row3x3Q<1, false, true>}, {Row3x3Q<1, true, false>, Row3x3Q<1, true, true>}},
      {{Row3x3Q<2, false, false>, Row3x3Q<2, false, true>}, {Row3x3Q<2, true, false>, Row3x3Q<2, true, true>}}};
  const RowFn row_fn = kRowFns[sh == 1 ? 0 : 1][p.x_signed ? 1 : 0][ra.folded && ra.quick ? 1 : 0];
  auto in_place_fn = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / oh, oy = row - b * oh, iy0 = oy * sh - pt;
      const uint8_t* r[3];
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t iy = iy0 + ky;
        r[ky] = iy >= 0 && iy < p.h ? p.x + (b * p.h + iy) * p.w * c : pad_row;
      }
      uint8_t* y = p.yq + row * ow * c;
      row_fn(r, ra, y);
    }
  };
  // A slot of scratch per concurrent call of ring_fn.
  ScratchSlots busy(slots);
  const int64_t ring = in_place ? 0 : RingRows(wt.taps, g);
  auto ring_fn = [&](int64_t begin, int64_t end) {
    const int64_t slot = busy.Acquire();
    float* rows_buf = scratch + slot * slot_floats;
    float* out = rows_buf + ring * p.w * c;
    // The image row each ring slot holds (-1: none yet): rows are converted once per call.
    int64_t held_small[32];
    std::unique_ptr<int64_t[]> held_big(ring > 32 ? new int64_t[static_cast<size_t>(ring)] : nullptr);
    int64_t* held = ring > 32 ? held_big.get() : held_small;
    std::fill(held, held + ring, int64_t{-1});
    const float* small[33];
    std::unique_ptr<const float*[]> big(kh > 32 ? new const float*[static_cast<size_t>(kh + 1)] : nullptr);
    const float** rows = kh > 32 ? big.get() : small;
    for (int64_t row = begin; row < end;) {
      const int64_t b = row / oh, oy = row - b * oh, iy0 = oy * sh - pt;
      const int64_t n = sh == 1 && dh == 1 && row + 1 < end && oy + 1 < oh ? 2 : 1;
      for (int64_t ky = 0; ky < kh + n - 1; ++ky) {
        const int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= p.h) {
          rows[ky] = nullptr;
          continue;
        }
        const int64_t key = b * p.h + iy, s = key % ring;
        float* dst = rows_buf + s * p.w * c;
        if (held[s] != key) {
          ConvertRow(p.x + key * p.w * c, p.x_signed, p.xz, p.w * c, dst);
          held[s] = key;
        }
        rows[ky] = dst;
      }
      if (n == 2) {
        dw::ConvRowPair(wt.taps, rg, rows, out, out + ow * c);
      } else {
        dw::ConvRow(wt.taps, rg, rows, out);
      }
      const int64_t o = row * ow * c;
      StoreRow(out, n * ow, c, p.rq, p.yq ? p.yq + o : nullptr, p.y32 ? p.y32 + o : nullptr);
      row += n;
    }
    busy.Release(slot);
  };
  const int64_t rows = p.n * oh;
  // ~32K outputs per chunk: enough work to amortise a pool wake-up (at 16K a 7x7x960 conv ran
  // slower on 2 threads than on 1).
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, ow * c));
  auto body = [&](int64_t b, int64_t e) {
    if (in_place) {
      in_place_fn(b, e);
    } else {
      ring_fn(b, e);
    }
  };
  if (pool && rows > grain) {
    // Fixed row regions per CPU (see the float kernel): a CPU reads the rows it wrote.
    ParallelRangeByCpu(pool, rows, grain, body);
  } else {
    body(0, rows);
  }
}

}  // namespace strata::int8dw
