// Guards around libonnx 1.12's shape inference, which trusts some attributes and shapes that a
// hostile model controls. Each guard is a crash the model fuzzer found. InferShapes visits the
// main graph, every subgraph in a node attribute, and each model-local function body (at every
// call, with the caller's types and attributes), so every guard covers all three.
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/import_internal.h"

namespace strata::import {

namespace {

// The shapes one graph declares (initializers, inputs, value_info, outputs) and which of its
// nodes makes each value, with the enclosing graphs' reached through `outer` (not copied: a
// model with many subgraphs would copy the main graph's table for each). A name declared twice
// with different shapes (in one graph, or a subgraph redeclaring an outer value) counts as
// unknown: which one libonnx would use is not something to bet the process on.
class ShapeScope {
 public:
  static constexpr int64_t kUnknownDim = -1;

  ShapeScope(const onnx::GraphProto& g, const ShapeScope* outer) : outer_(outer) {
    for (const auto& t : g.initializer()) Add(t.name(), {t.dims().begin(), t.dims().end()});
    for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
      for (const auto& v : *list) {
        if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
        std::vector<int64_t> dims;
        for (const auto& d : v.type().tensor_type().shape().dim())
          dims.push_back(d.has_dim_value() ? d.dim_value() : kUnknownDim);
        Add(v.name(), std::move(dims));
      }
    for (const auto& n : g.node())
      for (const auto& o : n.output()) producers_[o] = &n;
  }

  // The declared dims (kUnknownDim where not a number), or null when the shape is not declared
  // or declared differently in two places. A value made by an op that keeps its input's shape
  // (DequantizeLinear of a quantized weight, Identity, Cast) has that input's shape.
  const std::vector<int64_t>* Dims(const std::string& name, int depth = 0) const {
    bool conflict = false;
    const std::vector<int64_t>* found = nullptr;
    for (const ShapeScope* s = this; s != nullptr; s = s->outer_) {
      auto it = s->shapes_.find(name);
      if (it == s->shapes_.end()) continue;
      if (it->second.conflict || (found != nullptr && *found != it->second.dims)) conflict = true;
      if (found == nullptr) found = &it->second.dims;
    }
    if (found != nullptr) return conflict ? nullptr : found;
    const onnx::NodeProto* n = nullptr;
    for (const ShapeScope* s = this; s != nullptr && n == nullptr; s = s->outer_) {
      auto p = s->producers_.find(name);
      if (p != s->producers_.end()) n = p->second;
    }
    if (n == nullptr || depth > 8) return nullptr;
    const std::string& op = n->op_type();
    if (!NormalizeDomain(n->domain()).empty() || n->input_size() == 0 ||
        (op != "DequantizeLinear" && op != "Identity" && op != "Cast"))
      return nullptr;
    return Dims(n->input(0), depth + 1);
  }

  // The declared rank, or -1 when unknown.
  int Rank(const std::string& name) const {
    const std::vector<int64_t>* d = Dims(name);
    return d != nullptr ? static_cast<int>(d->size()) : -1;
  }

 private:
  struct Declared {
    std::vector<int64_t> dims;
    bool conflict = false;
  };
  void Add(const std::string& name, std::vector<int64_t> dims) {
    auto [it, inserted] = shapes_.try_emplace(name, Declared{dims, false});
    if (!inserted && it->second.dims != dims) it->second.conflict = true;
  }

  const ShapeScope* outer_;
  std::unordered_map<std::string, Declared> shapes_;
  std::unordered_map<std::string, const onnx::NodeProto*> producers_;
};

bool IsOnnxOp(const onnx::NodeProto& n, const char* op) {
  return n.op_type() == op && NormalizeDomain(n.domain()).empty();
}

// Calls f(node, scope) for every node of g and of its subgraphs; scope is null inside a
// model-local function body, whose value types come from each caller.
template <typename F>
Status VisitGraph(onnx::GraphProto* g, const ShapeScope* outer, bool in_function, const F& f) {
  ShapeScope scope(*g, outer);
  const ShapeScope* s = in_function ? nullptr : &scope;
  for (auto& n : *g->mutable_node()) {
    RETURN_IF_ERROR(f(n, s));
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(VisitGraph(a.mutable_g(), s, in_function, f));
      for (auto& sg : *a.mutable_graphs()) RETURN_IF_ERROR(VisitGraph(&sg, s, in_function, f));
    }
  }
  return Status::Ok();
}

// Every node of the model, function bodies included. Node pointers f keeps stay valid: a body's
// nodes are swapped into a scratch graph and back, which moves no element.
template <typename F>
Status VisitModel(onnx::ModelProto* proto, const F& f) {
  RETURN_IF_ERROR(VisitGraph(proto->mutable_graph(), nullptr, false, f));
  for (auto& fn : *proto->mutable_functions()) {
    onnx::GraphProto body;
    body.mutable_node()->Swap(fn.mutable_node());
    Status st = VisitGraph(&body, nullptr, true, f);
    body.mutable_node()->Swap(fn.mutable_node());
    RETURN_IF_ERROR(st);
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

// Conv, ConvInteger and QLinearConv's inference (convPoolShapeInference) takes the kernel from
// W's dims 2.. when there is no kernel_shape attribute and never checks it against X's rank: a
// W of higher rank than X reads X's dims and the dilations out of bounds. With kernel_shape
// present it checks the size. Returns W's input index for those ops, else -1.
int ConvWeightIndex(const onnx::NodeProto& n) {
  if (!NormalizeDomain(n.domain()).empty()) return -1;
  if (n.op_type() == "Conv" || n.op_type() == "ConvInteger") return 1;
  if (n.op_type() == "QLinearConv") return 3;
  return -1;
}

// What InferShapesGuarded changes for the length of the libonnx call, and puts back.
struct Shielded {
  std::vector<std::pair<onnx::NodeProto*, std::vector<std::string>>> dropped_outputs;
  std::vector<onnx::NodeProto*> added_kernel_shape;  // the attribute is the node's last
  std::vector<std::pair<onnx::NodeProto*, std::string>> renamed;
  // Of the renamed: Conv-like nodes skipped because their W is made by another node in a graph
  // (not a function body), whose shape libonnx infers in the same call.
  int weight_made_by_node = 0;

  void Restore() {
    for (auto& [n, tail] : dropped_outputs)
      for (auto& name : tail) n->add_output(std::move(name));
    for (auto* n : added_kernel_shape) n->mutable_attribute()->RemoveLast();
    for (auto& [n, op] : renamed) n->set_op_type(op);
  }
};

// libonnx's ParseData (which shape inference uses to read an initializer or a Constant's value:
// Reshape's shape, Reduce*'s axes, ...) copies raw_data into a vector of raw_data.size() /
// sizeof(T) elements with a memcpy of raw_data.size() bytes: a size that is not a whole number
// of elements writes past the vector, or through a null pointer for fewer bytes than one
// element. The importer's own stripped payloads are such one-byte placeholders (import_wire.cc:
// a valid model's large initializer), and a hostile model can write any size. Every tensor
// whose raw_data is not exactly its shape's bytes is marked EXTERNAL for the length of the
// call, which ParseData refuses with an exception; the importer reads the real payloads (or
// reports the bad size, naming the tensor) afterwards.
struct HiddenPayloads {
  std::vector<onnx::TensorProto*> tensors;
  void Restore() {
    for (auto* t : tensors) t->clear_data_location();
  }
};

int64_t FixedElemSize(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::COMPLEX64:
      return 8;
    case onnx::TensorProto::COMPLEX128:
      return 16;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return 1;
    default:
      return 0;  // strings have no raw_data; newer types libonnx cannot parse at all
  }
}

void HideIfMisfit(onnx::TensorProto* t, HiddenPayloads* h) {
  if (!t->has_raw_data() || t->data_location() == onnx::TensorProto::EXTERNAL) return;
  const int64_t elem = FixedElemSize(t->data_type());
  int64_t bytes = elem;
  bool overflow = elem == 0;
  for (int64_t d : t->dims()) overflow = overflow || d < 0 || __builtin_mul_overflow(bytes, d, &bytes);
  if (!overflow && static_cast<uint64_t>(bytes) == t->raw_data().size()) return;
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  h->tensors.push_back(t);
}

void HideMisfitPayloads(onnx::GraphProto* g, HiddenPayloads* h, int depth = 0) {
  if (depth > 256) return;  // the subgraph-depth check reports it
  for (auto& t : *g->mutable_initializer()) HideIfMisfit(&t, h);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) HideIfMisfit(a.mutable_t(), h);
      for (auto& t : *a.mutable_tensors()) HideIfMisfit(&t, h);
      if (a.has_g()) HideMisfitPayloads(a.mutable_g(), h, depth + 1);
      for (auto& sg : *a.mutable_graphs()) HideMisfitPayloads(&sg, h, depth + 1);
    }
}

// Op name no schema has: libonnx skips the node (its outputs keep their declared types).
constexpr const char* kSkippedOp = "strata.InferenceSkipped";

// Returns an error for what is invalid whatever the shapes; otherwise makes the node safe for
// libonnx for the length of the call, recording what it changed in *s. A node whose safety
// depends on something not known before inference (a shape made by another node, a function's
// input, an attribute from a function's caller) is skipped by libonnx.
Status Shield(onnx::NodeProto& n, const ShapeScope* scope, Shielded* s) {
  if (!NormalizeDomain(n.domain()).empty()) return Status::Ok();
  const std::string& op = n.op_type();
  bool skip = false;
  bool literal = false;
  // Conv/pool inference divides by each stride unchecked: a stride of 0 is SIGFPE. ONNX
  // requires positive strides on every op that has them.
  if (const onnx::AttributeProto* a = FindAttr(n, "strides", &literal)) {
    for (int64_t v : a->ints())
      if (v < 1) return InvalidModel(op, " node '", n.name(), "': strides must be positive, got ", v);
    skip = skip || !literal;
  }
  // GatherND inference offsets data's dims by batch_dims unchecked: a negative one reads
  // before them. ONNX defines batch_dims as a non-negative count of leading dims.
  if (op == "GatherND") {
    if (const onnx::AttributeProto* a = FindAttr(n, "batch_dims", &literal)) {
      if (a->i() < 0 || a->i() > INT_MAX)
        return InvalidModel("GatherND node '", n.name(), "': batch_dims must be a non-negative count of leading ",
                            "dims, got ", a->i());
      skip = skip || !literal;
    }
  }
  // ConvTranspose inference reads dim 1 of W without checking W's rank. W is (C, M/group,
  // k1, ...): a declared rank below 2 is an error.
  if (op == "ConvTranspose" && n.input_size() > 1) {
    const int rank = scope != nullptr ? scope->Rank(n.input(1)) : -1;
    if (rank >= 0 && rank < 2)
      return InvalidModel("ConvTranspose node '", n.name(), "': weight '", n.input(1), "' has rank ", rank,
                          "; it must be (C, M/group, kernel...) with rank >= 2");
    // Without kernel_shape it takes the kernel from W's dims 2.. and reads X's dilations for
    // each: a W of higher rank than X reads past them (SEGV with X of rank 2).
    const int x_rank = scope != nullptr ? scope->Rank(n.input(0)) : -1;
    if (rank >= 0 && x_rank >= 0 && rank != x_rank)
      return InvalidModel("ConvTranspose node '", n.name(), "': weight '", n.input(1), "' has rank ", rank,
                          " but input '", n.input(0), "' has rank ", x_rank, "; they must be equal");
    skip = skip || rank < 0 || x_rank < 0;
  }
  // MaxUnpool's inference without output_shape takes the channel count from dim 1 of I
  // unchecked (SEGV for an I of rank 0 or 1). I has X's shape: rank >= 2.
  if (op == "MaxUnpool" && n.input_size() == 2) {
    const int rank = scope != nullptr ? scope->Rank(n.input(1)) : -1;
    if (rank >= 0 && rank < 2)
      return InvalidModel("MaxUnpool node '", n.name(), "': indices '", n.input(1), "' have rank ", rank,
                          "; they must have X's shape (rank >= 2)");
    skip = skip || rank < 0;
  }
  // Einsum's inference of an implicit output counts each left-hand label in a 26-entry array
  // at [label - 'a'] unchecked: an upper-case label (valid, and strata's kernel takes it) or
  // any other character writes outside it (ASan: a bad free with "i,Y").
  if (op == "Einsum") {
    if (const onnx::AttributeProto* a = FindAttr(n, "equation", &literal)) {
      const std::string& eq = a->s();
      if (eq.find("->") == std::string::npos)
        for (char c : eq) skip = skip || !((c >= 'a' && c <= 'z') || c == ',' || c == '.' || c == ' ');
      skip = skip || !literal;
    }
  }
  // STFT's inference reads the signal's dims 1 and 2 without checking its rank (SEGV for a
  // signal of rank 0 or 1).
  if (op == "STFT" && n.input_size() > 0) skip = skip || scope == nullptr || scope->Rank(n.input(0)) < 3;
  if (op == "LayerNormalization" && n.output_size() > 1 && !LayerNormAxisSafe(n)) {
    auto* outs = n.mutable_output();
    s->dropped_outputs.emplace_back(&n, std::vector<std::string>(outs->begin() + 1, outs->end()));
    outs->DeleteSubrange(1, outs->size() - 1);
  }
  const int w = ConvWeightIndex(n);
  if (!skip && w >= 0 && n.input_size() > w && FindAttr(n, "kernel_shape", &literal) == nullptr) {
    const std::vector<int64_t>* dims = scope != nullptr ? scope->Dims(n.input(w)) : nullptr;
    bool symbolic = false;  // libonnx stops at a kernel dim that is not a number
    for (size_t i = 2; dims != nullptr && i < dims->size(); ++i) symbolic = symbolic || (*dims)[i] < 0;
    if (dims == nullptr) {
      skip = true;
      if (scope != nullptr) ++s->weight_made_by_node;
    } else if (!symbolic) {
      // The kernel libonnx would read from W, made explicit so that its size is checked.
      auto* a = n.add_attribute();
      a->set_name("kernel_shape");
      a->set_type(onnx::AttributeProto::INTS);
      for (size_t i = 2; i < dims->size(); ++i) a->add_ints((*dims)[i]);
      s->added_kernel_shape.push_back(&n);
    }
  }
  if (skip) {
    s->renamed.emplace_back(&n, op);
    n.set_op_type(kSkippedOp);
  }
  return Status::Ok();
}

}  // namespace

Status InferShapesGuarded(onnx::ModelProto* proto, const onnx::ShapeInferenceOptions& options) {
  // Nodes libonnx could mis-index are shielded for the length of the call: a LayerNormalization
  // whose axis is not safe loses Mean/InvStdDev (the Y-only path is safe); a Conv gets the
  // kernel_shape its W declares; what cannot be proven safe is skipped. Skipped or dropped
  // values keep their declared types (strata's own inference covers the rest).
  // A Conv skipped because another node makes its W (W * scale, Reshape of a constant) would
  // leave everything after it untyped, and the optimizer does not fuse untyped values. The
  // first call infers W's shape, so a second call, run only when it would type such a Conv
  // (W's producer may be one libonnx cannot infer either), gives the Conv that shape as an
  // explicit (checked) kernel_shape and types the rest of the graph.
  int skipped_weights = -1;  // the last call's Shielded::weight_made_by_node
  HiddenPayloads hidden;
  HideMisfitPayloads(proto->mutable_graph(), &hidden);
  for (auto& fn : *proto->mutable_functions())
    for (auto& n : *fn.mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_t()) HideIfMisfit(a.mutable_t(), &hidden);
        if (a.has_g()) HideMisfitPayloads(a.mutable_g(), &hidden);
      }
  struct RestoreOnExit {
    HiddenPayloads* h;
    ~RestoreOnExit() { h->Restore(); }
  } restore_payloads{&hidden};
  for (int round = 0; round < 2; ++round) {
    Shielded shielded;
    Status checked = VisitModel(
        proto, [&](onnx::NodeProto& n, const ShapeScope* scope) -> Status { return Shield(n, scope, &shielded); });
    if (!checked.ok() || (skipped_weights >= 0 && shielded.weight_made_by_node >= skipped_weights)) {
      shielded.Restore();
      RETURN_IF_ERROR(checked);
      break;  // no Conv the first call skipped would be inferred now
    }
    skipped_weights = shielded.weight_made_by_node;
    try {
      onnx::shape_inference::InferShapes(*proto, onnx::OpSchemaRegistry::Instance(), options);
    } catch (...) {
      // Inference is best effort: a valid model keeps its declared types.
    }
    shielded.Restore();
    if (skipped_weights == 0) break;
  }

  // With ranks now inferred, an axis out of range is reported here rather than by the kernel.
  return VisitGraph(proto->mutable_graph(), nullptr, false,
                    [](const onnx::NodeProto& n, const ShapeScope* scope) -> Status {
                      if (!IsOnnxOp(n, "LayerNormalization") || n.input_size() == 0) return Status::Ok();
                      bool literal = false;
                      const onnx::AttributeProto* a = FindAttr(n, "axis", &literal);
                      const int64_t axis = a != nullptr ? a->i() : -1;
                      const int rank = scope->Rank(n.input(0));
                      if (!literal || rank < 0) return Status::Ok();
                      if (axis < -static_cast<int64_t>(rank) || axis >= rank)
                        return InvalidModel("LayerNormalization node '", n.name(), "': axis ", axis,
                                            " is out of range for input '", n.input(0), "' of rank ", rank);
                      return Status::Ok();
                    });
}

}  // namespace strata::import
