// One depthwise 3x3 output row (dw::ConvRow) on its own, input rows resident in L1/L2, at
// mobilenet_v2's shapes: the kernel's time without the fused block around it. Eighth
// session on the Xeon VM: before the blocks of a row ran inline (each 4-pixel block was an
// out-of-line call that reloaded its weights), 112 px x 96 ch at stride 2 took ~4 us a row,
// after ~2 us; 7 px x 960 ch 5.4 -> 2.8 us (a standalone harness, docs/cpu-kernels.md).
// An iteration computes three output rows; items_per_second counts output pixel-channels.
// Input and output are 64-byte aligned tensors (a vector's 16-byte alignment splits every
// store across cache lines).
//   strata_kernel_bench --benchmark_filter=BM_DepthwiseRow --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "cpu/conv_nhwc_depthwise.h"

namespace strata {
namespace {

// state.range: channels, input width, stride. Three output rows over seven input rows
// (stride 2; stride 1 uses the first five), aligned like the block's strip buffers.
void BM_DepthwiseRow(benchmark::State& state) {
  if (!dw::Available()) {
    state.SkipWithError("needs AVX-512F");
    return;
  }
  const int64_t c = state.range(0), w = state.range(1), stride = state.range(2);
  const int64_t ow = (w + 2 - 3) / stride + 1;
  std::vector<float> wv(static_cast<size_t>(c * 9)), bv(static_cast<size_t>(c), 0.1f);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i % 13) * 0.01f;
  const Tensor wt = Tensor::FromVector<float>(wv, {c, 1, 3, 3});
  const Tensor bt = Tensor::FromVector<float>(bv, {c});
  const dw::Weights packed = dw::PackWeights(wt, &bt);
  const dw::RowGeometry g{w, ow, stride, 1, 1, 0.0f, 6.0f};
  constexpr int64_t kRows = 7, kOut = 3;
  const Tensor in =
      Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(kRows * w * c), 0.5f), {kRows, w, c});
  Tensor out = Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(kOut * ow * c)), {kOut, ow, c});
  float* y = out.mutable_data<float>();
  const float* x = in.data<float>();
  for (auto _ : state) {
    for (int64_t o = 0; o < kOut; ++o) {
      const float* rows[3] = {x + (stride * o) * w * c, x + (stride * o + 1) * w * c, x + (stride * o + 2) * w * c};
      dw::ConvRow(packed, g, rows, y + o * ow * c);
    }
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kOut * ow * c);
}

BENCHMARK(BM_DepthwiseRow)
    ->Args({16, 112, 1})
    ->Args({96, 112, 2})
    ->Args({144, 56, 1})
    ->Args({192, 28, 1})
    ->Args({384, 14, 1})
    ->Args({576, 14, 2})
    ->Args({960, 7, 1});

}  // namespace
}  // namespace strata
