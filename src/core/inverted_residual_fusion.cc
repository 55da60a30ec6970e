// FuseInvertedResidualBlocks (see inverted_residual_fusion.h).
#include "core/inverted_residual_fusion.h"

#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"

namespace strata {
namespace {

bool IsCpuNhwcConv(const Node& n) {
  return n.op_type == "NhwcConv" && n.domain == kInternalDomain && n.provider == "cpu" && n.outputs.size() == 1 &&
         n.outputs[0] >= 0 && n.inputs.size() >= 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0;
}

// Constant float bias of `m` values, or absent.
bool BiasOk(const Graph& g, const Node& n, int64_t m) {
  if (n.inputs.size() < 3 || n.inputs[2] < 0) return true;
  const Tensor* b = g.Constant(n.inputs[2]);
  return b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == m;
}

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// A 1x1, stride-1, unpadded, ungrouped conv with constant float weights; `residual_ok`
// allows the fused residual input 3.
const Tensor* PointwiseWeight(const Graph& g, const Node& n, bool residual_ok) {
  if (!IsCpuNhwcConv(n) || n.inputs.size() > (residual_ok ? 4u : 3u) || n.GetInt("group", 1) != 1) return nullptr;
  const Tensor* w = g.Constant(n.inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0 || w->dim(2) != 1 ||
      w->dim(3) != 1 || !BiasOk(g, n, w->dim(0)))
    return nullptr;
  if (!AllEqual(n.GetInts("strides", {1, 1}), 1) || !AllEqual(n.GetInts("pads", {0, 0, 0, 0}), 0) ||
      !AllEqual(n.GetInts("dilations", {1, 1}), 1))
    return nullptr;
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return nullptr;
  return w;
}

// A depthwise conv (multiplier 1) with constant float weights [C, 1, KH, KW].
const Tensor* DepthwiseWeight(const Graph& g, const Node& n) {
  if (!IsCpuNhwcConv(n) || n.inputs.size() > 3) return nullptr;
  const Tensor* w = g.Constant(n.inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0 || w->dim(1) != 1 ||
      n.GetInt("group", 1) != w->dim(0) || !BiasOk(g, n, w->dim(0)))
    return nullptr;
  return w;
}

void CopyAttrs(const Node& from, const char* prefix, Node* to) {
  for (const auto& [k, a] : from.attrs) to->attrs[prefix + k] = a;
}

}  // namespace

int FuseInvertedResidualBlocks(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t pi = 0; pi < g.nodes.size(); ++pi) {
    const Node& proj = g.nodes[pi];
    const Tensor* wp = PointwiseWeight(g, proj, /*residual_ok=*/true);
    if (!wp) continue;
    const int d_out = proj.inputs[0];
    const int di = gu.Producer(d_out);
    if (di < 0 || drop[di] || !gu.Intermediate(d_out)) continue;
    const Node& dwn = g.nodes[di];
    const Tensor* wd = DepthwiseWeight(g, dwn);
    if (!wd || wd->dim(0) != wp->dim(1)) continue;
    // The expand conv is optional (MobileNetV2's first block has none).
    const int e_out = dwn.inputs[0];
    int ei = gu.Producer(e_out);
    if (ei >= 0) {
      const Tensor* we = drop[ei] || !gu.Intermediate(e_out) ? nullptr : PointwiseWeight(g, g.nodes[ei], false);
      if (!we || we->dim(0) != wd->dim(0)) ei = -1;
    }
    Node f;
    const Node& first = ei >= 0 ? g.nodes[ei] : dwn;
    f.name = first.name;  // the block is named after its first conv (that node is gone)
    f.op_type = kInvertedResidualOp;
    f.domain = kInternalDomain;
    f.opset = 1;
    f.provider = proj.provider;
    auto in = [](const Node& n, size_t k) { return k < n.inputs.size() ? n.inputs[k] : -1; };
    if (ei >= 0) {
      const Node& exp = g.nodes[ei];
      f.inputs = {exp.inputs[0], exp.inputs[1], in(exp, 2)};
      CopyAttrs(exp, kExpandPrefix, &f);
    } else {
      f.inputs = {dwn.inputs[0], -1, -1};
    }
    f.inputs.insert(f.inputs.end(), {dwn.inputs[1], in(dwn, 2), proj.inputs[1], in(proj, 2), in(proj, 3)});
    CopyAttrs(dwn, kDepthwisePrefix, &f);
    CopyAttrs(proj, kProjectPrefix, &f);
    f.outputs = proj.outputs;
    // The kernel registry decides whether this CPU runs the block (AVX-512 SGEMM and depthwise).
    if (!OptimizedKernelCovers(f, g, KernelConfig{})) continue;
    if (ei >= 0) drop[ei] = 1;
    drop[di] = 1;
    g.nodes[pi] = std::move(f);
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

}  // namespace strata
