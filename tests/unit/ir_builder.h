// Builds strata IR graphs directly (no ONNX protobuf in between), for tests that hand
// graphs to the partitioner, the executor or a provider. tests/unit/onnx_builder.h is its
// counterpart for tests that need ONNX files.
//
//   IrBuilder b;
//   int x = b.Input("x", tensor), w = b.Const("w", weights), y = b.Out("y");
//   b.Add("Conv", {x, w}, {y}).attrs["pads"] = Attribute::Ints({1, 1, 1, 1});
//   b.g.outputs = {y};
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/ir.h"
#include "core/tensor.h"

namespace strata::testing {

class IrBuilder {
 public:
  // A tensor value of known dtype and shape.
  int Value(const std::string& name, const Shape& shape, DataType dt = DataType::kFloat) {
    int v = g.AddValue(name);
    g.values[v].type.kind = TypeInfo::Kind::kTensor;
    g.values[v].type.elem_type = dt;
    g.values[v].type.has_shape = true;
    for (int64_t d : shape) g.values[v].type.dims.push_back(Dim{d, ""});
    return v;
  }
  // A graph input; `t` is what the test feeds it (kept in `feeds`).
  int Input(const std::string& name, Tensor t) {
    int v = Value(name, t.shape(), t.dtype());
    g.inputs.push_back(v);
    feeds[v] = std::move(t);
    return v;
  }
  int Const(const std::string& name, const Tensor& t) {
    int v = Value(name, t.shape(), t.dtype());
    g.initializers[v] = t;
    return v;
  }
  // A float output whose shape is left for the kernels to work out.
  int Out(const std::string& name) {
    int v = g.AddValue(name);
    g.values[v].type.kind = TypeInfo::Kind::kTensor;
    g.values[v].type.elem_type = DataType::kFloat;
    return v;
  }
  Node& Add(const std::string& op, std::vector<int> ins, std::vector<int> outs, int opset = 13) {
    Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.op_type = op;
    n.opset = opset;
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  Graph g;
  std::map<int, Tensor> feeds;
};

inline void SetInts(Node& n, const std::string& k, std::vector<int64_t> v) { n.attrs[k] = Attribute::Ints(std::move(v)); }
inline void SetInt(Node& n, const std::string& k, int64_t v) { n.attrs[k] = Attribute::Int(v); }
inline void SetFloat(Node& n, const std::string& k, float v) { n.attrs[k] = Attribute::Float(v); }
inline void SetString(Node& n, const std::string& k, const std::string& v) { n.attrs[k] = Attribute::String(v); }

}  // namespace strata::testing
