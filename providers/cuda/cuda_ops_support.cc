// Which nodes the CUDA provider accepts. Anything declined runs on the CPU through the
// host's partitioning, so this errs on the side of declining.
#include <set>
#include <string>

#include "cuda_ops.h"

namespace strata_cuda {

size_t DtypeSize(int32_t dtype) {
  switch (dtype) {
    case kFloat: return 4;
    case kUint8: return 1;
    case kInt32: return 4;
    case kInt64: return 8;
    default: return 0;
  }
}

namespace {

bool FloatOrUnknown(const strata_value_desc* v) { return v && (v->dtype == kFloat || v->dtype == 0); }
bool IntOrUnknown(const strata_value_desc* v) {
  return v && (v->dtype == kInt64 || v->dtype == kInt32 || v->dtype == 0);
}
bool AnyOf(const strata_value_desc* v) {
  return v && (v->dtype == kFloat || v->dtype == kInt64 || v->dtype == kInt32 || v->dtype == 0);
}
// The axis is the last one when the rank is known; unknown rank declines.
bool IsLastAxis(const strata_value_desc* v, int64_t axis) {
  if (!v || v->rank <= 0) return false;
  return axis == -1 || axis == v->rank - 1;
}

const std::set<std::string>& Binary() {
  static const std::set<std::string> s = {"Add", "Sub", "Mul", "Div", "Pow"};
  return s;
}
const std::set<std::string>& Unary() {
  static const std::set<std::string> s = {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Sqrt", "Clip", "LeakyRelu"};
  return s;
}
const std::set<std::string>& Meta() {
  static const std::set<std::string> s = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return s;
}

}  // namespace

std::string WhyUnsupported(const strata_node_desc* n) {
  const std::string op = n->op_type ? n->op_type : "";
  const std::string domain = n->domain ? n->domain : "";
  auto in = [&](size_t i) { return strata_node_input(n, i); };
  auto out_count = [&]() {
    size_t c = 0;
    for (size_t k = 0; k < n->output_count; ++k) c += n->outputs[k] >= 0;
    return c;
  };
  if (domain == "com.microsoft") {
    if (op != "MatMulNBits") return "com.microsoft op " + op + " is not handled";
    const int64_t bits = strata_node_attr_int(n, "bits", 4), block = strata_node_attr_int(n, "block_size", 0);
    if (bits != 4 && bits != 8) return "MatMulNBits with bits=" + std::to_string(bits) + " is not handled";
    if (block < 16 || (block & (block - 1)) != 0) return "block_size must be a power of two >= 16";
    if (!FloatOrUnknown(in(0))) return "only float32 activations are handled";
    if (!in(1) || !in(1)->const_data || !in(2) || !in(2)->const_data)
      return "B and scales must be constant initializers";
    if (in(2)->dtype != kFloat) return "only float32 scales are handled";
    if (in(3) && (!in(3)->const_data || in(3)->dtype != kUint8)) return "zero points must be constant uint8";
    if (in(4) || in(5)) return "g_idx and bias inputs are not handled";
    return "";
  }
  if (!domain.empty() && domain != "ai.onnx") return "domain '" + domain + "' is not handled";
  if (Binary().count(op)) return FloatOrUnknown(in(0)) && FloatOrUnknown(in(1)) ? "" : "only float32 is handled";
  if (Unary().count(op)) return FloatOrUnknown(in(0)) ? "" : "only float32 is handled";
  if (op == "MatMul") {
    if (!FloatOrUnknown(in(0)) || !FloatOrUnknown(in(1))) return "only float32 is handled";
    if (!in(0) || !in(1) || in(0)->rank < 2 || in(1)->rank < 2) return "MatMul needs known ranks >= 2";
    return "";
  }
  if (op == "Gemm") {
    for (size_t k = 0; k < 3; ++k)
      if (in(k) && !FloatOrUnknown(in(k))) return "only float32 is handled";
    const std::string act = strata_node_attr_string(n, "activation", "");
    if (!act.empty() && act != "Relu" && act != "Clip") return "fused activation " + act + " is not handled";
    return "";
  }
  if (op == "Conv") {
    for (size_t k = 0; k < 3; ++k)
      if (in(k) && !FloatOrUnknown(in(k))) return "only float32 is handled";
    if (!in(0) || in(0)->rank != 4 || !in(1) || in(1)->rank != 4) return "only 2-D convolution (rank 4) is handled";
    const std::string act = strata_node_attr_string(n, "activation", "");
    if (!act.empty() && act != "Relu" && act != "Clip") return "fused activation " + act + " is not handled";
    return "";
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (!FloatOrUnknown(in(0))) return "only float32 is handled";
    if (!in(0) || in(0)->rank != 4) return "only 2-D pooling (rank 4) is handled";
    if (out_count() > 1) return "the Indices output is not handled";
    if (strata_node_attr_int(n, "storage_order", 0) != 0) return "storage_order=1 is not handled";
    return "";
  }
  if (op == "GlobalAveragePool") return FloatOrUnknown(in(0)) && in(0) && in(0)->rank >= 3 ? "" : "needs float32 rank >= 3";
  if (op == "Softmax" || op == "LogSoftmax") {
    if (!FloatOrUnknown(in(0))) return "only float32 is handled";
    const int64_t axis = strata_node_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
    return IsLastAxis(in(0), axis) ? "" : "only the last axis is handled";
  }
  if (op == "LayerNormalization") {
    if (!FloatOrUnknown(in(0)) || !FloatOrUnknown(in(1)) || (in(2) && !FloatOrUnknown(in(2))))
      return "only float32 is handled";
    if (out_count() > 1) return "the Mean/InvStdDev outputs are not handled";
    if (strata_node_attr_int(n, "stash_type", 1) != 1) return "only stash_type=1 is handled";
    return IsLastAxis(in(0), strata_node_attr_int(n, "axis", -1)) ? "" : "only the last axis is handled";
  }
  if (op == "ReduceMean" || op == "ReduceSum") {
    if (!FloatOrUnknown(in(0))) return "only float32 is handled";
    if (strata_node_attr_int(n, "noop_with_empty_axes", 0) != 0) return "noop_with_empty_axes is not handled";
    size_t count = 0;
    const int64_t* axes = strata_node_attr_ints(n, "axes", &count);
    const strata_value_desc* ax = in(1);
    if (ax) {
      if (!ax->const_data || ax->dtype != kInt64 || ax->const_bytes != sizeof(int64_t))
        return "axes must be one constant int64";
      axes = static_cast<const int64_t*>(ax->const_data);
      count = 1;
    }
    if (count != 1 || !IsLastAxis(in(0), axes[0])) return "only a reduction over the last axis is handled";
    return "";
  }
  if (op == "Transpose" || op == "Concat" || op == "Slice" || Meta().count(op)) {
    if (!AnyOf(in(0))) return "only float32, int32 and int64 data are handled";
    if (op == "Concat")
      for (size_t k = 0; k < n->input_count; ++k)
        if (!AnyOf(in(k))) return "only float32, int32 and int64 data are handled";
    if (op == "Reshape" && strata_node_attr_int(n, "allowzero", 0) != 0) return "allowzero=1 is not handled";
    if (op == "Slice")
      for (size_t k = 1; k < n->input_count; ++k)
        if (in(k) && !IntOrUnknown(in(k))) return "starts/ends/axes/steps must be integers";
    return "";
  }
  if (op == "Gather") {
    if (!AnyOf(in(0)) || !IntOrUnknown(in(1))) return "data must be float32/int32/int64 and indices int32/int64";
    return "";
  }
  if (op == "Cast") {
    const int64_t to = strata_node_attr_int(n, "to", 0);
    if (!AnyOf(in(0)) || (to != kFloat && to != kInt32 && to != kInt64))
      return "only casts between float32, int32 and int64 are handled";
    return "";
  }
  if (op == "LSTM") {
    for (size_t k = 0; k < 8; ++k)
      if (k != 4 && in(k) && !FloatOrUnknown(in(k))) return "only float32 is handled";
    if (in(4)) return "sequence_lens is not handled";
    if (strata_node_attr_int(n, "layout", 0) != 0) return "only layout=0 is handled";
    const std::string dir = strata_node_attr_string(n, "direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return "direction " + dir + " is not valid";
    const strata_attribute* acts = strata_node_find_attr(n, "activations");
    if (acts) {
      static const char* kDefault[3] = {"Sigmoid", "Tanh", "Tanh"};
      if (acts->type != STRATA_ATTR_STRINGS || acts->count % 3 != 0) return "activations must be a multiple of 3";
      for (size_t k = 0; k < acts->count; ++k)
        if (!acts->strings[k] || std::string(acts->strings[k]) != kDefault[k % 3])
          return "only the default activations (Sigmoid, Tanh, Tanh) are handled";
    }
    return "";
  }
  return "op " + op + " is not handled";
}

}  // namespace strata_cuda
