// How fast can one core read data that lives in L3 (more than the 1 MiB L2, less than the
// L3)? The batch-1 GEMVs (cpu/gemv.h) stream their packed weights once per run, one FMA per
// load, so this rate is their ceiling. Read patterns over a 7.2 MB buffer (the mlp's
// weights), all loading 8 zmm per step into 8 independent add chains:
//   - S interleaved streams (1, 2, 4, 8): the buffer split into S parts read side by side;
//   - software prefetch D bytes ahead of every stream with prefetcht0/t1/t2/nta;
//   - non-temporal loads (vmovntdqa);
//   - 2 MiB pages (MADV_HUGEPAGE) or 4 KiB pages (MADV_NOHUGEPAGE).
// Rates use the thread's CPU time (robust against preemption on a shared machine).
//   strata_kernel_bench --benchmark_filter=BM_L3Read --benchmark_min_time=0.1
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

// GCC 12's AVX-512 headers pass deliberately undefined vectors through; never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata {
namespace {

constexpr size_t kBytes = size_t{7200} << 10;  // ~ the mlp's 7.2 MB of fp32 weights
constexpr size_t kHuge = size_t{2} << 20;

// A mapping of kBytes (2 MiB aligned), huge or small pages, filled with ones.
struct Buffer {
  explicit Buffer(bool huge) {
    len = (kBytes + 2 * kHuge);
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    base = m;
    char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1));
    madvise(p, (kBytes + kHuge - 1) & ~(kHuge - 1), huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    data = reinterpret_cast<float*>(p);
    for (size_t i = 0; i < kBytes / sizeof(float); ++i) data[i] = 1.0f;
  }
  ~Buffer() {
    if (base) munmap(base, len);
  }
  void* base = nullptr;
  size_t len = 0;
  float* data = nullptr;
};

enum Hint { kNone = -1, kT0 = _MM_HINT_T0, kT1 = _MM_HINT_T1, kT2 = _MM_HINT_T2, kNta = _MM_HINT_NTA };

template <int S, int H, bool NT>
__attribute__((target("avx512f"))) float Read(const float* p, size_t n, size_t pf_bytes) {
  constexpr int V = 8 / S;  // zmm (one line each) per stream per step
  const size_t per = n / S / (16 * V) * (16 * V);
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const float* s[S];
  for (int i = 0; i < S; ++i) s[i] = p + i * per;
  for (size_t off = 0; off < per; off += 16 * V) {
    for (int i = 0; i < S; ++i) {
      const float* q = s[i] + off;
      if constexpr (H != kNone)
        for (int v = 0; v < V; ++v)
          _mm_prefetch(reinterpret_cast<const char*>(q) + pf_bytes + 64 * v, static_cast<_mm_hint>(H));
      for (int v = 0; v < V; ++v) {
        __m512 x;
        if constexpr (NT)
          x = _mm512_castsi512_ps(_mm512_stream_load_si512(const_cast<float*>(q + 16 * v)));
        else
          x = _mm512_load_ps(q + 16 * v);
        acc[i * V + v] = _mm512_add_ps(acc[i * V + v], x);
      }
    }
  }
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}

// Keeping part of the data in L2 across passes: the first `resident` bytes are read with
// prefetcht0 (normal priority), the rest with prefetchH. If H's lines are the first a
// streaming pass evicts, the resident part survives from one pass to the next and the rate
// over all the bytes rises above the L3 read rate.
template <int H>
__attribute__((target("avx512f"))) float ReadResident(const float* p, size_t n, size_t resident) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  constexpr size_t kAhead = 1024;
  const size_t split = resident / sizeof(float) / 128 * 128;
  size_t i = 0;
  for (; i < split; i += 128) {
    for (int j = 0; j < 8; ++j) _mm_prefetch(reinterpret_cast<const char*>(p + i) + kAhead + 64 * j, _MM_HINT_T0);
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + i + 16 * j));
  }
  for (; i + 128 <= n; i += 128) {
    for (int j = 0; j < 8; ++j)
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + kAhead + 64 * j, static_cast<_mm_hint>(H));
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + i + 16 * j));
  }
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}

// Args: resident KiB.
template <int H>
void BM_L3Resident(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  Buffer buf(true);
  if (!buf.data) return state.SkipWithError("mmap failed");
  const size_t resident = static_cast<size_t>(state.range(0)) << 10;
  for (auto _ : state) benchmark::DoNotOptimize(ReadResident<H>(buf.data, kBytes / sizeof(float), resident));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_L3Resident<kT0>)->Arg(0)->Arg(512);
BENCHMARK(BM_L3Resident<kNta>)->Arg(0)->Arg(256)->Arg(512)->Arg(768)->Arg(896);
BENCHMARK(BM_L3Resident<kT2>)->Arg(512)->Arg(768);

// The same read over a buffer of state.range(0) KiB (< L2: the L2 rate) with prefetch hint H.
template <int H>
void BM_L2Read(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  Buffer buf(true);
  if (!buf.data) return state.SkipWithError("mmap failed");
  const size_t bytes = static_cast<size_t>(state.range(0)) << 10;
  for (auto _ : state) benchmark::DoNotOptimize(Read<1, H, false>(buf.data, bytes / sizeof(float), 1024));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_L2Read<kNone>)->Arg(256)->Arg(768);
BENCHMARK(BM_L2Read<kNta>)->Arg(256)->Arg(768);

// Reading only some chunks: the buffer as rows of state.range(0) bytes, about half of them
// (a fixed random pick, like the nonzeros of a ReLU output) read with prefetcht0 4 KiB of
// read rows ahead. Bytes counted: all of the buffer, so a rate of 2x the plain read means
// the skipped rows cost nothing (the hardware prefetchers did not fetch them anyway).
__attribute__((target("avx512f"))) float ReadRows(const float* p, const std::vector<int32_t>& rows, size_t row_floats,
                                                  size_t ahead_rows) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const size_t n = rows.size() - ahead_rows;
  for (size_t i = 0; i < n; ++i) {
    const float* pf = p + rows[i + ahead_rows] * row_floats;
    const float* q = p + rows[i] * row_floats;
    for (size_t l = 0; l < row_floats; l += 16) _mm_prefetch(reinterpret_cast<const char*>(pf + l), _MM_HINT_T0);
    for (size_t l = 0; l < row_floats; l += 16) acc[l / 16 % 8] = _mm512_add_ps(acc[l / 16 % 8], _mm512_load_ps(q + l));
  }
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}

// Args: row bytes, percent of rows read.
void BM_L3ReadRows(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  Buffer buf(true);
  if (!buf.data) return state.SkipWithError("mmap failed");
  const size_t row_floats = static_cast<size_t>(state.range(0)) / sizeof(float);
  const size_t nrows = kBytes / sizeof(float) / row_floats;
  std::mt19937 rng(5);
  std::vector<int32_t> rows;
  for (size_t r = 0; r < nrows; ++r)
    if (static_cast<int64_t>(rng() % 100) < state.range(1)) rows.push_back(static_cast<int32_t>(r));
  const size_t ahead = std::max<size_t>(1, 4096 / (row_floats * sizeof(float)));
  for (size_t j = 0; j < ahead; ++j) rows.push_back(rows[j]);
  for (auto _ : state) benchmark::DoNotOptimize(ReadRows(buf.data, rows, row_floats, ahead));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_L3ReadRows)->ArgsProduct({{256, 1024, 4096}, {100, 50}});

// Args: huge pages (0/1), prefetch distance in bytes (ignored without a hint).
template <int S, int H, bool NT>
void BM_L3Read(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  Buffer buf(state.range(0) != 0);
  if (!buf.data) return state.SkipWithError("mmap failed");
  const size_t pf = static_cast<size_t>(state.range(1));
  for (auto _ : state) benchmark::DoNotOptimize(Read<S, H, NT>(buf.data, kBytes / sizeof(float), pf));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBytes));
}

void PageArgs(benchmark::internal::Benchmark* b) {
  for (int huge : {1, 0}) b->Args({huge, 0});
}
void PrefetchArgs(benchmark::internal::Benchmark* b) {
  for (int huge : {1, 0})
    for (int d : {256, 512, 1024, 2048, 4096}) b->Args({huge, d});
}

BENCHMARK(BM_L3Read<1, kNone, false>)->Apply(PageArgs);
BENCHMARK(BM_L3Read<2, kNone, false>)->Apply(PageArgs);
BENCHMARK(BM_L3Read<4, kNone, false>)->Apply(PageArgs);
BENCHMARK(BM_L3Read<8, kNone, false>)->Apply(PageArgs);
BENCHMARK(BM_L3Read<1, kNone, true>)->Apply(PageArgs);
BENCHMARK(BM_L3Read<1, kT0, false>)->Apply(PrefetchArgs);
BENCHMARK(BM_L3Read<1, kT1, false>)->Apply(PrefetchArgs);
BENCHMARK(BM_L3Read<1, kT2, false>)->Apply(PrefetchArgs);
BENCHMARK(BM_L3Read<1, kNta, false>)->Apply(PrefetchArgs);
BENCHMARK(BM_L3Read<2, kT0, false>)->Apply(PrefetchArgs);
BENCHMARK(BM_L3Read<4, kT0, false>)->Apply(PrefetchArgs);

// The fused LSTM's recurrent step at 1 thread (cpu/rnn_lstm_fused.cc, StepPanel): each step
// reads all of R as panels of H = 256 rows x 64 floats (64 KiB), 8 FMAs per 2 rows, with
// the next step depending on this one. How many panels one core's L2 keeps from step to
// step: with 12 panels (768 KiB) the sweep runs at L2 speed, the benchmark LSTM's 16 (1 MiB,
// one layer's R) do not fit beside anything else. Args: panels, alternate the panel order
// between steps (1, what RunSerial does) or not (0). Bytes counted: R per step.
__attribute__((target("avx512f"), noinline)) void SweepPanel(const float* h, const float* rp, int64_t rows,
                                                             float* out) {
  __m512 e[4], o[4];
  for (int j = 0; j < 4; ++j) e[j] = o[j] = _mm512_setzero_ps();
  for (int64_t k = 0; k + 2 <= rows; k += 2) {
    const __m512 a0 = _mm512_set1_ps(h[k]), a1 = _mm512_set1_ps(h[k + 1]);
    const float* pk = rp + k * 64;
    for (int j = 0; j < 4; ++j) e[j] = _mm512_fmadd_ps(a0, _mm512_load_ps(pk + 16 * j), e[j]);
    for (int j = 0; j < 4; ++j) o[j] = _mm512_fmadd_ps(a1, _mm512_load_ps(pk + 64 + 16 * j), o[j]);
  }
  for (int j = 0; j < 4; ++j)
    _mm512_storeu_ps(out + 16 * j, _mm512_mul_ps(_mm512_add_ps(e[j], o[j]), _mm512_set1_ps(1e-3f)));
}

void BM_RecurrentSweep(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  constexpr int64_t kRows = 256, kPanelFloats = kRows * 64;
  const int64_t panels = state.range(0);
  const bool alternate = state.range(1) != 0;
  if (panels * kPanelFloats * static_cast<int64_t>(sizeof(float)) > static_cast<int64_t>(kBytes))
    return state.SkipWithError("R larger than the buffer");
  Buffer buf(true);
  if (!buf.data) return state.SkipWithError("mmap failed");
  std::vector<float> h(kRows, 0.5f), out(static_cast<size_t>(panels) * 64);
  int64_t step = 0;
  for (auto _ : state) {
    if (alternate && (step & 1)) {
      for (int64_t p = panels - 1; p >= 0; --p) SweepPanel(h.data(), buf.data + p * kPanelFloats, kRows, &out[p * 64]);
    } else {
      for (int64_t p = 0; p < panels; ++p) SweepPanel(h.data(), buf.data + p * kPanelFloats, kRows, &out[p * 64]);
    }
    for (int64_t i = 0; i < kRows; ++i) h[i] = out[i % out.size()] + 0.5f;  // the next step depends on this one
    ++step;
  }
  state.SetBytesProcessed(state.iterations() * panels * kPanelFloats * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_RecurrentSweep)->ArgsProduct({{8, 12, 13, 14, 15, 16}, {1}})->Args({16, 0});

}  // namespace
}  // namespace strata
