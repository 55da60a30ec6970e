// Graph validation and topological sorting on the protobuf level. It runs before
// onnx's checker (which insists on sorted nodes) so that out-of-order models import, and
// so that cycles, duplicate producers and dangling inputs get errors naming the value.
#include <functional>
#include <queue>

#include "core/import_internal.h"

namespace strata::import {

namespace {

std::string NodeLabel(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
}

std::string GraphLabel(const onnx::GraphProto& g, int depth) {
  if (depth == 0) return "main graph";
  return "subgraph '" + g.name() + "'";
}

// Validates and sorts `g`; inserts into *free_names the names it reads from enclosing scopes.
Status SortRec(onnx::GraphProto* g, const std::unordered_set<std::string>& outer, const OpsetMap& opsets, int depth,
               int max_depth, std::unordered_set<std::string>* free_names) {
  if (depth > max_depth)
    return InvalidModel(GraphLabel(*g, depth), " is nested ", depth, " levels deep; the limit is ", max_depth);
  const std::string where = GraphLabel(*g, depth);
  constexpr int kGraphValue = -1;
  // name -> producing node index, or kGraphValue for inputs and initializers.
  std::unordered_map<std::string, int> producer;
  for (const auto& in : g->input()) {
    if (in.name().empty()) return InvalidModel(where, " has an input with an empty name");
    if (!producer.emplace(in.name(), kGraphValue).second)
      return InvalidModel(where, " declares input '", in.name(), "' twice");
  }
  auto add_constant = [&](const std::string& name) -> Status {
    if (name.empty()) return InvalidModel(where, " has an initializer with an empty name");
    producer.emplace(name, kGraphValue);  // an initializer may share its name with an input
    return Status::Ok();
  };
  std::unordered_set<std::string> init_names;
  for (const auto& t : g->initializer()) {
    if (!init_names.insert(t.name()).second) return InvalidModel(where, " has two initializers named '", t.name(), "'");
    RETURN_IF_ERROR(add_constant(t.name()));
  }
  for (const auto& t : g->sparse_initializer()) RETURN_IF_ERROR(add_constant(t.values().name()));
  const int num_nodes = g->node_size();
  // Unnamed nodes are named by their position in the file, so names stay stable when sorting.
  for (int i = 0; i < num_nodes; ++i)
    if (g->node(i).name().empty()) g->mutable_node(i)->set_name(NodeLabel(g->node(i), i));
  for (int i = 0; i < num_nodes; ++i) {
    const auto& n = g->node(i);
    for (const auto& out : n.output()) {
      if (out.empty()) continue;
      auto [it, inserted] = producer.emplace(out, i);
      if (!inserted) {
        if (it->second == kGraphValue)
          return InvalidModel("value '", out, "' in ", where, " is produced by node '", NodeLabel(n, i),
                              "' but is also a graph input or initializer");
        return InvalidModel("value '", out, "' in ", where, " is produced twice: by node '",
                            NodeLabel(g->node(it->second), it->second), "' and by node '", NodeLabel(n, i), "'");
      }
    }
  }

  // Names visible to subgraphs of this graph.
  std::unordered_set<std::string> inner_scope;
  bool has_subgraphs = false;
  for (const auto& n : g->node())
    for (const auto& a : n.attribute()) has_subgraphs |= a.has_g() || a.graphs_size() > 0;
  if (has_subgraphs) {
    inner_scope = outer;
    for (const auto& [name, p] : producer) inner_scope.insert(name);
  }

  std::vector<std::vector<int>> consumers(num_nodes);
  std::vector<int> indegree(num_nodes, 0);
  // Resolves a name read by node i (directly or by one of its subgraphs).
  auto use = [&](int i, const std::string& name, const char* how) -> Status {
    if (name.empty()) return Status::Ok();
    auto it = producer.find(name);
    if (it != producer.end()) {
      if (it->second != kGraphValue) {
        consumers[it->second].push_back(i);
        ++indegree[i];
      }
      return Status::Ok();
    }
    if (outer.count(name)) {
      free_names->insert(name);
      return Status::Ok();
    }
    return InvalidModel(
        "node '", NodeLabel(g->node(i), i), "' (", g->node(i).op_type(), ") in ", where, " ", how, " '", name,
        "', which is never produced (not a graph input, initializer, node output or outer-scope value)");
  };

  for (int i = 0; i < num_nodes; ++i) {
    onnx::NodeProto* n = g->mutable_node(i);
    if (n->op_type().empty()) return InvalidModel("node '", NodeLabel(*n, i), "' in ", where, " has no op_type");
    if (!opsets.count(NormalizeDomain(n->domain())))
      return InvalidModel("node '", NodeLabel(*n, i), "' (", n->op_type(), ") in ", where, " uses domain '",
                          OnnxDomainName(n->domain()), "', which has no opset_import in the model");
    for (const auto& in : n->input()) RETURN_IF_ERROR(use(i, in, "reads input"));
    std::unordered_set<std::string> sub_free;
    for (auto& a : *n->mutable_attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(SortRec(a.mutable_g(), inner_scope, opsets, depth + 1, max_depth, &sub_free));
      for (auto& sg : *a.mutable_graphs())
        RETURN_IF_ERROR(SortRec(&sg, inner_scope, opsets, depth + 1, max_depth, &sub_free));
    }
    for (const auto& name : sub_free) RETURN_IF_ERROR(use(i, name, "has a subgraph that reads"));
  }
  for (const auto& out : g->output()) {
    if (producer.count(out.name())) continue;
    if (outer.count(out.name())) {
      free_names->insert(out.name());
      continue;
    }
    return InvalidModel(where, " output '", out.name(), "' is never produced");
  }

  // Kahn's algorithm; the min-heap keeps the file's order wherever it is already valid.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < num_nodes; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<int> order;
  order.reserve(num_nodes);
  std::vector<int> remaining = indegree;
  while (!ready.empty()) {
    int u = ready.top();
    ready.pop();
    order.push_back(u);
    for (int c : consumers[u])
      if (--remaining[c] == 0) ready.push(c);
  }
  if (static_cast<int>(order.size()) != num_nodes) {
    // Walk backwards through unsorted producers until a node repeats: that one is on a cycle.
    std::vector<char> sorted(num_nodes, 0);
    for (int u : order) sorted[u] = 1;
    std::vector<std::vector<int>> preds(num_nodes);
    for (int u = 0; u < num_nodes; ++u)
      for (int c : consumers[u])
        if (!sorted[u] && !sorted[c]) preds[c].push_back(u);
    int u = 0;
    while (sorted[u]) ++u;
    std::vector<char> seen(num_nodes, 0);
    while (!seen[u]) {
      seen[u] = 1;
      u = preds[u].front();  // an unsorted node always has an unsorted producer
    }
    return InvalidModel(where, " contains a cycle: node '", NodeLabel(g->node(u), u), "' (", g->node(u).op_type(),
                        ") depends on its own output");
  }
  bool identity = true;
  for (int i = 0; i < num_nodes; ++i) identity &= order[i] == i;
  if (!identity) {
    std::vector<onnx::NodeProto> nodes(num_nodes);
    for (int i = 0; i < num_nodes; ++i) nodes[i].Swap(g->mutable_node(order[i]));
    for (int i = 0; i < num_nodes; ++i) g->mutable_node(i)->Swap(&nodes[i]);
  }
  return Status::Ok();
}

}  // namespace

Status SortAndValidateGraph(onnx::GraphProto* g, const std::unordered_set<std::string>& outer, const OpsetMap& opsets,
                            int depth, int max_depth) {
  std::unordered_set<std::string> free_names;
  return SortRec(g, outer, opsets, depth, max_depth, &free_names);
}

}  // namespace strata::import
