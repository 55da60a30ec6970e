// ONNX Runtime's fused contrib ops, rewritten at import into the standard ops they fuse:
//   com.microsoft FusedConv(X, W, B?, Z?)  ->  act(Conv(X, W, B) [+ Z])
//   com.microsoft FusedGemm(A, B, C?)      ->  act(Gemm(A, B, C))
// ORT's graph optimizer writes these into the models it saves (levels "extended" and
// "all"). Rewritten before the checker and shape inference, the whole graph gets its types
// and shapes inferred (libonnx knows no com.microsoft op), and strata's own passes fuse the
// parts again their way (conv epilogues, the NHWC layout); at optimization level 0 the
// reference kernels run the parts.
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/import_internal.h"

namespace strata::import {
namespace {

constexpr char kMs[] = "com.microsoft";

bool IsFused(const onnx::NodeProto& n) {
  return NormalizeDomain(n.domain()) == kMs && (n.op_type() == "FusedConv" || n.op_type() == "FusedGemm");
}

void CollectNames(const onnx::GraphProto& g, std::unordered_set<std::string>* names) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& v : g.output()) names->insert(v.name());
  for (const auto& v : g.value_info()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) names->insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNames(a.g(), names);
      for (const auto& sg : a.graphs()) CollectNames(sg, names);
    }
  }
}

struct Lowering {
  std::unordered_set<std::string> names;  // every name in the model: new ones avoid them
  int onnx_opset = 0;

  std::string Fresh(const std::string& base) {
    std::string n = base;
    for (int i = 1; names.count(n); ++i) n = base + "_" + std::to_string(i);
    names.insert(n);
    return n;
  }

  static const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const char* name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }

  static onnx::NodeProto Make(const onnx::NodeProto& from, const std::string& suffix, const char* op,
                              std::vector<std::string> ins, const std::string& out) {
    onnx::NodeProto n;
    n.set_name(from.name().empty() ? std::string() : from.name() + suffix);
    n.set_op_type(op);
    for (auto& i : ins) n.add_input(std::move(i));
    n.add_output(out);
    return n;
  }

  static void SetFloat(onnx::NodeProto* n, const char* name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }

  // act(in) -> out for ORT's activation name and parameters (FusedConv's activation_params;
  // FusedGemm's activation_alpha/beta), appended to `out_nodes`; `g` takes Clip's bounds.
  Status Activation(const onnx::NodeProto& fused, const std::string& act, const std::vector<float>& params,
                    const std::string& in, const std::string& out, onnx::GraphProto* g,
                    std::vector<onnx::NodeProto>* out_nodes) {
    const std::string what = "node '" + fused.name() + "' (" + fused.op_type() + ", com.microsoft)";
    auto param = [&](size_t i, float def) { return i < params.size() ? params[i] : def; };
    onnx::NodeProto n;
    if (act == "Relu" || act == "Sigmoid" || act == "Tanh") {
      n = Make(fused, "/" + act, act.c_str(), {in}, out);
    } else if (act == "LeakyRelu") {
      n = Make(fused, "/LeakyRelu", "LeakyRelu", {in}, out);
      SetFloat(&n, "alpha", param(0, 0.01f));
    } else if (act == "HardSigmoid") {
      n = Make(fused, "/HardSigmoid", "HardSigmoid", {in}, out);
      SetFloat(&n, "alpha", param(0, 0.2f));
      SetFloat(&n, "beta", param(1, 0.5f));
    } else if (act == "Clip" && fused.op_type() == "FusedConv") {
      if (params.size() != 2)
        return InvalidModel(what, ": activation Clip needs activation_params [min, max], got ", params.size(),
                            " values");
      if (onnx_opset < 11) {  // Clip-6 takes its bounds as attributes
        n = Make(fused, "/Clip", "Clip", {in}, out);
        SetFloat(&n, "min", params[0]);
        SetFloat(&n, "max", params[1]);
      } else {  // Clip-11 as inputs: two scalar initializers
        std::vector<std::string> ins = {in};
        for (int i = 0; i < 2; ++i) {
          auto* t = g->add_initializer();
          t->set_name(Fresh(out + (i ? "/clip_max" : "/clip_min")));
          t->set_data_type(onnx::TensorProto::FLOAT);
          t->add_float_data(params[i]);
          ins.push_back(t->name());
        }
        n = Make(fused, "/Clip", "Clip", std::move(ins), out);
      }
    } else {
      return Unsupported(what, ": activation '", act, "' is not supported");
    }
    out_nodes->push_back(std::move(n));
    return Status::Ok();
  }

  Status Lower(const onnx::NodeProto& n, onnx::GraphProto* g, std::vector<onnx::NodeProto>* out) {
    const std::string what = "node '" + n.name() + "' (" + n.op_type() + ", com.microsoft)";
    if (n.output_size() != 1 || n.output(0).empty()) return InvalidModel(what, ": takes one output");
    const std::string y = n.output(0);
    const auto* act_attr = Attr(n, "activation");
    const std::string act = act_attr ? act_attr->s() : "";
    std::vector<std::string> ins(n.input().begin(), n.input().end());
    if (n.op_type() == "FusedConv") {
      if (ins.size() < 2 || ins.size() > 4) return InvalidModel(what, ": takes 2 to 4 inputs");
      const bool z = ins.size() == 4 && !ins[3].empty();
      std::vector<std::string> conv_in(ins.begin(), ins.begin() + std::min<size_t>(3, ins.size()));
      const std::string conv_out = act.empty() && !z ? y : Fresh(y + "/conv");
      onnx::NodeProto conv = Make(n, "", "Conv", std::move(conv_in), conv_out);
      for (const auto& a : n.attribute())
        if (a.name() != "activation" && a.name() != "activation_params") *conv.add_attribute() = a;
      out->push_back(std::move(conv));
      std::string cur = conv_out;
      if (z) {
        const std::string sum = act.empty() ? y : Fresh(y + "/sum");
        out->push_back(Make(n, "/Add", "Add", {cur, ins[3]}, sum));
        cur = sum;
      }
      if (act.empty()) return Status::Ok();
      const auto* p = Attr(n, "activation_params");
      const std::vector<float> params =
          p ? std::vector<float>(p->floats().begin(), p->floats().end()) : std::vector<float>{};
      return Activation(n, act, params, cur, y, g, out);
    }
    if (ins.size() < 2 || ins.size() > 3) return InvalidModel(what, ": takes 2 or 3 inputs");
    const std::string gemm_out = act.empty() ? y : Fresh(y + "/gemm");
    onnx::NodeProto gemm = Make(n, "", "Gemm", std::move(ins), gemm_out);
    for (const auto& a : n.attribute())
      if (a.name() == "alpha" || a.name() == "beta" || a.name() == "transA" || a.name() == "transB")
        *gemm.add_attribute() = a;
    out->push_back(std::move(gemm));
    if (act.empty()) return Status::Ok();
    const auto* aa = Attr(n, "activation_alpha");
    const auto* ab = Attr(n, "activation_beta");
    const std::vector<float> params = {aa ? aa->f() : (act == "LeakyRelu" ? 0.01f : 0.2f), ab ? ab->f() : 0.5f};
    return Activation(n, act, params, gemm_out, y, g, out);
  }

  Status Graph(onnx::GraphProto* g) {
    bool any = false;
    for (auto& n : *g->mutable_node()) {
      any = any || IsFused(n);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) RETURN_IF_ERROR(Graph(a.mutable_g()));
        for (auto& sg : *a.mutable_graphs()) RETURN_IF_ERROR(Graph(&sg));
      }
    }
    if (!any) return Status::Ok();
    std::vector<onnx::NodeProto> nodes;
    for (auto& n : *g->mutable_node()) {
      if (IsFused(n))
        RETURN_IF_ERROR(Lower(n, g, &nodes));
      else
        nodes.push_back(std::move(n));
    }
    g->clear_node();
    for (auto& n : nodes) *g->add_node() = std::move(n);
    return Status::Ok();
  }
};

bool AnyFused(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (IsFused(n)) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && AnyFused(a.g())) return true;
      for (const auto& sg : a.graphs())
        if (AnyFused(sg)) return true;
    }
  }
  return false;
}

}  // namespace

Status LowerOrtFusedNodes(onnx::ModelProto* model, const OpsetMap& opsets) {
  if (!AnyFused(model->graph())) return Status::Ok();
  auto onnx = opsets.find("");
  if (onnx == opsets.end())
    return InvalidModel("the model uses ONNX Runtime's FusedConv/FusedGemm but imports no ai.onnx opset for the ",
                        "standard ops they stand for");
  Lowering l;
  l.onnx_opset = onnx->second;
  CollectNames(model->graph(), &l.names);
  return l.Graph(model->mutable_graph());
}

}  // namespace strata::import
