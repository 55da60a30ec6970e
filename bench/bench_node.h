// One-node kernel benchmarks shared by the microbenchmark files: build a single node, create
// the kernel the registry selects for it (as a session would) and time Compute.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace strata::bench {

// A float tensor uniform in [-1, 1) from std::mt19937(seed).
Tensor RandomFloatTensor(Shape shape, uint32_t seed);
Attribute IntsAttr(std::vector<int64_t> v);
Attribute IntAttr(int64_t v);

struct NodeBenchSpec {
  std::string op;
  std::string domain;  // "" = ai.onnx (opset 13); other domains use opset 1
  std::map<std::string, Attribute> attrs;
  std::vector<Tensor> inputs;
  bool const_weights = true;  // inputs 1.. become initializers (prepacked weights)
  KernelConfig config;
  double flops = 0;   // per Compute, reported as the FLOPS rate counter
  std::string label;  // empty: the selected kernel's impl name
};

// Runs the benchmark on state.range(0) threads; a missing kernel or failing Compute skips
// it with the error.
void RunNodeBenchmark(benchmark::State& state, NodeBenchSpec spec);

}  // namespace strata::bench
