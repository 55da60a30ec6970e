// Function inlining: replaces calls of model-local functions, and of ONNX ops whose schema
// defines a function body but which have no kernel, by the body. Inner values get unique
// names, attribute references (ref_attr_name) are substituted from the call, and inner nodes
// keep the function's opset imports. Repeats until no call is left.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <exception>

#include "core/import_internal.h"

namespace strata::import {

namespace {

constexpr int kMaxInlineDepth = 64;

struct Renamer {
  std::unordered_map<std::string, std::string> map;
  std::string prefix;
  const std::unordered_map<std::string, const onnx::AttributeProto*>* call_attrs;
  std::string call_name;

  std::string Rename(const std::string& name) {
    if (name.empty()) return name;
    auto it = map.find(name);
    if (it != map.end()) return it->second;
    std::string fresh = prefix + name;
    map.emplace(name, fresh);
    return fresh;
  }

  // Renames values and substitutes attribute references in a node, recursing into subgraphs.
  void RewriteNode(onnx::NodeProto* n, int index) {
    for (auto& in : *n->mutable_input()) in = Rename(in);
    for (auto& out : *n->mutable_output()) out = Rename(out);
    n->set_name(call_name + "/" + (n->name().empty() ? n->op_type() + "_" + std::to_string(index) : n->name()));
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
    for (auto& a : *n->mutable_attribute()) {
      if (!a.ref_attr_name().empty()) {
        auto it = call_attrs->find(a.ref_attr_name());
        if (it == call_attrs->end()) continue;  // not given by the caller: the op's default applies
        onnx::AttributeProto* sub = attrs.Add();
        *sub = *it->second;
        sub->set_name(a.name());
        continue;
      }
      if (a.has_g()) RewriteGraph(a.mutable_g());
      for (auto& g : *a.mutable_graphs()) RewriteGraph(&g);
      *attrs.Add() = std::move(a);
    }
    n->mutable_attribute()->Swap(&attrs);
  }

  void RewriteGraph(onnx::GraphProto* g) {
    for (auto& v : *g->mutable_input()) v.set_name(Rename(v.name()));
    for (auto& v : *g->mutable_output()) v.set_name(Rename(v.name()));
    for (auto& v : *g->mutable_value_info()) v.set_name(Rename(v.name()));
    for (auto& t : *g->mutable_initializer()) t.set_name(Rename(t.name()));
    for (int i = 0; i < g->node_size(); ++i) RewriteNode(g->mutable_node(i), i);
  }
};

}  // namespace

namespace {

using FnKey = std::pair<std::string, std::string>;

void CollectCalls(const onnx::GraphProto& g, std::vector<FnKey>* calls);

void CollectNodeCalls(const onnx::NodeProto& n, std::vector<FnKey>* calls) {
  calls->emplace_back(NormalizeDomain(n.domain()), n.op_type());
  for (const auto& a : n.attribute()) {
    if (a.has_g()) CollectCalls(a.g(), calls);
    for (const auto& g : a.graphs()) CollectCalls(g, calls);
  }
}

void CollectCalls(const onnx::GraphProto& g, std::vector<FnKey>* calls) {
  for (const auto& n : g.node()) CollectNodeCalls(n, calls);
}

}  // namespace

Status CheckLocalFunctions(const onnx::ModelProto& model) {
  std::map<FnKey, int> index;
  for (int i = 0; i < model.functions_size(); ++i) {
    const auto& f = model.functions(i);
    FnKey key{NormalizeDomain(f.domain()), f.name()};
    if (!index.emplace(key, i).second)
      return InvalidModel("model-local function '", OnnxDomainName(key.first), ".", key.second, "' is defined twice");
  }
  // Calls between local functions; a cycle is found by depth-first search with colours.
  const int n = model.functions_size();
  std::vector<std::vector<int>> callees(n);
  for (int i = 0; i < n; ++i) {
    std::vector<FnKey> calls;
    for (const auto& node : model.functions(i).node()) CollectNodeCalls(node, &calls);
    for (const auto& c : calls) {
      auto it = index.find(c);
      if (it != index.end()) callees[i].push_back(it->second);
    }
  }
  std::vector<int> colour(n, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<int, size_t>> stack;
  for (int root = 0; root < n; ++root) {
    if (colour[root]) continue;
    stack.push_back({root, 0});
    colour[root] = 1;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next == callees[u].size()) {
        colour[u] = 2;
        stack.pop_back();
        continue;
      }
      int v = callees[u][next++];
      if (colour[v] == 1) {
        const auto& f = model.functions(v);
        return InvalidModel("model-local function '", OnnxDomainName(f.domain()), ".", f.name(),
                            "' calls itself (directly or through other functions); recursion is not allowed");
      }
      if (colour[v] == 0) {
        colour[v] = 1;
        stack.push_back({v, 0});
      }
    }
  }
  return Status::Ok();
}

FunctionInliner::FunctionInliner(const onnx::ModelProto& model, const OpsetMap& model_opsets, const ImportOptions& opts)
    : model_opsets_(model_opsets), opts_(opts) {
  for (const auto& f : model.functions()) local_functions_[{NormalizeDomain(f.domain()), f.name()}] = &f;
  if (opts_.has_kernel) CollectTypes(model.graph());
}

void FunctionInliner::CollectTypes(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) {
    onnx::TypeProto& tp = initializer_types_.emplace_back();
    auto* tt = tp.mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    types_[t.name()] = &tp;
  }
  for (const auto& v : g.input())
    if (v.has_type()) types_[v.name()] = &v.type();
  for (const auto& v : g.value_info())
    if (v.has_type()) types_[v.name()] = &v.type();
  for (const auto& v : g.output())
    if (v.has_type()) types_[v.name()] = &v.type();
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectTypes(a.g());
      for (const auto& sg : a.graphs()) CollectTypes(sg);
    }
}

const onnx::TypeProto* FunctionInliner::TypeOf(const std::string& name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : it->second;
}

Status FunctionInliner::Expand(const onnx::NodeProto& node, const OpsetMap* opsets, std::vector<ExpandedNode>* out) {
  return ExpandRec(node, opsets, 0, out);
}

Status FunctionInliner::ExpandRec(const onnx::NodeProto& node, const OpsetMap* opsets, int depth,
                                  std::vector<ExpandedNode>* out) {
  if (depth > kMaxInlineDepth)
    return InvalidModel("node '", node.name(), "' (", node.op_type(), "): function inlining exceeds ", kMaxInlineDepth,
                        " levels (recursive function?)");
  const std::string domain = NormalizeDomain(node.domain());
  auto local = local_functions_.find({domain, node.op_type()});
  if (local != local_functions_.end()) return Inline(node, *local->second, nullptr, opsets, "", 0, depth, out);

  auto ver = opsets->find(domain);
  if (opts_.has_kernel && ver != opsets->end() && !opts_.has_kernel(domain, node.op_type(), ver->second)) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), ver->second, domain);
    if (schema && schema->HasFunction() && schema->GetFunction()) {
      return Inline(node, *schema->GetFunction(), schema, opsets, domain, schema->SinceVersion(), depth, out);
    }
    if (schema && schema->HasContextDependentFunction()) {
      std::vector<onnx::TypeProto> input_types;
      for (const auto& in : node.input()) {
        const onnx::TypeProto* t = in.empty() ? nullptr : TypeOf(in);
        input_types.push_back(t ? *t : onnx::TypeProto());
      }
      onnx::FunctionBodyBuildContextImpl ctx(node, input_types);
      onnx::FunctionProto body;
      bool built = false;
      try {
        built = schema->BuildContextDependentFunction(ctx, body);
      } catch (const std::exception&) {
        built = false;  // e.g. input types unknown: keep the node; a missing kernel is reported later
      }
      if (built) {
        const onnx::FunctionProto& fn = built_functions_.emplace_back(std::move(body));
        return Inline(node, fn, schema, opsets, domain, schema->SinceVersion(), depth, out);
      }
    }
  }
  out->push_back(ExpandedNode{node, opsets});
  return Status::Ok();
}

Status FunctionInliner::Inline(const onnx::NodeProto& call, const onnx::FunctionProto& fn, const onnx::OpSchema* schema,
                               const OpsetMap* caller_opsets, const std::string& fallback_domain, int fallback_version,
                               int depth, std::vector<ExpandedNode>* out) {
  const std::string what = "node '" + call.name() + "' (" + call.op_type() + ")";
  if (call.input_size() > fn.input_size())
    return InvalidModel(what, " passes ", call.input_size(), " inputs but function '", fn.name(), "' takes ",
                        fn.input_size());
  if (call.output_size() > fn.output_size())
    return InvalidModel(what, " expects ", call.output_size(), " outputs but function '", fn.name(), "' has ",
                        fn.output_size());
  // Inner nodes run at the function's opsets; domains it does not mention keep the caller's.
  OpsetMap opsets = *caller_opsets;
  bool has_own = false;
  for (const auto& imp : fn.opset_import()) {
    opsets[NormalizeDomain(imp.domain())] = static_cast<int>(imp.version());
    has_own |= NormalizeDomain(imp.domain()) == fallback_domain;
  }
  if (fallback_version > 0 && !has_own) opsets[fallback_domain] = fallback_version;
  const OpsetMap* inner_opsets = &opset_storage_.emplace_back(std::move(opsets));
  std::pair<std::string, std::string> key{NormalizeDomain(call.domain()), call.op_type()};
  if (std::find(active_.begin(), active_.end(), key) != active_.end())
    return InvalidModel(what, ": function '", OnnxDomainName(key.first), ".", key.second,
                        "' calls itself (recursive functions cannot be inlined)");

  std::unordered_map<std::string, const onnx::AttributeProto*> call_attrs;
  // Attributes the call leaves out take the schema's defaults (e.g. HannWindow's periodic).
  if (schema) {
    for (const auto& [name, attr] : schema->attributes())
      if (attr.default_value.type() != onnx::AttributeProto::UNDEFINED) call_attrs[name] = &attr.default_value;
  }
  for (const auto& a : call.attribute()) call_attrs[a.name()] = &a;
  Renamer r;
  r.prefix = "__strata_inl" + std::to_string(counter_++) + "__";
  r.call_attrs = &call_attrs;
  r.call_name = call.name();
  for (int i = 0; i < fn.input_size(); ++i) r.map[fn.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i) {
    bool given = i < call.output_size() && !call.output(i).empty();
    r.map[fn.output(i)] = given ? call.output(i) : r.prefix + fn.output(i);
  }
  active_.push_back(key);
  Status st;
  for (int i = 0; i < fn.node_size() && st.ok(); ++i) {
    onnx::NodeProto inner = fn.node(i);
    r.RewriteNode(&inner, i);
    st = ExpandRec(inner, inner_opsets, depth + 1, out);
  }
  active_.pop_back();
  return st;
}

}  // namespace strata::import
