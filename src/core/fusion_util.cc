#include "core/fusion_util.h"

#include <algorithm>

#include "core/optimizer.h"

namespace strata {

std::vector<int64_t> StaticDims(const Graph& g, int v) {
  const TypeInfo& t = g.values[v].type;
  if (t.kind != TypeInfo::Kind::kTensor || !t.has_shape) return {};
  std::vector<int64_t> d;
  for (const Dim& x : t.dims) {
    if (!x.known()) return {};
    d.push_back(x.value);
  }
  return d;
}

bool IsGraphOutput(const Graph& g, int v) {
  for (int o : g.outputs)
    if (o == v) return true;
  return false;
}

GraphUses::GraphUses(const Graph& g)
    : uses_(UseCounts(g)),
      producer_(g.values.size(), -1),
      consumer_(g.values.size(), -1),
      is_output_(g.values.size(), 0) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs)
      if (o >= 0) producer_[o] = static_cast<int>(i);
    for (int v : g.nodes[i].inputs)
      if (v >= 0) consumer_[v] = static_cast<int>(i);
  }
  for (int o : g.outputs)
    if (o >= 0) is_output_[o] = 1;
}

int LongestChainAfter(const Graph& g, const Node& node, bool (*counts)(const Node&)) {
  // after[v]: the longest chain from value v to a graph output. One reverse pass over the
  // topological order: a node's inputs see the best of its outputs, plus the node itself.
  std::vector<int> after(g.values.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    int best = 0;
    for (int v : n.outputs)
      if (v >= 0) best = std::max(best, after[static_cast<size_t>(v)]);
    best += counts(n) ? 1 : 0;
    for (int v : n.inputs)
      if (v >= 0) after[static_cast<size_t>(v)] = std::max(after[static_cast<size_t>(v)], best);
  }
  int chain = 0;
  for (int v : node.outputs)
    if (v >= 0 && static_cast<size_t>(v) < after.size()) chain = std::max(chain, after[static_cast<size_t>(v)]);
  return chain;
}

void RemoveDroppedNodes(Graph& g, const std::vector<char>& drop) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

bool OptimizedKernelCovers(const Node& node, const Graph& g, const KernelConfig& config) {
  const KernelInit init{node, g, nullptr, config};
  // The dispatch dtype: fusions only build float nodes, and Select ignores it for
  // entries that list no types.
  const KernelDef* def = CpuKernels().Select(init, DataType::kFloat, /*want_reference=*/false);
  return def != nullptr && !def->reference;
}

}  // namespace strata
