#include "bench_node.h"

#include <random>
#include <utility>

#include "core/caching_allocator.h"
#include "core/threadpool.h"

namespace strata::bench {

Tensor RandomFloatTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(shape)).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<float>()[i] = d(rng);
  return t;
}

Attribute IntsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}

Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}

void RunNodeBenchmark(benchmark::State& state, NodeBenchSpec spec) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  Graph graph;
  Node node;
  node.name = "bench";
  node.op_type = spec.op;
  node.domain = spec.domain;
  node.opset = spec.domain.empty() ? 13 : 1;
  node.attrs = std::move(spec.attrs);
  std::vector<Value> values;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    int v = graph.AddValue("in" + std::to_string(i));
    node.inputs.push_back(v);
    if (i > 0 && spec.const_weights) graph.initializers[v] = spec.inputs[i];
    values.emplace_back(spec.inputs[i]);
  }
  node.outputs.push_back(graph.AddValue("out"));
  KernelInit init{node, graph, &pool, spec.config};
  const KernelDef* def = CpuKernels().Select(init, DataType::kFloat);
  if (!def) {
    state.SkipWithError(("no kernel for " + spec.op).c_str());
    return;
  }
  auto kernel = def->factory(init);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().ToString().c_str());
    return;
  }
  std::vector<const Value*> ptrs;
  for (auto& v : values) ptrs.push_back(&v);
  std::vector<Value> outputs(1);
  // A session's allocator: steady-state runs reuse the output buffer. With plain malloc a
  // multi-MiB output is a fresh mmap every run, and on this VM its page faults cost more
  // than the kernel (1x1 56x56 64->256: 11.5 vs ~0.6 ms).
  CachingAllocator alloc;
  for (auto _ : state) {
    KernelContext ctx(node, ptrs, &outputs, &pool, &alloc, nullptr);
    Status st = (*kernel)->Compute(ctx);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].tensor().raw_data());
  }
  state.counters["FLOPS"] = benchmark::Counter(spec.flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(spec.label.empty() ? def->impl : spec.label);
}

}  // namespace strata::bench
