// FuseNhwcConvResidual (see conv_nhwc_gemm.h): ResNet's "conv -> Add(skip) -> Relu" tail
// as one SGEMM epilogue, saving two full passes over the activation per block.
#include <cmath>
#include <vector>

#include "core/layout_pass.h"
#include "cpu/conv_nhwc_gemm.h"

namespace strata {
namespace {

// Same static shape: every dim known and equal, or both symbolic with the same name.
bool SameStaticShape(const TypeInfo& a, const TypeInfo& b) {
  if (!a.has_shape || !b.has_shape || a.dims.size() != 4 || b.dims.size() != 4) return false;
  if (a.elem_type != DataType::kFloat || b.elem_type != DataType::kFloat) return false;
  for (size_t i = 0; i < 4; ++i) {
    const Dim &x = a.dims[i], &y = b.dims[i];
    if (x.known() != y.known()) return false;
    if (x.known() ? x.value != y.value : (x.param.empty() || x.param != y.param)) return false;
  }
  return true;
}

}  // namespace

int FuseNhwcConvResidual(Graph& g) {
  const size_t nv = g.values.size();
  std::vector<int> uses(nv, 0), producer(nv, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs)
      if (v >= 0) ++uses[v];
    for (int v : g.nodes[i].outputs)
      if (v >= 0) producer[v] = static_cast<int>(i);
  }
  for (int v : g.outputs)
    if (v >= 0) ++uses[v];  // a graph output is one more reader

  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    Node& add = g.nodes[ai];
    if (add.op_type != "Add" || !add.domain.empty() || add.provider != "cpu" || add.inputs.size() != 2 ||
        add.outputs.size() != 1 || add.outputs[0] < 0 || add.inputs[0] < 0 || add.inputs[1] < 0)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int y = add.inputs[side], other = add.inputs[1 - side];
      if (y == other || producer[y] < 0 || drop[producer[y]] || uses[y] != 1) continue;
      Node& conv = g.nodes[producer[y]];
      if (conv.op_type != "NhwcConv" || conv.domain != kInternalDomain || conv.provider != "cpu" ||
          conv.HasAttr("activation") || conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1)
        continue;
      const Tensor* w = g.Constant(conv.inputs[1]);
      if (!w || !NhwcGemmConvApplies(conv, *w)) continue;
      // The residual must not broadcast: it is read as a dense [N*OH*OW, M] matrix.
      if (!SameStaticShape(g.values[y].type, g.values[other].type) ||
          !SameStaticShape(g.values[y].type, g.values[add.outputs[0]].type))
        continue;
      Node f = conv;
      f.inputs.resize(3, -1);
      f.inputs.push_back(other);
      f.outputs = add.outputs;
      // A lone Relu reading the sum joins too (clamp after the residual add).
      const int sum = add.outputs[0];
      if (uses[sum] == 1) {
        for (size_t ri = ai + 1; ri < g.nodes.size(); ++ri) {
          Node& r = g.nodes[ri];
          if (r.op_type == "Relu" && r.domain.empty() && r.provider == "cpu" && r.inputs.size() == 1 &&
              r.inputs[0] == sum && r.outputs.size() == 1 && r.outputs[0] >= 0 && !drop[ri]) {
            f.attrs["activation"] = Attribute::String("Relu");
            f.attrs["activation_min"] = Attribute::Float(0.0f);
            f.attrs["activation_max"] = Attribute::Float(INFINITY);
            f.outputs = r.outputs;
            drop[ri] = true;
            break;
          }
        }
      }
      // The fused node runs where the Add ran: both operands exist by then.
      drop[producer[y]] = true;
      add = std::move(f);
      ++fused;
      break;
    }
  }
  if (fused) {
    std::vector<Node> kept;
    kept.reserve(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
  }
  return fused;
}

}  // namespace strata
