#include "core/optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_set>

#include "core/caching_allocator.h"
#include "core/fusion_util.h"
#include "core/inverted_residual_fusion.h"
#include "core/layout_pass.h"
#include "core/qdq_fusion.h"
#include "core/run_control.h"
#include "core/transformer_fusion.h"

namespace strata {

namespace {

bool HasSubgraph(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

bool IsNondeterministic(const Node& n) {
  static const std::unordered_set<std::string> kOps = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                                       "RandomUniformLike", "Multinomial",   "Bernoulli"};
  return kOps.count(n.op_type) != 0;
}

}  // namespace

// Use counts of every value: node inputs, graph outputs, and names captured by subgraphs.
std::vector<int> UseCounts(const Graph& g) {
  std::vector<int> uses(g.values.size(), 0);
  std::set<std::string> captured;
  std::function<void(const Graph&)> collect = [&](const Graph& sg) {
    for (const Node& n : sg.nodes) {
      for (int i : n.inputs)
        if (i >= 0) captured.insert(sg.ValueName(i));
      for (const auto& [k, a] : n.attrs) {
        if (a.g) collect(*a.g);
        for (const auto& s : a.graphs) collect(*s);
      }
    }
    for (int o : sg.outputs) captured.insert(sg.ValueName(o));
  };
  for (const Node& n : g.nodes) {
    for (int i : n.inputs)
      if (i >= 0) ++uses[i];
    for (const auto& [k, a] : n.attrs) {
      if (a.g) collect(*a.g);
      for (const auto& s : a.graphs) collect(*s);
    }
  }
  for (int o : g.outputs) ++uses[o];
  for (const auto& name : captured) {
    int v = g.FindValue(name);
    if (v >= 0) ++uses[v];
  }
  return uses;
}

namespace {

// Replaces every use of value `from` by `to` in nodes (not in graph outputs).
void ReplaceUses(Graph& g, int from, int to) {
  for (Node& n : g.nodes)
    for (int& i : n.inputs)
      if (i == from) i = to;
}

// Sizes above this stay computed at run time rather than baked into the session.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

// Folding runs kernels while the session is created, where no run deadline applies and the
// caller cannot terminate anything. So the pass gets a time budget, which kernels whose
// cost their inputs' size does not bound check (Einsum: a chain of small constants can sum
// 10^14 terms), and one buffer may hold at most what a folded constant may (kMaxFoldElements
// of the widest type, or the session's memory cap if lower): a constant Expand to terabytes
// is refused at once instead of being written (it was, whatever the cap, and then dropped
// as too large to keep). A node stopped by either is left to run time, where the caller's
// limits apply.
constexpr int64_t kFoldBudgetMs = 2000;
constexpr size_t kFoldMaxBufferBytes = static_cast<size_t>(kMaxFoldElements) * 16;

}  // namespace

// Shape(x) of a tensor whose dims are all statically known (the graph's inputs have static
// dims, which Run enforces, and shape inference carried them): the int64 dims [start, end)
// of opset 15's attributes, as a constant. Then the Gather/Add/Div/... that compute Slice
// bounds or Reshape targets from it fold too (ShuffleNet's channel split), and the layout
// pass sees constant operands. nullopt: leave the node to run time.
std::optional<Tensor> StaticShapeOf(const Graph& g, const Node& node) {
  if (node.op_type != "Shape" || !node.domain.empty() || node.provider != "cpu" || node.inputs.size() != 1 ||
      node.inputs[0] < 0 || node.outputs.size() != 1 || node.outputs[0] < 0 || g.IsConstant(node.inputs[0]))
    return std::nullopt;
  const TypeInfo& t = g.values[node.inputs[0]].type;
  const std::vector<int64_t> dims = StaticDims(g, node.inputs[0]);
  // Empty dims: unknown, unless the value is a known scalar (Shape gives [] then).
  if (dims.empty() && !(t.kind == TypeInfo::Kind::kTensor && t.has_shape && t.dims.empty())) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = node.opset >= 15 ? node.GetInt("start", 0) : 0;
  int64_t end = node.opset >= 15 ? node.GetInt("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> out(dims.begin() + start, dims.begin() + end);
  return Tensor::FromVector<int64_t>(out, {end - start});
}

Result<int> FoldConstants(Graph& g, const OptimizerOptions& opts) {
  RunControlScope budget(nullptr, kFoldBudgetMs);
  CachingAllocator fold_alloc(opts.memory_cap_bytes > 0 ? std::min(opts.memory_cap_bytes, kFoldMaxBufferBytes)
                                                        : kFoldMaxBufferBytes);
  int folded = 0;
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& node : g.nodes) {
    if (std::optional<Tensor> shape = StaticShapeOf(g, node)) {
      g.initializers[node.outputs[0]] = std::move(*shape);
      ++folded;
      continue;
    }
    bool foldable = !HasSubgraph(node) && !IsNondeterministic(node) && !node.outputs.empty() && node.domain.empty() &&
                    node.provider == "cpu";
    for (int i : node.inputs)
      if (i >= 0 && !g.IsConstant(i)) foldable = false;
    for (int o : node.outputs)
      if (o < 0) foldable = false;
    if (foldable && node.inputs.empty() && node.op_type != "Constant" && node.op_type != "ConstantOfShape" &&
        node.op_type != "Range" && node.op_type != "EyeLike")
      foldable = false;
    if (!foldable) {
      kept.push_back(std::move(node));
      continue;
    }
    DataType dt = DataType::kUndefined;
    if (!node.inputs.empty() && node.inputs[0] >= 0) dt = g.Constant(node.inputs[0])->dtype();
    const KernelDef* def = CpuKernels().Find(node.domain, node.op_type, node.opset, dt, true);
    if (!def) def = CpuKernels().Find(node.domain, node.op_type, node.opset, dt, false);
    if (!def) {
      kept.push_back(std::move(node));
      continue;
    }
    KernelInit init{node, g, opts.pool, opts.kernel};
    auto kernel = def->factory(init);
    if (!kernel.ok()) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<Value> in_vals;
    in_vals.reserve(node.inputs.size());
    for (int i : node.inputs) in_vals.push_back(i >= 0 ? Value(*g.Constant(i)) : Value());
    std::vector<const Value*> in_ptrs;
    for (size_t k = 0; k < in_vals.size(); ++k) in_ptrs.push_back(node.inputs[k] >= 0 ? &in_vals[k] : nullptr);
    std::vector<Value> outs(node.outputs.size());
    KernelContext ctx(node, in_ptrs, &outs, opts.pool, &fold_alloc, nullptr);
    // A kernel that throws (bad_alloc from its scratch) is left to run time like one that
    // fails, where the executor reports it naming the node.
    Status st;
    try {
      st = (*kernel)->Compute(ctx);
    } catch (...) {
      st = MakeStatus(StatusCode::kInternal, node.Describe(), ": threw while folding");
    }
    bool ok = st.ok();
    for (const Value& v : outs)
      if (!v.is_tensor() || v.tensor().num_elements() > kMaxFoldElements) ok = false;
    if (!ok) {  // Leave it to run time, which reports any error with full context.
      kept.push_back(std::move(node));
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      // Folded results must not alias buffers that a caller could later mutate.
      auto copy = outs[k].tensor().Clone();
      if (!copy.ok()) return copy.status();
      g.initializers[node.outputs[k]] = std::move(copy).value();
    }
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

// A Pad whose pads are all zero (torch exports one before each count_include_pad
// AveragePool, e.g. DenseNet's transitions): whatever its mode and value, Y is X.
bool ZeroPad(const Graph& g, const Node& n) {
  if (n.op_type != "Pad" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0) return false;
  if (n.opset < 11) {
    const char* attr = n.opset < 2 ? "paddings" : "pads";
    if (!n.HasAttr(attr)) return false;
    for (int64_t p : n.GetInts(attr))
      if (p != 0) return false;
    return true;
  }
  const Tensor* pads = n.inputs.size() > 1 && n.inputs[1] >= 0 ? g.Constant(n.inputs[1]) : nullptr;
  if (!pads || pads->dtype() != DataType::kInt64) return false;
  for (int64_t i = 0; i < pads->num_elements(); ++i)
    if (pads->data<int64_t>()[i] != 0) return false;
  return true;
}

int EliminateIdentities(Graph& g) {
  int removed = 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool identity =
        (n.op_type == "Identity" && n.domain.empty() && n.inputs.size() == 1 && n.inputs[0] >= 0) || ZeroPad(g, n);
    // Inference-mode Dropout without a mask output is an identity.
    if (n.op_type == "Dropout" && n.domain.empty() && !n.inputs.empty() && n.inputs[0] >= 0 &&
        (n.outputs.size() < 2 || n.outputs[1] < 0) && n.inputs.size() < 3)
      identity = true;
    if (identity && !n.outputs.empty() && n.outputs[0] >= 0 && !IsGraphOutput(g, n.outputs[0]) &&
        g.values[n.inputs[0]].type.kind != TypeInfo::Kind::kSequence) {
      // Outer-scope captures refer to names; only rewrite when nothing captures the output.
      bool captured = false;
      std::function<void(const Graph&)> scan = [&](const Graph& sg) {
        for (const Node& m : sg.nodes) {
          for (int i : m.inputs)
            if (i >= 0 && sg.ValueName(i) == g.ValueName(n.outputs[0])) captured = true;
          for (const auto& [k, a] : m.attrs) {
            if (a.g) scan(*a.g);
            for (const auto& s : a.graphs) scan(*s);
          }
        }
        for (int o : sg.outputs)
          if (sg.ValueName(o) == g.ValueName(n.outputs[0])) captured = true;
      };
      for (const Node& m : g.nodes)
        for (const auto& [k, a] : m.attrs) {
          if (a.g) scan(*a.g);
          for (const auto& s : a.graphs) scan(*s);
        }
      if (!captured) {
        ReplaceUses(g, n.outputs[0], n.inputs[0]);
        ++removed;
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  return removed;
}

int EliminateDeadNodes(Graph& g) {
  int removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    std::vector<int> uses = UseCounts(g);
    std::vector<Node> kept;
    for (Node& n : g.nodes) {
      bool live = IsNondeterministic(n) && false;
      for (int o : n.outputs)
        if (o >= 0 && uses[o] > 0) live = true;
      if (live) {
        kept.push_back(std::move(n));
      } else {
        ++removed;
        changed = true;
      }
    }
    g.nodes = std::move(kept);
  }
  // Drop initializers nothing reads any more (folded intermediates).
  std::vector<int> uses = UseCounts(g);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    bool is_input = false;
    for (int v : g.inputs) is_input = is_input || v == it->first;
    if (uses[it->first] == 0 && !is_input) {
      it = g.initializers.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

Result<int> FoldConvBatchNorm(Graph& g) {
  int folded = 0;
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    Node& bn = g.nodes[bi];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5) continue;
    if (bn.outputs.size() > 1 && std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](int o) { return o >= 0; }))
      continue;
    if (bn.GetInt("training_mode", 0) != 0) continue;
    int x = bn.inputs[0];
    if (gu.Producer(x) < 0 || !gu.Intermediate(x)) continue;
    Node& conv = g.nodes[gu.Producer(x)];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.HasAttr("activation")) continue;
    const Tensor* w = conv.inputs.size() > 1 ? g.Constant(conv.inputs[1]) : nullptr;
    const Tensor* b = conv.inputs.size() > 2 && conv.inputs[2] >= 0 ? g.Constant(conv.inputs[2]) : nullptr;
    if (!w || w->dtype() != DataType::kFloat || w->rank() < 3) continue;
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !b) continue;
    const Tensor* scale = g.Constant(bn.inputs[1]);
    const Tensor* bias = g.Constant(bn.inputs[2]);
    const Tensor* mean = g.Constant(bn.inputs[3]);
    const Tensor* var = g.Constant(bn.inputs[4]);
    if (!scale || !bias || !mean || !var) continue;
    int64_t m = w->dim(0);
    for (const Tensor* t : {scale, bias, mean, var})
      if (t->dtype() != DataType::kFloat || t->num_elements() != m) m = -1;
    if (m < 0 || (b && (b->dtype() != DataType::kFloat || b->num_elements() != m))) continue;
    float eps = bn.GetFloat("epsilon", 1e-5f);
    ASSIGN_OR_RETURN(Tensor nw, w->Clone());
    ASSIGN_OR_RETURN(Tensor nb, Tensor::Allocate(DataType::kFloat, {m}));
    int64_t per = w->num_elements() / std::max<int64_t>(m, 1);
    float* pw = nw.mutable_data<float>();
    float* pb = nb.mutable_data<float>();
    for (int64_t c = 0; c < m; ++c) {
      float s = scale->data<float>()[c] / std::sqrt(var->data<float>()[c] + eps);
      for (int64_t k = 0; k < per; ++k) pw[c * per + k] *= s;
      float cb = b ? b->data<float>()[c] : 0.0f;
      pb[c] = (cb - mean->data<float>()[c]) * s + bias->data<float>()[c];
    }
    int wv = g.AddValue(conv.name + "/folded_bn_weight");
    int bv = g.AddValue(conv.name + "/folded_bn_bias");
    g.values[wv].type = g.values[conv.inputs[1]].type;
    g.values[bv].type.kind = TypeInfo::Kind::kTensor;
    g.values[bv].type.elem_type = DataType::kFloat;
    g.values[bv].type.has_shape = true;
    g.values[bv].type.dims = {Dim{m, ""}};
    g.initializers[wv] = std::move(nw);
    g.initializers[bv] = std::move(nb);
    conv.inputs.resize(3);
    conv.inputs[1] = wv;
    conv.inputs[2] = bv;
    conv.outputs[0] = bn.outputs[0];
    drop[bi] = 1;
    ++folded;
  }
  if (folded) RemoveDroppedNodes(g, drop);
  return folded;
}

int FuseActivations(Graph& g) {
  int fused = 0;
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    Node& act = g.nodes[ai];
    if (!act.domain.empty() || act.inputs.empty() || act.inputs[0] < 0) continue;
    float lo = -INFINITY, hi = INFINITY;
    if (act.op_type == "Relu") {
      lo = 0.0f;
    } else if (act.op_type == "Clip") {
      if (act.opset < 11) {
        lo = act.GetFloat("min", -INFINITY);
        hi = act.GetFloat("max", INFINITY);
      } else {
        const Tensor* mn = act.inputs.size() > 1 && act.inputs[1] >= 0 ? g.Constant(act.inputs[1]) : nullptr;
        const Tensor* mx = act.inputs.size() > 2 && act.inputs[2] >= 0 ? g.Constant(act.inputs[2]) : nullptr;
        if ((act.inputs.size() > 1 && act.inputs[1] >= 0 && !mn) ||
            (act.inputs.size() > 2 && act.inputs[2] >= 0 && !mx))
          continue;
        if ((mn && mn->dtype() != DataType::kFloat) || (mx && mx->dtype() != DataType::kFloat)) continue;
        if (mn) lo = mn->data<float>()[0];
        if (mx) hi = mx->data<float>()[0];
      }
    } else {
      continue;
    }
    int x = act.inputs[0];
    if (gu.Producer(x) < 0 || !gu.Intermediate(x)) continue;
    Node& p = g.nodes[gu.Producer(x)];
    if (!p.domain.empty() || (p.op_type != "Conv" && p.op_type != "Gemm") || p.HasAttr("activation")) continue;
    if (g.values[x].type.elem_type != DataType::kFloat) continue;
    p.attrs["activation"] = Attribute::String(act.op_type);
    p.attrs["activation_min"] = Attribute::Float(lo);
    p.attrs["activation_max"] = Attribute::Float(hi);
    p.outputs[0] = act.outputs[0];
    drop[ai] = 1;
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

Status OptimizeGraph(Graph& g, const OptimizerOptions& opts) {
  if (opts.level <= 0) return Status::Ok();
  EliminateIdentities(g);
  // Before folding, which would turn DequantizeLinear(W_q) into float weights; the weights'
  // DequantizeLinear nodes the fused convs no longer read go before folding computes them.
  if (FuseQdqConv(g, opts) > 0) EliminateDeadNodes(g);
  if (FuseQdqAdd(g, opts) > 0) EliminateDeadNodes(g);
  if (FuseQdqMatMul(g, opts) > 0) EliminateDeadNodes(g);
  SinkDequantizeBelowMaxPool(g, opts);
  ASSIGN_OR_RETURN(int f, FoldConstants(g, opts));
  (void)f;
  EliminateIdentities(g);  // again: a Pad's pads may have been a Constant node until folded
  if (opts.level >= 2) {
    ASSIGN_OR_RETURN(int c, FoldConvBatchNorm(g));
    (void)c;
    FuseActivations(g);
    RETURN_IF_ERROR(FuseTransformerPatterns(g, opts).status());
    // Last: it renames Conv/pool nodes into the internal domain the passes above skip.
    ASSIGN_OR_RETURN(int l, ConvertToNhwc(g, opts));
    // ResNet's conv -> Add(skip) [-> Relu] into the conv's SGEMM epilogue (NHWC only).
    if (l > 0) FuseNhwcConvResidual(g);
    if (l > 0) FuseNhwcQConvAdd(g);            // the int8 form of the same
    if (l > 0) FuseInvertedResidualBlocks(g);  // MobileNetV2 blocks: after the residual fusion
    if (l > 0) FuseNhwcConvInputScale(g);      // SE scales: after the blocks, which take none
    if (l > 0) FuseNhwcConvActivation(g);      // after the blocks, whose parts take clamps only
    if (l > 0) FuseNhwcBatchNormRelu(g);
    if (l > 0) SplitNhwcPoolOverConcat(g);  // SqueezeNet: pooled parts for the next pass
    if (l > 0) FuseNhwcConvInputNorm(g);    // DenseNet: after the BN takes its Relu
    if (l > 0) FuseDepthwiseGlobalPool(g);  // last: the conv then has two outputs
  }
  EliminateDeadNodes(g);
  return Status::Ok();
}

}  // namespace strata
