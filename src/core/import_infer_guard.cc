// Guards around libonnx 1.12's shape inference, which trusts some attributes and ranks that a
// hostile model controls. Each guard is a crash the model fuzzer found. InferShapes visits the
// main graph, every subgraph in a node attribute, and each model-local function body (at every
// call, with the caller's types and attributes), so every guard covers all three.
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/import_internal.h"

namespace strata::import {

namespace {

// Ranks of the values one graph declares, with its enclosing graphs' in scope. A name declared
// with two different ranks (the graph's own entries, or a subgraph redeclaring an outer value)
// maps to kConflict: which one libonnx would use is not something to bet the process on.
class RankScope {
 public:
  static constexpr int kConflict = -1;

  RankScope(const onnx::GraphProto& g, const RankScope* outer) {
    if (outer != nullptr) ranks_ = outer->ranks_;
    auto add = [&](const std::string& name, int rank) {
      auto [it, inserted] = ranks_.emplace(name, rank);
      if (!inserted && it->second != rank) it->second = kConflict;
    };
    for (const auto& t : g.initializer()) add(t.name(), t.dims_size());
    for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
      for (const auto& v : *list)
        if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
          add(v.name(), v.type().tensor_type().shape().dim_size());
  }

  // The declared rank, or -1 when unknown or conflicting.
  int Of(const std::string& name) const {
    auto it = ranks_.find(name);
    return it == ranks_.end() ? kConflict : it->second;
  }

 private:
  std::unordered_map<std::string, int> ranks_;
};

bool IsOnnxOp(const onnx::NodeProto& n, const char* op) {
  return n.op_type() == op && NormalizeDomain(n.domain()).empty();
}

// Calls f(node, scope) for every node of g and of its subgraphs; scope is null inside a
// model-local function body, whose value types come from each caller.
template <typename F>
Status VisitGraph(const onnx::GraphProto& g, const RankScope* outer, bool in_function, const F& f) {
  RankScope scope(g, outer);
  const RankScope* s = in_function ? nullptr : &scope;
  for (const auto& n : g.node()) {
    RETURN_IF_ERROR(f(n, s));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(VisitGraph(a.g(), s, in_function, f));
      for (const auto& sg : a.graphs()) RETURN_IF_ERROR(VisitGraph(sg, s, in_function, f));
    }
  }
  return Status::Ok();
}

template <typename F>
Status VisitModel(const onnx::ModelProto& proto, const F& f) {
  RETURN_IF_ERROR(VisitGraph(proto.graph(), nullptr, false, f));
  for (const auto& fn : proto.functions()) {
    onnx::GraphProto body;  // VisitGraph walks graphs; a body is its node list
    *body.mutable_node() = fn.node();
    RETURN_IF_ERROR(VisitGraph(body, nullptr, true, f));
  }
  return Status::Ok();
}

// The node's one value of attribute `name`; *literal is false when it comes from the caller of
// a function (ref_attr_name) or is given twice, i.e. when its value here is not what libonnx
// will use.
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const char* name, bool* literal) {
  const onnx::AttributeProto* found = nullptr;
  *literal = true;
  for (const auto& a : n.attribute()) {
    if (a.name() != name) continue;
    if (found != nullptr || !a.ref_attr_name().empty()) *literal = false;
    found = &a;
  }
  return found;
}

// LayerNormalization's inference writes Mean/InvStdDev's dims from d = int(axis) (+ rank when
// negative) up to rank with no range check. It cannot go wrong for an axis in [0, INT_MAX]; any
// other axis (the default -1 on a scalar, -1025, INT64_MAX) can index out of bounds.
bool LayerNormAxisSafe(const onnx::NodeProto& n) {
  bool literal = false;
  const onnx::AttributeProto* a = FindAttr(n, "axis", &literal);
  const int64_t axis = a != nullptr ? a->i() : -1;
  return literal && axis >= 0 && axis <= INT_MAX;
}

void CollectUnsafeLayerNorms(onnx::GraphProto* g, std::vector<onnx::NodeProto*>* out) {
  for (auto& n : *g->mutable_node()) {
    if (IsOnnxOp(n, "LayerNormalization") && n.output_size() > 1 && !LayerNormAxisSafe(n)) out->push_back(&n);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) CollectUnsafeLayerNorms(a.mutable_g(), out);
      for (auto& sg : *a.mutable_graphs()) CollectUnsafeLayerNorms(&sg, out);
    }
  }
}

}  // namespace

Status CheckBeforeInference(const onnx::ModelProto& proto, bool* safe) {
  *safe = true;
  return VisitModel(proto, [&](const onnx::NodeProto& n, const RankScope* scope) -> Status {
    if (!NormalizeDomain(n.domain()).empty()) return Status::Ok();
    // Conv/pool inference divides by each stride unchecked: a stride of 0 is SIGFPE. ONNX
    // requires positive strides on every op that has them.
    bool literal = false;
    if (const onnx::AttributeProto* a = FindAttr(n, "strides", &literal)) {
      if (!literal) *safe = false;
      for (int64_t v : a->ints())
        if (v < 1) return InvalidModel(n.op_type(), " node '", n.name(), "': strides must be positive, got ", v);
    }
    // ConvTranspose inference reads dim 1 of W without checking W's rank. W is (C, M/group,
    // k1, ...): a declared rank below 2 is an error; an undeclared one (W made by another node,
    // or a function's input) could be anything, so inference is skipped.
    if (n.op_type() == "ConvTranspose" && n.input_size() > 1) {
      const int rank = scope != nullptr ? scope->Of(n.input(1)) : RankScope::kConflict;
      if (rank == RankScope::kConflict) {
        *safe = false;
      } else if (rank < 2) {
        return InvalidModel("ConvTranspose node '", n.name(), "': weight '", n.input(1), "' has rank ", rank,
                            "; it must be (C, M/group, kernel...) with rank >= 2");
      }
    }
    return Status::Ok();
  });
}

Status InferShapesGuarded(onnx::ModelProto* proto, const onnx::ShapeInferenceOptions& options) {
  // LayerNormalization nodes whose axis libonnx could mis-index lose Mean/InvStdDev while it
  // runs (the Y-only path is safe), and get them back after; their types are then the
  // declared ones, or strata's own inference's.
  std::vector<onnx::NodeProto*> risky;
  CollectUnsafeLayerNorms(proto->mutable_graph(), &risky);
  for (auto& fn : *proto->mutable_functions()) {
    onnx::GraphProto body;
    body.mutable_node()->Swap(fn.mutable_node());
    CollectUnsafeLayerNorms(&body, &risky);  // pointers stay valid: Swap moves the elements
    body.mutable_node()->Swap(fn.mutable_node());
  }
  std::vector<std::vector<std::string>> tails(risky.size());
  for (size_t i = 0; i < risky.size(); ++i) {
    auto* outs = risky[i]->mutable_output();
    tails[i].assign(outs->begin() + 1, outs->end());
    outs->DeleteSubrange(1, outs->size() - 1);
  }
  try {
    onnx::shape_inference::InferShapes(*proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (...) {
    // Inference is best effort: a valid model keeps its declared types.
  }
  for (size_t i = 0; i < risky.size(); ++i)
    for (auto& name : tails[i]) risky[i]->add_output(std::move(name));

  // With ranks now inferred, an axis out of range is reported here rather than by the kernel.
  return VisitGraph(proto->graph(), nullptr, false, [](const onnx::NodeProto& n, const RankScope* scope) -> Status {
    if (!IsOnnxOp(n, "LayerNormalization") || n.input_size() == 0) return Status::Ok();
    bool literal = false;
    const onnx::AttributeProto* a = FindAttr(n, "axis", &literal);
    const int64_t axis = a != nullptr ? a->i() : -1;
    const int rank = scope->Of(n.input(0));
    if (!literal || rank == RankScope::kConflict) return Status::Ok();
    if (axis < -static_cast<int64_t>(rank) || axis >= rank)
      return InvalidModel("LayerNormalization node '", n.name(), "': axis ", axis, " is out of range for input '",
                          n.input(0), "' of rank ", rank);
    return Status::Ok();
  });
}

}  // namespace strata::import
