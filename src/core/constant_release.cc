#include "core/constant_release.h"

#include <algorithm>
#include <string>

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

ConstantReleaser::ConstantReleaser(Graph& g)
    : g_(g), readers_left_(g.values.size(), 0), needed_(g.values.size(), 0), seen_(g.nodes.size(), 0) {
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
  for (int v : g.outputs)
    if (v >= 0) needed_[v] = 1;
  for (int v : g.inputs)
    if (v >= 0) needed_[v] = 1;
  for (const Node& n : g.nodes)
    for (int v : n.inputs)
      if (v >= 0) ++readers_left_[v];
  for (const auto& [v, t] : g.initializers) {
    if (!t.buffer()) continue;
    // Unread constants, strings (their buffer owns std::string objects) and constants a
    // subgraph may capture by name are never released; neither is anything sharing a
    // buffer with them.
    if (readers_left_[v] == 0 || t.dtype() == DataType::kString || sub_names.count(g.ValueName(v)) ||
        pinned.count(t.buffer().get()))
      needed_[v] = 1;
    by_buffer_[t.buffer().get()].push_back(v);
  }
}

void ConstantReleaser::OnKernel(size_t node, const OpKernel* kernel) {
  if (node >= g_.nodes.size() || seen_[node]) return;
  seen_[node] = 1;
  const Node& n = g_.nodes[node];
  const auto* packer = dynamic_cast<const PacksConstantInputs*>(kernel);
  std::vector<size_t> packed;
  if (packer) packed = packer->PackedConstantInputs();
  std::vector<const Buffer*> touched;
  for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
    const int v = n.inputs[slot];
    if (v < 0) continue;
    --readers_left_[v];
    if (std::find(packed.begin(), packed.end(), slot) == packed.end()) needed_[v] = 1;
    auto it = g_.initializers.find(v);
    if (it != g_.initializers.end() && it->second.buffer()) touched.push_back(it->second.buffer().get());
  }
  for (const Buffer* b : touched) TryRelease(b);
}

void ConstantReleaser::TryRelease(const Buffer* buffer) {
  if (released_.count(buffer)) return;
  auto it = by_buffer_.find(buffer);
  if (it == by_buffer_.end()) return;
  for (int v : it->second)
    if (needed_[v] || readers_left_[v] > 0) return;
  const int v0 = it->second.front();
  Buffer* buf = g_.initializers.at(v0).buffer().get();
  const size_t bytes = buf->size();
  if (bytes == 0 || !buf->ReleaseStorage()) return;
  released_.insert(buffer);
  ++stats_.released;
  stats_.bytes += bytes;
}

ConstantReleaseStats ReleasePackedConstants(Graph& g, const std::function<const OpKernel*(size_t)>& kernel_of) {
  ConstantReleaser r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) r.OnKernel(i, kernel_of(i));
  return r.stats();
}

}  // namespace strata
