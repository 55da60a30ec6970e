// Builds the plain-C graph descriptions of include/strata/provider.h from strata IR.
// The builder owns every string, dims array and attribute array the descriptions point
// to, so they stay valid for as long as the builder lives.
#pragma once

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir.h"
#include "strata/provider.h"

namespace strata::plugin {

class DescBuilder {
 public:
  explicit DescBuilder(const Graph& g) : g_(g) {}
  // Adds node `n` of the graph with every value it touches. Constants carry their data.
  void AddNode(const Node& n);
  // Index of graph value v in the value table, adding it if new.
  int32_t ValueIndex(int v);
  // Provider options ("key=value" strings, the provider prefix already removed) passed
  // in the partition description. Malformed entries (no '=') are an error in Finish's
  // caller, not here: see ParseProviderOption.
  void SetOptions(const std::vector<std::pair<std::string, std::string>>& options);
  // Builds the descriptions. Pointers into earlier results are invalidated.
  const strata_partition_desc& Finish(const std::string& name, const std::vector<int>& inputs,
                                      const std::vector<int>& outputs);
  const strata_node_desc& node(size_t i) const { return node_descs_[i]; }

 private:
  const char* Keep(const std::string& s);
  struct PendingNode {
    const Node* node;
    std::vector<int32_t> inputs, outputs;
    size_t attr_begin = 0, attr_count = 0;
  };
  const Graph& g_;
  std::deque<std::string> strings_;
  std::deque<std::vector<int64_t>> dims_;
  std::deque<std::vector<const char*>> string_lists_;
  std::vector<strata_value_desc> values_;
  std::unordered_map<int, int32_t> value_index_;
  std::vector<strata_attribute> attrs_;
  std::vector<PendingNode> nodes_;
  std::vector<strata_node_desc> node_descs_;
  std::vector<int32_t> part_inputs_, part_outputs_;
  std::vector<const char*> option_keys_, option_values_;
  strata_partition_desc part_{};
};

// True if a node can be described across the ABI at all: tensor values of numeric
// dtypes only and no subgraph attributes.
bool Describable(const Node& n, const Graph& g);

}  // namespace strata::plugin
