// FuseNhwcConvResidual (see optimizer.h): ResNet's "conv -> Add(skip) -> Relu" tail as
// one conv epilogue, saving two full passes over the activation per block.
#include <cmath>
#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"
#include "core/optimizer.h"

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
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    Node& add = g.nodes[ai];
    if (add.op_type != "Add" || !add.domain.empty() || add.provider != "cpu" || add.inputs.size() != 2 ||
        add.outputs.size() != 1 || add.outputs[0] < 0 || add.inputs[0] < 0 || add.inputs[1] < 0)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int y = add.inputs[side], other = add.inputs[1 - side];
      const int ci = gu.Producer(y);
      if (y == other || ci < 0 || drop[ci] || !gu.Intermediate(y)) continue;
      Node& conv = g.nodes[ci];
      if (conv.op_type != "NhwcConv" || conv.domain != kInternalDomain || conv.provider != "cpu" ||
          conv.HasAttr("activation") || conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1)
        continue;
      // The residual must not broadcast: it is read as a dense [N*OH*OW, M] matrix.
      if (!SameStaticShape(g.values[y].type, g.values[other].type) ||
          !SameStaticShape(g.values[y].type, g.values[add.outputs[0]].type))
        continue;
      Node f = conv;
      f.inputs.resize(3, -1);
      f.inputs.push_back(other);
      f.outputs = add.outputs;
      // Only where a kernel takes the residual (NhwcConv: the SGEMM conv, group 1, AVX-512F;
      // its coverage does not depend on the session's KernelConfig).
      if (!OptimizedKernelCovers(f, g, KernelConfig{})) continue;
      // A lone Relu reading the sum joins too (clamp after the residual add).
      const int ri = gu.SoleConsumer(add.outputs[0]);
      if (ri > static_cast<int>(ai) && !drop[ri]) {
        const Node& r = g.nodes[ri];
        if (r.op_type == "Relu" && r.domain.empty() && r.provider == "cpu" && r.inputs.size() == 1 &&
            r.outputs.size() == 1 && r.outputs[0] >= 0) {
          f.attrs["activation"] = Attribute::String("Relu");
          f.attrs["activation_min"] = Attribute::Float(0.0f);
          f.attrs["activation_max"] = Attribute::Float(INFINITY);
          f.outputs = r.outputs;
          drop[ri] = 1;
        }
      }
      // The fused node runs where the Add ran: both operands exist by then.
      drop[ci] = 1;
      add = std::move(f);
      ++fused;
      break;
    }
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

namespace {

// The walk both activation folds share: each cpu node `act` with one input and one output
// for which activation(act) names an activation (nullptr: skip), whose input's only reader
// it is and whose producer is not already taken, is offered to that producer:
// take(producer, name, act) rewrites the producer to apply it (and to write act's outputs)
// and returns true, or leaves it untouched and returns false. Taken activations are dropped.
template <typename ActivationFn, typename TakeFn>
int FoldActivations(Graph& g, ActivationFn activation, TakeFn take) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    const Node& act = g.nodes[ai];
    const char* name = activation(act);
    if (!name || act.provider != "cpu" || act.inputs.size() != 1 || act.outputs.size() != 1 || act.inputs[0] < 0 ||
        act.outputs[0] < 0)
      continue;
    const int y = act.inputs[0], pi = gu.Producer(y);
    if (pi < 0 || drop[pi] || gu.SoleConsumer(y) != static_cast<int>(ai)) continue;
    if (!take(g.nodes[pi], name, act)) continue;
    drop[ai] = 1;
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

}  // namespace

int FuseNhwcBatchNormRelu(Graph& g) {
  return FoldActivations(
      g, [](const Node& act) { return act.op_type == "Relu" && act.domain.empty() ? "Relu" : nullptr; },
      [](Node& bn, const char* name, const Node& act) {
        if (bn.op_type != "NhwcBatchNormalization" || bn.domain != kInternalDomain || bn.provider != "cpu" ||
            bn.HasAttr("activation") || bn.outputs.size() != 1)
          return false;
        bn.attrs["activation"] = Attribute::String(name);
        bn.attrs["activation_min"] = Attribute::Float(0.0f);
        bn.attrs["activation_max"] = Attribute::Float(INFINITY);
        bn.outputs = act.outputs;
        return true;
      });
}

int FuseNhwcConvActivation(Graph& g) {
  return FoldActivations(
      g,
      [](const Node& act) -> const char* {
        if (act.op_type == "QuickGelu" && act.domain == "com.microsoft" && act.HasAttr("alpha") &&
            act.GetFloat("alpha", 0.0f) == 1.0f)
          return "Silu";
        return act.op_type == "HardSwish" && act.domain.empty() ? "HardSwish" : nullptr;
      },
      [&g](Node& conv, const char* name, const Node& act) {
        if (conv.op_type != "NhwcConv" || conv.domain != kInternalDomain || conv.provider != "cpu" ||
            conv.HasAttr("activation") || conv.outputs.size() != 1)
          return false;
        Node f = conv;
        f.attrs["activation"] = Attribute::String(name);
        f.outputs = act.outputs;
        if (!OptimizedKernelCovers(f, g, KernelConfig{})) return false;
        conv = std::move(f);
        return true;
      });
}

}  // namespace strata
