// bf16 fast math vs fp32: the same MatMul/Conv nodes built with bf16_fast_math off and
// on, registered next to each other so a filtered run alternates A/B on a noisy machine.
//   strata_kernel_bench --benchmark_filter=Bf16 --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "bench_node.h"
#include "core/threadpool.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/gemm_bf16.h"

namespace strata {
namespace {

using bench::IntsAttr;

Tensor RandomInput(Shape shape) { return bench::RandomFloatTensor(std::move(shape), 7); }

// state.range(0): threads; state.range(1): 1 = bf16 fast math.
void RunBf16Node(benchmark::State& state, const std::string& op, std::map<std::string, Attribute> attrs,
                 std::vector<Tensor> inputs, double flops) {
  const bool bf16 = state.range(1) != 0;
  bench::RunNodeBenchmark(state, {.op = op,
                                  .attrs = std::move(attrs),
                                  .inputs = std::move(inputs),
                                  .config = {.bf16_fast_math = bf16},
                                  .flops = flops,
                                  .label = bf16 ? "bf16" : "fp32"});
}

void BM_Bf16MatMul(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  RunBf16Node(state, "MatMul", {}, {RandomInput({m, k}), RandomInput({k, n})}, 2.0 * m * n * k);
}
void BM_Bf16Conv(benchmark::State& state, int64_t hw, int64_t cin, int64_t cout, int64_t ksize, int64_t stride) {
  const int64_t pad = ksize / 2, out = (hw + 2 * pad - ksize) / stride + 1;
  RunBf16Node(state, "Conv", {{"pads", IntsAttr({pad, pad, pad, pad})}, {"strides", IntsAttr({stride, stride})}},
              {RandomInput({1, cin, hw, hw}), RandomInput({cout, cin, ksize, ksize}), RandomInput({cout})},
              2.0 * out * out * cout * cin * ksize * ksize);
}

// The NHWC conv the layout pass emits for CNNs (X is NHWC, W stays OIHW).
void BM_Bf16NhwcConv(benchmark::State& state, int64_t hw, int64_t cin, int64_t cout, int64_t ksize, int64_t stride) {
  const int64_t pad = ksize / 2, out = (hw + 2 * pad - ksize) / stride + 1;
  const bool bf16 = state.range(1) != 0;
  bench::RunNodeBenchmark(
      state, {.op = "NhwcConv",
              .domain = "strata.internal",
              .attrs = {{"pads", IntsAttr({pad, pad, pad, pad})},
                        {"strides", IntsAttr({stride, stride})},
                        {"kernel_shape", IntsAttr({ksize, ksize})}},
              .inputs = {RandomInput({1, hw, hw, cin}), RandomInput({cout, cin, ksize, ksize}), RandomInput({cout})},
              .config = {.bf16_fast_math = bf16},
              .flops = 2.0 * out * out * cout * cin * ksize * ksize,
              .label = bf16 ? "bf16" : "fp32"});
}

// mobilenet_v2's fused inverted-residual block (expand 1x1 + ReLU6, depthwise 3x3 + ReLU6,
// project 1x1 [+ residual]) on NHWC input; bf16 covers blocks with ce >= 512.
void BM_Bf16InvertedResidual(benchmark::State& state, int64_t hw, int64_t cin, int64_t ce, int64_t cout, bool residual,
                             int64_t stride = 1) {
  const bool bf16 = state.range(1) != 0;
  std::map<std::string, Attribute> attrs = {{"depthwise.group", bench::IntAttr(ce)},
                                            {"depthwise.kernel_shape", IntsAttr({3, 3})},
                                            {"depthwise.strides", IntsAttr({stride, stride})},
                                            {"depthwise.pads", IntsAttr({1, 1, 1, 1})}};
  for (const char* part : {"expand.", "depthwise."}) {
    attrs[std::string(part) + "activation"] = Attribute::String("Clip");
    attrs[std::string(part) + "activation_min"] = Attribute::Float(0.0f);
    attrs[std::string(part) + "activation_max"] = Attribute::Float(6.0f);
  }
  std::vector<Tensor> in = {RandomInput({1, hw, hw, cin}),
                            RandomInput({ce, cin, 1, 1}),
                            RandomInput({ce}),
                            RandomInput({ce, 1, 3, 3}),
                            RandomInput({ce}),
                            RandomInput({cout, ce, 1, 1}),
                            RandomInput({cout})};
  if (residual) in.push_back(RandomInput({1, hw, hw, cout}));
  bench::RunNodeBenchmark(state, {.op = "NhwcInvertedResidual",
                                  .domain = "strata.internal",
                                  .attrs = std::move(attrs),
                                  .inputs = std::move(in),
                                  .config = {.bf16_fast_math = bf16},
                                  .flops = 2.0 * ce * (hw * hw * cin + (hw / stride) * (hw / stride) * (9 + cout)),
                                  .label = bf16 ? "bf16" : "fp32"});
}

// The bf16 GEMM with B streamed from DRAM, as resnet50's late 1x1 convs and classifier read
// it (its ~50 MB of bf16 weights do not fit the L3): M x K times K x N with one of enough
// packed copies of B to fill 64 MiB, a different one each iteration. state.range(0): threads.
void BM_Bf16GemmColdB(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  const Tensor a = RandomInput({m, k}), b = RandomInput({k, n});
  std::vector<PackedBf16B> packs;
  const int64_t copies = std::max<int64_t>(2, (int64_t{64} << 20) / (k * n * 2));
  for (int64_t i = 0; i < copies; ++i) {
    auto p = PackBf16(b.data<float>(), k, n, /*trans=*/false);
    if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
    packs.push_back(std::move(p).value());
  }
  ThreadPool pool(static_cast<int>(state.range(0)));
  Node node;
  node.op_type = "MatMul";
  node.name = "cold_b";
  std::vector<float> c(static_cast<size_t>(m * n));
  size_t i = 0;
  for (auto _ : state) {
    const Status st = GemmBf16(node, m, a.data<float>(), k, false, packs[i++ % packs.size()], c.data(), n, {}, &pool);
    if (!st.ok()) return state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The fused inverted-residual block's GEMM on pair rows it rounded itself (PairRowsGemm):
// state.range(0) = 1 reads them in place on AMX (rows padded to 16 pairs, AmxRowsGemm);
// 0 gives the rows an odd stride, so the copy-per-K-chunk path (BlockRows) runs instead.
void BM_Bf16PairRowsGemm(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  if (!Bf16GemmAvailable()) return state.SkipWithError("needs avx512_bf16");
  const Tensor a = bench::RandomFloatTensor({m, k}, 3), w = bench::RandomFloatTensor({n, k}, 4);
  const int64_t pairs = block_bf16::PairsPerRow(k);
  const int64_t ldp = state.range(0) ? block_bf16::RowWords(pairs) : (pairs % 2 ? pairs : pairs + 1);
  std::vector<uint32_t> rows(static_cast<size_t>(m * ldp));
  block_bf16::RoundRows(a.data<float>(), k, m, k, rows.data(), ldp);
  auto packed = PackBf16(w.data<float>(), k, n, /*trans=*/true);
  if (!packed.ok()) return state.SkipWithError(packed.status().ToString().c_str());
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    block_bf16::PairRowsGemm(m, rows.data(), ldp, *packed, c.data(), n, Bf16Epilogue{});
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The AMX unit's throughput right now: TDPBF16PS on tiles already loaded (no memory), 4
// independent accumulators. On a shared VM this moves between runs (1.4-2.9 TFLOP/s on the
// Xeon VM within minutes), which moves every bf16 figure with it; bf16_compare.py --amx-peak
// samples it next to each round.
//
// LDTILECFG's 64-byte operand, palette 1, every tile 16 rows of 64 bytes.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
const AmxTileConfig kAmxTileConfig;

__attribute__((target("amx-tile,amx-bf16"))) void AmxTdpLoop(int64_t n) {
  _tile_loadconfig(&kAmxTileConfig);
  // Tile numbers are immediates (statements: GCC's _tile_zero is an asm statement).
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t i = 0; i < n; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_release();
}
void BM_AmxTdpPeak(benchmark::State& state) {
  if (!bf16_internal::AmxAvailable()) return state.SkipWithError("needs AMX (amx_tile + amx_bf16)");
  constexpr int64_t kSteps = 4096;
  for (auto _ : state) AmxTdpLoop(kSteps);
  state.counters["GFLOP/s"] = benchmark::Counter(
      4.0 * 16 * 16 * 32 * 2 * kSteps * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AmxTdpPeak);

#define AB ->Args({1, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)
BENCHMARK_CAPTURE(BM_Bf16MatMul, 128x768x768, 128, 768, 768) AB;
BENCHMARK_CAPTURE(BM_Bf16MatMul, 128x3072x768, 128, 3072, 768) AB;
BENCHMARK_CAPTURE(BM_Bf16MatMul, 128x768x3072, 128, 768, 3072) AB;
BENCHMARK_CAPTURE(BM_Bf16MatMul, 512x512x512, 512, 512, 512) AB;
BENCHMARK_CAPTURE(BM_Bf16Conv, 3x3_56x64to64, 56, 64, 64, 3, 1) AB;
BENCHMARK_CAPTURE(BM_Bf16Conv, 3x3_28x128to128, 28, 128, 128, 3, 1) AB;
BENCHMARK_CAPTURE(BM_Bf16Conv, 3x3_7x512to512, 7, 512, 512, 3, 1) AB;
BENCHMARK_CAPTURE(BM_Bf16Conv, 1x1_56x256to64, 56, 256, 64, 1, 1) AB;
BENCHMARK_CAPTURE(BM_Bf16Conv, 7x7s2_224x3to64, 224, 3, 64, 7, 2) AB;
// ResNet shapes on the NHWC path (1 and 2 threads).
#define AB2 AB->Args({2, 0})->Args({2, 1})
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 3x3_56x64to64, 56, 64, 64, 3, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 3x3_28x128to128, 28, 128, 128, 3, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 3x3_14x256to256, 14, 256, 256, 3, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 3x3_7x512to512, 7, 512, 512, 3, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 1x1_56x256to64, 56, 256, 64, 1, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 1x1_56x64to256, 56, 64, 256, 1, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 1x1_14x1024to256, 14, 1024, 256, 1, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 1x1_14x256to1024, 14, 256, 1024, 1, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 7x7s2_224x3to64, 224, 3, 64, 7, 2) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 1x1_7x160to960, 7, 160, 960, 1, 1) AB2;
BENCHMARK_CAPTURE(BM_Bf16NhwcConv, 3x3s2_224x3to32, 224, 3, 32, 3, 2) AB2;
// resnet50's layer4 conv1 (7^2 2048->512), layer3 conv1 (14^2 1024->256) and classifier.
BENCHMARK_CAPTURE(BM_Bf16GemmColdB, 49x512x2048, 49, 512, 2048)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Bf16GemmColdB, 196x256x1024, 196, 256, 1024)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Bf16GemmColdB, 1x1000x2048, 1, 1000, 2048)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
// mobilenet_v2 blocks 13 (14^2 96->576->96 + residual), 15 and 17 (7^2 160->960->160/320).
// mobilenet_v2 block 13's expand and project GEMMs (14^2 rows), block 17's project (7^2),
// a 3136-row strip-sized product.
#define PR ->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 196x96to576, 196, 96, 576) PR;
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 196x576to96, 196, 576, 96) PR;
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 49x960to320, 49, 960, 320) PR;
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 768x192to64, 768, 192, 64) PR;
// The split rows (three segments per row) of resnet50's 56^2 1x1 convs 64->256 and 256->64.
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 3136x192to256, 3136, 192, 256) PR;
BENCHMARK_CAPTURE(BM_Bf16PairRowsGemm, 3136x768to64, 3136, 768, 64) PR;
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 14x96to576to96_res, 14, 96, 576, 96, true) AB2;
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 7x160to960to160_res, 7, 160, 960, 160, true) AB2;
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 7x160to960to320, 7, 160, 960, 320, false) AB2;
// The early blocks 2 (112^2 16->96->24 /2), 3 (56^2 24->144->24 + residual) and 4 (56^2
// 24->144->32 /2): fp32 in bf16 sessions unless the split rows reach down to them.
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 112x16to96to24s2, 112, 16, 96, 24, false, 2) AB2;
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 56x24to144to24_res, 56, 24, 144, 24, true) AB2;
BENCHMARK_CAPTURE(BM_Bf16InvertedResidual, 56x24to144to32s2, 56, 24, 144, 32, false, 2) AB2;

}  // namespace
}  // namespace strata
