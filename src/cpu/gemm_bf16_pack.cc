// Packing constant B operands to bf16 pair panels (gemm_bf16.h): B [K, N] or B^T [N, K],
// from memory or read a block of rows at a time from the model file (sgemm::WeightRows).
//
// Why vectorised and streamed: the scalar packer with its zero-filled malloc'd panels made a
// bf16 session's creation 2-3x its fp32 one (resnet50 1 thread ~180 vs ~75 ms), the panels'
// fresh pages and the payload read whole into its own memory costing as much as the loop.
// The panels now come from AllocateWeightBuffer from 2 MiB on (huge pages, recycled during
// creation) and every word, padding included, is written once; rounding is FloatToBf16's,
// bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/first_error.h"
#include "core/large_pages.h"
#include "core/tensor.h"
#include "cpu/gemm_bf16.h"
#include "cpu/sgemm.h"
#include "cpu/sgemm_transpose.h"

namespace strata {
namespace {

// Rows of a B [K, N] read per block from the file (~512 KiB, an even count: whole pairs).
constexpr int64_t kBlockBytes = 512 * 1024;
// From this many floats a pool splits the panels (or row blocks), as sgemm's packers do.
constexpr int64_t kParallelFloats = int64_t{1} << 20;

inline uint32_t Pair(float lo, float hi) {
  return static_cast<uint32_t>(FloatToBf16(lo)) | (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
}

#define STRATA_AVX512 __attribute__((target("avx512f")))

// FloatToBf16 on 16 lanes (round to nearest even, a NaN stays a quiet NaN), each result in
// the low 16 bits of its lane.
STRATA_AVX512 inline __m512i RoundBf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i bias =
      _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(r, nan, q);
}

// 32 consecutive floats of a row (k0 .. k0 + 31, lanes at or past `live` read as 0) times
// scale as 16 pair words: word q = bf16(x[2q]) | bf16(x[2q + 1]) << 16.
STRATA_AVX512 inline __m512i PairWords(const float* x, int64_t live, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  const int64_t l0 = std::clamp<int64_t>(live, 0, 16), l1 = std::clamp<int64_t>(live - 16, 0, 16);
  const __mmask16 m0 = static_cast<__mmask16>((1u << l0) - 1), m1 = static_cast<__mmask16>((1u << l1) - 1);
  // maskz after the multiply too: lanes past K are 0 even when scale is not finite.
  const __m512i r0 = RoundBf16(_mm512_maskz_mul_ps(m0, _mm512_maskz_loadu_ps(m0, x), s));
  const __m512i r1 = RoundBf16(_mm512_maskz_mul_ps(m1, _mm512_maskz_loadu_ps(m1, x + 16), s));
  // Per 64-bit lane (r[2q] low, r[2q + 1] high, each < 2^16): r[2q] | r[2q + 1] << 16.
  const __m256i w0 = _mm512_cvtepi64_epi32(_mm512_or_si512(r0, _mm512_srli_epi64(r0, 16)));
  const __m256i w1 = _mm512_cvtepi64_epi32(_mm512_or_si512(r1, _mm512_srli_epi64(r1, 16)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
}

// One panel of B^T: `cols` (<= 32) rows of K floats, ld apart, are its columns.
STRATA_AVX512 void TransPanelAvx512(const float* rows, int64_t ld, int64_t K, int64_t cols, float scale, int64_t kps,
                                    uint32_t* panel) {
  const int64_t kp = (K + 1) / 2;
  for (int64_t q0 = 0; q0 < kps; q0 += 16) {
    for (int64_t j0 = 0; j0 < kBf16NR; j0 += 16) {
      __m512 v[16];
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t j = j0 + r;
        v[r] = j < cols && q0 < kp ? _mm512_castsi512_ps(PairWords(rows + j * ld + 2 * q0, K - 2 * q0, scale))
                                   : _mm512_setzero_ps();
      }
      sgemm::internal::Transpose16x16(v);
      for (int64_t q = 0; q < 16; ++q) _mm512_storeu_ps(panel + (q0 + q) * kBf16NR + j0, v[q]);
    }
  }
}

// Pair rows [q0, q1) of every panel from B [K, N] rows 2 * q0 .. (`rows` points at row
// 2 * q0, ld apart; rows at or past K read as 0).
STRATA_AVX512 void PairRowsAvx512(const float* rows, int64_t ld, int64_t K, int64_t N, int64_t q0, int64_t q1,
                                  float scale, const PackedBf16B& p, uint32_t* dst) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t pn = 0; pn < p.panels; ++pn) {
    uint32_t* panel = dst + pn * p.panel_stride();
    for (int64_t h = 0; h < kBf16NR; h += 16) {
      const int64_t n0 = pn * kBf16NR + h;
      const int64_t live = std::clamp<int64_t>(N - n0, 0, 16);
      const __mmask16 m = static_cast<__mmask16>((1u << live) - 1);
      for (int64_t q = q0; q < q1; ++q) {
        // Pair rows past K (the padding to kps) have no source rows: all zeros.
        const __mmask16 mlo = 2 * q < K ? m : 0, mhi = 2 * q + 1 < K ? m : 0;
        const float* lo = mlo ? rows + (2 * (q - q0)) * ld + n0 : nullptr;
        const float* hi = mhi ? lo + ld : nullptr;
        const __m512i rl =
            mlo ? RoundBf16(_mm512_maskz_mul_ps(mlo, _mm512_maskz_loadu_ps(mlo, lo), s)) : _mm512_setzero_si512();
        const __m512i rh =
            mhi ? RoundBf16(_mm512_maskz_mul_ps(mhi, _mm512_maskz_loadu_ps(mhi, hi), s)) : _mm512_setzero_si512();
        _mm512_storeu_si512(panel + q * kBf16NR + h, _mm512_or_si512(rl, _mm512_slli_epi32(rh, 16)));
      }
    }
  }
}

// Scalar fallbacks (no AVX-512F), word for word the same.
void TransPanelScalar(const float* rows, int64_t ld, int64_t K, int64_t cols, float scale, int64_t kps,
                      uint32_t* panel) {
  for (int64_t q = 0; q < kps; ++q)
    for (int64_t j = 0; j < kBf16NR; ++j) {
      const float lo = j < cols && 2 * q < K ? scale * rows[j * ld + 2 * q] : 0.0f;
      const float hi = j < cols && 2 * q + 1 < K ? scale * rows[j * ld + 2 * q + 1] : 0.0f;
      panel[q * kBf16NR + j] = Pair(lo, hi);
    }
}

void PairRowsScalar(const float* rows, int64_t ld, int64_t K, int64_t N, int64_t q0, int64_t q1, float scale,
                    const PackedBf16B& p, uint32_t* dst) {
  for (int64_t pn = 0; pn < p.panels; ++pn)
    for (int64_t q = q0; q < q1; ++q)
      for (int64_t j = 0; j < kBf16NR; ++j) {
        const int64_t n = pn * kBf16NR + j;
        // Rows past K (and so `rows` itself, for a block of padding only) are never touched.
        const int64_t at = 2 * (q - q0) * ld + n;
        const float a = n < N && 2 * q < K ? scale * rows[at] : 0.0f;
        const float b = n < N && 2 * q + 1 < K ? scale * rows[at + ld] : 0.0f;
        dst[pn * p.panel_stride() + q * kBf16NR + j] = Pair(a, b);
      }
}

bool Vector() { return sgemm::Available(); }  // AVX-512F (STRATA_SGEMM=0 exercises the scalar packers)

// Geometry and storage of a packed B; the words are not initialised.
Result<PackedBf16B> Allocate(int64_t K, int64_t N) {
  if (K < 0 || N < 0) return InvalidArgument("bf16 pack: negative B dimensions K=", K, " N=", N);
  PackedBf16B p;
  p.K = K;
  p.N = N;
  p.kp = (K + 1) / 2;
  p.kps = (p.kp + 15) / 16 * 16;
  p.panels = (N + kBf16NR - 1) / kBf16NR;
  const int64_t words = p.panels * p.panel_stride();
  if (words > (int64_t{1} << 40)) return InvalidArgument("bf16 pack: B is too large");
  // Huge pages from 2 MiB: a smaller block would take a 2 MiB chunk of its own whenever the
  // next one does not fit beside it (bert's 768 x 768 panels, 1.2 MB each: +42 MiB of RSS).
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(words, 1)) * sizeof(uint32_t);
  if (bytes >= kHugePageBytes) {
    ASSIGN_OR_RETURN(p.buf, AllocateWeightBuffer(bytes));
  } else {
    ASSIGN_OR_RETURN(p.buf, DefaultAllocator()->Allocate(bytes));
  }
  return p;
}

}  // namespace

Result<PackedBf16B> PackBf16(const float* b, int64_t K, int64_t N, bool trans, float scale) {
  sgemm::WeightRows rows;
  rows.data = b;
  return PackBf16(rows, K, N, trans, scale, nullptr);
}

Result<PackedBf16B> PackBf16(const sgemm::WeightRows& b, int64_t K, int64_t N, bool trans, float scale,
                             ThreadPool* pool) {
  return PackBf16Rows(b, trans ? K : N, nullptr, nullptr, K, N, trans, scale, pool);
}

Result<PackedBf16B> PackBf16Rows(const sgemm::WeightRows& b, int64_t src_row, Bf16RowReorder reorder, const void* ctx,
                                 int64_t K, int64_t N, bool trans, float scale, ThreadPool* pool) {
  ASSIGN_OR_RETURN(PackedBf16B p, Allocate(K, N));
  if (p.panels == 0) return p;
  if (K == 0) {  // no pair rows to read: the panels are their zero padding
    std::memset(p.buf->data(), 0, static_cast<size_t>(p.panels * p.panel_stride()) * sizeof(uint32_t));
    return p;
  }
  if (!b.data && !b.file) return InvalidArgument("bf16 pack: no B for K=", K, " N=", N);
  const int64_t src_rows = trans ? N : K;
  if (b.file && b.file->num_elements() != src_rows * src_row)
    return InvalidArgument("bf16 pack: B has ", b.file->num_elements(), " elements, not ", src_rows, " rows of ",
                           src_row);
  if (!trans && reorder) return InvalidArgument("bf16 pack: a row reorder needs B^T rows");
  uint32_t* dst = static_cast<uint32_t*>(p.buf->data());
  const bool vec = Vector();
  FirstError first;
  if (trans) {
    // Panel by panel: its 32 rows (read from the file, reordered) while they are in L2.
    sgemm::ForPanels(p.panels, K * N, kParallelFloats, pool, [&](int64_t p0, int64_t p1) {
      first.Set([&]() -> Status {
        sgemm::RowReader reader(b, kBf16NR * src_row, "bf16 pack");
        // Scratch pages, recycled during creation (a malloc'd block would fault in fresh ones).
        ScratchPages ordered(reorder ? static_cast<size_t>(kBf16NR * K) * sizeof(float) : 0);
        if (reorder && !ordered.data()) return MakeStatus(StatusCode::kOutOfMemory, "bf16 pack: no scratch memory");
        for (int64_t pn = p0; pn < p1; ++pn) {
          // Every panel has at least one column: panels = ceil(N / kBf16NR).
          const int64_t n0 = pn * kBf16NR, cols = std::min<int64_t>(kBf16NR, N - n0);
          ASSIGN_OR_RETURN(const float* rows, reader.Rows(n0, cols, src_row));
          int64_t ld = src_row;
          if (reorder) {
            float* out = static_cast<float*>(ordered.data());
            for (int64_t j = 0; j < cols; ++j) reorder(rows + j * src_row, out + j * K, ctx);
            rows = out;
            ld = K;
          }
          uint32_t* panel = dst + pn * p.panel_stride();
          (vec ? TransPanelAvx512 : TransPanelScalar)(rows, ld, K, cols, scale, p.kps, panel);
        }
        return Status::Ok();
      }());
    });
  } else {
    // Blocks of whole pair rows of B: each block's rows go into every panel.
    const int64_t pairs_per_block = std::max<int64_t>(1, kBlockBytes / (2 * std::max<int64_t>(N, 1) * 4));
    const int64_t blocks = (p.kps + pairs_per_block - 1) / pairs_per_block;
    sgemm::ForPanels(blocks, K * N, kParallelFloats, pool, [&](int64_t b0, int64_t b1) {
      first.Set([&]() -> Status {
        sgemm::RowReader reader(b, 2 * pairs_per_block * N, "bf16 pack");
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t q0 = blk * pairs_per_block, q1 = std::min(p.kps, q0 + pairs_per_block);
          // Rows 2 * q0 .. min(K, 2 * q1) exist; pair rows past kp are the zero padding.
          const int64_t r0 = std::min(K, 2 * q0), r1 = std::min(K, 2 * q1);
          ASSIGN_OR_RETURN(const float* rows, reader.Rows(r0, r1 - r0, N));
          (vec ? PairRowsAvx512 : PairRowsScalar)(rows, N, K, N, q0, q1, scale, p, dst);
        }
        return Status::Ok();
      }());
    });
  }
  RETURN_IF_ERROR(first.Take());
  return p;
}

}  // namespace strata
