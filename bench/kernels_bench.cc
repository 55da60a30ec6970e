// Heavy kernel microbenchmarks: GEMM (constant and run-time B), resnet-style convs,
// a depthwise conv and max pooling, on 1 and 2 threads. Reports FLOP/s; compare with
// the 117.5 GFLOP/s/core fp32 FMA peak (docs/cpu-kernels.md). Rates use the main
// thread's CPU time, which stays meaningful on a shared, oversubscribed machine.
//   strata_kernel_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_node.h"

namespace strata {
namespace {

using bench::IntAttr;
using bench::IntsAttr;

Tensor RandomTensor(Shape shape) { return bench::RandomFloatTensor(std::move(shape), 42); }
Attribute Ints(std::vector<int64_t> v) { return IntsAttr(std::move(v)); }
Attribute Int(int64_t v) { return IntAttr(v); }

// One node whose inputs 1.. are constants (weights) when `const_weights`, with the kernel
// a session would select; the label is its impl name.
void RunNode(benchmark::State& state, const std::string& op, std::map<std::string, Attribute> attrs,
             std::vector<Tensor> inputs, bool const_weights, double flops, const std::string& domain = "") {
  bench::RunNodeBenchmark(state, {.op = op,
                                  .domain = domain,
                                  .attrs = std::move(attrs),
                                  .inputs = std::move(inputs),
                                  .const_weights = const_weights,
                                  .flops = flops});
}

void BM_GemmConstB(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  RunNode(state, "MatMul", {}, {RandomTensor({m, k}), RandomTensor({k, n})}, true, 2.0 * m * n * k);
}
void BM_MatMulDynamicB(benchmark::State& state, int64_t batch, int64_t m, int64_t n, int64_t k) {
  RunNode(state, "MatMul", {}, {RandomTensor({batch, m, k}), RandomTensor({batch, k, n})}, false,
          2.0 * batch * m * n * k);
}
void BM_Conv(benchmark::State& state, int64_t hw, int64_t cin, int64_t cout, int64_t ksize, int64_t group) {
  int64_t pad = ksize / 2;
  RunNode(state, "Conv", {{"pads", Ints({pad, pad, pad, pad})}, {"group", Int(group)}},
          {RandomTensor({1, cin, hw, hw}), RandomTensor({cout, cin / group, ksize, ksize}), RandomTensor({cout})}, true,
          2.0 * hw * hw * cout * (cin / group) * ksize * ksize);
}
// The NHWC conv the layout pass emits (SGEMM for group 1, XNNPACK otherwise): what the CNN
// models run after optimization. stride 2 when `stride` says so; the 7x7 stem has 3 inputs.
void BM_NhwcConv(benchmark::State& state, int64_t hw, int64_t cin, int64_t cout, int64_t ksize, int64_t stride,
                 int64_t group) {
  const int64_t pad = ksize / 2, out = (hw + 2 * pad - ksize) / stride + 1;
  RunNode(state, "NhwcConv",
          {{"pads", Ints({pad, pad, pad, pad})},
           {"strides", Ints({stride, stride})},
           {"group", Int(group)},
           {"strata_onnx_opset", Int(13)}},
          {RandomTensor({1, hw, hw, cin}), RandomTensor({cout, cin / group, ksize, ksize}), RandomTensor({cout})}, true,
          2.0 * out * out * cout * (cin / group) * ksize * ksize, "strata.internal");
}
// ResNet's fused block tail: the conv with the skip input added and Relu in its epilogue
// (what FuseNhwcConvResidual makes of conv -> Add -> Relu). Stride 1, same padding.
void BM_NhwcConvResidual(benchmark::State& state, int64_t hw, int64_t cin, int64_t cout, int64_t ksize) {
  const int64_t pad = ksize / 2;
  RunNode(state, "NhwcConv",
          {{"pads", Ints({pad, pad, pad, pad})},
           {"strata_onnx_opset", Int(13)},
           {"activation", Attribute::String("Relu")},
           {"activation_min", Attribute::Float(0.0f)},
           {"activation_max", Attribute::Float(std::numeric_limits<float>::infinity())}},
          {RandomTensor({1, hw, hw, cin}), RandomTensor({cout, cin, ksize, ksize}), RandomTensor({cout}),
           RandomTensor({1, hw, hw, cout})},
          true, 2.0 * hw * hw * cout * cin * ksize * ksize, "strata.internal");
}
void BM_MaxPool(benchmark::State& state, int64_t hw, int64_t c) {
  int64_t out = (hw + 2 - 3) / 2 + 1;
  RunNode(state, "MaxPool", {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}},
          {RandomTensor({1, c, hw, hw})}, false, 9.0 * out * out * c);
}
// The NHWC max pool the layout pass emits (resnet's 3x3/2 after the stem).
void BM_NhwcMaxPool(benchmark::State& state, int64_t hw, int64_t c) {
  int64_t out = (hw + 2 - 3) / 2 + 1;
  RunNode(state, "NhwcMaxPool",
          {{"kernel_shape", Ints({3, 3})},
           {"strides", Ints({2, 2})},
           {"pads", Ints({1, 1, 1, 1})},
           {"strata_onnx_opset", Int(13)}},
          {RandomTensor({1, hw, hw, c})}, false, 9.0 * out * out * c, "strata.internal");
}

#define THREADS ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
BENCHMARK_CAPTURE(BM_GemmConstB, 1024x1024x1024, 1024, 1024, 1024) THREADS;
BENCHMARK_CAPTURE(BM_GemmConstB, 128x768x768, 128, 768, 768) THREADS;
BENCHMARK_CAPTURE(BM_GemmConstB, 128x3072x768, 128, 3072, 768) THREADS;
BENCHMARK_CAPTURE(BM_GemmConstB, 128x768x3072, 128, 768, 3072) THREADS;
BENCHMARK_CAPTURE(BM_GemmConstB, 64x2304x768, 64, 2304, 768) THREADS;
BENCHMARK_CAPTURE(BM_GemmConstB, 1x4096x4096, 1, 4096, 4096) THREADS;
BENCHMARK_CAPTURE(BM_MatMulDynamicB, 1x128x768x768, 1, 128, 768, 768) THREADS;
BENCHMARK_CAPTURE(BM_MatMulDynamicB, attnQK_12x128x128x64, 12, 128, 128, 64) THREADS;
BENCHMARK_CAPTURE(BM_Conv, 3x3_56x64to64, 56, 64, 64, 3, 1) THREADS;
BENCHMARK_CAPTURE(BM_Conv, 3x3_28x128to128, 28, 128, 128, 3, 1) THREADS;
BENCHMARK_CAPTURE(BM_Conv, 3x3_14x256to256, 14, 256, 256, 3, 1) THREADS;
BENCHMARK_CAPTURE(BM_Conv, 3x3_7x512to512, 7, 512, 512, 3, 1) THREADS;
BENCHMARK_CAPTURE(BM_Conv, 1x1_56x256to64, 56, 256, 64, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_Conv, dw3x3_112x32, 112, 32, 32, 3, 32) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, stem7x7s2_224x3to64, 224, 3, 64, 7, 2, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 3x3_56x64to64, 56, 64, 64, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 3x3s2_56x128to128, 56, 128, 128, 3, 2, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 3x3_14x256to256, 14, 256, 256, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 3x3_7x512to512, 7, 512, 512, 3, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_56x256to64, 56, 256, 64, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_56x64to256, 56, 64, 256, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_7x512to2048, 7, 512, 2048, 1, 1, 1) THREADS;
// Grouped 3x3 convs: RegNetY-400MF's 8-channel groups (stage 1-4, the stride-2 first), a
// ResNeXt-50 32x4d stage-1 conv (4 channels per group), 32 and 64 channels per group.
BENCHMARK_CAPTURE(BM_NhwcConv, g8_3x3s2_112x48, 112, 48, 48, 3, 2, 6) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g8_3x3_56x48, 56, 48, 48, 3, 1, 6) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g8_3x3_28x104, 28, 104, 104, 3, 1, 13) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g8_3x3_14x208, 14, 208, 208, 3, 1, 26) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g8_3x3_7x440, 7, 440, 440, 3, 1, 55) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g4_3x3_56x128, 56, 128, 128, 3, 1, 32) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g32_3x3_28x256, 28, 256, 256, 3, 1, 8) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g64_3x3_14x256, 14, 256, 256, 3, 1, 4) THREADS;
// ResNeXt-50 32x4d's layer3 and layer4 convs: 16 and 32 channels per group.
BENCHMARK_CAPTURE(BM_NhwcConv, g16_3x3_14x512, 14, 512, 512, 3, 1, 32) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g32_3x3_56x128, 56, 128, 128, 3, 1, 4) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, g32_3x3_7x1024, 7, 1024, 1024, 3, 1, 32) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_7x2048to512, 7, 2048, 512, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_28x512to128, 28, 512, 128, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_14x1024to256, 14, 1024, 256, 1, 1, 1) THREADS;
// ResNeXt-50 32x4d layer3 1x1 convs (wider than ResNet-50's).
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_14x512to1024, 14, 512, 1024, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_14x1024to512, 14, 1024, 512, 1, 1, 1) THREADS;
// mobilenet_v2's pointwise convs: N = 24-64, K = 144-384.
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_56x144to24, 56, 144, 24, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_28x192to32, 28, 192, 32, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_14x384to64, 14, 384, 64, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_14x576to96, 14, 576, 96, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_56x24to144, 56, 24, 144, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_112x32to16, 112, 32, 16, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_56x64to64, 56, 64, 64, 1, 1, 1) THREADS;
// EfficientNet-B0 / MNASNet expand convs: K = 16 on a 112x112 map.
BENCHMARK_CAPTURE(BM_NhwcConv, 1x1_112x16to96, 112, 16, 96, 1, 1, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, dw3x3_112x32, 112, 32, 32, 3, 1, 32) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, dw3x3s2_112x96, 112, 96, 96, 3, 2, 96) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, dw3x3_56x144, 56, 144, 144, 3, 1, 144) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConv, stem3x3s2_224x3to32, 224, 3, 32, 3, 2, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConvResidual, 1x1_56x64to256, 56, 64, 256, 1) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConvResidual, 3x3_56x64to64, 56, 64, 64, 3) THREADS;
BENCHMARK_CAPTURE(BM_NhwcConvResidual, 1x1_14x256to1024, 14, 256, 1024, 1) THREADS;
BENCHMARK_CAPTURE(BM_MaxPool, 3x3s2_112x64, 112, 64) THREADS;
BENCHMARK_CAPTURE(BM_NhwcMaxPool, 3x3s2_112x64, 112, 64) THREADS;

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
