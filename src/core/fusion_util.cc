#include "core/fusion_util.h"

#include "core/optimizer.h"

namespace strata {

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
