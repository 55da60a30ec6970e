#include "core/ir.h"

namespace strata {

std::string TypeInfo::ToString() const {
  std::string base = DataTypeName(elem_type);
  std::string s;
  if (has_shape) {
    s = base + "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) s += ",";
      if (dims[i].known()) {
        s += std::to_string(dims[i].value);
      } else {
        s += dims[i].param.empty() ? "?" : dims[i].param;
      }
    }
    s += "]";
  } else {
    s = base + "[...]";
  }
  if (map_key != DataType::kUndefined) {
    s = std::string("map<") + DataTypeName(map_key) + "," + base + ">";
    if (kind == Kind::kMap) return s;
  }
  if (kind == Kind::kSequence) return "sequence<" + s + ">";
  if (kind == Kind::kOptional) return optional_of_sequence ? "optional<sequence<" + s + ">>" : "optional<" + s + ">";
  return s;
}

const Attribute* Node::FindAttr(const std::string& n) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? nullptr : &it->second;
}
int64_t Node::GetInt(const std::string& n, int64_t def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kInt ? a->i : def;
}
float Node::GetFloat(const std::string& n, float def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kFloat ? a->f : def;
}
std::string Node::GetString(const std::string& n, const std::string& def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kString ? a->s : def;
}
std::vector<int64_t> Node::GetInts(const std::string& n, std::vector<int64_t> def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kInts ? a->ints : def;
}
std::vector<float> Node::GetFloats(const std::string& n, std::vector<float> def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kFloats ? a->floats : def;
}
std::vector<std::string> Node::GetStrings(const std::string& n, std::vector<std::string> def) const {
  const Attribute* a = FindAttr(n);
  return a && a->type == Attribute::Type::kStrings ? a->strings : def;
}
std::string Node::Describe() const {
  return op_type + " node '" + name + "' (" + (domain.empty() ? std::string("ai.onnx") : domain) + " opset " +
         std::to_string(opset) + ")";
}

Result<Shape> ResolveReshape(const Shape& in, const Shape& req, bool allowzero, const Node& node) {
  // Checked: a graph pass may see a fuzzed model's declared dims (UBSan caught 15 * 2^63-1).
  // No string is built unless there is an error: kernels call this on every run.
  int64_t n = 1;
  for (int64_t d : in)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return InvalidArgument(node.Describe(), ": input shape ", ShapeToString(in), " is negative or overflows");
  Shape out(req.size());
  int64_t infer = -1, known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < req.size(); ++i) {
    int64_t d = req[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return InvalidArgument(node.Describe(), ": shape ", ShapeToString(req), " copies dimension ", i,
                               " (0) but the input ", ShapeToString(in), " has rank ", in.size());
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) return InvalidArgument(node.Describe(), ": shape ", ShapeToString(req), " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < -1) return InvalidArgument(node.Describe(), ": invalid dimension ", d, " in shape ", ShapeToString(req));
    if (d == 0) has_zero = true;
    if (__builtin_mul_overflow(known, d, &known))
      return InvalidArgument(node.Describe(), ": shape ", ShapeToString(req), " overflows");
    out[i] = d;
  }
  if (infer >= 0) {
    if (allowzero && has_zero)
      return InvalidArgument(node.Describe(), ": allowzero shape ", ShapeToString(req), " cannot mix 0 and -1");
    if (known == 0 || n % known != 0)
      return InvalidArgument(node.Describe(), ": cannot reshape input ", ShapeToString(in), " to ", ShapeToString(req),
                             " (the -1 dimension cannot be inferred)");
    out[infer] = n / known;
  } else if (known != n) {
    return InvalidArgument(node.Describe(), ": cannot reshape input ", ShapeToString(in), " (", n, " elements) to ",
                           ShapeToString(out), " (", known, " elements)");
  }
  return out;
}

int Graph::AddValue(const std::string& n) {
  auto it = name_to_value.find(n);
  if (it != name_to_value.end()) return it->second;
  int idx = static_cast<int>(values.size());
  values.push_back(ValueInfo{n, {}});
  name_to_value.emplace(n, idx);
  return idx;
}
int Graph::FindValue(const std::string& n) const {
  auto it = name_to_value.find(n);
  return it == name_to_value.end() ? -1 : it->second;
}
const Tensor* Graph::Constant(int v) const {
  auto it = initializers.find(v);
  return it == initializers.end() ? nullptr : &it->second;
}

}  // namespace strata
