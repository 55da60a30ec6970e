// ONNX import driver: parse -> validate/sort -> onnx checker -> shape inference -> IR.
#include "core/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <exception>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "core/contrib_schemas.h"
#include "core/import_internal.h"
#include "core/load_trace.h"
#include "core/opset_schemas.h"

namespace strata {

namespace {

using import::ExpandedNode;
using import::OpsetMap;

// ONNX's type string ("tensor(float)", "seq(tensor(int64))", ...) for TYPE_PROTO attributes.
std::string TypeString(const onnx::TypeProto& tp) {
  auto elem = [](int32_t t) {
    std::string s = onnx::TensorProto_DataType_IsValid(t)
                        ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t))
                        : std::string("undefined");
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  if (tp.has_tensor_type()) return "tensor(" + elem(tp.tensor_type().elem_type()) + ")";
  if (tp.has_sparse_tensor_type()) return "sparse_tensor(" + elem(tp.sparse_tensor_type().elem_type()) + ")";
  if (tp.has_sequence_type()) return "seq(" + TypeString(tp.sequence_type().elem_type()) + ")";
  if (tp.has_optional_type()) return "optional(" + TypeString(tp.optional_type().elem_type()) + ")";
  if (tp.has_map_type())
    return "map(" + elem(tp.map_type().key_type()) + "," + TypeString(tp.map_type().value_type()) + ")";
  return "undefined";
}

// Old files may leave AttributeProto.type unset; infer it from the field that is filled.
onnx::AttributeProto::AttributeType AttrType(const onnx::AttributeProto& a) {
  using A = onnx::AttributeProto;
  if (a.type() != A::UNDEFINED) return a.type();
  if (a.has_f()) return A::FLOAT;
  if (a.has_i()) return A::INT;
  if (a.has_s()) return A::STRING;
  if (a.has_t()) return A::TENSOR;
  if (a.has_g()) return A::GRAPH;
  if (a.has_sparse_tensor()) return A::SPARSE_TENSOR;
  if (a.has_tp()) return A::TYPE_PROTO;
  if (a.floats_size()) return A::FLOATS;
  if (a.ints_size()) return A::INTS;
  if (a.strings_size()) return A::STRINGS;
  if (a.tensors_size()) return A::TENSORS;
  if (a.graphs_size()) return A::GRAPHS;
  if (a.sparse_tensors_size()) return A::SPARSE_TENSORS;
  if (a.type_protos_size()) return A::TYPE_PROTOS;
  return A::UNDEFINED;
}

Status WithContext(const Status& st, const std::string& context) {
  return st.ok() ? st : Status(st.code(), context + ": " + st.message());
}

class Converter {
 public:
  Converter(import::FunctionInliner* inliner, import::TensorContext tctx, int64_t ir_version, int max_depth)
      : inliner_(inliner), tctx_(std::move(tctx)), ir_version_(ir_version), max_depth_(max_depth) {}

  // Converts `g`; names it reads from enclosing scopes are added to *outer_reads.
  Status ConvertGraph(const onnx::GraphProto& g, const OpsetMap* opsets, int depth, Graph* out,
                      std::vector<std::string>* outer_reads);

 private:
  using TypeMap = std::unordered_map<std::string, const onnx::TypeProto*>;
  // `types`: declared/inferred types of this graph's values, given to outputs as they appear
  // (so subgraphs converted later in the same graph see their captures' types).
  Status ConvertNode(const ExpandedNode& e, int depth, const TypeMap& types, Graph* graph, std::vector<char>* defined,
                     std::vector<std::string>* outer_reads);
  Status ConvertConstant(const ExpandedNode& e, Graph* graph, std::vector<char>* defined);
  // `parent` is the graph that holds the node with this attribute.
  Result<Attribute> ConvertAttribute(const onnx::AttributeProto& a, const OpsetMap* opsets, int depth,
                                     const Graph* parent, std::vector<std::string>* sub_reads);
  Result<std::shared_ptr<Graph>> ConvertSubgraph(const onnx::GraphProto& g, const OpsetMap* opsets, int depth,
                                                 const Graph* parent, std::vector<std::string>* sub_reads);
  // Index of `name` as read in `graph`: a local value, or a new capture from an outer scope.
  int Resolve(const std::string& name, Graph* graph, std::vector<char>* defined, std::vector<std::string>* outer_reads);

  import::FunctionInliner* inliner_;
  import::TensorContext tctx_;
  std::vector<const Graph*> enclosing_;  // graphs being converted, outermost first
  int64_t ir_version_;
  int max_depth_;
};

int Converter::Resolve(const std::string& name, Graph* graph, std::vector<char>* defined,
                       std::vector<std::string>* outer_reads) {
  int idx = graph->FindValue(name);
  if (idx >= 0) return idx;  // local, or already captured
  idx = graph->AddValue(name);
  defined->resize(graph->values.size(), 0);
  graph->captures.push_back(idx);
  // A capture has the type of the value it refers to in the nearest enclosing scope.
  for (auto it = enclosing_.rbegin(); it != enclosing_.rend(); ++it) {
    int outer = (*it)->FindValue(name);
    if (outer >= 0) {
      graph->values[idx].type = (*it)->values[outer].type;
      break;
    }
  }
  outer_reads->push_back(name);
  return idx;
}

// An element type this build has no tensor type for (IR 9-10's float8, uint4 and int4, or a
// number no ONNX release defines) in a graph input's or output's declared type, named.
Status CheckElemType(const onnx::TypeProto& tp, const std::string& what) {
  int32_t elem = 0;
  if (tp.has_tensor_type()) {
    elem = tp.tensor_type().elem_type();
  } else if (tp.has_sequence_type()) {
    return CheckElemType(tp.sequence_type().elem_type(), what);
  } else if (tp.has_optional_type()) {
    return CheckElemType(tp.optional_type().elem_type(), what);
  } else if (tp.has_map_type()) {
    return CheckElemType(tp.map_type().value_type(), what);
  }
  if (elem == 0 || import::KnownDataType(elem)) return Status::Ok();
  static const char* const kNewer[] = {"FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                       "UINT4",        "INT4",           "FLOAT4E2M1"};
  const std::string name = elem >= 17 && elem <= 23 ? kNewer[elem - 17] : "an unknown type";
  return Unsupported(what, " has element type ", name, " (", elem, "), which strata has no tensor type for");
}

Status Converter::ConvertGraph(const onnx::GraphProto& g, const OpsetMap* opsets, int depth, Graph* graph,
                               std::vector<std::string>* outer_reads) {
  if (depth > max_depth_)
    return InvalidModel("subgraph '", g.name(), "' is nested ", depth, " levels deep; the limit is ", max_depth_);
  graph->name = g.name();
  std::vector<char> defined;
  auto define = [&](int idx) {
    defined.resize(graph->values.size(), 0);
    defined[idx] = 1;
  };
  std::unordered_set<std::string> init_names;
  for (const auto& t : g.initializer()) init_names.insert(t.name());
  if (g.sparse_initializer_size() > 0)
    return Unsupported("sparse initializer '", g.sparse_initializer(0).values().name(), "' is not supported");

  for (const auto& in : g.input()) {
    int idx = graph->AddValue(in.name());
    define(idx);
    RETURN_IF_ERROR(CheckElemType(in.type(), "graph input '" + in.name() + "'"));
    if (in.has_type()) graph->values[idx].type = import::ConvertType(in.type());
    // IR < 4 listed every initializer as an input; only IR >= 4 means "overridable default".
    if (init_names.count(in.name()) && ir_version_ < 4) continue;
    graph->inputs.push_back(idx);
  }
  // Only the main graph's initializers can have payloads kept out of protobuf.
  const auto* stripped = depth == 0 && tctx_.inline_source ? &tctx_.inline_source->table : nullptr;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto& t = g.initializer(i);
    int idx = graph->AddValue(t.name());
    define(idx);
    const import::InlineRange* range =
        stripped && static_cast<size_t>(i) < stripped->size() ? &(*stripped)[static_cast<size_t>(i)] : nullptr;
    ASSIGN_OR_RETURN(Tensor tensor, import::ConvertTensor(t, tctx_, range));
    graph->initializers[idx] = std::move(tensor);
    if (graph->values[idx].type.kind == TypeInfo::Kind::kUnknown) graph->values[idx].type = import::TensorTypeInfo(t);
  }

  TypeMap types;
  for (const auto& vi : g.value_info())
    if (vi.has_type()) types[vi.name()] = &vi.type();
  for (const auto& vi : g.output())
    if (vi.has_type() && vi.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) types[vi.name()] = &vi.type();
  for (const auto& n : g.node()) {
    std::vector<ExpandedNode> expanded;
    RETURN_IF_ERROR(inliner_->Expand(n, opsets, &expanded));
    for (const auto& e : expanded) RETURN_IF_ERROR(ConvertNode(e, depth, types, graph, &defined, outer_reads));
  }

  for (const auto& out : g.output()) {
    RETURN_IF_ERROR(CheckElemType(out.type(), "graph output '" + out.name() + "'"));
    int idx = Resolve(out.name(), graph, &defined, outer_reads);
    if (out.has_type()) {
      TypeInfo declared = import::ConvertType(out.type());
      if (declared.kind != TypeInfo::Kind::kUnknown) graph->values[idx].type = declared;
    }
    graph->outputs.push_back(idx);
  }
  // Inferred (or declared) types of intermediate values.
  for (const auto& vi : g.value_info()) {
    int idx = graph->FindValue(vi.name());
    if (idx < 0 || !vi.has_type() || graph->values[idx].type.kind != TypeInfo::Kind::kUnknown) continue;
    graph->values[idx].type = import::ConvertType(vi.type());
  }
  if (depth == 0 && !graph->captures.empty())
    return InvalidModel("main graph reads '", graph->ValueName(graph->captures.front()), "', which is never produced");
  return Status::Ok();
}

Status Converter::ConvertConstant(const ExpandedNode& e, Graph* graph, std::vector<char>* defined) {
  const onnx::NodeProto& n = e.proto;
  const std::string what = "Constant node '" + n.name() + "'";
  if (n.output_size() != 1 || n.output(0).empty()) return InvalidModel(what, " must have exactly one output");
  if (n.attribute_size() != 1)
    return InvalidModel(what, " must have exactly one value attribute, found ", n.attribute_size());
  const onnx::AttributeProto& a = n.attribute(0);
  Tensor t;
  const std::string& an = a.name();
  if (an == "value") {
    auto r = import::ConvertTensor(a.t(), tctx_);
    if (!r.ok()) return WithContext(r.status(), what);
    t = std::move(r).value();
  } else if (an == "value_float") {
    t = Tensor::Scalar<float>(a.f());
  } else if (an == "value_floats") {
    t = Tensor::FromVector<float>({a.floats().begin(), a.floats().end()}, {a.floats_size()});
  } else if (an == "value_int") {
    t = Tensor::Scalar<int64_t>(a.i());
  } else if (an == "value_ints") {
    t = Tensor::FromVector<int64_t>({a.ints().begin(), a.ints().end()}, {a.ints_size()});
  } else if (an == "value_string") {
    t = Tensor::Scalar<std::string>(a.s());
  } else if (an == "value_strings") {
    t = Tensor::FromVector<std::string>({a.strings().begin(), a.strings().end()}, {a.strings_size()});
  } else if (an == "sparse_value") {
    return Unsupported(what, " uses sparse_value, which is not supported");
  } else {
    return InvalidModel(what, " has unknown attribute '", an, "'");
  }
  if (an != "value" && tctx_.budget) {
    RETURN_IF_ERROR(tctx_.budget->Charge(t.dtype() == DataType::kString ? 0 : t.byte_size(), what));
  }
  int idx = graph->AddValue(n.output(0));
  defined->resize(graph->values.size(), 0);
  if ((*defined)[idx]) return InvalidModel("value '", n.output(0), "' is produced twice (", what, ")");
  (*defined)[idx] = 1;
  TypeInfo ti;
  ti.kind = TypeInfo::Kind::kTensor;
  ti.elem_type = t.dtype();
  ti.has_shape = true;
  for (int64_t d : t.shape()) ti.dims.push_back(Dim{d, ""});
  graph->values[idx].type = ti;
  graph->initializers[idx] = std::move(t);
  return Status::Ok();
}

Status Converter::ConvertNode(const ExpandedNode& e, int depth, const TypeMap& types, Graph* graph,
                              std::vector<char>* defined, std::vector<std::string>* outer_reads) {
  const onnx::NodeProto& p = e.proto;
  Node node;
  node.name = p.name();
  node.op_type = p.op_type();
  node.domain = import::NormalizeDomain(p.domain());
  auto ver = e.opsets->find(node.domain);
  if (ver == e.opsets->end())
    return InvalidModel("node '", node.name, "' (", node.op_type, ") uses domain '", OnnxDomainName(node.domain),
                        "', which has no opset_import");
  node.opset = ver->second;
  if (node.domain.empty() && node.op_type == "Constant") return ConvertConstant(e, graph, defined);

  for (const auto& in : p.input()) node.inputs.push_back(in.empty() ? -1 : Resolve(in, graph, defined, outer_reads));
  for (const auto& a : p.attribute()) {
    std::vector<std::string> sub_reads;
    auto attr = ConvertAttribute(a, e.opsets, depth, graph, &sub_reads);
    if (!attr.ok()) return WithContext(attr.status(), node.Describe() + " attribute '" + a.name() + "'");
    node.attrs[a.name()] = std::move(attr).value();
    // What a subgraph captures is read by this node from this graph (or from further out).
    for (const auto& name : sub_reads) Resolve(name, graph, defined, outer_reads);
  }
  for (const auto& out : p.output()) {
    if (out.empty()) {
      node.outputs.push_back(-1);
      continue;
    }
    int idx = graph->AddValue(out);
    defined->resize(graph->values.size(), 0);
    bool captured = std::find(graph->captures.begin(), graph->captures.end(), idx) != graph->captures.end();
    if ((*defined)[idx] || captured)
      return InvalidModel(node.Describe(), " produces '", out, "', which is already defined");
    (*defined)[idx] = 1;
    auto t = types.find(out);
    if (t != types.end()) graph->values[idx].type = import::ConvertType(*t->second);
    node.outputs.push_back(idx);
  }
  graph->nodes.push_back(std::move(node));
  return Status::Ok();
}

Result<std::shared_ptr<Graph>> Converter::ConvertSubgraph(const onnx::GraphProto& g, const OpsetMap* opsets, int depth,
                                                          const Graph* parent, std::vector<std::string>* sub_reads) {
  auto sub = std::make_shared<Graph>();
  enclosing_.push_back(parent);
  Status st = ConvertGraph(g, opsets, depth + 1, sub.get(), sub_reads);
  enclosing_.pop_back();
  RETURN_IF_ERROR(st);
  return sub;
}

Result<Attribute> Converter::ConvertAttribute(const onnx::AttributeProto& a, const OpsetMap* opsets, int depth,
                                              const Graph* parent, std::vector<std::string>* sub_reads) {
  using A = onnx::AttributeProto;
  using T = Attribute::Type;
  Attribute out;
  if (!a.ref_attr_name().empty())
    return InvalidModel("refers to function attribute '", a.ref_attr_name(), "' outside a function");
  switch (AttrType(a)) {
    case A::FLOAT:
      out.type = T::kFloat;
      out.f = a.f();
      break;
    case A::INT:
      out.type = T::kInt;
      out.i = a.i();
      break;
    case A::STRING:
      out.type = T::kString;
      out.s = a.s();
      break;
    case A::TENSOR: {
      out.type = T::kTensor;
      ASSIGN_OR_RETURN(out.t, import::ConvertTensor(a.t(), tctx_));
      break;
    }
    case A::GRAPH: {
      out.type = T::kGraph;
      ASSIGN_OR_RETURN(out.g, ConvertSubgraph(a.g(), opsets, depth, parent, sub_reads));
      break;
    }
    case A::FLOATS:
      out.type = T::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      out.type = T::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      out.type = T::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::TENSORS:
      out.type = T::kTensors;
      for (const auto& tp : a.tensors()) {
        ASSIGN_OR_RETURN(Tensor t, import::ConvertTensor(tp, tctx_));
        out.tensors.push_back(std::move(t));
      }
      break;
    case A::GRAPHS:
      out.type = T::kGraphs;
      for (const auto& g : a.graphs()) {
        ASSIGN_OR_RETURN(auto sub, ConvertSubgraph(g, opsets, depth, parent, sub_reads));
        out.graphs.push_back(std::move(sub));
      }
      break;
    case A::TYPE_PROTO:
      out.type = T::kString;
      out.s = TypeString(a.tp());
      break;
    case A::TYPE_PROTOS:
      out.type = T::kStrings;
      for (const auto& tp : a.type_protos()) out.strings.push_back(TypeString(tp));
      break;
    case A::SPARSE_TENSOR:
    case A::SPARSE_TENSORS:
      return Unsupported("sparse tensor attributes are not supported");
    default:
      return InvalidModel("has no value (attribute type undefined)");
  }
  return out;
}

// onnx::checker::check_model(ModelProto) with the model folder set, so that the checker
// looks for external data next to the model instead of in the working directory.
void RunChecker(const onnx::ModelProto& model, const std::string& model_dir) {
  namespace ck = onnx::checker;
  if (!model.ir_version()) fail_check("The model does not have an ir_version set properly.");
  // IR 9 to 11 (ONNX 1.14-1.18) add float8, int4 and float4 types, metadata and multi-device
  // fields; the tensor types are refused by name where a model uses them, the fields ignored.
  if (model.ir_version() > kMaxIrVersion)
    fail_check("model ir_version ", model.ir_version(), " is newer than this build reads (up to ", kMaxIrVersion, ")");
  ck::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  ctx.set_model_dir(model_dir);
  std::unordered_map<std::string, int> opsets;
  for (const auto& imp : model.opset_import()) opsets[imp.domain()] = static_cast<int>(imp.version());
  ctx.set_opset_imports(opsets);
  ck::LexicalScopeContext lex;
  ck::check_graph(model.graph(), ctx, lex);
  if (model.ir_version() >= 8) ck::check_model_local_functions(model, ctx, lex);
}

// Adds the (normalized) domain of every node in g and its subgraphs to `out`. Depth is
// bounded by the caller's later subgraph-depth check; a hostile nesting depth stops here at
// kMaxDepth too (the domains below it are then not collected, and the import fails later).
void CollectNodeDomains(const onnx::GraphProto& g, std::unordered_set<std::string>* out, int depth = 0) {
  constexpr int kMaxDepth = 256;
  if (depth > kMaxDepth) return;
  for (const auto& n : g.node()) {
    out->insert(import::NormalizeDomain(n.domain()));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNodeDomains(a.g(), out, depth + 1);
      for (const auto& sg : a.graphs()) CollectNodeDomains(sg, out, depth + 1);
    }
  }
}

// Refuses every ai.onnx node whose op is new or changed in an opset this build has no schema
// for (opset_schemas.h), before the checker would report it less clearly or accept the older
// version. Functions' nodes are checked at the functions' own opsets.
Status CheckOpVersions(const onnx::GraphProto& g, int onnx_opset, int depth = 0) {
  constexpr int kMaxDepth = 256;
  if (depth > kMaxDepth) return Status::Ok();  // the subgraph-depth check reports it
  for (const auto& n : g.node()) {
    if (import::NormalizeDomain(n.domain()).empty())
      RETURN_IF_ERROR(CheckOnnxOpVersion(n.op_type(), onnx_opset, "node '" + n.name() + "' (" + n.op_type() + ")"));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(CheckOpVersions(a.g(), onnx_opset, depth + 1));
      for (const auto& sg : a.graphs()) RETURN_IF_ERROR(CheckOpVersions(sg, onnx_opset, depth + 1));
    }
  }
  return Status::Ok();
}

Status CheckOpVersions(const onnx::ModelProto& proto, const OpsetMap& opsets) {
  auto onnx_opset = opsets.find("");
  if (onnx_opset != opsets.end()) RETURN_IF_ERROR(CheckOpVersions(proto.graph(), onnx_opset->second));
  for (const auto& f : proto.functions()) {
    int v = onnx_opset != opsets.end() ? onnx_opset->second : 0;
    for (const auto& imp : f.opset_import())
      if (import::NormalizeDomain(imp.domain()).empty()) v = static_cast<int>(imp.version());
    for (const auto& n : f.node())
      if (v > 0 && import::NormalizeDomain(n.domain()).empty())
        RETURN_IF_ERROR(CheckOnnxOpVersion(
            n.op_type(), v, "function '" + f.name() + "' node '" + n.name() + "' (" + n.op_type() + ")"));
  }
  return Status::Ok();
}

// `src` says where stripped payloads are re-read from (its table is filled here); the model
// bytes must stay valid until this returns.
Result<Model> ImportImpl(const void* data, size_t size, const ImportOptions& opts, import::InlineSource* src) {
  LoadTrace trace("import");
  if (size == 0) return InvalidModel("model is empty (0 bytes)");
  onnx::ModelProto proto;
  {
    // Large weights are read later straight into their tensors, not copied by protobuf.
    std::string stripped;
    // From the file when there is one: the scan then never touches the mapping (see
    // import_wire.cc), and what it read is parsed unless it gave up.
    import::StripResult strip =
        src->fd >= 0
            ? import::StripLargeRawDataFromFile(src->fd, size, import::kStripRawDataThreshold, &stripped, &src->table)
        : import::StripLargeRawData(data, size, import::kStripRawDataThreshold, &stripped, &src->table)
            ? import::StripResult::kStripped
            : import::StripResult::kGaveUp;
    // The file shrank since it was opened: its mapping would fault (SIGBUS) past the new end.
    if (strip == import::StripResult::kReadFailed)
      return MakeStatus(StatusCode::kIOError, "cannot read the model: short read (the file was truncated or replaced ",
                        "while it was being loaded)");
    if (strip != import::StripResult::kStripped) src->table.clear();
    const bool parse_stripped = strip == import::StripResult::kStripped || strip == import::StripResult::kWhole;
    const void* parse_data = parse_stripped ? stripped.data() : data;
    size_t parse_size = parse_stripped ? stripped.size() : size;
    // The file scan gave up (bytes it does not expect): a model of modest size is read rather
    // than parsed from the mapping (on a VM each mapped page's first touch costs more than
    // reading it, and a file cut meanwhile is then a clear error, not a fault).
    std::string whole;
    if (strip == import::StripResult::kGaveUp && src->fd >= 0 && size <= import::kReadWholeModelMaxBytes) {
      whole.resize(size);
      RETURN_IF_ERROR(import::ReadFully(src->fd, 0, size, whole.data(), src->path, "the model"));
      parse_data = whole.data();
    }
    trace.Phase("strip raw_data");
    if (parse_size > static_cast<size_t>(INT_MAX))
      return InvalidModel("model is ", size, " bytes; protobuf cannot parse more than 2 GiB (use external data)");
    if (!proto.ParseFromArray(parse_data, static_cast<int>(parse_size)))
      return InvalidModel("not a valid ONNX model: protobuf parsing failed (truncated, corrupt or not an ONNX file)");
    trace.Phase("protobuf parse");
  }
  if (!proto.has_graph()) return InvalidModel("model has no graph (truncated or not an ONNX model?)");
  if (proto.opset_import_size() == 0) return InvalidModel("model has no opset_import; cannot tell which opset it uses");
  EnsureOpsetSchemas();
  EnsureContribSchemas();
  OpsetMap opsets;
  // Domains some node uses: an import no node uses cannot change what runs (ONNX Runtime's
  // saved optimized models import every domain it knows, e.g. ai.onnx.ml at opset 5).
  std::unordered_set<std::string> used_domains;
  CollectNodeDomains(proto.graph(), &used_domains);
  for (const auto& f : proto.functions()) {
    for (const auto& n : f.node()) used_domains.insert(import::NormalizeDomain(n.domain()));
  }
  for (const auto& imp : proto.opset_import()) {
    std::string d = import::NormalizeDomain(imp.domain());
    // An opset newer than libonnx knows would silently run with older op semantics.
    const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto range = known.find(d);
    if (range != known.end() && used_domains.count(d) &&
        (imp.version() < range->second.first || imp.version() > range->second.second))
      return Unsupported("model imports domain '", OnnxDomainName(d), "' at opset ", imp.version(),
                         "; this build knows opsets ", range->second.first, " to ", range->second.second);
    auto [it, inserted] = opsets.emplace(d, static_cast<int>(imp.version()));
    if (!inserted && it->second != imp.version())
      return InvalidModel("model imports domain '", OnnxDomainName(d), "' twice, at opsets ", it->second, " and ",
                          imp.version());
  }
  if (opts.max_subgraph_depth < 0) return InvalidArgument("max_subgraph_depth must be >= 0");

  RETURN_IF_ERROR(import::CheckLocalFunctions(proto));
  RETURN_IF_ERROR(import::ValidateExternalData(proto.graph(), opts.base_dir));
  RETURN_IF_ERROR(import::SortAndValidateGraph(proto.mutable_graph(), {}, opsets, 0, opts.max_subgraph_depth));
  RETURN_IF_ERROR(import::LowerOrtFusedNodes(&proto, opsets));
  RETURN_IF_ERROR(CheckOpVersions(proto, opsets));
  trace.Phase("validate/sort");

  if (opts.run_checker) {
    try {
      RunChecker(proto, opts.base_dir);
    } catch (const onnx::checker::ValidationError& e) {
      return InvalidModel("ONNX checker: ", import::OneLine(e.what()));
    } catch (const std::exception& e) {
      return InvalidModel("ONNX checker: ", import::OneLine(e.what()));
    } catch (...) {
      return InvalidModel("ONNX checker failed with an unknown error");
    }
    trace.Phase("onnx checker");
  }
  if (opts.infer_shapes) {
    try {
      onnx::ShapeInferenceOptions so(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/false);
      RETURN_IF_ERROR(import::InferShapesGuarded(&proto, so));
    } catch (...) {
      // Inference is best effort: a valid model keeps its declared types.
    }
    trace.Phase("shape inference");
  }

  import::MemoryBudget budget{opts.memory_cap_bytes, 0};
  import::FunctionInliner inliner(proto, opsets, opts);
  Converter conv(&inliner, import::TensorContext{opts.base_dir, &budget, src}, proto.ir_version(),
                 opts.max_subgraph_depth);
  Model model;
  model.ir_version = proto.ir_version();
  model.producer = proto.producer_name();
  if (!proto.producer_version().empty()) model.producer += " " + proto.producer_version();
  model.opsets = opsets;
  model.graph = std::make_shared<Graph>();
  std::vector<std::string> outer_reads;
  RETURN_IF_ERROR(conv.ConvertGraph(proto.graph(), &model.opsets, 0, model.graph.get(), &outer_reads));
  trace.Phase("convert to IR");
  return model;
}

}  // namespace

Result<Model> ImportOnnxBytes(const void* data, size_t size, const ImportOptions& opts) {
  if (data == nullptr && size != 0) return InvalidArgument("model data is null");
  import::InlineSource src;
  src.bytes = static_cast<const uint8_t*>(data);
  src.size = size;
  try {
    return ImportImpl(data, size, opts, &src);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kOutOfMemory, "out of memory while importing the model");
  } catch (const std::exception& e) {
    return InvalidModel("import failed: ", import::OneLine(e.what()));
  }
}

Result<Model> ImportOnnxFile(const std::string& path, ImportOptions opts) {
  LoadTrace trace("file");
  // Mapped, not read: the parser only touches the graph structure, and large weights are
  // read (or mapped) from the file straight into their tensors.
  ASSIGN_OR_RETURN(auto file, import::MappedFile::Open(path));
  trace.Phase("map file");
  if (opts.base_dir.empty()) {
    std::filesystem::path p(path);
    opts.base_dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  }
  import::InlineSource src;
  src.fd = file->fd();
  src.path = path;
  // Mapped payloads are read on first touch already.
  if (opts.defer_weight_reads && !import::MapWeightPayloads()) {
    ASSIGN_OR_RETURN(src.deferred, DeferredPayloads::Open(file->fd(), path));
  }
  Result<Model> r = InvalidModel("model is empty (0 bytes)");
  try {
    r = ImportImpl(file->data(), file->size(), opts, &src);
  } catch (const std::bad_alloc&) {
    r = MakeStatus(StatusCode::kOutOfMemory, "out of memory while importing the model");
  } catch (const std::exception& e) {
    r = InvalidModel("import failed: ", import::OneLine(e.what()));
  }
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  r->path = path;
  if (src.deferred && src.deferred->made() > 0) r->deferred = std::move(src.deferred);
  return r;
}

}  // namespace strata
