#include "core/layout_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <unordered_set>

#include "core/channel_shuffle_fusion.h"
#include "core/fusion_util.h"

namespace strata {
namespace {

// Elementwise ops whose result does not depend on the layout: input 0 is the tensor,
// any other inputs are scalars by the op's definition (Clip's min/max).
const std::unordered_set<std::string>& UnaryOps() {
  static const std::unordered_set<std::string> kOps = {
      "Relu",     "Clip",           "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh", "Elu",  "Selu",
      "Softplus", "Softsign",       "Exp",     "Abs",         "Neg",       "Sqrt",      "Erf",  "Gelu", "Mish",
      "Celu",     "ThresholdedRelu"};
  return kOps;
}
// com.microsoft's one-input activations are as layout-free (QuickGelu is also the
// optimizer's SiLU fusion).
// Per-tensor QuantizeLinear / DequantizeLinear (scalar scale and zero point, which the caller
// checks) are as free: static int8 models carry them between their QLinearConvs.
bool LayoutFreeUnary(const Node& n) {
  if (n.domain.empty())
    return UnaryOps().count(n.op_type) != 0 || n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear";
  return n.domain == "com.microsoft" && (n.op_type == "QuickGelu" || n.op_type == "Gelu") && n.inputs.size() == 1;
}

// NHWC position of NCHW axis `axis` of a rank-4 value (negative counts from the end), or
// -1 when it is out of range.
int64_t NhwcAxis(int64_t axis) {
  static constexpr int64_t kNhwcAxis[4] = {0, 3, 1, 2};
  if (axis < 0) axis += 4;
  return axis >= 0 && axis < 4 ? kNhwcAxis[axis] : -1;
}

// Two-input broadcasting elementwise ops; permuting both operands alike commutes with them.
const std::unordered_set<std::string>& BinaryOps() {
  static const std::unordered_set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "PRelu"};
  return kOps;
}

TypeInfo PermutedType(const TypeInfo& t) {
  TypeInfo r = t;
  r.kind = TypeInfo::Kind::kTensor;
  if (r.elem_type == DataType::kUndefined) r.elem_type = DataType::kFloat;
  if (t.has_shape && t.dims.size() == 4) {
    r.dims = {t.dims[0], t.dims[2], t.dims[3], t.dims[1]};
  } else {
    r.has_shape = false;
    r.dims.clear();
  }
  return r;
}

// A Conv XNNPACK's NHWC path (or the exact fallback behind it) can run: float 2-D, constant
// weight and bias, well-formed attributes. Anything else stays an ordinary NCHW Conv.
bool ConvertibleConv(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || !n.domain.empty() || n.inputs.size() < 2 || n.inputs[0] < 0) return false;
  if (n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const Tensor* w = g.Constant(n.inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0) return false;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor* b = g.Constant(n.inputs[2]);
    if (!b || b->dtype() != DataType::kFloat || b->rank() != 1 || b->dim(0) != w->dim(0)) return false;
  }
  const TypeInfo& xt = g.values[n.inputs[0]].type;
  if (xt.elem_type != DataType::kUndefined && xt.elem_type != DataType::kFloat) return false;
  if (xt.has_shape && xt.dims.size() != 4) return false;
  int64_t group = n.GetInt("group", 1);
  if (group <= 0 || w->dim(0) % group != 0) return false;
  if (xt.has_shape && xt.dims[1].known() && xt.dims[1].value != w->dim(1) * group) return false;
  if (n.HasAttr("kernel_shape") && n.GetInts("kernel_shape") != Shape(w->shape().begin() + 2, w->shape().end()))
    return false;
  for (const char* a : {"strides", "dilations"}) {
    if (!n.HasAttr(a)) continue;
    auto v = n.GetInts(a);
    if (v.size() != 2 || v[0] <= 0 || v[1] <= 0) return false;
  }
  std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return false;
  if (n.HasAttr("pads")) {
    auto p = n.GetInts("pads");
    if (p.size() != 4) return false;
    for (int64_t x : p)
      if (x < 0) return false;
  }
  if (n.HasAttr("activation")) {
    std::string act = n.GetString("activation", "");
    if (act != "Relu" && act != "Clip") return false;
  }
  return true;
}

bool ConvertiblePool(const Node& n) {
  if ((n.op_type != "MaxPool" && n.op_type != "AveragePool") || !n.domain.empty()) return false;
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0) return false;  // MaxPool's Indices are NCHW offsets
  if (n.GetInts("kernel_shape").size() != 2) return false;
  if (n.op_type == "MaxPool" && n.GetInt("storage_order", 0) != 0) return false;
  return true;
}

// An inference BatchNormalization (no training_mode, spatial parameters, no statistics
// outputs) whose four parameters are float constants of one length: the NHWC kernel
// (norm_nhwc.cc) reads them at creation.
bool ConvertibleBatchNorm(const Graph& g, const Node& n) {
  if (n.op_type != "BatchNormalization" || !n.domain.empty() || n.inputs.size() != 5 || n.outputs.empty() ||
      n.outputs[0] < 0)
    return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0) return false;
  if (n.GetInt("training_mode", 0) != 0 || (n.opset < 9 && n.GetInt("spatial", 1) == 0)) return false;
  int64_t c = -1;
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = n.inputs[i] >= 0 ? g.Constant(n.inputs[i]) : nullptr;
    if (!t || t->dtype() != DataType::kFloat || t->rank() != 1 || (c >= 0 && t->dim(0) != c)) return false;
    c = t->dim(0);
  }
  return true;
}

// The constant `c` (rank <= 4) as seen by a rank-4 NHWC operand: left-padded to rank 4 as
// numpy broadcasting would, then permuted NCHW -> NHWC.
Tensor PermuteConstant(const Tensor& c) {
  Shape s(4 - c.rank(), 1);
  s.insert(s.end(), c.shape().begin(), c.shape().end());
  Shape ps = {s[0], s[2], s[3], s[1]};
  Tensor out = std::move(Tensor::Allocate(c.dtype(), ps)).value();
  const float* src = c.data<float>();
  float* dst = out.mutable_data<float>();
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < s[1]; ++ch)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          dst[((n * s[2] + h) * s[3] + w) * s[1] + ch] = src[((n * s[1] + ch) * s[2] + h) * s[3] + w];
  return out;
}

// Names read by subgraphs (If/Loop/Scan bodies) from this scope: those values must exist
// in NCHW form as soon as they are produced.
std::set<std::string> CapturedNames(const Graph& g) {
  std::set<std::string> names;
  std::function<void(const Graph&)> collect = [&](const Graph& sg) {
    for (const Node& n : sg.nodes) {
      for (int i : n.inputs)
        if (i >= 0) names.insert(sg.ValueName(i));
      for (const auto& [k, a] : n.attrs) {
        if (a.g) collect(*a.g);
        for (const auto& s : a.graphs) collect(*s);
      }
    }
    for (int o : sg.outputs) names.insert(sg.ValueName(o));
  };
  for (const Node& n : g.nodes)
    for (const auto& [k, a] : n.attrs) {
      if (a.g) collect(*a.g);
      for (const auto& s : a.graphs) collect(*s);
    }
  return names;
}

class LayoutRewriter {
 public:
  explicit LayoutRewriter(Graph& g) : g_(g) {}

  int Run() {
    const size_t nvals = g_.values.size();
    twin_.assign(nvals, -1);
    pending_.assign(nvals, false);
    std::set<std::string> captured = CapturedNames(g_);
    std::vector<Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    alias_.assign(nvals, -1);
    captured_ = &captured;
    for (Node& n : old) {
      for (int& i : n.inputs)
        if (i >= 0 && i < static_cast<int>(alias_.size()) && alias_[i] >= 0) i = alias_[i];
      const size_t before = out_.size();
      if (!TryConvert(n)) {
        for (int i : n.inputs)
          if (i >= 0) Materialize(i);
        out_.push_back(std::move(n));
        continue;
      }
      for (size_t k = before; k < out_.size(); ++k)
        for (int o : out_[k].outputs)
          if (o >= 0 && o < static_cast<int>(nvals) && captured.count(g_.ValueName(o))) Materialize(o);
    }
    for (int o : g_.outputs) Materialize(o);
    g_.nodes = std::move(out_);
    return converted_;
  }

 private:
  void Grow() {
    twin_.resize(g_.values.size(), -1);
    pending_.resize(g_.values.size(), false);
  }

  int NewValue(const std::string& name, const TypeInfo& type) {
    std::string nm = name;
    for (int k = 1; g_.FindValue(nm) >= 0; ++k) nm = name + "_" + std::to_string(k);
    int v = g_.AddValue(nm);
    g_.values[v].type = type;
    Grow();
    return v;
  }

  // NHWC twin of NCHW value v, adding an entry NchwToNhwc on first use.
  int ToNhwc(int v, const std::string& at) {
    if (twin_[v] >= 0) return twin_[v];
    int t = NewValue(g_.ValueName(v) + "/nhwc", PermutedType(g_.values[v].type));
    out_.push_back(LayoutNode("NchwToNhwc", at + "/to_nhwc", v, t));
    twin_[v] = t;
    return t;
  }

  // Produces NCHW value v from its NHWC twin if only the twin exists so far.
  void Materialize(int v) {
    if (v < 0 || v >= static_cast<int>(pending_.size()) || !pending_[v]) return;
    out_.push_back(LayoutNode("NhwcToNchw", g_.ValueName(v) + "/to_nchw", twin_[v], v));
    pending_[v] = false;
  }

  Node LayoutNode(const char* op, const std::string& name, int in, int out) {
    Node n;
    n.name = name;
    n.op_type = op;
    n.domain = kInternalDomain;
    n.opset = 1;
    n.inputs = {in};
    n.outputs = {out};
    return n;
  }

  // Marks node n's output k as NHWC-only: the node writes a new twin value instead.
  void RedirectOutput(Node& n, size_t k) {
    int o = n.outputs[k];
    int t = NewValue(g_.ValueName(o) + "/nhwc", PermutedType(g_.values[o].type));
    twin_[o] = t;
    pending_[o] = true;
    n.outputs[k] = t;
  }

  void MakeInternal(Node& n, const std::string& op) {
    Attribute a;
    a.type = Attribute::Type::kInt;
    a.i = n.opset;
    n.attrs[kOriginalOpsetAttr] = a;
    n.op_type = op;
    n.domain = kInternalDomain;
    n.opset = 1;
  }

  // ONNX Runtime's QOperator-format ops (com.microsoft) that run on NHWC tensors as they lie:
  // QLinearAdd / QLinearMul read two rank-4 tensors elementwise (broadcasting commutes with
  // permuting both alike), QLinearSigmoid / QLinearLeakyRelu one, and QLinearGlobalAveragePool /
  // QLinearAveragePool take channels_last = 1; every other input is a scalar parameter. Their
  // outputs keep the input's 8-bit type (ONNX shape inference types no contrib output).
  bool TryQOperator(Node& n) {
    const std::string& op = n.op_type;
    const bool binary = (op == "QLinearAdd" || op == "QLinearMul") && n.inputs.size() >= 7;
    const bool unary = op == "QLinearSigmoid" || op == "QLinearLeakyRelu";
    const bool pool =
        (op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool") && n.GetInt("channels_last", 0) == 0;
    if (!binary && !unary && !pool) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const bool tensor = i == 0 || (binary && i == 3);
      if (tensor && !HasTwin(n.inputs[i])) return false;
      if (!tensor && n.inputs[i] >= 0 &&
          !(g_.values[n.inputs[i]].type.has_shape && g_.values[n.inputs[i]].type.dims.empty()))
        return false;
    }
    n.inputs[0] = twin_[n.inputs[0]];
    if (binary) n.inputs[3] = twin_[n.inputs[3]];
    if (pool) n.attrs["channels_last"] = Attribute::Int(1);
    const DataType dt = g_.values[n.inputs[0]].type.elem_type;
    RedirectOutput(n, 0);
    if (dt != DataType::kUndefined) g_.values[n.outputs[0]].type.elem_type = dt;
    return Converted(std::move(n));
  }

  bool HasTwin(int v) const { return v >= 0 && v < static_cast<int>(twin_.size()) && twin_[v] >= 0; }

  bool TryConvert(Node& n) {
    if (n.provider != "cpu") return false;
    // ShuffleNet's channel shuffle (channel_shuffle_fusion.cc): a permutation of each pixel's
    // channels in NHWC.
    if (n.domain == kInternalDomain && n.op_type == "ChannelShuffle" && n.inputs.size() == 1 && HasTwin(n.inputs[0]) &&
        n.outputs.size() == 1 && n.outputs[0] >= 0) {
      n.inputs[0] = twin_[n.inputs[0]];
      n.op_type = "NhwcChannelShuffle";
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    // QdqAdd reads two tensors of one shape elementwise: NHWC when both are.
    if (n.domain == kInternalDomain && n.op_type == kQdqAddOp && n.inputs.size() == 8 && HasTwin(n.inputs[0]) &&
        HasTwin(n.inputs[3]) && n.outputs.size() == 1 && n.outputs[0] >= 0) {
      n.inputs[0] = twin_[n.inputs[0]];
      n.inputs[3] = twin_[n.inputs[3]];
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    if (n.domain == "com.microsoft" && n.outputs.size() == 1 && n.outputs[0] >= 0 && TryQOperator(n)) return true;
    if (LayoutFreeUnary(n) && !n.inputs.empty() && HasTwin(n.inputs[0]) && n.outputs.size() == 1 && n.outputs[0] >= 0) {
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (n.inputs[i] >= 0 && g_.values[n.inputs[i]].type.has_shape && !g_.values[n.inputs[i]].type.dims.empty())
          return false;  // only scalar extra operands are layout-free
      n.inputs[0] = twin_[n.inputs[0]];
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    if (!n.domain.empty()) return false;
    // Explicit layout changes (ConvNeXt's permutes around its LayerNorms and Linears):
    // NCHW -> NHWC of a value with a twin is the twin itself, and NHWC -> NCHW of a rank-4
    // value makes that value the result's twin, its NCHW form made only if something needs it.
    if (n.op_type == "Transpose" && n.inputs.size() == 1 && n.inputs[0] >= 0 && n.outputs.size() == 1 &&
        n.outputs[0] >= 0 && n.outputs[0] < static_cast<int>(alias_.size())) {
      const std::vector<int64_t> perm = n.GetInts("perm");
      const int in = n.inputs[0], o = n.outputs[0];
      const bool kept = IsGraphOutput(g_, o) || captured_->count(g_.ValueName(o));
      if (perm == std::vector<int64_t>{0, 2, 3, 1} && HasTwin(in) && !kept) {
        alias_[o] = twin_[in];
        ++converted_;
        return true;
      }
      const TypeInfo& it = g_.values[in].type;
      if (perm == std::vector<int64_t>{0, 3, 1, 2} && !HasTwin(o) && it.has_shape && it.dims.size() == 4 &&
          (it.elem_type == DataType::kFloat || it.elem_type == DataType::kUndefined)) {
        twin_[o] = in;
        pending_[o] = true;
        if (captured_->count(g_.ValueName(o))) Materialize(o);  // a subgraph reads it by name
        ++converted_;
        return true;
      }
    }
    // Slice with constant starts, ends, axes (and steps), opset >= 10 (ShuffleNet's channel
    // split): the same slice on the permuted axes.
    if (n.op_type == "Slice" && n.opset >= 10 && n.inputs.size() >= 4 && HasTwin(n.inputs[0]) &&
        n.outputs.size() == 1 && n.outputs[0] >= 0) {
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (n.inputs[i] >= 0 && !g_.Constant(n.inputs[i])) return false;
      const Tensor* axes = n.inputs[3] >= 0 ? g_.Constant(n.inputs[3]) : nullptr;
      if (!axes || axes->rank() != 1 || (axes->dtype() != DataType::kInt64 && axes->dtype() != DataType::kInt32))
        return false;
      std::vector<int64_t> mapped;
      for (int64_t i = 0; i < axes->num_elements(); ++i) {
        const int64_t a =
            NhwcAxis(axes->dtype() == DataType::kInt64 ? axes->data<int64_t>()[i] : axes->data<int32_t>()[i]);
        if (a < 0) return false;
        mapped.push_back(a);
      }
      n.inputs[0] = twin_[n.inputs[0]];
      n.inputs[3] = Int64Constant(n.name + "/nhwc_axes", mapped);
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    if (ConvertibleConv(g_, n)) {
      n.inputs[0] = ToNhwc(n.inputs[0], n.name);
      RedirectOutput(n, 0);
      MakeInternal(n, "NhwcConv");
      return Converted(std::move(n));
    }
    // A 2-D QLinearConv on the VNNI GEMM (static int8 models): NHWC is its GEMM's own order.
    if (n.op_type == "QLinearConv" && n.inputs.size() >= 8 && n.inputs[0] >= 0 && n.outputs.size() == 1 &&
        n.outputs[0] >= 0) {
      const Tensor* w = g_.Constant(n.inputs[3]);
      if (w && w->rank() == 4 && OptimizedKernelCovers(n, g_, KernelConfig{})) {
        n.inputs[0] = ToNhwc(n.inputs[0], n.name);
        RedirectOutput(n, 0);
        MakeInternal(n, kNhwcQLinearConvOp);
        return Converted(std::move(n));
      }
    }
    // Pools and GlobalAveragePool join a region; alone they would only add transposes.
    if (ConvertiblePool(n) && HasTwin(n.inputs[0])) {
      n.inputs[0] = twin_[n.inputs[0]];
      n.outputs.resize(1);
      RedirectOutput(n, 0);
      MakeInternal(n, "Nhwc" + n.op_type);
      return Converted(std::move(n));
    }
    // Concat of NHWC values (DenseNet's, SqueezeNet's and ShuffleNet's channel concats) on
    // the permuted axis: the region goes on through it instead of ending in transposes.
    if (n.op_type == "Concat" && !n.inputs.empty() && n.outputs.size() == 1 && n.outputs[0] >= 0) {
      bool all = true;
      for (int v : n.inputs) all = all && HasTwin(v);
      const int64_t axis = NhwcAxis(n.GetInt("axis", 1));  // opset 1's default; required from opset 4
      if (!all || axis < 0) return false;
      for (int& v : n.inputs) v = twin_[v];
      n.attrs["axis"] = Attribute::Int(axis);
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    // Inference BatchNormalization left after the Conv+BN folding (DenseNet's pre-activation
    // BNs): per-channel over the last axis, with the same inputs.
    if (ConvertibleBatchNorm(g_, n) && HasTwin(n.inputs[0])) {
      n.inputs[0] = twin_[n.inputs[0]];
      n.outputs.resize(1);
      RedirectOutput(n, 0);
      MakeInternal(n, "NhwcBatchNormalization");
      return Converted(std::move(n));
    }
    // GlobalAveragePool, or a spatial mean written as ReduceMean over H and W (torchvision's
    // MNASNet and ShuffleNetV2: x.mean([2, 3])). Writes the NCHW value itself: [N,C,1,1], and
    // [N,C] for keepdims 0, share NHWC [N,1,1,C]'s byte order.
    const bool gap = n.op_type == "GlobalAveragePool" && n.inputs.size() == 1;
    if ((gap || (n.op_type == "ReduceMean" && !n.inputs.empty() && ReducesHw(n))) && HasTwin(n.inputs[0]) &&
        n.outputs.size() == 1 && n.outputs[0] >= 0) {
      const int64_t keepdims = gap || n.GetInt("keepdims", 1) != 0 ? 1 : 0;
      n.inputs = {twin_[n.inputs[0]]};
      n.attrs.clear();
      n.attrs["keepdims"] = Attribute::Int(keepdims);
      MakeInternal(n, "NhwcGlobalAveragePool");
      return Converted(std::move(n));
    }
    if (BinaryOps().count(n.op_type) && n.inputs.size() == 2 && n.outputs.size() == 1 && n.outputs[0] >= 0 &&
        (HasTwin(n.inputs[0]) || HasTwin(n.inputs[1]))) {
      std::vector<int> ins(2);
      for (int k = 0; k < 2; ++k) {
        int v = n.inputs[k];
        if (v < 0) return false;
        if (HasTwin(v)) {
          ins[k] = twin_[v];
          continue;
        }
        const Tensor* c = g_.Constant(v);
        if (!c || c->dtype() != DataType::kFloat || c->rank() > 4) return false;
        // PRelu's slope broadcasts one way only: it must not widen the output.
        if (c->num_elements() <= 1) {
          ins[k] = v;
        } else {
          ins[k] = PermutedConstant(v, *c);
        }
      }
      // A rank-4 NCHW value twinned in NHWC must meet a twin or a constant of rank <= 4.
      n.inputs = ins;
      RedirectOutput(n, 0);
      return Converted(std::move(n));
    }
    return false;
  }

  // ReduceMean node n reduces exactly axes 2 and 3 of its rank-4 input, negative axes counted
  // from the end. Only the axes attribute (opsets up to 17, all this build imports; 18 moved
  // the axes to an input).
  bool ReducesHw(const Node& n) const {
    if (n.opset >= 18 || !n.HasAttr("axes")) return false;  // no axes: every axis
    std::vector<int64_t> axes = n.GetInts("axes");
    for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    return axes == std::vector<int64_t>{2, 3};
  }

  // A new int64 [values.size()] constant.
  int Int64Constant(const std::string& name, const std::vector<int64_t>& values) {
    Tensor t = Tensor::FromVector<int64_t>(values, {static_cast<int64_t>(values.size())});
    TypeInfo type;
    type.kind = TypeInfo::Kind::kTensor;
    type.elem_type = DataType::kInt64;
    type.has_shape = true;
    type.dims.push_back(Dim{static_cast<int64_t>(values.size()), ""});
    int nv = NewValue(name, type);
    g_.initializers[nv] = std::move(t);
    return nv;
  }

  int PermutedConstant(int v, const Tensor& c) {
    auto it = permuted_.find(v);
    if (it != permuted_.end()) return it->second;
    Tensor p = PermuteConstant(c);
    TypeInfo t;
    t.kind = TypeInfo::Kind::kTensor;
    t.elem_type = DataType::kFloat;
    t.has_shape = true;
    for (int64_t d : p.shape()) t.dims.push_back(Dim{d, ""});
    int nv = NewValue(g_.ValueName(v) + "/nhwc", t);
    g_.initializers[nv] = std::move(p);
    permuted_[v] = nv;
    return nv;
  }

  bool Converted(Node n) {
    out_.push_back(std::move(n));
    ++converted_;
    return true;
  }

  Graph& g_;
  std::vector<int> twin_;                            // NCHW value -> its NHWC twin, -1 if none
  std::vector<bool> pending_;                        // produced only as its twin so far
  std::unordered_map<int, int> permuted_;            // constant -> its NHWC-broadcastable copy
  std::vector<int> alias_;                           // a Transpose's output -> the twin that is its data, -1 if none
  const std::set<std::string>* captured_ = nullptr;  // names subgraphs read (see CapturedNames)
  std::vector<Node> out_;
  int converted_ = 0;
};

}  // namespace

Result<int> ConvertToNhwc(Graph& g, const OptimizerOptions& opts) {
  if (opts.kernel.prefer_reference || !opts.cpu_only) return 0;
  FuseChannelShuffles(g);
  // Values keep their NCHW meaning; NHWC data lives in new "twin" values, so graph inputs,
  // outputs and anything outside a region are untouched.
  return LayoutRewriter(g).Run();
}

}  // namespace strata
