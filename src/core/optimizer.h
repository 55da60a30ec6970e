// Graph optimization passes over the strata IR. Each pass keeps the graph's
// meaning: tests compare optimized with unoptimized outputs.
#pragma once

#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "core/status.h"

namespace strata {

struct OptimizerOptions {
  int level = 99;  // 0 none, 1 basic (folding, dead code), 2+ fusions
  ThreadPool* pool = nullptr;
  KernelConfig kernel;
  // False when accelerator providers may claim nodes after optimization: passes that move
  // ops into strata's internal domain (the NHWC layout pass) are then skipped, since no
  // provider supports those ops.
  bool cpu_only = true;
};

Status OptimizeGraph(Graph& g, const OptimizerOptions& opts);

// Use counts of every value: node inputs, graph outputs, and names captured by subgraphs
// (a value with count 0 is dead; count 1 and not a graph output: a single consumer).
std::vector<int> UseCounts(const Graph& g);

// Individual passes, exposed for tests. Each returns how many rewrites it made.
Result<int> FoldConstants(Graph& g, const OptimizerOptions& opts);
int EliminateIdentities(Graph& g);
int EliminateDeadNodes(Graph& g);
Result<int> FoldConvBatchNorm(Graph& g);
int FuseActivations(Graph& g);

}  // namespace strata
