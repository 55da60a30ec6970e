// strata's AVX-512 SGEMM next to OpenBLAS cblas_sgemm and XNNPACK fully-connected on
// the same shapes in one run: 1024^3, bert (M=128), gpt2 (M=64) and resnet 1x1 convs as
// GEMMs. Single thread unless noted; GFLOP/s in the "FLOPS" counter (single-thread
// rates use the thread's CPU time, robust on a shared machine; 2-thread rates wall time). On a shared machine
// run short and repeated, and compare medians:
//   strata_kernel_bench --benchmark_filter=BM_Sgemm --benchmark_min_time=0.2 --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/threadpool.h"
#include "cpu/gemm_kernels.h"
#include "cpu/sgemm.h"

namespace strata {
namespace {

std::vector<float> Rand(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

enum class Impl { kStrata, kOpenBlas, kXnnpack };

void BM_Sgemm(benchmark::State& state, Impl impl, int64_t m, int64_t n, int64_t k) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> a = Rand(m * k, 1), b = Rand(k * n, 2), c(static_cast<size_t>(m * n));
  ThreadPool pool(threads);
  if (impl == Impl::kStrata) {
    if (!sgemm::Available()) return state.SkipWithError("no AVX-512F");
    auto packed = sgemm::PackB(b.data(), k, n, false);
    if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
    for (auto _ : state) {
      Status st = sgemm::Gemm(m, a.data(), k, *packed, c.data(), n, {}, &pool);
      if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
      benchmark::DoNotOptimize(c.data());
    }
  } else if (impl == Impl::kOpenBlas) {
    if (threads != 1) return state.SkipWithError("OpenBLAS is measured single-threaded");
    EnsureBlasSingleThreaded();
    for (auto _ : state) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), 1.0f, a.data(), static_cast<int>(k), b.data(), static_cast<int>(n), 0.0f,
                  c.data(), static_cast<int>(n));
      benchmark::DoNotOptimize(c.data());
    }
  } else {
    if (xnn_initialize(nullptr) != xnn_status_success) return state.SkipWithError("xnn_initialize failed");
    std::vector<float> w(static_cast<size_t>(k * n));  // XNNPACK wants [N, K]
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) w[i * k + j] = b[j * n + i];
    xnn_operator_t op = nullptr;
    if (xnn_create_fully_connected_nc_f32(k, n, k, n, w.data(), nullptr, -INFINITY, INFINITY, 0, &op) !=
        xnn_status_success)
      return state.SkipWithError("xnn_create_fully_connected_nc_f32 failed");
    if (xnn_setup_fully_connected_nc_f32(op, m, a.data(), c.data(), pool.handle()) != xnn_status_success)
      return state.SkipWithError("xnn_setup failed");
    for (auto _ : state) {
      xnn_run_operator(op, pool.handle());
      benchmark::DoNotOptimize(c.data());
    }
    xnn_delete_operator(op);
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// B cold in the caches, as in a model whose weights (resnet50: ~100 MB) exceed the 32 MiB
// L3: each iteration takes the next of enough packed copies of B to pass 64 MiB, so its B
// comes from DRAM (the warm BM_Sgemm keeps one 4 MB B in L3: resnet50's layer4 1x1 2048->512
// takes 0.31 ms there and 0.43 ms in the model). `stride` 2 reads A through row pointers
// of a stride-2 1x1 conv (GemmIndirect: resnet50's layer3.0 downsample 512->1024 on a
// 28x28 input) instead of a dense matrix.
void BM_SgemmColdB(benchmark::State& state, int64_t m, int64_t n, int64_t k, int64_t stride) {
  if (!sgemm::Available()) return state.SkipWithError("no AVX-512F");
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t copies = std::max<int64_t>(2, ((int64_t{64} << 20) / (4 * n * k)) + 1);
  const std::vector<float> b = Rand(k * n, 2);
  std::vector<sgemm::PackedB> packed;
  for (int64_t i = 0; i < copies; ++i) {
    auto p = sgemm::PackB(b.data(), k, n, false);
    if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
    packed.push_back(std::move(p).value());
  }
  // stride 2: A is every other pixel of every other row of a square NHWC image.
  const int64_t side = stride == 1 ? 0 : static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(m))));
  if (stride != 1 && side * side != m) return state.SkipWithError("strided A needs a square M");
  const std::vector<float> a = Rand(stride == 1 ? m * k : (side * stride) * (side * stride) * k, 1);
  std::vector<float> c(static_cast<size_t>(m * n));
  struct Strided {
    const float* x;
    int64_t side, stride, k;
  } strided{a.data(), side, stride, k};
  const sgemm::IndirectA ia{[](const void* ctx, int64_t row0, int64_t rows, const float** dst) {
                              const Strided& s = *static_cast<const Strided*>(ctx);
                              for (int64_t r = 0; r < rows; ++r) {
                                const int64_t oy = (row0 + r) / s.side, ox = (row0 + r) % s.side;
                                dst[r] = s.x + ((oy * s.stride) * s.side * s.stride + ox * s.stride) * s.k;
                              }
                            },
                            &strided, 1, k};
  size_t next = 0;
  for (auto _ : state) {
    const sgemm::PackedB& pb = packed[next];
    next = (next + 1) % packed.size();
    Status st = stride == 1 ? sgemm::Gemm(m, a.data(), k, pb, c.data(), n, {}, &pool)
                            : sgemm::GemmIndirect(m, ia, pb, c.data(), n, {}, &pool);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}
// resnet50's late 1x1 convs: layer4 conv1, layer3 conv1, layer3.0 downsample (stride 2).
BENCHMARK_CAPTURE(BM_SgemmColdB, 49x512x2048, 49, 512, 2048, 1)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_SgemmColdB, 196x256x1024, 196, 256, 1024, 1)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_SgemmColdB, s2_196x1024x512, 196, 1024, 512, 2)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_SgemmColdB, 49x2048x512, 49, 2048, 512, 1)->Arg(1)->Arg(2)->UseRealTime();

#define SHAPE(name, m, n, k)                                                      \
  BENCHMARK_CAPTURE(BM_Sgemm, strata_##name, Impl::kStrata, m, n, k)->Arg(1);     \
  BENCHMARK_CAPTURE(BM_Sgemm, openblas_##name, Impl::kOpenBlas, m, n, k)->Arg(1); \
  BENCHMARK_CAPTURE(BM_Sgemm, xnnpack_##name, Impl::kXnnpack, m, n, k)->Arg(1);   \
  BENCHMARK_CAPTURE(BM_Sgemm, strata_##name, Impl::kStrata, m, n, k)->Arg(2)->UseRealTime();

SHAPE(1024x1024x1024, 1024, 1024, 1024)
SHAPE(bert_128x768x768, 128, 768, 768)
SHAPE(bert_128x2304x768, 128, 2304, 768)
SHAPE(bert_128x3072x768, 128, 3072, 768)
SHAPE(bert_128x768x3072, 128, 768, 3072)
SHAPE(gpt2_64x2304x768, 64, 2304, 768)
SHAPE(gpt2_64x768x3072, 64, 768, 3072)
SHAPE(resnet_3136x64x64, 3136, 64, 64)
SHAPE(resnet_3136x256x64, 3136, 256, 64)
SHAPE(resnet_784x512x128, 784, 512, 128)
SHAPE(resnet_196x1024x256, 196, 1024, 256)
SHAPE(resnet_49x2048x512, 49, 2048, 512)

}  // namespace
}  // namespace strata
