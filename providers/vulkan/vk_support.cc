// The capability query: which nodes the Vulkan provider runs exactly. Anything it
// declines (other dtypes, unknown attributes, non-constant shape inputs, ...) stays on
// the CPU, so this errs on the side of declining.
#include <cmath>
#include <set>
#include <string>

#include "vk_ops.h"

namespace strata_vk {
namespace {

const std::set<std::string> kUnary = {"Relu", "Sigmoid",   "Tanh", "Erf", "Exp",        "Sqrt", "Neg",
                                      "Clip", "LeakyRelu", "Gelu", "Abs", "Reciprocal", "Log"};
const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow"};
const std::set<std::string> kMeta = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

bool IsFloat(const strata_value_desc* v) { return v && v->dtype == kFloat; }
bool IsConst(const strata_value_desc* v) { return v && v->const_data != nullptr; }
bool IsConstInt(const strata_value_desc* v) { return IsConst(v) && (v->dtype == kInt64 || v->dtype == kInt32); }
bool RankIs(const strata_value_desc* v, int r) { return v && v->rank == r; }
// Intermediate values may lack a shape (rank -1); the kernel then checks the rank when it
// runs and reports a mismatch as an error naming the node.
bool RankIsOrUnknown(const strata_value_desc* v, int r) { return v && (v->rank == r || v->rank < 0); }

// Outputs after the first must be absent (MaxPool Indices, LayerNorm Mean, ...).
bool OnlyFirstOutput(const strata_node_desc* n) {
  for (size_t k = 1; k < n->output_count; ++k)
    if (n->outputs[k] >= 0) return false;
  return n->output_count >= 1 && n->outputs[0] >= 0;
}

std::string CheckPads(const strata_node_desc* n) {
  std::string pad = strata_node_attr_string(n, "auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID" && pad != "SAME_UPPER" && pad != "SAME_LOWER")
    return "auto_pad " + pad + " is not handled";
  size_t c;
  strata_node_attr_ints(n, "strides", &c);
  if (c != 0 && c != 2) return "strides must have 2 entries";
  strata_node_attr_ints(n, "dilations", &c);
  if (c != 0 && c != 2) return "dilations must have 2 entries";
  strata_node_attr_ints(n, "pads", &c);
  if (c != 0 && c != 4) return "pads must have 4 entries";
  return "";
}

std::string CheckActivation(const strata_node_desc* n) {
  const strata_attribute* a = strata_node_find_attr(n, "activation");
  if (!a) return "";
  if (a->type != STRATA_ATTR_STRING || !a->s) return "activation must be a string";
  std::string act = a->s;
  if (act != "Relu" && act != "Clip" && !act.empty()) return "fused activation " + act + " is not handled";
  return "";
}

}  // namespace

std::string WhyUnsupported(const strata_node_desc* n) {
  const std::string op = n->op_type ? n->op_type : "";
  if (n->domain && n->domain[0] != '\0') return "domain '" + std::string(n->domain) + "' is not handled";
  if (!OnlyFirstOutput(n)) return "only the first output is produced";
  if (!IsFloat(strata_node_output(n, 0))) return "only float32 outputs are handled";
  auto in = [&](size_t i) { return strata_node_input(n, i); };
  auto float_inputs = [&](size_t first, size_t last) -> bool {
    for (size_t k = first; k < n->input_count && k <= last; ++k)
      if (in(k) && !IsFloat(in(k))) return false;
    return in(0) != nullptr;
  };
  if (kUnary.count(op)) {
    if (!float_inputs(0, 0)) return "only float32 is handled";
    if (op == "Clip" && n->opset >= 11) {
      for (size_t k = 1; k < 3; ++k)
        if (in(k) && (!IsFloat(in(k)) || !IsConst(in(k)) || in(k)->const_bytes != sizeof(float)))
          return "Clip min/max must be constant float32 scalars";
    }
    if (op == "Gelu") {
      std::string a = strata_node_attr_string(n, "approximate", "none");
      if (a != "none" && a != "tanh") return "Gelu approximate=" + a + " is not handled";
    }
    if (n->input_count > 3 || (op != "Clip" && n->input_count > 1)) return "unexpected extra inputs";
    return "";
  }
  if (kBinary.count(op)) return float_inputs(0, 1) && in(1) ? "" : "only float32 is handled";
  if (op == "MatMul") return float_inputs(0, 1) && in(1) ? "" : "only float32 is handled";
  if (op == "Gemm") {
    if (!float_inputs(0, 2) || !in(1)) return "only float32 is handled";
    return CheckActivation(n);
  }
  if (op == "Conv") {
    if (!float_inputs(0, 2) || !in(1)) return "only float32 is handled";
    if (!RankIsOrUnknown(in(0), 4) || !RankIs(in(1), 4)) return "only 2-D convolution (rank 4) is handled";
    std::string why = CheckPads(n);
    if (why.empty()) why = CheckActivation(n);
    size_t c;
    strata_node_attr_ints(n, "kernel_shape", &c);
    if (why.empty() && c != 0 && c != 2) why = "kernel_shape must have 2 entries";
    return why;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (!float_inputs(0, 0)) return "only float32 is handled";
    if (!RankIsOrUnknown(in(0), 4)) return "only 2-D pooling (rank 4) is handled";
    if (strata_node_attr_int(n, "storage_order", 0) != 0) return "storage_order=1 is not handled";
    size_t c;
    strata_node_attr_ints(n, "kernel_shape", &c);
    if (c != 2) return "kernel_shape must have 2 entries";
    return CheckPads(n);
  }
  if (op == "GlobalAveragePool") {
    if (!float_inputs(0, 0)) return "only float32 is handled";
    return in(0)->rank >= 3 || in(0)->rank < 0 ? "" : "input rank must be >= 3";
  }
  if (op == "Softmax") return float_inputs(0, 0) ? "" : "only float32 is handled";
  if (op == "LayerNormalization") {
    if (!float_inputs(0, 2) || !in(1)) return "only float32 is handled";
    if (strata_node_attr_int(n, "stash_type", 1) != 1) return "stash_type other than float32 is not handled";
    return "";
  }
  if (op == "ReduceMean" || op == "ReduceSum") {
    if (!float_inputs(0, 0)) return "only float32 is handled";
    const bool axes_input = (op == "ReduceSum" && n->opset >= 13) || (op == "ReduceMean" && n->opset >= 18);
    if (axes_input && in(1) && !IsConstInt(in(1))) return "axes must be a constant";
    if (strata_node_attr_int(n, "noop_with_empty_axes", 0) != 0) return "noop_with_empty_axes=1 is not handled";
    return "";
  }
  if (op == "Transpose" || op == "Concat") return float_inputs(0, n->input_count) ? "" : "only float32 is handled";
  if (op == "Slice") {
    if (!float_inputs(0, 0)) return "only float32 is handled";
    for (size_t k = 1; k < n->input_count; ++k)
      if (in(k) && !IsConstInt(in(k))) return "starts/ends/axes/steps must be constants";
    return "";
  }
  if (op == "Gather") {
    if (!float_inputs(0, 0)) return "only float32 data is handled";
    if (!in(1) || (in(1)->dtype != kInt64 && in(1)->dtype != kInt32)) return "indices must be int32 or int64";
    return "";
  }
  if (kMeta.count(op)) {
    if (!float_inputs(0, 0)) return "only float32 data is handled";
    if ((op == "Reshape" || ((op == "Squeeze" || op == "Unsqueeze") && n->opset >= 13)) && in(1) && !IsConstInt(in(1)))
      return "the shape/axes input must be a constant";
    if (op == "Reshape" && !in(1)) return "Reshape needs a shape";
    return "";
  }
  return "op " + op + " is not handled";
}

}  // namespace strata_vk
