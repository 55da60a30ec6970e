// ShuffleNet's channel shuffle, Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose
// (0, 2, 1, 3, 4), Reshape back to [N, C, H, W], as one internal ChannelShuffle(x, groups)
// node (kernel: src/cpu/channel_shuffle.cc). The 5-D reshapes would otherwise end the NHWC
// region at every block with a transpose out and one back in; in NHWC the shuffle is a
// permutation of each pixel's channels (NhwcChannelShuffle, made by the layout pass).
#include "core/channel_shuffle_fusion.h"

#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"

namespace strata {
namespace {

// A Reshape of `in` by a constant int64 shape: the target dims with 0 and -1 resolved
// against in_dims (allowzero unset), or empty.
std::vector<int64_t> ReshapeTarget(const Graph& g, const Node& n, const std::vector<int64_t>& in_dims) {
  if (n.op_type != "Reshape" || !n.domain.empty() || n.inputs.size() != 2 || n.GetInt("allowzero", 0) != 0) return {};
  const Tensor* s = g.Constant(n.inputs[1]);
  if (!s || s->dtype() != DataType::kInt64 || s->rank() != 1) return {};
  const Shape req(s->data<int64_t>(), s->data<int64_t>() + s->num_elements());
  Result<Shape> out = ResolveReshape(Shape(in_dims.begin(), in_dims.end()), req, /*allowzero=*/false, n);
  if (!out.ok()) return {};
  return {out->begin(), out->end()};
}

}  // namespace

int FuseChannelShuffles(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& r1 = g.nodes[i];
    if (r1.provider != "cpu" || r1.outputs.size() != 1 || r1.inputs.empty() || r1.inputs[0] < 0) continue;
    const int x = r1.inputs[0];
    // X's dims: known statically, or (a Concat of Slices whose bounds were run-time values
    // when shapes were inferred: rank and dims unknown) those of the explicit first shape
    // (no 0 or -1 in it, so it does not depend on X's dims). The kernels compute the
    // chain's result for any X of that many elements, as the Reshapes did.
    std::vector<int64_t> xd = StaticDims(g, x);
    const TypeInfo& xt = g.values[x].type;
    if ((xt.elem_type != DataType::kFloat && xt.elem_type != DataType::kUndefined) ||
        (xt.has_shape && xt.dims.size() != 4))
      continue;
    if (xd.empty()) {
      const Tensor* t = r1.inputs.size() == 2 ? g.Constant(r1.inputs[1]) : nullptr;
      if (!t || t->dtype() != DataType::kInt64 || t->num_elements() != 5) continue;
      const int64_t* v = t->data<int64_t>();
      int64_t c = 0;
      if (v[0] <= 0 || v[1] <= 0 || v[2] <= 0 || v[3] <= 0 || v[4] <= 0 || __builtin_mul_overflow(v[1], v[2], &c))
        continue;
      xd = {v[0], c, v[3], v[4]};
      bool agree = true;
      for (int k = 0; k < 4 && xt.has_shape; ++k) agree = agree && (!xt.dims[k].known() || xt.dims[k].value == xd[k]);
      if (!agree) continue;
    }
    const std::vector<int64_t> s1 = ReshapeTarget(g, r1, xd);
    // [N, groups, C / groups, H, W], a real split of C.
    int64_t split = 0;
    if (s1.size() != 5 || __builtin_mul_overflow(s1[1], s1[2], &split) || s1[0] != xd[0] || split != xd[1] ||
        s1[3] != xd[2] || s1[4] != xd[3] || s1[1] < 2 || s1[2] < 2)
      continue;
    const int t_i = gu.SoleConsumer(r1.outputs[0]);
    if (t_i < 0) continue;
    const Node& t = g.nodes[t_i];
    if (t.op_type != "Transpose" || !t.domain.empty() || t.outputs.size() != 1 ||
        t.GetInts("perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
      continue;
    const int r2_i = gu.SoleConsumer(t.outputs[0]);
    if (r2_i < 0) continue;
    const Node& r2 = g.nodes[r2_i];
    if (r2.outputs.size() != 1 || r2.outputs[0] < 0 || ReshapeTarget(g, r2, {s1[0], s1[2], s1[1], s1[3], s1[4]}) != xd)
      continue;
    Node n;
    n.name = r2.name;
    n.domain = kInternalDomain;
    n.op_type = "ChannelShuffle";
    n.opset = 1;
    n.inputs = {x};
    n.outputs = {r2.outputs[0]};
    n.attrs["groups"] = Attribute::Int(s1[1]);
    n.attrs["shape"] = Attribute::Ints(xd);  // Y's dims: the second Reshape's target
    drop[i] = drop[t_i] = 1;
    g.nodes[r2_i] = std::move(n);
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

}  // namespace strata
