// MatMulInteger with a constant int8 B and a uint8 A (what dynamic quantization makes of a
// transformer's MatMuls), at BERT-base / GPT-2 shapes and a GEMV, on 1 and 2 threads. The
// FLOPS counter counts 2 ops per multiply-add, as the fp32 GEMM benchmarks do (compare with
// BM_GemmConstB at the same shapes). STRATA_INT8_GEMM=0 times the int16 reference kernel.
//   strata_kernel_bench --benchmark_filter=BM_MatMulInteger
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "bench_node.h"

namespace strata {
namespace {

Tensor Bytes(DataType dt, Shape shape, uint32_t seed) {
  auto t = Tensor::Allocate(dt, shape);
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(t->raw_mutable_data());
  for (int64_t i = 0; i < t->num_elements(); ++i) p[i] = static_cast<uint8_t>(rng() & 0xFF);
  return std::move(t).value();
}

void BM_MatMulInteger(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  bench::RunNodeBenchmark(state, {.op = "MatMulInteger",
                                  .inputs = {Bytes(DataType::kUInt8, {m, k}, 1), Bytes(DataType::kInt8, {k, n}, 2)},
                                  .const_weights = true,
                                  .flops = 2.0 * static_cast<double>(m * n * k)});
}

#define THREADS ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x768x768, 128, 768, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x3072x768, 128, 3072, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x768x3072, 128, 768, 3072) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 64x2304x768, 64, 2304, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 1x1024x1024, 1, 1024, 1024) THREADS;

}  // namespace
}  // namespace strata
