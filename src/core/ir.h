// strata's in-memory graph IR, independent of protobuf. The importer
// (core/onnx_import.*) builds it; the optimizer rewrites it; the planner and
// executor run it. Values are referred to by index into Graph::values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace strata {

struct Graph;
class DeferredPayloads;

// One dimension of a declared shape: a known size, or a symbolic/unknown one.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // symbolic name ("batch"), empty if unnamed
  bool known() const { return value >= 0; }
};

// Declared type of a value (from graph inputs/outputs/value_info or shape inference).
struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSequence, kOptional, kMap };
  Kind kind = Kind::kUnknown;
  DataType elem_type = DataType::kUndefined;  // tensor dtype, or the innermost tensor dtype (a map's value dtype)
  // kMap: the key dtype (int64 or string). kSequence/kOptional of maps: the element map's
  // key dtype. kUndefined for everything else.
  DataType map_key = DataType::kUndefined;
  bool has_shape = false;  // false: rank unknown
  std::vector<Dim> dims;
  // For kOptional: whether the contained type is a sequence.
  bool optional_of_sequence = false;
  std::string ToString() const;  // "float32[batch,3,224,224]"
};

struct Attribute {
  enum class Type { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors, kGraphs };
  Type type = Type::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;

  // One-line constructors for passes and tests that create attributes.
  static Attribute Int(int64_t v) {
    Attribute a;
    a.type = Type::kInt;
    a.i = v;
    return a;
  }
  static Attribute Float(float v) {
    Attribute a;
    a.type = Type::kFloat;
    a.f = v;
    return a;
  }
  static Attribute String(std::string v) {
    Attribute a;
    a.type = Type::kString;
    a.s = std::move(v);
    return a;
  }
  static Attribute Ints(std::vector<int64_t> v) {
    Attribute a;
    a.type = Type::kInts;
    a.ints = std::move(v);
    return a;
  }
  static Attribute Floats(std::vector<float> v) {
    Attribute a;
    a.type = Type::kFloats;
    a.floats = std::move(v);
    return a;
  }
  static Attribute OfTensor(Tensor v) {
    Attribute a;
    a.type = Type::kTensor;
    a.t = std::move(v);
    return a;
  }
};

struct Node {
  std::string name;  // may be empty in the file; the importer fills "<op>_<index>"
  std::string op_type;
  std::string domain;        // "" for ai.onnx
  int opset = 0;             // the imported opset version for this node's domain
  std::vector<int> inputs;   // value indices; -1 for an omitted optional input
  std::vector<int> outputs;  // value indices; -1 for an omitted optional output
  std::map<std::string, Attribute> attrs;
  // Which provider runs it ("cpu" unless a plugin took it). Set by partitioning.
  std::string provider = "cpu";

  bool HasAttr(const std::string& n) const { return attrs.count(n) != 0; }
  const Attribute* FindAttr(const std::string& n) const;
  int64_t GetInt(const std::string& n, int64_t def) const;
  float GetFloat(const std::string& n, float def) const;
  std::string GetString(const std::string& n, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(const std::string& n, std::vector<float> def = {}) const;
  std::vector<std::string> GetStrings(const std::string& n, std::vector<std::string> def = {}) const;
  // "Conv node 'conv1' (ai.onnx opset 13)": used to prefix error messages.
  std::string Describe() const;
};

// ONNX Reshape's output dims for input dims `in` and requested shape `req`: a 0 copies the
// input's dim unless `allowzero`, one -1 takes what is left. The Reshape kernel and the graph
// passes that reason about Reshapes share it. Errors begin with node.Describe().
Result<Shape> ResolveReshape(const Shape& in, const Shape& req, bool allowzero, const Node& node);

struct ValueInfo {
  std::string name;
  TypeInfo type;
};

struct Graph {
  std::string name;
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;  // topologically sorted after import
  // Graph inputs in declaration order. With IR >= 4 an input may also have an
  // initializer: it is then optional, and the initializer is its default.
  std::vector<int> inputs;
  std::vector<int> outputs;
  // Constant values: initializers and folded constants, by value index.
  std::unordered_map<int, Tensor> initializers;
  // Values this (sub)graph reads from an enclosing scope, by name.
  std::vector<int> captures;
  std::unordered_map<std::string, int> name_to_value;

  // Returns the index for `name`, adding a value if new.
  int AddValue(const std::string& name);
  int FindValue(const std::string& name) const;  // -1 if absent
  const std::string& ValueName(int v) const { return values[v].name; }
  bool IsConstant(int v) const { return v >= 0 && initializers.count(v) != 0; }
  const Tensor* Constant(int v) const;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer;
  std::map<std::string, int> opsets;  // domain ("" = ai.onnx) -> version
  std::shared_ptr<Graph> graph;
  std::string path;  // file it came from, or "" for memory
  // Payloads not read yet (ImportOptions::defer_weight_reads); null when none.
  std::shared_ptr<DeferredPayloads> deferred;
};

}  // namespace strata
