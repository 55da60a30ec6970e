// What every graph fusion pass asks before it rewrites: who produces each value, who reads
// it, whether it may disappear into a fused node, and whether a kernel can run the fused
// node at all (asked of the kernel registry, so passes never name a CPU kernel file).
#pragma once

#include <vector>

#include "core/ir.h"
#include "core/kernel.h"

namespace strata {

// Producers, consumers and use counts of one graph state (rebuild after rewriting).
class GraphUses {
 public:
  explicit GraphUses(const Graph& g);

  // Index of the node producing v, or -1 (graph input, constant, unknown, v < 0).
  int Producer(int v) const { return v >= 0 ? producer_[v] : -1; }
  // Node inputs, graph outputs and subgraph captures reading v (see UseCounts).
  int Uses(int v) const { return uses_[v]; }
  // True when v feeds exactly one node input and nothing else (no graph output, no
  // subgraph capture): the value may disappear into a fused node.
  bool Intermediate(int v) const { return v >= 0 && uses_[v] == 1 && !is_output_[v] && consumer_[v] >= 0; }
  // The one node reading v when Intermediate(v), else -1.
  int SoleConsumer(int v) const { return Intermediate(v) ? consumer_[v] : -1; }

 private:
  std::vector<int> uses_, producer_, consumer_;
  std::vector<char> is_output_;
};

// The longest chain of nodes for which counts(node) is true on any path from `node`'s
// outputs to a graph output, `node` itself not counted (g.nodes topologically sorted; only
// `node`'s output value ids are read, so it may be a copy). E.g. how many convs a
// rounding error made in `node` still passes through.
int LongestChainAfter(const Graph& g, const Node& node, bool (*counts)(const Node&));

// The dims of value v when all of them are statically known, else empty (unknown rank or
// any unknown dim; a scalar's are empty too).
std::vector<int64_t> StaticDims(const Graph& g, int v);

// True when v is one of the graph's outputs.
bool IsGraphOutput(const Graph& g, int v);

// Removes the nodes flagged in `drop` (indexed like g.nodes), keeping the others' order.
void RemoveDroppedNodes(Graph& g, const std::vector<char>& drop);

// True when the CPU registry would run `node` (as placed in `g`) on an optimized kernel,
// not the plain reference one, in a session with `config`: the registered entries'
// `covers` predicates decide. A pass asks this of the node it is about to create, so a
// fused form no fast kernel takes is left as written.
bool OptimizedKernelCovers(const Node& node, const Graph& g, const KernelConfig& config);

}  // namespace strata
