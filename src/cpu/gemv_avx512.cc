// Small-M GEMV/GEMM over column-panel prepacked weights (see gemv.h).
//
// AVX-512: one panel of 64 outputs is 4 zmm per row. One row keeps 8 independent
// accumulators by splitting K into even and odd halves (FMA latency x 2 ports); 2-4 rows
// reuse each weight load for every row. Bias and clamp are applied before the store.
// The AVX2+FMA and baseline variants compile one portable body under target attributes,
// so nothing here needs the whole file built with -mavx512f.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/first_error.h"
#include "core/large_pages.h"
#include "core/tensor.h"
#include "cpu/gemv.h"
#include "cpu/sgemm.h"
#include "cpu/sgemm_internal.h"
#include "cpu/simd_clamp.h"

// GCC 12's AVX-512 headers pass deliberately undefined vectors through; never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata {
namespace {

constexpr int64_t P = kGemvPanel;

// ------------------------------------------------------------------ portable / AVX2

__attribute__((always_inline)) inline void PanelsPortableBody(const float* a, int64_t lda, int64_t m,
                                                              const GemvWeights& w, float* y, int64_t ldy, float lo,
                                                              float hi, int64_t p0, int64_t p1) {
  const int64_t K = w.k();
  for (int64_t p = p0; p < p1; ++p) {
    const float* pb = w.panel(p);
    const int64_t width = w.panel_width(p);
    const int64_t cols = std::min(P, w.n() - p * P);
    for (int64_t r = 0; r < m; ++r) {
      float acc[P];
      std::memcpy(acc, w.bias() + p * P, sizeof(acc));
      const float* ar = a + r * lda;
      for (int64_t kk = 0; kk < K; ++kk) {
        const float av = ar[kk];
        const float* pk = pb + kk * width;
        for (int64_t j = 0; j < width; ++j) acc[j] += av * pk[j];
      }
      float* yr = y + r * ldy + p * P;
      // NaN passes through, as in the AVX-512 path (std::max(lo, NaN) would return lo).
      for (int64_t j = 0; j < cols; ++j) yr[j] = acc[j] < lo ? lo : (acc[j] > hi ? hi : acc[j]);
    }
  }
}

void PanelsPortable(const float* a, int64_t lda, int64_t m, const GemvWeights& w, float* y, int64_t ldy, float lo,
                    float hi, int64_t p0, int64_t p1) {
  PanelsPortableBody(a, lda, m, w, y, ldy, lo, hi, p0, p1);
}
__attribute__((target("avx2,fma"))) void PanelsAvx2(const float* a, int64_t lda, int64_t m, const GemvWeights& w,
                                                    float* y, int64_t ldy, float lo, float hi, int64_t p0, int64_t p1) {
  PanelsPortableBody(a, lda, m, w, y, ldy, lo, hi, p0, p1);
}

// ------------------------------------------------------------------ AVX-512

// NV: the panel's width in vectors of 16 (4 for every panel but a narrow last one).
template <int NV>
__attribute__((target("avx512f"))) inline void StorePanelRow(float* yr, const float* bias, __m512 acc[NV], float lo,
                                                             float hi, int64_t cols) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int j = 0; j < NV; ++j) {
    __m512 v = _mm512_add_ps(acc[j], _mm512_loadu_ps(bias + 16 * j));
    v = simd::Clamp(v, vlo, vhi);
    const int64_t left = cols - 16 * j;
    if (left >= 16) {
      _mm512_storeu_ps(yr + 16 * j, v);
    } else if (left > 0) {
      _mm512_mask_storeu_ps(yr + 16 * j, static_cast<__mmask16>((1u << left) - 1), v);
    }
  }
}

// How far ahead Panel1 prefetches. A one-row product does one FMA per weight loaded, so it
// runs at the speed weights arrive from L3 (a batch-1 MLP's 7 MiB do not fit L2). mlp's
// three GEMVs on one thread (784-1024-1024-10), first machine: 82.5 us median without, 69-70
// us with 4, 8 or 16 rows ahead. On a Zen 4 VM (12-03; BM_Gemv, 4 alternating rounds) 16
// rows were slower than 1 (256 bytes) on every dense product: mlp 76-85 vs 81-96 us,
// mobilenet_fc 63-73 vs 77-86, a 1024x1024 dense row 50-56 vs 65-72 (its BM_L3Read: one
// stream at 76 GB/s with T0 256 bytes ahead, 55-58 from 1 KiB).
// Counted in bytes, so a narrow panel stays as far ahead in time.
constexpr int64_t kPrefetchBytes = 1 * P * sizeof(float);
// The sparse loops read rows the hardware prefetcher cannot predict, so they look further
// ahead (16 full-width rows; on the Zen 4 VM level with or slightly ahead of 1 row at 50
// and 80% zeros).
constexpr int64_t kSparsePrefetchBytes = 16 * P * sizeof(float);
// Below this K the products are small enough to stay in L2, where skipping rows saves little.
constexpr int64_t kSparseMinK = 64;

// k rows (each its own accumulator set) per step of a one-row loop over a panel of NV
// vectors: U * NV >= 8 independent FMA chains.
constexpr int KRowsPerStep(int nv) { return nv >= 4 ? 2 : (nv == 1 ? 8 : 4); }

// One row: U consecutive k rows feed separate accumulator sets, U * NV >= 8 independent
// chains (FMA latency x 2 ports). A narrow panel needs the extra k rows: with only two sets
// the mlp's 1024x10 layer (NV = 1) was bound by the FMA latency of 2 chains, not by memory.
template <int NV>
__attribute__((target("avx512f"))) inline void Panel1(const float* a, const float* pb, int64_t K, const float* bias,
                                                      float* y, float lo, float hi, int64_t cols) {
  constexpr int64_t W = 16 * NV;
  constexpr int U = KRowsPerStep(NV);
  __m512 acc[U][NV];
  for (int u = 0; u < U; ++u)
    for (int j = 0; j < NV; ++j) acc[u][j] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + U <= K; kk += U) {
    const float* pk = pb + kk * W;
    // The U * NV lines of these k rows, kPrefetchBytes ahead; past the panel's end this
    // touches the next panel (or nothing: a prefetch never faults).
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(pk) + kPrefetchBytes;
    for (int j = 0; j < U * NV; ++j) _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * j), _MM_HINT_T0);
    for (int u = 0; u < U; ++u) {
      const __m512 av = _mm512_set1_ps(a[kk + u]);
      for (int j = 0; j < NV; ++j) acc[u][j] = _mm512_fmadd_ps(av, _mm512_load_ps(pk + u * W + 16 * j), acc[u][j]);
    }
  }
  // The last K % U rows into set 0 (a constant index keeps every set in registers).
  for (; kk < K; ++kk) {
    const __m512 av = _mm512_set1_ps(a[kk]);
    for (int j = 0; j < NV; ++j) acc[0][j] = _mm512_fmadd_ps(av, _mm512_load_ps(pb + kk * W + 16 * j), acc[0][j]);
  }
  for (int u = 1; u < U; ++u)
    for (int j = 0; j < NV; ++j) acc[0][j] = _mm512_add_ps(acc[0][j], acc[u][j]);
  StorePanelRow<NV>(y, bias, acc[0], lo, hi, cols);
}

// MR rows: every weight vector loaded once feeds MR FMAs.
template <int MR, int NV>
__attribute__((target("avx512f"))) inline void PanelN(const float* a, int64_t lda, const float* pb, int64_t K,
                                                      const float* bias, float* y, int64_t ldy, float lo, float hi,
                                                      int64_t cols) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < K; ++kk) {
    const float* pk = pb + kk * 16 * NV;
    __m512 bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = _mm512_load_ps(pk + 16 * j);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r) StorePanelRow<NV>(y + r * ldy, bias, acc[r], lo, hi, cols);
}

// The nonzero entries of a one-row A: their k (ascending) and values, then kSparsePad
// entries the prefetches read past the end (see BuildSparseRow).
struct SparseRow {
  std::vector<int32_t> k;
  std::vector<float> v;
  int64_t count = 0;
};
// Rows a sparse loop prefetches ahead: kSparsePrefetchBytes of the narrowest (16-wide) panel.
constexpr int64_t kSparseAheadMax = kSparsePrefetchBytes / (16 * sizeof(float));
constexpr int64_t kSparsePad = kSparseAheadMax + 8;

// Fills `s` with A's nonzeros when at least a quarter of its K entries are zero (below
// that, skipping saves less than the index loop costs); false otherwise. The padding
// entries are the first nonzeros again plus K: prefetched past the end of a panel they
// are the next panel's first rows to read (a prefetch never faults). Compresses, not
// a branch per entry: ReLU zeros fall at random, and ~K/2 mispredictions would cost more
// than a 1024-row panel's skipped reads save.
__attribute__((target("avx512f"))) bool BuildSparseRow(const float* a, int64_t K, SparseRow* s) {
  if (K > INT32_MAX / 2) return false;
  if (static_cast<int64_t>(s->k.size()) < K + kSparsePad) {
    s->k.resize(static_cast<size_t>(K + kSparsePad));
    s->v.resize(static_cast<size_t>(K + kSparsePad));
  }
  int32_t* ks = s->k.data();
  float* vs = s->v.data();
  const __m512 zero = _mm512_setzero_ps();
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  int64_t nz = 0, kk = 0;
  for (; kk + 16 <= K; kk += 16) {
    const __m512 x = _mm512_loadu_ps(a + kk);
    const __mmask16 m = _mm512_cmp_ps_mask(x, zero, _CMP_NEQ_UQ);  // NaN counts as nonzero
    // Compress into a register, then store all 16 lanes: nz <= kk, so the store ends
    // inside the K entries, and lanes past the nonzeros are overwritten next (or by the
    // padding). A compress straight to memory is microcoded on Zen 4 (~100+ cycles each:
    // 4.9 us for one 1024-row product, 78% of it in these stores), fast on Zen 5 and Intel.
    _mm512_storeu_ps(vs + nz, _mm512_maskz_compress_ps(m, x));
    _mm512_storeu_si512(ks + nz, _mm512_maskz_compress_epi32(m, idx));
    nz += __builtin_popcount(m);
    idx = _mm512_add_epi32(idx, step);
  }
  for (; kk < K; ++kk) {
    if (a[kk] == 0.0f) continue;
    ks[nz] = static_cast<int32_t>(kk);
    vs[nz++] = a[kk];
  }
  if (4 * nz > 3 * K) return false;
  for (int64_t j = 0; j < kSparsePad; ++j) {
    ks[nz + j] = static_cast<int32_t>(K + (nz > 0 ? ks[j % nz] : 0));
    vs[nz + j] = 0.0f;
  }
  s->count = nz;
  return true;
}

// The calling thread's nonzero list, reused by every sparse GEMV it runs.
thread_local SparseRow t_sparse;

// Panel1 over A's nonzero entries only: U of them per step, each its own accumulator set.
template <int NV>
__attribute__((target("avx512f"))) inline void Panel1Sparse(const SparseRow& s, const float* pb, const float* bias,
                                                            float* y, float lo, float hi, int64_t cols) {
  constexpr int64_t W = 16 * NV;
  constexpr int U = KRowsPerStep(NV);
  constexpr int64_t kAhead = kSparsePrefetchBytes / (W * sizeof(float));  // rows, <= kSparseAheadMax
  const int32_t* ks = s.k.data();
  const float* vs = s.v.data();
  const int64_t n = s.count;
  __m512 acc[U][NV];
  for (int u = 0; u < U; ++u)
    for (int j = 0; j < NV; ++j) acc[u][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + U <= n; i += U) {
    for (int u = 0; u < U; ++u) {
      const char* ahead = reinterpret_cast<const char*>(pb + int64_t{ks[i + u + kAhead]} * W);
      for (int j = 0; j < NV; ++j) _mm_prefetch(ahead + 64 * j, _MM_HINT_T0);
    }
    for (int u = 0; u < U; ++u) {
      const __m512 av = _mm512_set1_ps(vs[i + u]);
      const float* pk = pb + int64_t{ks[i + u]} * W;
      for (int j = 0; j < NV; ++j) acc[u][j] = _mm512_fmadd_ps(av, _mm512_load_ps(pk + 16 * j), acc[u][j]);
    }
  }
  for (; i < n; ++i) {
    const __m512 av = _mm512_set1_ps(vs[i]);
    const float* pk = pb + int64_t{ks[i]} * W;
    for (int j = 0; j < NV; ++j) acc[0][j] = _mm512_fmadd_ps(av, _mm512_load_ps(pk + 16 * j), acc[0][j]);
  }
  for (int u = 1; u < U; ++u)
    for (int j = 0; j < NV; ++j) acc[0][j] = _mm512_add_ps(acc[0][j], acc[u][j]);
  StorePanelRow<NV>(y, bias, acc[0], lo, hi, cols);
}

template <int NV>
__attribute__((target("avx512f"))) inline void PanelAvx512(const float* a, int64_t lda, int64_t m, const float* pb,
                                                           int64_t K, const float* bias, float* y, int64_t ldy,
                                                           float lo, float hi, int64_t cols) {
  switch (m) {
    case 1:
      return Panel1<NV>(a, pb, K, bias, y, lo, hi, cols);
    case 2:
      return PanelN<2, NV>(a, lda, pb, K, bias, y, ldy, lo, hi, cols);
    case 3:
      return PanelN<3, NV>(a, lda, pb, K, bias, y, ldy, lo, hi, cols);
    default:
      return PanelN<4, NV>(a, lda, pb, K, bias, y, ldy, lo, hi, cols);
  }
}

__attribute__((target("avx512f"))) void PanelsAvx512(const float* a, int64_t lda, int64_t m, const GemvWeights& w,
                                                     float* y, int64_t ldy, float lo, float hi, int64_t p0,
                                                     int64_t p1) {
  const int64_t K = w.k();
  // One row of A with many zeros (ReLU outputs): read only the weight rows of its nonzeros.
  SparseRow& sparse = t_sparse;
  if (m == 1 && w.all_finite() && K >= kSparseMinK && BuildSparseRow(a, K, &sparse)) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* pb = w.panel(p);
      const float* bias = w.bias() + p * P;
      const int64_t cols = std::min(P, w.n() - p * P);
      switch (w.panel_width(p) / 16) {
        case 1:
          Panel1Sparse<1>(sparse, pb, bias, y + p * P, lo, hi, cols);
          break;
        case 2:
          Panel1Sparse<2>(sparse, pb, bias, y + p * P, lo, hi, cols);
          break;
        case 3:
          Panel1Sparse<3>(sparse, pb, bias, y + p * P, lo, hi, cols);
          break;
        default:
          Panel1Sparse<4>(sparse, pb, bias, y + p * P, lo, hi, cols);
          break;
      }
    }
    return;
  }
  for (int64_t p = p0; p < p1; ++p) {
    const float* pb = w.panel(p);
    const float* bias = w.bias() + p * P;
    const int64_t cols = std::min(P, w.n() - p * P);
    float* yp = y + p * P;
    switch (w.panel_width(p) / 16) {
      case 1:
        PanelAvx512<1>(a, lda, m, pb, K, bias, yp, ldy, lo, hi, cols);
        break;
      case 2:
        PanelAvx512<2>(a, lda, m, pb, K, bias, yp, ldy, lo, hi, cols);
        break;
      case 3:
        PanelAvx512<3>(a, lda, m, pb, K, bias, yp, ldy, lo, hi, cols);
        break;
      default:
        PanelAvx512<4>(a, lda, m, pb, K, bias, yp, ldy, lo, hi, cols);
        break;
    }
  }
}

using PanelsFn = void (*)(const float*, int64_t, int64_t, const GemvWeights&, float*, int64_t, float, float, int64_t,
                          int64_t);
struct Isa {
  PanelsFn fn;
  const char* name;
};

const Isa& SelectIsa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    // STRATA_FORCE_ISA=avx2|scalar caps the choice (to test the fallbacks on AVX-512 hosts).
    const char* env = std::getenv("STRATA_FORCE_ISA");
    const std::string force = env ? env : "";
    if (force != "avx2" && force != "scalar" && __builtin_cpu_supports("avx512f")) return Isa{PanelsAvx512, "avx512"};
    if (force != "scalar" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa{PanelsAvx2, "avx2"};
    return Isa{PanelsPortable, "portable"};
  }();
  return isa;
}

float* AllocFloats(int64_t n) {
  // 64-byte alignment: every panel row is one cache line pair, loaded with aligned loads.
  const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  return static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
}

// Work below which a product stays on the calling thread: waking a worker and joining
// costs about a microsecond, which ~32K multiply-adds take on one core.
constexpr int64_t kParallelMacs = int64_t{1} << 16;
constexpr int64_t kChunkMacs = int64_t{1} << 15;

}  // namespace

void GemvWeights::FreeDeleter::operator()(float* p) const {
  if (mapped)
    FreeLargePages(p, mapped);
  else
    std::free(p);
}

Result<GemvWeights> GemvWeights::Allocate(int64_t k, int64_t n, const float* bias) {
  if (k < 0 || n < 0) return InvalidArgument("GEMV weights: negative dimensions K=", k, " N=", n);
  const int64_t panels = (n + P - 1) / P;
  if (k > 0 && panels > (int64_t{1} << 40) / (k * P))
    return InvalidArgument("GEMV weights: K=", k, " N=", n, " is too large to pack");
  GemvWeights w;
  w.k_ = k;
  w.n_ = n;
  w.panels_ = panels;
  if (panels > 0) w.tail_width_ = (n - (panels - 1) * P + 15) / 16 * 16;
  const int64_t data_floats = panels > 0 ? ((panels - 1) * P + w.tail_width_) * k : 0;
  // Large packed weights get their own huge-page mapping, faulted in by one call: taken one
  // by one during the copy, 4 KiB page faults cost more than the copy on a VM.
  const size_t data_bytes = static_cast<size_t>(data_floats) * sizeof(float);
  if (data_bytes >= kLargePagesMinBytes) {
    size_t mapped = 0;
    // zeroed = false: Pack and PackRows write every float, padding included.
    if (void* p = AllocateLargePages(data_bytes, &mapped, /*zeroed=*/false))
      w.data_ = std::unique_ptr<float[], FreeDeleter>(static_cast<float*>(p), FreeDeleter{mapped});
  }
  if (!w.data_) w.data_.reset(AllocFloats(data_floats));
  w.bias_.reset(AllocFloats(panels * P));
  if (!w.data_ || !w.bias_)
    return MakeStatus(StatusCode::kOutOfMemory, "GEMV weights: cannot allocate K=", k, " N=", n);
  std::fill(w.bias_.get(), w.bias_.get() + panels * P, 0.0f);
  if (bias) std::copy(bias, bias + n, w.bias_.get());
  return w;
}

// True if no float of [p, p + n) is Inf or NaN (exponent bits all ones); branch-free, so
// it vectorises.
bool AllFiniteFloatsPortable(const float* p, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// The same 16 floats at a time: this file's portable code is built for baseline x86-64,
// where the loop above became 4-wide SSE, ~7% of the LSTM's session creation (3.5 MiB).
__attribute__((target("avx512f"))) bool AllFiniteFloatsAvx512(const float* p, int64_t n) {
  const __m512i exp = _mm512_set1_epi32(0x7f800000);
  __mmask16 bad = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(p + i), exp), exp);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    bad |= _mm512_mask_cmpeq_epi32_mask(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(m, p + i), exp), exp);
  }
  return bad == 0;
}

bool AllFiniteFloats(const float* p, int64_t n) {
  return SelectIsa().fn == PanelsAvx512 ? AllFiniteFloatsAvx512(p, n) : AllFiniteFloatsPortable(p, n);
}

// Runs pack(p0, p1) -> "all finite" over the panels, split between the pool's threads from
// 2^18 floats (1 MiB: packing it takes ~0.1 ms on one core); each range checks its own
// panels while they are still in cache.
template <typename F>
bool PackPanels(int64_t panels, int64_t floats, ThreadPool* pool, F&& pack) {
  std::atomic<bool> finite{true};
  sgemm::ForPanels(panels, floats, int64_t{1} << 18, pool, [&](int64_t p0, int64_t p1) {
    if (!pack(p0, p1)) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load();
}

Result<GemvWeights> GemvWeights::Pack(const float* b, int64_t k, int64_t n, bool b_is_nk, float alpha,
                                      const float* bias, ThreadPool* pool) {
  sgemm::WeightRows rows;
  rows.data = b;
  return Pack(rows, k, n, b_is_nk, alpha, bias, pool);
}

Result<GemvWeights> GemvWeights::Pack(const sgemm::WeightRows& src, int64_t k, int64_t n, bool b_is_nk, float alpha,
                                      const float* bias, ThreadPool* pool) {
  ASSIGN_OR_RETURN(GemvWeights w, Allocate(k, n, bias));
  // Only B^T's panels are whole rows of the source; a [K, N] B on disk is loaded.
  if (src.file && b_is_nk && src.file->num_elements() != k * n)
    return InvalidArgument("GEMV weights: B has ", src.file->num_elements(), " elements, not K=", k, " x N=", n);
  const float* b = src.file && !b_is_nk ? src.file->data<float>() : src.data;
  FirstError first;
  auto pack = [&](int64_t p0, int64_t p1) {
    bool finite = true;
    sgemm::RowReader reader(src, P * k, "GEMV weights");
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = w.data_.get() + p * k * P;
      const int64_t width = w.panel_width(p);
      const int64_t cols = std::min(P, n - p * P);
      if (cols < width) std::fill(dst, dst + k * width, 0.0f);
      if (!b_is_nk) {
        for (int64_t kk = 0; kk < k; ++kk) {
          const float* row = b + kk * n + p * P;
          for (int64_t j = 0; j < cols; ++j) dst[kk * width + j] = alpha * row[j];
        }
      } else {
        // B is [N, K]: the panel's rows (read in place, or from the file) through the SGEMM's
        // transposing panel packer (16x16 AVX-512 transposes; blocked so that rows K*4 bytes
        // apart do not all miss in one L1 set), then alpha on the real columns (the same single
        // rounding as alpha * src, and padding stays 0).
        Result<const float*> from = reader.Rows(p * P, cols, k);
        if (!from.ok()) {
          first.Set(from.status());
          return finite;
        }
        sgemm::PackTransposedPanel(*from, k, k, 1, 0, cols, width, dst);
        if (alpha != 1.0f)
          for (int64_t kk = 0; kk < k; ++kk)
            for (int64_t j = 0; j < cols; ++j) dst[kk * width + j] *= alpha;
      }
      finite = AllFiniteFloats(dst, k * width) && finite;
    }
    return finite;
  };
  w.all_finite_ = PackPanels(w.panels_, k * n, pool, pack);
  RETURN_IF_ERROR(first.Take());
  return w;
}

Result<GemvWeights> GemvWeights::PackRows(const float* src, int64_t ldb, int64_t k, int64_t n, const int64_t* rows,
                                          const float* bias, ThreadPool* pool) {
  sgemm::WeightRows from;
  from.data = src;
  return PackRows(from, 0, ldb, k, n, rows, bias, pool);
}

Result<GemvWeights> GemvWeights::PackRows(const sgemm::WeightRows& src, int64_t row0, int64_t ldb, int64_t k, int64_t n,
                                          const int64_t* rows, const float* bias, ThreadPool* pool) {
  if (row0 < 0 || k < 0 || n < 0)
    return InvalidArgument("GEMV weights: negative row offset or size (row0=", row0, " K=", k, " N=", n, ")");
  if (k > ldb) return InvalidArgument("GEMV weights: row stride ", ldb, " is shorter than K=", k);
  int64_t src_rows = 0;
  for (int64_t j = 0; j < n; ++j) src_rows = std::max(src_rows, rows[j] + 1);
  if (sgemm::internal::MulOverflows(row0 + src_rows, std::max<int64_t>(ldb, 1)) ||
      (src.file && src.file->num_elements() < (row0 + src_rows) * ldb))
    return InvalidArgument("GEMV weights: rows ", row0, "..", row0 + src_rows, " of ", ldb, " floats are past the ",
                           src.file ? src.file->num_elements() : 0, " elements of the weight");
  if (!src.file && !src.data && k > 0 && src_rows > 0) return InvalidArgument("GEMV weights: no source rows");
  ASSIGN_OR_RETURN(GemvWeights w, Allocate(k, n, bias));
  for (int64_t p = 0; p < w.panels_; ++p) {
    const int64_t c0 = p * P, cols = std::min(P, n - c0), width = w.panel_width(p);
    bool gaps = cols < width;
    for (int64_t j = 0; j < cols && !gaps; ++j) gaps = rows[c0 + j] < 0;
    if (gaps) std::fill(w.data_.get() + p * k * P, w.data_.get() + p * k * P + k * width, 0.0f);
  }
  // Blocks of consecutive source rows (about 256 KiB): each block's rows go into every
  // panel's columns while it is in L2. RowReader hands a resident weight's rows back in
  // place and reads a weight still in the model file into its scratch, so the payload of
  // one on disk is never loaded whole: one code path for both.
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(ldb, 1));
  const int64_t blocks = k > 0 ? (src_rows + block - 1) / block : 0;
  FirstError first;
  std::atomic<bool> finite{true};
  // Blocks write disjoint columns of the panels (a run of rows is cut at the block's end),
  // so threads may share panels.
  sgemm::ForPanels(blocks, src_rows * k, int64_t{1} << 18, pool, [&](int64_t b0, int64_t b1) {
    first.Set([&]() -> Status {
      sgemm::RowReader reader(src, block * ldb, "GEMV weights");
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * block, r1 = std::min(src_rows, r0 + block);
        ASSIGN_OR_RETURN(const float* from, reader.Rows(row0 + r0, r1 - r0, ldb));
        // Checked on the block while it is in cache, not on the panels afterwards: every
        // row up to the last one named is checked, so a non-finite row that no column uses
        // makes all_finite false too (it only turns off skipping zeros of A).
        for (int64_t i = 0; i < r1 - r0; ++i)
          if (!AllFiniteFloats(from + i * ldb, k)) finite.store(false, std::memory_order_relaxed);
        for (int64_t p = 0; p < w.panels_; ++p) {
          const int64_t c0 = p * P, cols = std::min(P, n - c0);
          for (int64_t j = 0; j < cols;) {
            const int64_t r = rows[c0 + j];
            if (r < r0 || r >= r1) {
              ++j;
              continue;
            }
            int64_t len = 1;
            while (j + len < cols && rows[c0 + j + len] == r + len && r + len < r1) ++len;
            sgemm::PackTransposedColumns(from, ldb, k, 1, r - r0, len, w.panel_width(p), w.data_.get() + p * k * P + j);
            j += len;
          }
        }
      }
      return Status::Ok();
    }());
  });
  RETURN_IF_ERROR(first.Take());
  w.all_finite_ = finite.load();
  return w;
}

void GemvPanels(const float* a, int64_t lda, int64_t m, const GemvWeights& w, float* y, int64_t ldy, float lo, float hi,
                int64_t p0, int64_t p1) {
  SelectIsa().fn(a, lda, m, w, y, ldy, lo, hi, p0, p1);
}

void Gemv(const float* a, int64_t lda, int64_t m, const GemvWeights& w, float* y, int64_t ldy, float lo, float hi,
          ThreadPool* pool) {
  if (m <= 0 || w.panels() == 0) return;
  const PanelsFn fn = SelectIsa().fn;
  const int64_t panel_macs = std::max<int64_t>(1, m * w.k() * P);
  if (!pool || pool->num_threads() <= 1 || panel_macs * w.panels() < kParallelMacs) {
    fn(a, lda, m, w, y, ldy, lo, hi, 0, w.panels());
    return;
  }
  // At least a few panels per chunk: every chunk is one claim and one completion on words
  // shared by all threads (about 0.1 us each across cores), and two chunks per thread still
  // let a fast thread take over from a late one.
  const int64_t per_thread_half = (w.panels() + 2 * pool->num_threads() - 1) / (2 * pool->num_threads());
  const int64_t grain = std::max<int64_t>({1, kChunkMacs / panel_macs, per_thread_half});
  pool->Run(w.panels(), grain, [&](int64_t p0, int64_t p1) { fn(a, lda, m, w, y, ldy, lo, hi, p0, p1); });
}

const char* GemvIsaName() { return SelectIsa().name; }

void PrepareGemvThreadScratch() {
  if (static_cast<int64_t>(t_sparse.k.size()) >= kGemvPreparedK + kSparsePad) return;
  t_sparse.k.resize(static_cast<size_t>(kGemvPreparedK + kSparsePad));
  t_sparse.v.resize(static_cast<size_t>(kGemvPreparedK + kSparsePad));
}

}  // namespace strata
