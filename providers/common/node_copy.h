// Shared by the provider plugins (header-only, compiled into each plugin; nothing here
// crosses the ABI): a node description copied out of its strata_node_desc, which is only
// valid during the supports_node/compile call, with typed attribute lookups.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/provider.h"

namespace strata_provider_common {

struct Attr {
  int32_t type = 0;  // strata_attr_type
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
};

struct NodeCopy {
  std::string name, op, domain;
  int opset = 0;
  std::vector<int32_t> inputs, outputs;  // value indices; -1: omitted
  std::map<std::string, Attr> attrs;

  bool Has(const char* n) const { return attrs.count(n) != 0; }
  int64_t Int(const char* n, int64_t def) const {
    auto it = attrs.find(n);
    return it != attrs.end() && it->second.type == STRATA_ATTR_INT ? it->second.i : def;
  }
  float Float(const char* n, float def) const {
    auto it = attrs.find(n);
    return it != attrs.end() && it->second.type == STRATA_ATTR_FLOAT ? it->second.f : def;
  }
  std::string Str(const char* n, const char* def) const {
    auto it = attrs.find(n);
    return it != attrs.end() && it->second.type == STRATA_ATTR_STRING ? it->second.s : def;
  }
  std::vector<int64_t> Ints(const char* n) const {
    auto it = attrs.find(n);
    return it != attrs.end() && it->second.type == STRATA_ATTR_INTS ? it->second.ints : std::vector<int64_t>{};
  }
  // "Conv 'name'", the prefix of every error about this node.
  std::string Who() const { return op + " '" + name + "'"; }
};

// Copies `nd` into `out` and checks that every value index is below `value_count`.
// Returns "" or what is wrong (the caller prefixes out->Who()).
inline std::string CopyNode(const strata_node_desc& nd, size_t value_count, NodeCopy* out) {
  out->name = nd.name ? nd.name : "";
  out->op = nd.op_type ? nd.op_type : "";
  out->domain = nd.domain ? nd.domain : "";
  out->opset = nd.opset;
  out->inputs.assign(nd.inputs, nd.inputs + nd.input_count);
  out->outputs.assign(nd.outputs, nd.outputs + nd.output_count);
  for (int32_t v : out->inputs)
    if (v >= static_cast<int32_t>(value_count)) return "input value index out of range";
  for (int32_t v : out->outputs)
    if (v >= static_cast<int32_t>(value_count)) return "output value index out of range";
  for (size_t a = 0; a < nd.attribute_count; ++a) {
    const strata_attribute& sa = nd.attributes[a];
    Attr at;
    at.type = sa.type;
    at.i = sa.i;
    at.f = sa.f;
    if (sa.type == STRATA_ATTR_STRING && sa.s) at.s = sa.s;
    if (sa.type == STRATA_ATTR_INTS && sa.ints) at.ints.assign(sa.ints, sa.ints + sa.count);
    if (sa.type == STRATA_ATTR_FLOATS && sa.floats) at.floats.assign(sa.floats, sa.floats + sa.count);
    if (sa.type == STRATA_ATTR_STRINGS && sa.strings)
      for (size_t k = 0; k < sa.count; ++k) at.strings.emplace_back(sa.strings[k] ? sa.strings[k] : "");
    out->attrs[sa.name ? sa.name : ""] = std::move(at);
  }
  return "";
}

}  // namespace strata_provider_common
