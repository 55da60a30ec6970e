// mobilenet_v2's early fused inverted-residual blocks (fp32 in every session: see
// kMinBf16ExpandWidth in conv_nhwc_block.cc), where most of a bf16 run's time goes.
//   strata_kernel_bench --benchmark_filter=InvertedResidualFp32 --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "bench_node.h"

namespace strata {
namespace {

using bench::IntsAttr;

// hw: input height = width; stride: the depthwise stride; residual when stride 1 and
// cin == cout. state.range(0): threads.
void BM_InvertedResidualFp32(benchmark::State& state, int64_t hw, int64_t cin, int64_t ce, int64_t cout,
                             int64_t stride) {
  std::map<std::string, Attribute> attrs = {{"depthwise.group", bench::IntAttr(ce)},
                                            {"depthwise.kernel_shape", IntsAttr({3, 3})},
                                            {"depthwise.strides", IntsAttr({stride, stride})},
                                            {"depthwise.pads", IntsAttr({1, 1, 1, 1})}};
  for (const char* part : {"expand.", "depthwise."}) {
    attrs[std::string(part) + "activation"] = Attribute::String("Clip");
    attrs[std::string(part) + "activation_min"] = Attribute::Float(0.0f);
    attrs[std::string(part) + "activation_max"] = Attribute::Float(6.0f);
  }
  const int64_t out = (hw - 1) / stride + 1;
  std::vector<Tensor> in = {bench::RandomFloatTensor({1, hw, hw, cin}, 7),
                            bench::RandomFloatTensor({ce, cin, 1, 1}, 8),
                            bench::RandomFloatTensor({ce}, 9),
                            bench::RandomFloatTensor({ce, 1, 3, 3}, 10),
                            bench::RandomFloatTensor({ce}, 11),
                            bench::RandomFloatTensor({cout, ce, 1, 1}, 12),
                            bench::RandomFloatTensor({cout}, 13)};
  if (stride == 1 && cin == cout) in.push_back(bench::RandomFloatTensor({1, hw, hw, cout}, 14));
  bench::RunNodeBenchmark(state, {.op = "NhwcInvertedResidual",
                                  .domain = "strata.internal",
                                  .attrs = std::move(attrs),
                                  .inputs = std::move(in),
                                  .flops = 2.0 * (hw * hw * cin * ce + out * out * ce * (9 + cout)),
                                  .label = "fp32"});
}

#define THREADS ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
// mobilenet_v2 blocks 2 (112^2 16->96->24 /2), 3 (56^2 24->144->24 + residual), 4 (56^2
// 24->144->32 /2), 6 (28^2 32->192->32 + residual), 9 (14^2 64->384->64 + residual).
BENCHMARK_CAPTURE(BM_InvertedResidualFp32, b2_112x16to96to24s2, 112, 16, 96, 24, 2) THREADS;
BENCHMARK_CAPTURE(BM_InvertedResidualFp32, b3_56x24to144to24, 56, 24, 144, 24, 1) THREADS;
BENCHMARK_CAPTURE(BM_InvertedResidualFp32, b4_56x24to144to32s2, 56, 24, 144, 32, 2) THREADS;
BENCHMARK_CAPTURE(BM_InvertedResidualFp32, b6_28x32to192to32, 28, 32, 192, 32, 1) THREADS;
BENCHMARK_CAPTURE(BM_InvertedResidualFp32, b9_14x64to384to64, 14, 64, 384, 64, 1) THREADS;

}  // namespace
}  // namespace strata
