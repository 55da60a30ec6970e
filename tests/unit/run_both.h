// Runs one model twice, optimized and as the reference (optimization level 0, reference
// kernels), for the tests that check a graph pass against the unoptimized graph.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "onnx_builder.h"

namespace strata::test {

// Deterministic values in [-scale, scale) (an LCG), the same for a seed on every machine.
inline std::vector<float> Pseudo(size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 7;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f) * scale;
  }
  return v;
}

// A float initializer of shape `dims` filled with Pseudo(.., seed, scale).
inline void AddInit(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, uint32_t seed,
                    float scale = 0.5f) {
  onnx_builder::AddFloatInit(g, name, dims, [&](size_t n) { return Pseudo(n, seed, scale); });
}

struct OptRefRuns {
  std::vector<Value> opt, ref;              // outputs; empty when a session failed
  std::vector<NodeAssignment> assignments;  // of the optimized session
  std::map<std::string, int> ops;           // op type -> count in the optimized session
};

// Optimized at the default level on `threads` threads vs level 0 with reference kernels on
// one thread. Creation and run failures are reported as test failures.
inline OptRefRuns RunOptimizedAndReference(const onnx::ModelProto& m,
                                           const std::vector<std::pair<std::string, Value>>& feeds, int threads = 1) {
  const std::string bytes = onnx_builder::Serialize(m);
  OptRefRuns r;
  SessionOptions fast;
  fast.threads = threads;
  SessionOptions ref;
  ref.threads = 1;
  ref.optimization_level = 0;
  ref.kernel.prefer_reference = true;
  auto sf = Session::CreateFromBytes(bytes.data(), bytes.size(), fast);
  auto sr = Session::CreateFromBytes(bytes.data(), bytes.size(), ref);
  EXPECT_TRUE(sf.ok()) << sf.status().ToString();
  EXPECT_TRUE(sr.ok()) << sr.status().ToString();
  if (!sf.ok() || !sr.ok()) return r;
  auto of = (*sf)->Run(feeds);
  auto orf = (*sr)->Run(feeds);
  EXPECT_TRUE(of.ok()) << of.status().ToString();
  EXPECT_TRUE(orf.ok()) << orf.status().ToString();
  if (of.ok()) r.opt = *of;
  if (orf.ok()) r.ref = *orf;
  r.assignments = (*sf)->assignments();
  for (const auto& a : r.assignments) ++r.ops[a.op_type];
  return r;
}

}  // namespace strata::test
