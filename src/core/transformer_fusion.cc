#include "core/transformer_fusion.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"  // kInternalDomain, kOriginalOpsetAttr

namespace strata {
namespace {

constexpr char kMsDomain[] = "com.microsoft";

// GraphUses (producers, consumers, use counts) with the graph it describes. Passes
// rebuild it after rewriting.
class GraphView : public GraphUses {
 public:
  explicit GraphView(Graph& g) : GraphUses(g), g_(g) {}

  Graph& graph() { return g_; }
  Node& node(int i) { return g_.nodes[i]; }
  // A float constant with exactly one element.
  bool ScalarConst(int v, float* out) const {
    const Tensor* t = g_.Constant(v);
    if (!t || t->dtype() != DataType::kFloat || t->num_elements() != 1) return false;
    *out = t->data<float>()[0];
    return true;
  }

 private:
  Graph& g_;
};

bool Near(float v, double want) { return std::fabs(v - want) <= 1e-4 * std::max(1.0, std::fabs(want)); }

// An ai.onnx node of type `op` with `ins` present inputs and one present output.
bool IsOp(const Node& n, const char* op, size_t ins) {
  if (!n.domain.empty() || n.op_type != op || n.inputs.size() != ins || n.outputs.size() != 1 || n.outputs[0] < 0)
    return false;
  for (int v : n.inputs)
    if (v < 0) return false;
  return true;
}

// For a commutative binary node (Add/Mul) with one scalar constant operand near `want`:
// the other operand, else -1. For Div only the divisor may be the constant.
int OtherThanScalar(const GraphView& gv, const Node& n, const char* op, double want) {
  if (!IsOp(n, op, 2)) return -1;
  float c = 0;
  if (gv.ScalarConst(n.inputs[1], &c) && Near(c, want)) return n.inputs[0];
  if (std::string(op) != "Div" && gv.ScalarConst(n.inputs[0], &c) && Near(c, want)) return n.inputs[1];
  return -1;
}

// The node consuming intermediate value v if it has type `op`, else -1.
int ConsumerOp(const GraphView& gv, int v, const char* op, size_t ins) {
  int c = gv.SoleConsumer(v);
  if (c < 0) return -1;
  return IsOp(const_cast<GraphView&>(gv).node(c), op, ins) ? c : -1;
}

// 0.5 * x * a1 in any of the usual association orders, a1 being the intermediate
// (1 + erf(...)) or (1 + tanh(...)). Adds the matched nodes to `nodes` (the last one
// produces the GELU result) and returns true.
bool MatchGeluTail(GraphView& gv, int a1, int x, std::vector<int>* nodes) {
  const int c1 = ConsumerOp(gv, a1, "Mul", 2);
  if (c1 < 0) return false;
  const Node& m1 = gv.node(c1);
  const int other = m1.inputs[0] == a1 ? m1.inputs[1] : m1.inputs[0];
  if (m1.inputs[0] == a1 && m1.inputs[1] == a1) return false;
  float c = 0;
  if (other == x) {  // (x * a1) * 0.5
    const int c2 = ConsumerOp(gv, m1.outputs[0], "Mul", 2);
    if (c2 < 0 || OtherThanScalar(gv, gv.node(c2), "Mul", 0.5) != m1.outputs[0]) return false;
    nodes->insert(nodes->end(), {c1, c2});
    return true;
  }
  if (gv.ScalarConst(other, &c)) {  // (a1 * 0.5) * x
    if (!Near(c, 0.5)) return false;
    const int c2 = ConsumerOp(gv, m1.outputs[0], "Mul", 2);
    if (c2 < 0) return false;
    const Node& m2 = gv.node(c2);
    if (!((m2.inputs[0] == x && m2.inputs[1] == m1.outputs[0]) || (m2.inputs[1] == x && m2.inputs[0] == m1.outputs[0])))
      return false;
    nodes->insert(nodes->end(), {c1, c2});
    return true;
  }
  // (x * 0.5) * a1
  const int h = gv.Producer(other);
  if (h < 0 || !gv.Intermediate(other) || OtherThanScalar(gv, gv.node(h), "Mul", 0.5) != x) return false;
  nodes->insert(nodes->end(), {h, c1});
  return true;
}

// a1 = 1 + f_out, f_out being the Erf/Tanh output: the Add node, or -1.
int MatchPlusOne(GraphView& gv, int f_out) {
  const int a = ConsumerOp(gv, f_out, "Add", 2);
  if (a < 0 || OtherThanScalar(gv, gv.node(a), "Add", 1.0) != f_out) return -1;
  return a;
}

// x^3 as Pow(x, 3), x * (x * x) or (x * x) * x: the nodes computing it, else empty.
std::vector<int> MatchCube(GraphView& gv, int x3, int x) {
  const int p = gv.Producer(x3);
  if (p < 0 || !gv.Intermediate(x3)) return {};
  const Node& n = gv.node(p);
  float c = 0;
  if (IsOp(n, "Pow", 2) && n.inputs[0] == x && gv.ScalarConst(n.inputs[1], &c) && c == 3.0f) return {p};
  if (!IsOp(n, "Mul", 2)) return {};
  for (int side = 0; side < 2; ++side) {
    if (n.inputs[side] != x) continue;
    const int x2 = n.inputs[1 - side];
    const int q = gv.Producer(x2);
    if (q < 0 || !gv.Intermediate(x2)) continue;
    const Node& sq = gv.node(q);
    if (IsOp(sq, "Mul", 2) && sq.inputs[0] == x && sq.inputs[1] == x) return {q, p};
  }
  return {};
}

// Replaces the matched chain by one node at the position of its last node (all its inputs
// exist there: x precedes the chain). `drop` collects the other nodes.
void ReplaceChain(GraphView& gv, const std::vector<int>& nodes, Node fused, std::vector<char>* drop) {
  const int last = *std::max_element(nodes.begin(), nodes.end());
  fused.outputs = {gv.node(last).outputs[0]};
  if (fused.name.empty()) fused.name = gv.node(last).name;
  for (int i : nodes) (*drop)[i] = 1;
  (*drop)[last] = 0;
  gv.node(last) = std::move(fused);
}

bool AnyDropped(const std::vector<int>& nodes, const std::vector<char>& drop) {
  for (int i : nodes)
    if (drop[i]) return true;
  return false;
}

Node MakeNode(const std::string& name, const char* domain, const char* op, std::vector<int> inputs) {
  Node n;
  n.name = name;
  n.domain = domain;
  n.op_type = op;
  n.opset = 1;
  n.inputs = std::move(inputs);
  return n;
}

// Both GELU forms -> com.microsoft Gelu / FastGelu(x).
void FuseGelu(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    // ai.onnx Gelu (opset 20) is the same op: renamed so the SIMD kernel and the
    // FusedMatMul activation fusion take it.
    if (Node& n = g.nodes[i]; n.domain.empty() && n.op_type == "Gelu" && n.inputs.size() == 1) {
      const std::string approximate = n.GetString("approximate", "none");
      if (approximate == "none" || approximate == "tanh") {
        const bool erf = approximate == "none";
        n.domain = kMsDomain;
        n.op_type = erf ? "Gelu" : "FastGelu";
        n.opset = 1;
        n.attrs.clear();
        ++(erf ? stats->gelu : stats->fast_gelu);
      }
      continue;
    }
    const Node& f = g.nodes[i];
    const bool erf = IsOp(f, "Erf", 1), tanh = IsOp(f, "Tanh", 1);
    if (!erf && !tanh) continue;
    std::vector<int> nodes = {static_cast<int>(i)};
    const int in = f.inputs[0];
    const int p = gv.Producer(in);
    if (p < 0 || !gv.Intermediate(in)) continue;
    nodes.push_back(p);
    int x = -1;
    if (erf) {
      x = OtherThanScalar(gv, gv.node(p), "Div", M_SQRT2);
      if (x < 0) x = OtherThanScalar(gv, gv.node(p), "Mul", M_SQRT1_2);
    } else {
      // Tanh(0.79788 * (x + 0.044715 * x^3))
      const int u = OtherThanScalar(gv, gv.node(p), "Mul", std::sqrt(2.0 / M_PI));
      const int pu = gv.Producer(u);
      if (u < 0 || pu < 0 || !gv.Intermediate(u) || !IsOp(gv.node(pu), "Add", 2)) continue;
      nodes.push_back(pu);
      const Node& add = gv.node(pu);
      for (int side = 0; side < 2 && x < 0; ++side) {
        const int t = add.inputs[1 - side], cand = add.inputs[side];
        const int pt = gv.Producer(t);
        if (pt < 0 || !gv.Intermediate(t)) continue;
        const int x3 = OtherThanScalar(gv, gv.node(pt), "Mul", 0.044715);
        if (x3 < 0) continue;
        std::vector<int> cube = MatchCube(gv, x3, cand);
        if (cube.empty()) continue;
        x = cand;
        nodes.push_back(pt);
        nodes.insert(nodes.end(), cube.begin(), cube.end());
      }
    }
    if (x < 0) continue;
    const int a = MatchPlusOne(gv, f.outputs[0]);
    if (a < 0) continue;
    nodes.push_back(a);
    if (!MatchGeluTail(gv, gv.node(a).outputs[0], x, &nodes) || AnyDropped(nodes, drop)) continue;
    ReplaceChain(gv, nodes, MakeNode(f.name, kMsDomain, erf ? "Gelu" : "FastGelu", {x}), &drop);
    ++(erf ? stats->gelu : stats->fast_gelu);
  }
  RemoveDroppedNodes(g, drop);
}

// MatMul(A, W[K,N] constant) + bias[N] constant -> FusedMatMul(A, W, bias).
void FuseMatMulBias(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!IsOp(g.nodes[i], "Add", 2)) continue;
    for (int side = 0; side < 2; ++side) {
      const Node& add = g.nodes[i];
      const int mm_out = add.inputs[side], bias_v = add.inputs[1 - side];
      const int p = gv.Producer(mm_out);
      if (p < 0 || drop[p] || !gv.Intermediate(mm_out) || !IsOp(gv.node(p), "MatMul", 2)) continue;
      const Node& mm = gv.node(p);
      const Tensor* w = g.Constant(mm.inputs[1]);
      const Tensor* bias = g.Constant(bias_v);
      // A bias of any other shape broadcasts differently (rows, batches): not a GEMM bias.
      if (!w || !bias || w->dtype() != DataType::kFloat || w->rank() != 2 || bias->dtype() != DataType::kFloat ||
          bias->rank() != 1 || bias->dim(0) != w->dim(1) || g.IsConstant(mm.inputs[0]))
        continue;
      Node fused = MakeNode(mm.name, kInternalDomain, kFusedMatMulOp, {mm.inputs[0], mm.inputs[1], bias_v});
      fused.attrs[kOriginalOpsetAttr] = Attribute::Int(mm.opset);
      ReplaceChain(gv, {p, static_cast<int>(i)}, std::move(fused), &drop);
      ++stats->matmul_bias;
      break;
    }
  }
  RemoveDroppedNodes(g, drop);
}

// FusedMatMul -> com.microsoft Gelu/FastGelu(x) (no bias input): the activation runs on
// the GEMM output while it is still in cache.
void FuseMatMulGelu(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& act = g.nodes[i];
    if (act.domain != kMsDomain || (act.op_type != "Gelu" && act.op_type != "FastGelu") || act.inputs.size() != 1 ||
        act.outputs.size() != 1 || act.outputs[0] < 0)
      continue;
    const int p = gv.Producer(act.inputs[0]);
    if (p < 0 || !gv.Intermediate(act.inputs[0])) continue;
    Node& mm = gv.node(p);
    if (mm.domain != kInternalDomain || mm.op_type != kFusedMatMulOp || mm.inputs.size() != 3 ||
        mm.HasAttr("activation"))
      continue;
    mm.attrs["activation"] = Attribute::String(act.op_type);
    mm.outputs[0] = act.outputs[0];
    drop[i] = 1;
    ++stats->matmul_gelu;
  }
  RemoveDroppedNodes(g, drop);
}

// Both values' declared shapes are fully known and equal.
bool SameKnownShape(const Graph& g, int a, int b) {
  const TypeInfo& ta = g.values[a].type;
  const TypeInfo& tb = g.values[b].type;
  if (!ta.has_shape || !tb.has_shape || ta.dims.size() != tb.dims.size()) return false;
  for (size_t k = 0; k < ta.dims.size(); ++k)
    if (!ta.dims[k].known() || ta.dims[k].value != tb.dims[k].value) return false;
  return true;
}

// FusedMatMul (no activation) + Add(residual of the output's exact shape) -> the residual
// joins the SGEMM epilogue (transformer blocks' skip connections).
void FuseMatMulResidual(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!IsOp(g.nodes[i], "Add", 2)) continue;
    for (int side = 0; side < 2; ++side) {
      const Node& add = g.nodes[i];
      const int mm_out = add.inputs[side], res = add.inputs[1 - side];
      const int p = gv.Producer(mm_out);
      if (p < 0 || drop[p] || !gv.Intermediate(mm_out) || mm_out == res || g.IsConstant(res)) continue;
      const Node& mm = gv.node(p);
      if (mm.domain != kInternalDomain || mm.op_type != kFusedMatMulOp || mm.inputs.size() != 3 ||
          mm.HasAttr("activation") || !SameKnownShape(g, mm_out, res) ||
          g.values[res].type.elem_type != DataType::kFloat)
        continue;
      // At the Add's position: the residual may be computed after the MatMul.
      Node fused = mm;
      fused.inputs.push_back(res);
      ReplaceChain(gv, {p, static_cast<int>(i)}, std::move(fused), &drop);
      ++stats->matmul_residual;
      break;
    }
  }
  RemoveDroppedNodes(g, drop);
}

// True when broadcasting `mask` onto x's declared shape provably leaves that shape as is.
bool MaskFits(const Graph& g, int x, int mask) {
  const TypeInfo& xt = g.values[x].type;
  if (!xt.has_shape) return false;
  std::vector<Dim> md;
  if (const Tensor* c = g.Constant(mask)) {
    if (c->dtype() != DataType::kFloat) return false;
    for (int64_t d : c->shape()) md.push_back(Dim{d, ""});
  } else {
    const TypeInfo& mt = g.values[mask].type;
    if (!mt.has_shape || (mt.elem_type != DataType::kFloat && mt.elem_type != DataType::kUndefined)) return false;
    md = mt.dims;
  }
  if (md.size() > xt.dims.size()) return false;
  const size_t off = xt.dims.size() - md.size();
  for (size_t k = 0; k < md.size(); ++k) {
    const Dim& a = xt.dims[off + k];
    const Dim& b = md[k];
    if (b.known() && b.value == 1) continue;
    if (a.known() && b.known() && a.value == b.value) continue;
    if (!a.known() && !b.known() && !a.param.empty() && a.param == b.param) continue;
    return false;
  }
  return true;
}

// Softmax(x / c + mask) or Softmax(x * c + mask) over the last axis -> MaskedSoftmax(x, mask).
void FuseMaskedSoftmax(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& sm = g.nodes[i];
    if (!IsOp(sm, "Softmax", 1)) continue;
    const TypeInfo& st = g.values[sm.inputs[0]].type;
    const int64_t axis = sm.GetInt("axis", sm.opset >= 13 ? -1 : 1);
    if (axis != -1 && !(st.has_shape && axis == static_cast<int64_t>(st.dims.size()) - 1)) continue;
    std::vector<int> nodes = {static_cast<int>(i)};
    int scaled = sm.inputs[0], mask = -1;
    const int pa = gv.Producer(scaled);
    if (pa < 0 || !gv.Intermediate(scaled)) continue;
    // Optional mask Add: the scaled scores on either side.
    if (IsOp(gv.node(pa), "Add", 2)) {
      const Node& add = gv.node(pa);
      int found = -1;
      for (int side = 0; side < 2 && found < 0; ++side) {
        const int q = gv.Producer(add.inputs[side]);
        if (q >= 0 && gv.Intermediate(add.inputs[side]) && (IsOp(gv.node(q), "Div", 2) || IsOp(gv.node(q), "Mul", 2)))
          found = side;
      }
      if (found < 0) continue;
      nodes.push_back(pa);
      scaled = add.inputs[found];
      mask = add.inputs[1 - found];
    }
    const int ps = gv.Producer(scaled);
    if (ps < 0 || !gv.Intermediate(scaled)) continue;
    const Node& sc = gv.node(ps);
    float c = 0;
    int x = -1;
    bool divide = false;
    if (IsOp(sc, "Div", 2) && gv.ScalarConst(sc.inputs[1], &c)) {
      x = sc.inputs[0];
      divide = true;
    } else if (IsOp(sc, "Mul", 2)) {
      if (gv.ScalarConst(sc.inputs[1], &c))
        x = sc.inputs[0];
      else if (gv.ScalarConst(sc.inputs[0], &c))
        x = sc.inputs[1];
    }
    if (x < 0 || !std::isfinite(c) || c == 0.0f || g.IsConstant(x)) continue;
    const TypeInfo& xt = g.values[x].type;
    if (xt.elem_type != DataType::kFloat || !xt.has_shape || xt.dims.empty()) continue;
    if (mask >= 0 && !MaskFits(g, x, mask)) continue;
    nodes.push_back(ps);
    if (AnyDropped(nodes, drop)) continue;
    Node fused = MakeNode(sm.name, kInternalDomain, kMaskedSoftmaxOp, {x, mask});
    fused.attrs["scale"] = Attribute::Float(c);
    fused.attrs["divide"] = Attribute::Int(divide ? 1 : 0);
    ReplaceChain(gv, nodes, std::move(fused), &drop);
    ++stats->masked_softmax;
  }
  RemoveDroppedNodes(g, drop);
}

// The positive int64 constant `v` (a Reshape target), or empty.
std::vector<int64_t> PositiveInts(const Graph& g, int v) {
  const Tensor* t = g.Constant(v);
  if (!t || t->dtype() != DataType::kInt64 || t->rank() != 1) return {};
  std::vector<int64_t> r(t->data<int64_t>(), t->data<int64_t>() + t->num_elements());
  for (int64_t d : r)
    if (d <= 0) return {};
  return r;
}

// v = Transpose(Reshape(src, [B, S, H, D]), perm): appends both nodes, sets src and the
// reshape target. Both intermediate values must have no other reader.
bool MatchHeadSplit(GraphView& gv, int v, std::initializer_list<int64_t> perm, std::vector<int>* nodes, int* src,
                    std::vector<int64_t>* dims) {
  const int t = gv.Producer(v);
  if (t < 0 || !gv.Intermediate(v) || !IsOp(gv.node(t), "Transpose", 1)) return false;
  if (gv.node(t).GetInts("perm") != std::vector<int64_t>(perm)) return false;
  const int r4 = gv.node(t).inputs[0];
  const int r = gv.Producer(r4);
  if (r < 0 || !gv.Intermediate(r4) || !IsOp(gv.node(r), "Reshape", 2)) return false;
  *dims = PositiveInts(gv.graph(), gv.node(r).inputs[1]);
  if (dims->size() != 4) return false;
  *src = gv.node(r).inputs[0];
  nodes->insert(nodes->end(), {t, r});
  return true;
}

// Multi-head attention around a MaskedSoftmax:
//   Q4 = Transpose(Reshape(q, [B,Sq,H,D]), [0,2,1,3]), K4 = Transpose(Reshape(k, [B,Skv,H,D]), [0,2,3,1]),
//   V4 = Transpose(Reshape(v, [B,Skv,H,D]), [0,2,1,3]),
//   Reshape(Transpose(MatMul(MaskedSoftmax(MatMul(Q4, K4), mask), V4), [0,2,1,3]), [B,Sq,H*D])
// -> Attention(q, k, v, mask): heads read in place from the projections' layout.
void FuseAttention(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& ms = g.nodes[i];
    if (ms.domain != kInternalDomain || ms.op_type != kMaskedSoftmaxOp || ms.outputs.size() != 1) continue;
    std::vector<int> nodes = {static_cast<int>(i)};
    const int scores = ms.inputs[0];
    const int p1 = gv.Producer(scores);
    if (p1 < 0 || !gv.Intermediate(scores) || !IsOp(gv.node(p1), "MatMul", 2)) continue;
    nodes.push_back(p1);
    const int p2 = ConsumerOp(gv, ms.outputs[0], "MatMul", 2);
    if (p2 < 0 || gv.node(p2).inputs[0] != ms.outputs[0]) continue;
    nodes.push_back(p2);
    int q = -1, k = -1, v = -1;
    std::vector<int64_t> qd, kd, vd;
    if (!MatchHeadSplit(gv, gv.node(p1).inputs[0], {0, 2, 1, 3}, &nodes, &q, &qd) ||
        !MatchHeadSplit(gv, gv.node(p1).inputs[1], {0, 2, 3, 1}, &nodes, &k, &kd) ||
        !MatchHeadSplit(gv, gv.node(p2).inputs[1], {0, 2, 1, 3}, &nodes, &v, &vd))
      continue;
    // Same batch, heads and head size everywhere; K and V of one length.
    if (kd != vd || qd[0] != kd[0] || qd[2] != kd[2] || qd[3] != kd[3]) continue;
    const int t = ConsumerOp(gv, gv.node(p2).outputs[0], "Transpose", 1);
    if (t < 0 || gv.node(t).GetInts("perm") != std::vector<int64_t>{0, 2, 1, 3}) continue;
    const int r = ConsumerOp(gv, gv.node(t).outputs[0], "Reshape", 2);
    if (r < 0) continue;
    const std::vector<int64_t> out = PositiveInts(g, gv.node(r).inputs[1]);
    int64_t out_elems = 1;
    for (int64_t d : out) out_elems *= d;
    if (out.empty() || out.back() != qd[2] * qd[3] || out_elems != qd[0] * qd[1] * qd[2] * qd[3]) continue;
    nodes.insert(nodes.end(), {t, r});
    if (AnyDropped(nodes, drop)) continue;
    const int mask = ms.inputs.size() > 1 ? ms.inputs[1] : -1;
    Node fused = MakeNode(ms.name, kInternalDomain, kAttentionOp, {q, k, v, mask});
    fused.attrs["scale"] = ms.attrs.at("scale");
    fused.attrs["divide"] = ms.attrs.at("divide");
    fused.attrs["batch"] = Attribute::Int(qd[0]);
    fused.attrs["q_len"] = Attribute::Int(qd[1]);
    fused.attrs["kv_len"] = Attribute::Int(kd[1]);
    fused.attrs["num_heads"] = Attribute::Int(qd[2]);
    fused.attrs["head_dim"] = Attribute::Int(qd[3]);
    fused.attrs["output_shape"] = Attribute::Ints(out);
    ReplaceChain(gv, nodes, std::move(fused), &drop);
    ++stats->attention;
  }
  RemoveDroppedNodes(g, drop);
}

// SiLU (Swish): Mul(x, Sigmoid(x)) in either operand order -> com.microsoft QuickGelu(x,
// alpha = 1): one pass over x instead of two and an intermediate (EfficientNet's and
// MnasNet-style nets' activations).
void FuseSilu(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& sig = g.nodes[i];
    if (!IsOp(sig, "Sigmoid", 1) || drop[i]) continue;
    const int x = sig.inputs[0], s = sig.outputs[0];
    if (g.values[x].type.elem_type != DataType::kFloat) continue;
    const int m = ConsumerOp(gv, s, "Mul", 2);
    if (m < 0) continue;
    const Node& mul = gv.node(m);
    if (!((mul.inputs[0] == x && mul.inputs[1] == s) || (mul.inputs[1] == x && mul.inputs[0] == s))) continue;
    Node fused = MakeNode(mul.name, kMsDomain, "QuickGelu", {x});
    fused.attrs["alpha"] = Attribute::Float(1.0f);
    fused.provider = mul.provider;
    ReplaceChain(gv, {static_cast<int>(i), m}, std::move(fused), &drop);
    ++stats->silu;
  }
  RemoveDroppedNodes(g, drop);
}

// ONNX Runtime's dynamic int8 MatMul -> DynQuantMatMul(X, W_q, W_scale, W_zp?, bias?). A
// DynamicQuantizeLinear may feed several MatMulIntegers (ORT quantizes a shared input once);
// each fused node quantizes X itself, and the DynamicQuantizeLinear goes once nothing else
// reads its outputs.
void FuseDynamicQuantMatMul(Graph& g, TransformerFusionStats* stats) {
  GraphView gv(g);
  std::vector<char> drop(g.nodes.size(), 0);
  std::vector<int> dqls;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mmi = g.nodes[i];
    if (!mmi.domain.empty() || mmi.op_type != "MatMulInteger" || mmi.inputs.size() < 3 || mmi.inputs.size() > 4 ||
        mmi.outputs.size() != 1 || mmi.outputs[0] < 0)
      continue;
    const int d = gv.Producer(mmi.inputs[0]);
    if (d < 0 || drop[d]) continue;
    const Node& dql = gv.node(d);
    if (!dql.domain.empty() || dql.op_type != "DynamicQuantizeLinear" || dql.inputs.size() != 1 || dql.inputs[0] < 0 ||
        dql.outputs.size() != 3 || dql.outputs[1] < 0 || mmi.inputs[2] != dql.outputs[2] || mmi.inputs[2] < 0)
      continue;
    const Tensor* w = g.Constant(mmi.inputs[1]);
    if (!w || (w->dtype() != DataType::kInt8 && w->dtype() != DataType::kUInt8) || w->rank() != 2) continue;
    const int64_t n = w->dim(1);
    const int wzp_v = mmi.inputs.size() == 4 ? mmi.inputs[3] : -1;
    if (wzp_v >= 0) {
      const Tensor* z = g.Constant(wzp_v);
      if (!z || z->dtype() != w->dtype() || z->rank() > 1 || (z->num_elements() != 1 && z->num_elements() != n))
        continue;
    }
    const int c = ConsumerOp(gv, mmi.outputs[0], "Cast", 1);
    if (c < 0 || gv.node(c).GetInt("to", 0) != static_cast<int64_t>(DataType::kFloat)) continue;
    const int accf = gv.node(c).outputs[0];
    const int m = gv.SoleConsumer(accf);
    if (m < 0 || !IsOp(gv.node(m), "Mul", 2)) continue;
    const Node& mul = gv.node(m);
    const int s = mul.inputs[0] == accf ? mul.inputs[1] : mul.inputs[0];
    const int sm = gv.Producer(s);
    if (s == accf || sm < 0 || !gv.Intermediate(s) || !IsOp(gv.node(sm), "Mul", 2)) continue;
    const Node& smul = gv.node(sm);
    const int xs = dql.outputs[1];
    const int ws_v = smul.inputs[0] == xs ? smul.inputs[1] : smul.inputs[1] == xs ? smul.inputs[0] : -1;
    const Tensor* ws = ws_v >= 0 ? g.Constant(ws_v) : nullptr;
    // A scale of rank <= 1 broadcasts over the last dim only, as the kernel applies it.
    if (!ws || ws->dtype() != DataType::kFloat || ws->rank() > 1 ||
        (ws->num_elements() != 1 && ws->num_elements() != n))
      continue;
    std::vector<int> chain = {static_cast<int>(i), c, sm, m};
    int bias_v = -1;
    const int a = gv.SoleConsumer(mul.outputs[0]);
    if (a >= 0 && IsOp(gv.node(a), "Add", 2)) {
      const Node& add = gv.node(a);
      const int other = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
      const Tensor* b = g.Constant(other);
      if (other != mul.outputs[0] && b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == n) {
        bias_v = other;
        chain.push_back(a);
      }
    }
    if (AnyDropped(chain, drop)) continue;
    Node fused =
        MakeNode(mmi.name, kInternalDomain, kDynQuantMatMulOp, {dql.inputs[0], mmi.inputs[1], ws_v, wzp_v, bias_v});
    ReplaceChain(gv, chain, std::move(fused), &drop);
    dqls.push_back(dql.outputs[0]);
    ++stats->dynq_matmul;
  }
  RemoveDroppedNodes(g, drop);
  // A DynamicQuantizeLinear none of whose outputs is read any more (by a node, a subgraph or
  // as a graph output) goes too.
  const GraphUses uses(g);
  std::vector<char> unread(g.nodes.size(), 0);
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    const Node& n = g.nodes[j];
    if (n.op_type != "DynamicQuantizeLinear" || !n.domain.empty() || n.outputs.empty() ||
        std::find(dqls.begin(), dqls.end(), n.outputs[0]) == dqls.end())
      continue;
    bool read = false;
    for (int v : n.outputs) read = read || (v >= 0 && uses.Uses(v) > 0);
    unread[j] = read ? 0 : 1;
  }
  RemoveDroppedNodes(g, unread);
}

// True when an optimized kernel, not the reference loops, runs internal op `op` in this
// session (on CPUs without AVX-512 the fast FusedMatMul/Attention kernels decline). The
// probe has no inputs: those entries' `covers` look only at the CPU, not at the node.
bool FastKernelFor(const Graph& g, const char* op, const OptimizerOptions& opts) {
  Node probe;
  probe.domain = kInternalDomain;
  probe.op_type = op;
  probe.opset = 1;
  return OptimizedKernelCovers(probe, g, opts.kernel);
}

}  // namespace

Result<TransformerFusionStats> FuseTransformerPatterns(Graph& g, const OptimizerOptions& opts) {
  TransformerFusionStats stats;
  if (opts.kernel.prefer_reference || !opts.cpu_only) return stats;
  // Order matters: GELU first so the bias fusion's FusedMatMul can absorb it afterwards.
  FuseGelu(g, &stats);
  FuseSilu(g, &stats);
  // FusedMatMul runs on the SGEMM, or with bf16 fast math on the bf16 GEMM (gemm_bf16_ops.cc).
  if (FastKernelFor(g, kFusedMatMulOp, opts)) {
    FuseMatMulBias(g, &stats);
    FuseMatMulGelu(g, &stats);
    FuseMatMulResidual(g, &stats);
  }
  FuseMaskedSoftmax(g, &stats);
  if (FastKernelFor(g, kAttentionOp, opts)) FuseAttention(g, &stats);
  if (FastKernelFor(g, kDynQuantMatMulOp, opts)) FuseDynamicQuantMatMul(g, &stats);
  return stats;
}

}  // namespace strata
