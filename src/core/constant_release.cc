#include "core/constant_release.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace strata {

namespace {

// Every name a subgraph (at any depth) mentions, and every buffer its constants use:
// captures are resolved by name at run time, so such constants must stay.
void CollectSubgraphUses(const Graph& g, std::unordered_set<std::string>* names,
                         std::unordered_set<const Buffer*>* buffers) {
  for (const auto& v : g.values) names->insert(v.name);
  for (const auto& [v, t] : g.initializers)
    if (t.buffer()) buffers->insert(t.buffer().get());
  for (const Node& n : g.nodes)
    for (const auto& [an, a] : n.attrs) {
      if (a.t.buffer()) buffers->insert(a.t.buffer().get());
      for (const auto& t : a.tensors)
        if (t.buffer()) buffers->insert(t.buffer().get());
      if (a.g) CollectSubgraphUses(*a.g, names, buffers);
      for (const auto& sg : a.graphs) CollectSubgraphUses(*sg, names, buffers);
    }
}

}  // namespace

ConstantReleaseStats ReleasePackedConstants(Graph& g, const std::function<const OpKernel*(size_t)>& kernel_of) {
  ConstantReleaseStats stats;
  std::unordered_set<std::string> sub_names;
  std::unordered_set<const Buffer*> pinned;  // buffers something we cannot see through uses
  for (const Node& n : g.nodes)
    for (const auto& [an, a] : n.attrs) {
      if (a.t.buffer()) pinned.insert(a.t.buffer().get());
      for (const auto& t : a.tensors)
        if (t.buffer()) pinned.insert(t.buffer().get());
      if (a.g) CollectSubgraphUses(*a.g, &sub_names, &pinned);
      for (const auto& sg : a.graphs) CollectSubgraphUses(*sg, &sub_names, &pinned);
    }

  // Per value: whether some reader still needs its data, and whether it has a reader at all.
  std::vector<char> needed(g.values.size(), 0), read(g.values.size(), 0);
  for (int v : g.outputs)
    if (v >= 0) needed[v] = 1;
  for (int v : g.inputs)
    if (v >= 0) needed[v] = 1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const OpKernel* k = kernel_of(i);
    const auto* packer = dynamic_cast<const PacksConstantInputs*>(k);
    std::vector<size_t> packed;
    if (packer) packed = packer->PackedConstantInputs();
    for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
      int v = n.inputs[slot];
      if (v < 0) continue;
      read[v] = 1;
      if (std::find(packed.begin(), packed.end(), slot) == packed.end()) needed[v] = 1;
    }
  }

  auto releasable = [&](int v, const Tensor& t) {
    return read[v] && !needed[v] && !sub_names.count(g.ValueName(v)) && t.buffer() && !pinned.count(t.buffer().get()) &&
           t.dtype() != DataType::kString;
  };
  // A buffer may back several constants (aliasing folds): free it only if all of them go.
  std::unordered_map<const Buffer*, bool> buffer_ok;
  for (const auto& [v, t] : g.initializers) {
    if (!t.buffer()) continue;
    auto [it, fresh] = buffer_ok.emplace(t.buffer().get(), true);
    if (!releasable(v, t)) it->second = false;
  }
  for (auto& [v, t] : g.initializers) {
    if (!t.buffer() || !buffer_ok[t.buffer().get()] || !releasable(v, t)) continue;
    size_t bytes = t.buffer()->size();
    if (bytes == 0) continue;  // already released through another constant
    if (t.buffer()->ReleaseStorage()) {
      ++stats.released;
      stats.bytes += bytes;
    }
  }
  return stats;
}

}  // namespace strata
