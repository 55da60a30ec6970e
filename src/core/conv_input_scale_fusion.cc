// The conv-input fusions (see optimizer.h). FuseNhwcConvInputNorm: DenseNet's channel Concat
// and pre-activation BatchNormalization (+ Relu) handed to the pointwise conv that reads them
// (cpu/conv_nhwc_input_norm.h), so neither the concatenated map nor its normalised copy is
// written. The squeeze-excitation fusions: FuseNhwcConvInputScale: a block's
// x * scale, read only by the pointwise conv after it, as that conv's input 4
// (cpu/conv_nhwc_scale.h), so the expanded map is not rewritten by a pass of its own before
// the conv reads it. FuseDepthwiseGlobalPool: the block's pool of the depthwise output as a
// second output of the depthwise conv, summed while each row is in L1.
#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"
#include "core/optimizer.h"

namespace strata {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// An NhwcConv with a 1x1, stride-1, unpadded, ungrouped constant float weight of C input
// channels and no input scale yet; returns C, or -1.
int64_t PointwiseConvChannels(const Graph& g, const Node& n) {
  if (n.op_type != "NhwcConv" || n.domain != kInternalDomain || n.provider != "cpu" || n.inputs.size() < 2 ||
      n.inputs.size() > 4 || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0 || n.GetInt("group", 1) != 1)
    return -1;
  const Tensor* w = g.Constant(n.inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0 || w->dim(2) != 1 ||
      w->dim(3) != 1)
    return -1;
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || !AllEqual(n.GetInts("strides", {1, 1}), 1) ||
      !AllEqual(n.GetInts("pads", {0, 0, 0, 0}), 0))
    return -1;
  return w->dim(1);
}

bool IsFloat(const Graph& g, int v) { return g.values[v].type.elem_type == DataType::kFloat; }

// NhwcConv's first input slot after the input scale: the fused norm's four parameters, then
// the Concat's parts after the first (cpu/conv_nhwc_input_norm.h).
constexpr size_t kFusedConvInputNorm = 5;

}  // namespace

int FuseNhwcConvInputScale(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    Node& conv = g.nodes[ci];
    const int64_t c = PointwiseConvChannels(g, conv);
    if (c < 0) continue;
    const int x = conv.inputs[0], mi = gu.Producer(x);
    if (mi < 0 || drop[mi] || gu.SoleConsumer(x) != static_cast<int>(ci)) continue;
    const Node& mul = g.nodes[mi];
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.provider != "cpu" || mul.inputs.size() != 2 ||
        mul.outputs.size() != 1 || mul.inputs[0] < 0 || mul.inputs[1] < 0)
      continue;
    const std::vector<int64_t> xd = StaticDims(g, x);
    if (xd.size() != 4 || xd[3] != c || !IsFloat(g, x)) continue;
    for (int side = 0; side < 2; ++side) {
      // The map: X's own static shape; the scale: one value per channel, for every image
      // or per image ([1 or N, 1, 1, C] in NHWC, what the SE branch's 1x1 convs make).
      const int d = mul.inputs[side], s = mul.inputs[1 - side];
      const std::vector<int64_t> sd = StaticDims(g, s);
      if (StaticDims(g, d) != xd || !IsFloat(g, d) || !IsFloat(g, s) || sd.size() != 4 ||
          (sd[0] != 1 && sd[0] != xd[0]) || sd[1] != 1 || sd[2] != 1 || sd[3] != c)
        continue;
      Node f = conv;
      f.inputs[0] = d;
      f.inputs.resize(4, -1);
      f.inputs.push_back(s);
      if (!OptimizedKernelCovers(f, g, KernelConfig{})) continue;
      // d and s are made before the Mul, so before the conv: the order stays valid.
      conv = std::move(f);
      drop[mi] = 1;
      ++fused;
      break;
    }
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

int SplitNhwcPoolOverConcat(Graph& g) {
  const GraphUses gu(g);
  // The Concat each split pool replaces (by node index), and the pool's parts.
  std::vector<int> split_at(g.nodes.size(), -1);
  std::vector<char> drop(g.nodes.size(), 0);
  int count = 0;
  for (size_t pi = 0; pi < g.nodes.size(); ++pi) {
    const Node& pool = g.nodes[pi];
    if ((pool.op_type != "NhwcMaxPool" && pool.op_type != "NhwcAveragePool") || pool.domain != kInternalDomain ||
        pool.provider != "cpu" || pool.inputs.size() != 1 || pool.outputs.size() != 1 || pool.outputs[0] < 0)
      continue;
    const int x = pool.inputs[0], y = pool.outputs[0], ki = gu.Producer(x), ci = gu.SoleConsumer(y);
    if (ki < 0 || gu.SoleConsumer(x) != static_cast<int>(pi) || ci < 0 || PointwiseConvChannels(g, g.nodes[ci]) < 0)
      continue;
    const Node& cat = g.nodes[ki];
    const std::vector<int64_t> yd = StaticDims(g, y);
    if (cat.op_type != "Concat" || !cat.domain.empty() || cat.provider != "cpu" || cat.inputs.size() < 2 ||
        cat.outputs.size() != 1 || (cat.GetInt("axis", 0) != 3 && cat.GetInt("axis", 0) != -1) || yd.size() != 4 ||
        !IsFloat(g, y))
      continue;
    bool ok = true;
    // Parts of at least one channel: a pool of an empty map is no saving worth a node.
    for (int v : cat.inputs) {
      const std::vector<int64_t> d = v >= 0 ? StaticDims(g, v) : std::vector<int64_t>{};
      ok = ok && d.size() == 4 && d[3] > 0 && IsFloat(g, v);
    }
    if (!ok) continue;
    split_at[pi] = ki;
    drop[ki] = 1;
    ++count;
  }
  if (!count) return 0;
  std::vector<Node> out;
  out.reserve(g.nodes.size() + 2 * static_cast<size_t>(count));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (drop[i]) continue;
    if (split_at[i] < 0) {
      out.push_back(std::move(g.nodes[i]));
      continue;
    }
    // pool(Concat(x_1 .. x_n)) = Concat(pool(x_1) .. pool(x_n)): the pool is per channel.
    const Node& pool = g.nodes[i];
    const Node& cat = g.nodes[static_cast<size_t>(split_at[i])];
    Node joined = cat;
    joined.name = pool.name + "/concat";
    joined.outputs = pool.outputs;
    joined.inputs.clear();
    for (size_t k = 0; k < cat.inputs.size(); ++k) {
      TypeInfo t = g.values[pool.outputs[0]].type;
      t.dims[3] = Dim{StaticDims(g, cat.inputs[k])[3], ""};
      const std::string name = pool.name + "/part" + std::to_string(k);
      const int v = g.AddValue(g.FindValue(name) < 0 ? name : name + "_" + std::to_string(g.values.size()));
      g.values[v].type = t;
      Node part = pool;
      part.name = name;
      part.inputs = {cat.inputs[k]};
      part.outputs = {v};
      out.push_back(std::move(part));
      joined.inputs.push_back(v);
    }
    out.push_back(std::move(joined));
  }
  g.nodes = std::move(out);
  return count;
}

int FuseNhwcConvInputNorm(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    Node& conv = g.nodes[ci];
    const int64_t c = PointwiseConvChannels(g, conv);
    if (c < 0) continue;  // (no input scale: PointwiseConvChannels takes at most 4 inputs)
    // The pre-activation BatchNormalization (+ Relu), when the conv is its only reader.
    int x = conv.inputs[0], reader = static_cast<int>(ci);
    const int bi = gu.Producer(x);
    const Node* bn = nullptr;
    if (bi >= 0 && !drop[bi] && gu.SoleConsumer(x) == reader) {
      const Node& b = g.nodes[bi];
      bool ok = b.op_type == "NhwcBatchNormalization" && b.domain == kInternalDomain && b.provider == "cpu" &&
                b.inputs.size() == 5 && b.outputs.size() == 1 && b.inputs[0] >= 0 && IsFloat(g, b.inputs[0]);
      if (ok) {
        const std::vector<int64_t> bd = StaticDims(g, b.inputs[0]);
        ok = bd.size() == 4 && bd == StaticDims(g, x);
      }
      for (int i = 1; ok && i < 5; ++i) {
        const Tensor* p = b.inputs[i] >= 0 ? g.Constant(b.inputs[i]) : nullptr;
        ok = p && p->dtype() == DataType::kFloat && p->rank() == 1 && p->dim(0) == c;
      }
      if (ok) {
        bn = &b;
        reader = bi;
        x = b.inputs[0];
      }
    }
    // The channel Concat of NHWC maps before it, when the BN (or the conv) is its only reader.
    const int ki = gu.Producer(x);
    const Node* cat = nullptr;
    if (ki >= 0 && !drop[ki] && gu.SoleConsumer(x) == reader) {
      const Node& k = g.nodes[ki];
      const std::vector<int64_t> xd = StaticDims(g, x);
      // One input (torchvision's DenseNet concatenates a list of one map) is the map itself.
      bool ok = k.op_type == "Concat" && k.domain.empty() && k.provider == "cpu" && !k.inputs.empty() &&
                k.outputs.size() == 1 && xd.size() == 4 && xd[3] == c && IsFloat(g, x);
      const int64_t axis = k.GetInt("axis", 0);
      ok = ok && (axis == 3 || axis == -1);
      int64_t sum = 0;
      for (size_t i = 0; ok && i < k.inputs.size(); ++i) {
        const std::vector<int64_t> d = k.inputs[i] >= 0 ? StaticDims(g, k.inputs[i]) : std::vector<int64_t>{};
        ok = d.size() == 4 && d[0] == xd[0] && d[1] == xd[1] && d[2] == xd[2] && IsFloat(g, k.inputs[i]);
        if (ok) sum += d[3];
      }
      if (ok && sum == c) cat = &k;
    }
    if (!bn && !cat) continue;
    Node f = conv;
    f.inputs.resize(kFusedConvInputNorm, -1);
    if (bn) {
      for (int i = 1; i < 5; ++i) f.inputs.push_back(bn->inputs[i]);
      f.attrs["input_norm_epsilon"] = Attribute::Float(bn->GetFloat("epsilon", 1e-5f));
      for (const char* a : {"activation", "activation_min", "activation_max"})
        if (bn->HasAttr(a)) f.attrs[std::string("input_norm_") + a] = bn->attrs.at(a);
    } else {
      f.inputs.resize(kFusedConvInputNorm + 4, -1);
    }
    f.inputs[0] = cat ? cat->inputs[0] : x;
    if (cat && cat->inputs.size() > 1) {
      for (size_t i = 1; i < cat->inputs.size(); ++i) f.inputs.push_back(cat->inputs[i]);
      f.attrs["input_parts"] = Attribute::Int(static_cast<int64_t>(cat->inputs.size()));
    }
    while (f.inputs.size() > 2 && f.inputs.back() < 0) f.inputs.pop_back();  // absent trailing slots
    if (!OptimizedKernelCovers(f, g, KernelConfig{})) continue;
    // The parts are made before the Concat, so before the conv: the order stays valid.
    conv = std::move(f);
    if (bn) drop[bi] = 1;
    if (cat) drop[ki] = 1;
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

int FuseDepthwiseGlobalPool(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t pi = 0; pi < g.nodes.size(); ++pi) {
    const Node& pool = g.nodes[pi];
    if (pool.op_type != "NhwcGlobalAveragePool" || pool.domain != kInternalDomain || pool.provider != "cpu" ||
        pool.inputs.size() != 1 || pool.inputs[0] < 0 || pool.outputs.size() != 1 || pool.outputs[0] < 0)
      continue;
    const int di = gu.Producer(pool.inputs[0]);
    if (di < 0 || drop[di]) continue;
    const Node& conv = g.nodes[di];
    if (conv.op_type != "NhwcConv" || conv.domain != kInternalDomain || conv.provider != "cpu" ||
        conv.outputs.size() != 1 || conv.inputs.size() < 2 || conv.inputs.size() > 3)
      continue;
    Node f = conv;
    f.outputs.push_back(pool.outputs[0]);
    f.attrs["pool_keepdims"] = Attribute::Int(pool.GetInt("keepdims", 1) != 0 ? 1 : 0);
    // The registry decides which convs can make the pooled output (the depthwise kernel's
    // entry: multiplier 1, constant weight, AVX-512F), so the pass does not restate it.
    if (!OptimizedKernelCovers(f, g, KernelConfig{})) continue;
    // The conv comes before the pool, so before every reader of the pooled value.
    g.nodes[di] = std::move(f);
    drop[pi] = 1;
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

}  // namespace strata
