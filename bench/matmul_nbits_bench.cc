// MatMulNBits kernels: int4/int8 GEMV (M=1) and GEMM (M=16, 128) at K, N in {2048, 4096,
// 8192}, reporting the packed-weight traffic as bytes/s, plus memcpy and a read-only
// stream in the same binary so the GEMV can be put against the machine's bandwidth.
//   strata_kernel_bench --benchmark_filter='NBits|Memory' --benchmark_min_time=0.1
// STRATA_NBITS_BENCH_THREADS=N sets the pool's threads (default: one per CPU); with 1 the
// reported CPU time is the kernel's own, which a loaded machine distorts least.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "cpu/matmul_nbits.h"

namespace strata {
namespace {

// int8: packed for the accuracy_level 4 (VNNI) kernel.
const nbits::Packed& PackedWeights(int64_t bits, int64_t K, int64_t N, bool int8 = false) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::unique_ptr<nbits::Packed>> cache;
  auto& slot = cache[{bits, K, N, int8}];
  if (!slot) {
    nbits::Params p;
    p.K = K;
    p.N = N;
    p.bits = bits;
    p.block_size = 32;
    p.n_blocks = (K + 31) / 32;
    p.blob = 32 * bits / 8;
    std::mt19937 rng(1);
    std::vector<uint8_t> b(N * p.n_blocks * p.blob);
    for (auto& v : b) v = static_cast<uint8_t>(rng());
    std::vector<float> s(N * p.n_blocks, 0.01f);
    Tensor bt = Tensor::FromVector(b, {N, p.n_blocks, p.blob});
    Tensor st = Tensor::FromVector(s, {N * p.n_blocks});
    nbits::Inputs in;
    in.b = &bt;
    in.scales = &st;
    slot = std::make_unique<nbits::Packed>(nbits::Pack(p, in, int8));
  }
  return *slot;
}

ThreadPool* Pool() {
  static ThreadPool pool([] {
    const char* t = std::getenv("STRATA_NBITS_BENCH_THREADS");
    return t ? std::atoi(t) : 0;
  }());
  return &pool;
}

// Args: bits, K, N, M.
void BM_NBitsMatMul(benchmark::State& state) {
  const int64_t bits = state.range(0), K = state.range(1), N = state.range(2), M = state.range(3);
  const nbits::Packed& w = PackedWeights(bits, K, N);
  const nbits::Isa isa = nbits::ResolveIsa(std::getenv("STRATA_FORCE_ISA"));
  std::vector<float> a(M * K, 0.5f), y(M * N);
  for (auto _ : state) {
    nbits::PackedMatMul(isa, w, a.data(), M, y.data(), Pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes()));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * M * N * K * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(nbits::IsaName(isa));
}
BENCHMARK(BM_NBitsMatMul)
    ->ArgsProduct({{4, 8}, {2048, 4096, 8192}, {2048, 4096, 8192}, {1, 16, 128}})
    ->ArgNames({"bits", "K", "N", "M"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The same through accuracy_level 4's int8 activations (AVX512-VNNI only).
void BM_NBitsMatMulInt8(benchmark::State& state) {
  if (!nbits::HasAvx512Vnni()) {
    state.SkipWithError("no AVX512-VNNI on this CPU");
    return;
  }
  const int64_t bits = state.range(0), K = state.range(1), N = state.range(2), M = state.range(3);
  const nbits::Packed& w = PackedWeights(bits, K, N, /*int8=*/true);
  std::vector<float> a(M * K, 0.5f), y(M * N);
  for (auto _ : state) {
    nbits::PackedMatMulInt8(w, a.data(), M, y.data(), Pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes()));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * M * N * K * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_NBitsMatMulInt8)
    ->ArgsProduct({{4, 8}, {2048, 4096, 8192}, {2048, 4096, 8192}, {1, 16, 128}})
    ->ArgNames({"bits", "K", "N", "M"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Buffers of 256 MiB, at least 4x the L3 of current server parts (32 MiB per CCD on Zen
// 4/5), so these measure memory, not cache; GEMV weights of K=N=8192 (int8: 64 MiB) are
// the shapes to put against them.
// Bytes copied per second (each byte is read once and written once).
void BM_MemoryCopy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_MemoryCopy)->Arg(256)->ArgName("MiB")->UseRealTime()->Unit(benchmark::kMicrosecond);

// Bytes read per second by one thread (what a GEMV needs: weights are only read).
void BM_MemoryRead(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  std::vector<uint64_t> src(bytes / 8, 1);
  for (auto _ : state) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < src.size(); i += 4) {
      s0 += src[i];
      s1 += src[i + 1];
      s2 += src[i + 2];
      s3 += src[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_MemoryRead)->Arg(256)->ArgName("MiB")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata
