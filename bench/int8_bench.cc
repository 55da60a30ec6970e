// MatMulInteger with a constant int8 B and a uint8 A (what dynamic quantization makes of a
// transformer's MatMuls), at BERT-base / GPT-2 shapes and a GEMV, on 1 and 2 threads. The
// FLOPS counter counts 2 ops per multiply-add, as the fp32 GEMM benchmarks do (compare with
// BM_GemmConstB at the same shapes). STRATA_INT8_GEMM=0 times the int16 reference kernel.
//   strata_kernel_bench --benchmark_filter=BM_MatMulInteger
// Also the layout pass's NHWC QLinearConv at mobilenet_v2_qdq's shapes (a static int8 model):
// the 3x3/2 stem of 3 channels (and resnet's 7x7/2), a 1x1 expansion of 16 channels, depthwise 3x3 at stride 1 and 2.
//   strata_kernel_bench --benchmark_filter=BM_NhwcQLinearConv
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

// NhwcQLinearConv: x [1, h, w, c] uint8, W [m, c / group, k, k] int8 per-channel, int32 bias;
// `residual`: with a ResNet block's residual sum and Relu in its store (FuseNhwcQConvAdd's
// inputs 9-15), a uint8 skip of the output's shape.
void BM_NhwcQLinearConv(benchmark::State& state, int64_t hw, int64_t c, int64_t m, int64_t k, int64_t stride,
                        int64_t group, bool residual = false) {
  const int64_t pad = k / 2, out = (hw + 2 * pad - k) / stride + 1;
  std::vector<float> ws(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) ws[static_cast<size_t>(i)] = 0.002f + 0.0001f * static_cast<float>(i % 7);
  std::vector<int32_t> bias(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) bias[static_cast<size_t>(i)] = static_cast<int32_t>(i * 37 % 2001) - 1000;
  std::vector<Tensor> inputs = {Bytes(DataType::kUInt8, {1, hw, hw, c}, 3),
                                Tensor::Scalar<float>(0.02f),
                                Tensor::Scalar<uint8_t>(128),
                                Bytes(DataType::kInt8, {m, c / group, k, k}, 4),
                                Tensor::FromVector<float>(ws, {m}),
                                Tensor::FromVector<int8_t>(std::vector<int8_t>(m, 0), {m}),
                                Tensor::Scalar<float>(0.05f),
                                Tensor::Scalar<uint8_t>(0),
                                Tensor::FromVector<int32_t>(bias, {m})};
  bench::NodeBenchSpec nb;
  nb.op = "NhwcQLinearConv";
  nb.domain = "strata.internal";
  nb.attrs = {{"strides", bench::IntsAttr({stride, stride})},
              {"pads", bench::IntsAttr({pad, pad, pad, pad})},
              {"group", bench::IntAttr(group)}};
  nb.flops = 2.0 * static_cast<double>(out * out * m * (c / group) * k * k);
  if (residual) {
    inputs.push_back(Bytes(DataType::kUInt8, {1, out, out, m}, 5));
    for (float scale : {0.04f, 0.05f, 0.06f}) {
      inputs.push_back(Tensor::Scalar<float>(scale));
      inputs.push_back(Tensor::Scalar<uint8_t>(scale == 0.06f ? 0 : 100));
    }
    nb.attrs["residual_relu"] = bench::IntAttr(1);
  }
  nb.inputs = std::move(inputs);
  bench::RunNodeBenchmark(state, nb);
}

#define THREADS ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x768x768, 128, 768, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x3072x768, 128, 3072, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 128x768x3072, 128, 768, 3072) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 64x2304x768, 64, 2304, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulInteger, 1x1024x1024, 1, 1024, 1024) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, stem_224_3to32_3x3s2, 224, 3, 32, 3, 2, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, stem_224_3to64_7x7s2, 224, 3, 64, 7, 2, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, pw_112_16to96, 112, 16, 96, 1, 1, 1) THREADS;
// MobileNetV2's 56x56 expansion (K = 24: six VNNI groups per output).
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, pw_56_24to144, 56, 24, 144, 1, 1, 1) THREADS;
// ResNet's 3x3 convs (layer1 to layer4) and a 1x1 expansion of its bottlenecks.
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, r3x3_56_64, 56, 64, 64, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, r3x3_28_128, 28, 128, 128, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, r3x3_7_512, 7, 512, 512, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, pw_56_64to256, 56, 64, 256, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, pw_56_64to256_residual, 56, 64, 256, 1, 1, 1, true) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, dw_56_144_s1, 56, 144, 144, 3, 1, 144) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, dw_112_96_s2, 112, 96, 96, 3, 2, 96) THREADS;
BENCHMARK_CAPTURE(BM_NhwcQLinearConv, dw_7_960_s1, 7, 960, 960, 3, 1, 960) THREADS;

}  // namespace
}  // namespace strata
