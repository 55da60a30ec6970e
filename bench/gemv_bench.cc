// Batch-1 fp32 GEMV (cpu/gemv.h) against the memory it has to read: the mlp benchmark's
// three layers (784-1024-1024-10, 7.2 MB of weights: more than L2, less than L3) and the
// mobilenet_v2 classifier (1280x1000), next to a memcpy and a read-only pass over the same
// number of bytes in the same process. "bytes_per_second" is the weight bytes over the
// time, so the GEMV rows read directly as a fraction of what L3 delivers. 1-thread rows use
// the thread's CPU time (robust on a shared machine); 2-thread rows use wall time.
//   strata_kernel_bench --benchmark_filter='BM_Gemv|BM_Stream' --benchmark_min_time=0.2
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "bench_node.h"
#include "core/threadpool.h"
#include "cpu/gemv.h"
#include "read_pass.h"

namespace strata {
namespace {

using bench::RandomFloatTensor;

struct Layer {
  int64_t k, n;
};
const std::vector<Layer> kMlp = {{784, 1024}, {1024, 1024}, {1024, 10}};
const std::vector<Layer> kMobilenetFc = {{1280, 1000}};
const std::vector<Layer> kMlpLast = {{1024, 10}};  // one narrow panel

int64_t WeightBytes(const std::vector<Layer>& layers) {
  int64_t bytes = 0;
  for (const Layer& l : layers) bytes += l.k * l.n * static_cast<int64_t>(sizeof(float));
  return bytes;
}

// The layers chained like the model (Relu between them), every output feeding the next.
void BM_Gemv(benchmark::State& state, const std::vector<Layer>* layers) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  std::vector<GemvWeights> ws;
  for (size_t i = 0; i < layers->size(); ++i) {
    const Layer& l = (*layers)[i];
    const Tensor b = RandomFloatTensor({l.n, l.k}, 2 + static_cast<uint32_t>(i)), bias = RandomFloatTensor({l.n}, 9);
    auto w = GemvWeights::Pack(b.data<float>(), l.k, l.n, /*b_is_nk=*/true, 1.0f, bias.data<float>());
    if (!w.ok()) return state.SkipWithError(w.status().ToString().c_str());
    ws.push_back(std::move(w).value());
  }
  const Tensor x = RandomFloatTensor({layers->front().k}, 1);
  std::vector<std::vector<float>> act;
  act.emplace_back(x.data<float>(), x.data<float>() + x.num_elements());
  for (const Layer& l : *layers) act.emplace_back(static_cast<size_t>(l.n));
  const float inf = std::numeric_limits<float>::infinity();
  for (auto _ : state) {
    for (size_t i = 0; i < ws.size(); ++i) {
      const bool last = i + 1 == ws.size();
      Gemv(act[i].data(), ws[i].k(), 1, ws[i], act[i + 1].data(), ws[i].n(), last ? -inf : 0.0f, inf, &pool);
    }
    benchmark::DoNotOptimize(act.back().data());
  }
  state.SetBytesProcessed(state.iterations() * WeightBytes(*layers));
}

// One 1024x1024 layer (4.2 MB: read from L3 every time) on an input with state.range(0)
// percent zeros, like a ReLU output: the one-row kernel reads only the nonzeros' rows.
void BM_GemvZeros(benchmark::State& state) {
  const int64_t k = 1024, n = 1024;
  const Tensor b = RandomFloatTensor({n, k}, 2), bias = RandomFloatTensor({n}, 9);
  auto w = GemvWeights::Pack(b.data<float>(), k, n, /*b_is_nk=*/true, 1.0f, bias.data<float>());
  if (!w.ok()) return state.SkipWithError(w.status().ToString().c_str());
  const Tensor xt = RandomFloatTensor({k}, 1);
  std::vector<float> x(xt.data<float>(), xt.data<float>() + k), y(static_cast<size_t>(n));
  std::mt19937 rng(3);
  for (float& v : x)
    if (static_cast<int64_t>(rng() % 100) < state.range(0)) v = 0.0f;
  const float inf = std::numeric_limits<float>::infinity();
  for (auto _ : state) {
    Gemv(x.data(), k, 1, *w, y.data(), n, -inf, inf, nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * k * n * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_GemvZeros)->Arg(0)->Arg(20)->Arg(30)->Arg(50)->Arg(80);

// memcpy of the weight bytes (reads them and writes as many).
void BM_StreamMemcpy(benchmark::State& state, const std::vector<Layer>* layers) {
  const size_t bytes = static_cast<size_t>(WeightBytes(*layers));
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

// SumAvx512 (read_pass.h), a read-only pass over the weight bytes, is the bound a
// one-FMA-per-load GEMV can reach.

void BM_StreamRead(benchmark::State& state, const std::vector<Layer>* layers) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512F");
  const size_t bytes = static_cast<size_t>(WeightBytes(*layers));
  const Tensor src = RandomFloatTensor({static_cast<int64_t>(bytes / sizeof(float))}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(SumAvx512(src.data<float>(), static_cast<size_t>(src.num_elements())));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

BENCHMARK_CAPTURE(BM_Gemv, mlp, &kMlp)->Arg(1);
BENCHMARK_CAPTURE(BM_Gemv, mlp, &kMlp)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, mobilenet_fc, &kMobilenetFc)->Arg(1);
BENCHMARK_CAPTURE(BM_Gemv, mobilenet_fc, &kMobilenetFc)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, mlp_last, &kMlpLast)->Arg(1);
BENCHMARK_CAPTURE(BM_StreamMemcpy, mlp, &kMlp);
BENCHMARK_CAPTURE(BM_StreamRead, mlp, &kMlp);
BENCHMARK_CAPTURE(BM_StreamRead, mobilenet_fc, &kMobilenetFc);

}  // namespace
}  // namespace strata
