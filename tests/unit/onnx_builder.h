// Small helpers that build ONNX models with the protobuf API, shared by tests that
// need hand-made (often deliberately broken) models.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace strata::onnx_builder {

// An empty model importing ai.onnx at `opset`.
inline onnx::ModelProto MakeModel(int opset, const std::string& producer = "strata_test") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name(producer);
  auto* imp = m.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// A further opset import (e.g. "strata.internal" 1 for a model that carries internal ops).
inline void AddOpsetImport(onnx::ModelProto* m, const std::string& domain, int64_t version) {
  auto* imp = m->add_opset_import();
  imp->set_domain(domain);
  imp->set_version(version);
}

// INTS / INT attributes on a node.
inline void SetInts(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// A tensor type; a negative dim becomes the symbolic dim "n".
inline void SetType(onnx::TypeProto* t, int elem, std::initializer_list<int64_t> dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("n");
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

inline void AddInput(onnx::GraphProto* g, const std::string& name, std::initializer_list<int64_t> dims,
                     int elem = onnx::TensorProto::FLOAT) {
  auto* v = g->add_input();
  v->set_name(name);
  SetType(v->mutable_type(), elem, dims);
}

inline void AddOutput(onnx::GraphProto* g, const std::string& name, std::initializer_list<int64_t> dims,
                      int elem = onnx::TensorProto::FLOAT) {
  auto* v = g->add_output();
  v->set_name(name);
  SetType(v->mutable_type(), elem, dims);
}

// A model-local function `domain`.`name`, with the model importing `domain` at version 1;
// the caller fills its inputs, outputs, opset imports and nodes.
inline onnx::FunctionProto* AddLocalFunction(onnx::ModelProto* m, const std::string& domain, const std::string& name) {
  auto* imp = m->add_opset_import();
  imp->set_domain(domain);
  imp->set_version(1);
  auto* f = m->add_functions();
  f->set_name(name);
  f->set_domain(domain);
  return f;
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::initializer_list<std::string> in,
                                std::initializer_list<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  if (!name.empty()) n->set_name(name);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

// A float initializer with its values inline (float_data).
inline onnx::TensorProto* AddFloatInit(onnx::GraphProto* g, const std::string& name,
                                       std::initializer_list<int64_t> dims, std::initializer_list<float> vals) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : vals) t->add_float_data(v);
  return t;
}

// Scalar initializers: Loop trip counts, conditions, counters.
inline void AddInt64Scalar(onnx::GraphProto* g, const std::string& name, int64_t v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(v);
}
inline void AddBoolScalar(onnx::GraphProto* g, const std::string& name, bool v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}

// Gives `node` a graph attribute `name` (a Loop or Scan body, an If branch), the graph
// named the same, and returns the graph to fill.
inline onnx::GraphProto* AddGraphAttr(onnx::NodeProto* node, const std::string& name) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(name);
  return g;
}

// An initializer of ONNX type `type` (its element type T) with `v` as raw bytes.
template <typename T>
void AddRawInit(onnx::GraphProto* g, const std::string& name, int type, const std::vector<int64_t>& dims,
                const std::vector<T>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

// Deterministic pseudo-random floats in [-1, 1) (an LCG: no <random> state, the same on
// every platform).
inline std::vector<float> PseudoRandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

// A float initializer of shape `dims` whose values `fill(n)` makes (n = the element count).
template <typename Fill>
onnx::TensorProto* AddFloatInit(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                                Fill fill) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  size_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= static_cast<size_t>(d);
  }
  for (float v : fill(n)) t->add_float_data(v);
  return t;
}

// A float initializer of PseudoRandom values.
inline onnx::TensorProto* AddPseudoRandomInit(onnx::GraphProto* g, const std::string& name,
                                              std::initializer_list<int64_t> dims, uint32_t seed) {
  return AddFloatInit(g, name, dims, [seed](size_t n) { return PseudoRandom(n, seed); });
}

inline std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace strata::onnx_builder
