// Heavy kernel microbenchmarks: GEMM (constant and run-time B), resnet-style convs,
// a depthwise conv and max pooling, on 1 and 2 threads. Reports FLOP/s; compare with
// the 117.5 GFLOP/s/core fp32 FMA peak (docs/cpu-kernels.md). Rates use the main
// thread's CPU time, which stays meaningful on a shared, oversubscribed machine.
//   strata_kernel_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/threadpool.h"

namespace strata {
namespace {

Tensor RandomTensor(Shape shape) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(shape)).value();
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<float>()[i] = d(rng);
  return t;
}

Attribute Ints(std::vector<int64_t> v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Int(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}

// Builds one node whose inputs 1.. are constants (weights) when `const_weights`, creates
// the preferred (optimized) kernel and times Compute.
void RunNode(benchmark::State& state, const std::string& op, std::map<std::string, Attribute> attrs,
             std::vector<Tensor> inputs, bool const_weights, double flops, const std::string& domain = "") {
  ThreadPool pool(static_cast<int>(state.range(0)));
  Graph graph;
  Node node;
  node.name = "bench";
  node.op_type = op;
  node.domain = domain;
  node.opset = domain.empty() ? 13 : 1;
  node.attrs = std::move(attrs);
  std::vector<Value> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int v = graph.AddValue("in" + std::to_string(i));
    node.inputs.push_back(v);
    if (i > 0 && const_weights) graph.initializers[v] = inputs[i];
    values.emplace_back(inputs[i]);
  }
  node.outputs.push_back(graph.AddValue("out"));
  const KernelDef* def = CpuKernels().Find(domain, op, node.opset, DataType::kFloat);
  if (!def) {
    state.SkipWithError(("no kernel for " + op).c_str());
    return;
  }
  KernelInit init{node, graph, &pool, {}};
  auto kernel = def->factory(init);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().ToString().c_str());
    return;
  }
  std::vector<const Value*> ptrs;
  for (auto& v : values) ptrs.push_back(&v);
  std::vector<Value> outputs(1);
  for (auto _ : state) {
    KernelContext ctx(node, ptrs, &outputs, &pool, DefaultAllocator(), nullptr);
    Status st = (*kernel)->Compute(ctx);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].tensor().raw_data());
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(def->impl);
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
void BM_MaxPool(benchmark::State& state, int64_t hw, int64_t c) {
  int64_t out = (hw + 2 - 3) / 2 + 1;
  RunNode(state, "MaxPool", {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}},
          {RandomTensor({1, c, hw, hw})}, false, 9.0 * out * out * c);
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
BENCHMARK_CAPTURE(BM_NhwcConv, dw3x3_112x32, 112, 32, 32, 3, 1, 32) THREADS;
BENCHMARK_CAPTURE(BM_MaxPool, 3x3s2_112x64, 112, 64) THREADS;

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
