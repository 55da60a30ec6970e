#include "core/qdq_fusion.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/fusion_util.h"
#include "core/layout_pass.h"  // kInternalDomain, kQdqAddOp

namespace strata {
namespace {

bool IsQ8(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// A cpu ai.onnx node `op` whose inputs [0, required) are present and whose one output is.
bool IsCpuOp(const Node& n, const char* op, size_t required, size_t max_inputs) {
  if (!n.domain.empty() || n.op_type != op || n.provider != "cpu" || n.inputs.size() < required ||
      n.inputs.size() > max_inputs || n.outputs.size() != 1 || n.outputs[0] < 0)
    return false;
  for (size_t i = 0; i < required; ++i)
    if (n.inputs[i] < 0) return false;
  return true;
}

// Optional input i of n, or -1.
int OptionalInput(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }

// A float constant scale with 1 or `count` elements (count 0: a scalar only), all finite and > 0.
const Tensor* ScaleConst(const Graph& g, int v, int64_t count) {
  const Tensor* t = g.Constant(v);
  if (!t || t->dtype() != DataType::kFloat || t->rank() > 1) return nullptr;
  if (t->num_elements() != 1 && (count == 0 || t->num_elements() != count)) return nullptr;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const float s = t->data<float>()[i];
    if (!(s > 0) || !std::isfinite(s)) return nullptr;
  }
  return t;
}

// A zero point that is absent (v < 0) or a constant of dtype `dt` with 1 or `count` elements.
bool ZeroPointOk(const Graph& g, int v, DataType dt, int64_t count) {
  if (v < 0) return true;
  const Tensor* t = g.Constant(v);
  return t && t->dtype() == dt && t->rank() <= 1 && (t->num_elements() == 1 || t->num_elements() == count);
}

int32_t ZeroPointValue(const Graph& g, int v) {
  if (v < 0) return 0;
  const Tensor* t = g.Constant(v);
  return t->dtype() == DataType::kUInt8 ? t->data<uint8_t>()[0] : t->data<int8_t>()[0];
}

// A new constant value holding `t`.
int AddConstant(Graph& g, const std::string& name, Tensor t) {
  std::string n = name;
  for (int k = 1; g.FindValue(n) >= 0; ++k) n = name + "_" + std::to_string(k);
  const int v = g.AddValue(n);
  TypeInfo& type = g.values[v].type;
  type.kind = TypeInfo::Kind::kTensor;
  type.elem_type = t.dtype();
  type.has_shape = true;
  for (int64_t d : t.shape()) type.dims.push_back(Dim{d, ""});
  g.initializers[v] = std::move(t);
  return v;
}

// The dequantized input of a DequantizeLinear node reading a constant, or nullptr.
struct Dequant {
  int q = -1, scale = -1, zp = -1;
  const Tensor* values = nullptr;  // the constant quantized tensor
  const Tensor* scales = nullptr;
};

// DequantizeLinear(q, scale[, zp]) producing v, per tensor or (when per_axis_len > 0) per
// axis 0 of that length; q constant of one of `types`.
bool MatchConstDequant(const Graph& g, const GraphUses& gu, int v, int64_t per_axis_len,
                       std::initializer_list<DataType> types, Dequant* d) {
  const int p = gu.Producer(v);
  if (p < 0) return false;
  const Node& n = g.nodes[p];
  if (!IsCpuOp(n, "DequantizeLinear", 2, 3) || n.HasAttr("block_size")) return false;
  d->q = n.inputs[0];
  d->scale = n.inputs[1];
  d->zp = OptionalInput(n, 2);
  d->values = g.Constant(d->q);
  if (!d->values) return false;
  bool type_ok = false;
  for (DataType t : types) type_ok = type_ok || d->values->dtype() == t;
  if (!type_ok) return false;
  d->scales = ScaleConst(g, d->scale, per_axis_len);
  if (!d->scales) return false;
  // A per-channel scale must run along axis 0 (DequantizeLinear's default axis is 1).
  if (d->scales->num_elements() > 1 && d->values->rank() > 0) {
    int64_t axis = n.GetInt("axis", 1);
    if (axis < 0) axis += d->values->rank();
    if (axis != 0) return false;
  }
  // The zero point has the scale's shape (DequantizeLinear refuses anything else).
  if (d->zp >= 0 && g.Constant(d->zp) && g.Constant(d->zp)->num_elements() != d->scales->num_elements()) return false;
  return ZeroPointOk(g, d->zp, d->values->dtype(), per_axis_len);
}

// DequantizeLinear(q, scale[, zp]) producing v with scalar constant parameters, q int8 or
// uint8: its inputs (zp -1 when absent, allowed only where !zp_required).
struct ScalarDequant {
  int q = -1, scale = -1, zp = -1;
};
bool MatchScalarDequant(const Graph& g, const GraphUses& gu, int v, bool zp_required, ScalarDequant* d) {
  const int p = gu.Producer(v);
  if (p < 0 || !IsCpuOp(g.nodes[p], "DequantizeLinear", 2, 3) || g.nodes[p].HasAttr("block_size")) return false;
  const Node& n = g.nodes[p];
  d->q = n.inputs[0];
  d->scale = n.inputs[1];
  d->zp = OptionalInput(n, 2);
  const DataType t = g.values[d->q].type.elem_type;
  return (d->zp >= 0 || !zp_required) && IsQ8(t) && ScaleConst(g, d->scale, 0) && ZeroPointOk(g, d->zp, t, 1);
}

// A per-tensor QuantizeLinear to int8 or uint8 with a constant scalar scale and a constant
// scalar zero point (or none, allowed only where !zp_required: then uint8 unless output_dtype
// says otherwise): its scale and zero point inputs and output type.
struct ScalarQuant {
  int scale = -1, zp = -1;
  DataType type = DataType::kUInt8;
};
bool MatchScalarQuantize(const Graph& g, const Node& n, bool zp_required, ScalarQuant* q) {
  // output_dtype (opset 21) may make a zero-point-less QuantizeLinear int8: left unfused.
  if (!IsCpuOp(n, "QuantizeLinear", zp_required ? 3 : 2, 3) || n.HasAttr("block_size") || n.HasAttr("output_dtype"))
    return false;
  q->scale = n.inputs[1];
  q->zp = OptionalInput(n, 2);
  q->type = DataType::kUInt8;
  if (q->zp >= 0) {
    const Tensor* z = g.Constant(q->zp);
    if (!z) return false;
    q->type = z->dtype();
  } else if (n.GetInt("output_dtype", 0) != 0 && n.GetInt("output_dtype", 0) != static_cast<int64_t>(q->type)) {
    return false;
  }
  return ScaleConst(g, q->scale, 0) && IsQ8(q->type) && ZeroPointOk(g, q->zp, q->type, 1);
}

// Rounds half to even and saturates to uint8 or int8, NaN to 0: QuantizeLinear's arithmetic.
int32_t Saturate(float v, DataType t) {
  float r = std::nearbyint(v);
  if (std::isnan(r)) r = 0;
  const float lo = t == DataType::kUInt8 ? 0.0f : -128.0f, hi = t == DataType::kUInt8 ? 255.0f : 127.0f;
  return static_cast<int32_t>(std::min(hi, std::max(lo, r)));
}

// A cpu Relu, or Clip with constant float bounds (inputs from opset 11, attributes before):
// its clamp [lo, hi].
bool ActivationBounds(const Graph& g, const Node& n, float* lo, float* hi) {
  if (IsCpuOp(n, "Relu", 1, 1)) {
    *lo = 0;
    *hi = INFINITY;
    return true;
  }
  if (!IsCpuOp(n, "Clip", 1, 3)) return false;
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n.opset < 11) {
    *lo = n.GetFloat("min", -INFINITY);
    *hi = n.GetFloat("max", INFINITY);
    return true;
  }
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) continue;
    const Tensor* t = g.Constant(n.inputs[i]);
    if (!t || t->dtype() != DataType::kFloat || t->num_elements() != 1) return false;
    (i == 1 ? *lo : *hi) = t->data<float>()[0];
  }
  return true;
}

}  // namespace

int FuseQdqConv(Graph& g, const OptimizerOptions& opts) {
  if (opts.level < 2 || opts.kernel.prefer_reference || !opts.cpu_only) return 0;
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const Node& conv = g.nodes[ci];
    if (drop[ci] || !IsCpuOp(conv, "Conv", 2, 3)) continue;
    // x: DequantizeLinear(x_q, xs[, xz]) with per-tensor parameters.
    ScalarDequant dx;
    if (!MatchScalarDequant(g, gu, conv.inputs[0], /*zp_required=*/false, &dx)) continue;
    const int x_q = dx.q, xs_v = dx.scale, xz_v = dx.zp;
    const DataType xt = g.values[x_q].type.elem_type;
    // W: DequantizeLinear of a constant int8/uint8 [M, C/group, k...], scale per tensor or per M.
    Dequant w;
    const int wp = gu.Producer(conv.inputs[1]);
    if (wp < 0 || !IsCpuOp(g.nodes[wp], "DequantizeLinear", 2, 3)) continue;
    const Tensor* wq = g.Constant(g.nodes[wp].inputs[0]);
    if (!wq || wq->rank() < 3 || wq->dim(0) <= 0) continue;
    const int64_t M = wq->dim(0);
    if (!MatchConstDequant(g, gu, conv.inputs[1], M, {DataType::kInt8, DataType::kUInt8}, &w)) continue;
    // y: Conv -> [Relu | Clip ->] QuantizeLinear(., ys[, yz]).
    int y = conv.outputs[0];
    std::vector<int> chain = {static_cast<int>(ci)};
    float act_lo = -INFINITY, act_hi = INFINITY;  // the activation's clamp
    int qi = gu.SoleConsumer(y);
    if (qi >= 0 && ActivationBounds(g, g.nodes[qi], &act_lo, &act_hi)) {
      chain.push_back(qi);
      qi = gu.SoleConsumer(g.nodes[qi].outputs[0]);
    }
    ScalarQuant yq;
    if (qi < 0 || !MatchScalarQuantize(g, g.nodes[qi], /*zp_required=*/false, &yq)) continue;
    const Node& q = g.nodes[qi];
    chain.push_back(qi);
    const int ys_v = yq.scale, yz_v = yq.zp;
    const DataType yt = yq.type;
    // QuantizeLinear is monotone, so Q(clamp(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)): the
    // activation is the saturation itself when Q(lo) and Q(hi) are the type's ends (a Relu
    // when y's zero point is the lowest value; ReLU6 when 6 quantizes to the top or past it).
    const float ysf = g.Constant(ys_v)->data<float>()[0], yzf = static_cast<float>(ZeroPointValue(g, yz_v));
    const auto quantize = [&](float v) { return Saturate(std::nearbyint(v / ysf) + yzf, yt); };
    const int32_t qmin = yt == DataType::kUInt8 ? 0 : -128, qmax = yt == DataType::kUInt8 ? 255 : 127;
    if (chain.size() == 3 && (quantize(act_lo) != qmin || quantize(act_hi) != qmax)) continue;
    bool dropped = false;
    for (int n : chain) dropped = dropped || drop[n];
    if (dropped) continue;

    // Bias: int32 at scale xs * ws[m].
    const float xsf = g.Constant(xs_v)->data<float>()[0];
    auto ws_at = [&](int64_t m) { return w.scales->data<float>()[w.scales->num_elements() == 1 ? 0 : m]; };
    int bias_v = -1;
    if (const int b = OptionalInput(conv, 2); b >= 0) {
      Dequant bd;
      std::vector<float> bf(static_cast<size_t>(M));
      bool ok = false;
      if (MatchConstDequant(g, gu, b, M, {DataType::kInt32}, &bd) && bd.values->num_elements() == M) {
        // Used as is when its zero point is 0 and its scale xs * ws[m] (quantizers write it so).
        const Tensor* bz = bd.zp >= 0 ? g.Constant(bd.zp) : nullptr;
        bool exact = true;
        for (int64_t m = 0; m < M; ++m) {
          const float bs = bd.scales->data<float>()[bd.scales->num_elements() == 1 ? 0 : m];
          const int64_t z = bz ? bz->data<int32_t>()[bz->num_elements() == 1 ? 0 : m] : 0;
          exact = exact && z == 0 && bs == xsf * ws_at(m);
          bf[static_cast<size_t>(m)] =
              static_cast<float>(static_cast<double>(bd.values->data<int32_t>()[m] - z) * static_cast<double>(bs));
        }
        ok = true;
        if (exact) bias_v = bd.q;
      } else if (const Tensor* bc = g.Constant(b);
                 bc && bc->dtype() == DataType::kFloat && bc->rank() == 1 && bc->dim(0) == M) {
        for (int64_t m = 0; m < M; ++m) bf[static_cast<size_t>(m)] = bc->data<float>()[m];
        ok = true;
      }
      if (!ok) continue;
      if (bias_v < 0) {  // re-quantize to xs * ws[m]
        std::vector<int32_t> bq(static_cast<size_t>(M));
        bool fits = true;
        for (int64_t m = 0; m < M; ++m) {
          const double r = std::nearbyint(static_cast<double>(bf[static_cast<size_t>(m)]) / (xsf * ws_at(m)));
          fits = fits && std::fabs(r) < 2147483647.0;
          bq[static_cast<size_t>(m)] = fits ? static_cast<int32_t>(r) : 0;
        }
        if (!fits) continue;
        bias_v = AddConstant(g, conv.name + "/qdq_bias", Tensor::FromVector<int32_t>(bq, {M}));
      }
    }

    Node f;
    f.name = conv.name;
    f.op_type = "QLinearConv";
    f.opset = conv.opset;
    f.provider = conv.provider;
    f.attrs = conv.attrs;
    const int xz = xz_v >= 0
                       ? xz_v
                       : AddConstant(g, conv.name + "/qdq_x_zero_point",
                                     xt == DataType::kUInt8 ? Tensor::Scalar<uint8_t>(0) : Tensor::Scalar<int8_t>(0));
    const int wz = w.zp >= 0 ? w.zp
                             : AddConstant(g, conv.name + "/qdq_w_zero_point",
                                           w.values->dtype() == DataType::kUInt8 ? Tensor::Scalar<uint8_t>(0)
                                                                                 : Tensor::Scalar<int8_t>(0));
    const int yz = yz_v >= 0 ? yz_v : AddConstant(g, conv.name + "/qdq_y_zero_point", Tensor::Scalar<uint8_t>(0));
    f.inputs = {x_q, xs_v, xz, w.q, w.scale, wz, ys_v, yz};
    if (bias_v >= 0) f.inputs.push_back(bias_v);
    f.outputs = q.outputs;
    if (!OptimizedKernelCovers(f, g, opts.kernel)) continue;
    // The fused node takes the QuantizeLinear's place: x_q exists by then.
    for (int n : chain) drop[n] = 1;
    drop[qi] = 0;
    g.nodes[qi] = std::move(f);
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

namespace {

bool SameStaticShape(const TypeInfo& a, const TypeInfo& b) {
  if (!a.has_shape || !b.has_shape || a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (!a.dims[i].known() || a.dims[i].value != b.dims[i].value) return false;
  return true;
}

}  // namespace

int FuseQdqAdd(Graph& g, const OptimizerOptions& opts) {
  if (opts.level < 2 || opts.kernel.prefer_reference || !opts.cpu_only) return 0;
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    const Node& q = g.nodes[qi];
    ScalarQuant yq;
    if (!MatchScalarQuantize(g, q, /*zp_required=*/true, &yq)) continue;
    const int ys_v = yq.scale, yz_v = yq.zp;
    std::vector<int> chain = {static_cast<int>(qi)};
    int ai = gu.Producer(q.inputs[0]);
    bool relu = false;
    if (ai >= 0 && IsCpuOp(g.nodes[ai], "Relu", 1, 1) && gu.Intermediate(q.inputs[0])) {
      relu = true;
      chain.push_back(ai);
      const int r_in = g.nodes[ai].inputs[0];
      ai = gu.Intermediate(r_in) ? gu.Producer(r_in) : -1;
    } else if (!gu.Intermediate(q.inputs[0])) {
      continue;
    }
    if (ai < 0 || !IsCpuOp(g.nodes[ai], "Add", 2, 2)) continue;
    chain.push_back(ai);
    const Node& add = g.nodes[ai];
    ScalarDequant da, db;
    if (!MatchScalarDequant(g, gu, add.inputs[0], /*zp_required=*/true, &da) ||
        !MatchScalarDequant(g, gu, add.inputs[1], /*zp_required=*/true, &db))
      continue;
    if (!SameStaticShape(g.values[da.q].type, g.values[db.q].type)) continue;
    bool dropped = false;
    for (int n : chain) dropped = dropped || drop[n];
    if (dropped) continue;
    Node f;
    f.name = add.name;
    f.op_type = kQdqAddOp;
    f.domain = kInternalDomain;
    f.opset = 1;
    f.provider = q.provider;
    f.inputs = {da.q, da.scale, da.zp, db.q, db.scale, db.zp, ys_v, yz_v};
    f.outputs = q.outputs;
    f.attrs["relu"] = Attribute::Int(relu ? 1 : 0);
    for (int n : chain) drop[n] = 1;
    drop[qi] = 0;  // the fused node takes the QuantizeLinear's place: a and b exist by then
    g.nodes[qi] = std::move(f);
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

int FuseQdqMatMul(Graph& g, const OptimizerOptions& opts) {
  if (opts.level < 2 || opts.kernel.prefer_reference || !opts.cpu_only) return 0;
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t mi = 0; mi < g.nodes.size(); ++mi) {
    const Node& mm = g.nodes[mi];
    if (drop[mi] || !IsCpuOp(mm, "MatMul", 2, 2)) continue;
    // X: DequantizeLinear(x_q, xs[, xz]) with scalar constant parameters.
    ScalarDequant dx;
    if (!MatchScalarDequant(g, gu, mm.inputs[0], /*zp_required=*/false, &dx)) continue;
    // W: DequantizeLinear of a constant int8/uint8 [K, N], scale per tensor or per column
    // (axis 1, DequantizeLinear's default), the zero point of the scale's shape.
    const int wp = gu.Producer(mm.inputs[1]);
    if (wp < 0 || !IsCpuOp(g.nodes[wp], "DequantizeLinear", 2, 3) || g.nodes[wp].HasAttr("block_size")) continue;
    const Node& dqw = g.nodes[wp];
    const Tensor* wq = g.Constant(dqw.inputs[0]);
    if (!wq || !IsQ8(wq->dtype()) || wq->rank() != 2) continue;
    const int64_t N = wq->dim(1);
    const int ws_v = dqw.inputs[1], wz_v = OptionalInput(dqw, 2);
    const Tensor* ws = ScaleConst(g, ws_v, N);
    if (!ws || !ZeroPointOk(g, wz_v, wq->dtype(), N)) continue;
    if (ws->num_elements() > 1) {
      int64_t axis = dqw.GetInt("axis", 1);
      if (axis < 0) axis += 2;
      if (axis != 1) continue;
    }
    if (wz_v >= 0 && g.Constant(wz_v)->num_elements() != ws->num_elements()) continue;
    // An Add of a constant float [N] (the Linear's bias) reading `v` alone: the bias, or -1.
    auto bias_after = [&](int v, int* add_node) {
      const int ai = gu.SoleConsumer(v);
      if (ai < 0 || drop[ai] || !IsCpuOp(g.nodes[ai], "Add", 2, 2)) return -1;
      const Node& add = g.nodes[ai];
      const int other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
      const Tensor* b = g.Constant(other);
      if (other == v || !b || b->dtype() != DataType::kFloat || b->rank() != 1 || b->dim(0) != N) return -1;
      *add_node = ai;
      return other;
    };
    // A per-tensor QuantizeLinear -> DequantizeLinear pair (both with constant parameters and
    // a zero point) reading `v` alone: the DequantizeLinear's node, or -1.
    auto requant_after = [&](int v, int* q_node) {
      const int qi = gu.SoleConsumer(v);
      ScalarQuant sq;
      if (qi < 0 || drop[qi] || !MatchScalarQuantize(g, g.nodes[qi], /*zp_required=*/true, &sq)) return -1;
      const int qv = g.nodes[qi].outputs[0];
      const int di = gu.SoleConsumer(qv);
      ScalarDequant sd;
      if (di < 0 || drop[di] || !MatchScalarDequant(g, gu, g.nodes[di].outputs[0], /*zp_required=*/true, &sd) ||
          sd.q != qv || g.Constant(sd.zp)->dtype() != sq.type)
        return -1;
      *q_node = qi;
      return di;
    };
    // The Linear's bias joins the GEMM's store; so does a quantized output (QuantizeLinear ->
    // DequantizeLinear, then the bias), as a requantization in the store.
    int bias_v = -1, out_node = static_cast<int>(mi), q_node = -1, dq_node = -1, post_bias_v = -1;
    bias_v = bias_after(mm.outputs[0], &out_node);
    if (bias_v < 0 && (dq_node = requant_after(mm.outputs[0], &q_node)) >= 0) {
      out_node = dq_node;
      post_bias_v = bias_after(g.nodes[dq_node].outputs[0], &out_node);
    }
    Node f;
    f.name = mm.name;
    f.op_type = kQdqMatMulOp;
    f.domain = kInternalDomain;
    f.opset = 1;
    f.provider = mm.provider;
    f.inputs = {dx.q, dx.scale, dx.zp, dqw.inputs[0], ws_v, wz_v};
    if (bias_v >= 0) f.inputs.push_back(bias_v);
    if (dq_node >= 0) {
      const Node& q = g.nodes[q_node];
      const Node& dq = g.nodes[dq_node];
      f.inputs.insert(f.inputs.end(), {-1, q.inputs[1], q.inputs[2], dq.inputs[1], dq.inputs[2]});
      if (post_bias_v >= 0) f.inputs.push_back(post_bias_v);
    }
    f.outputs = g.nodes[out_node].outputs;
    if (!OptimizedKernelCovers(f, g, opts.kernel)) continue;
    // The fused node takes the last node's place: x_q exists by then.
    drop[mi] = 1;
    if (q_node >= 0) drop[q_node] = drop[dq_node] = 1;
    drop[out_node] = 0;
    g.nodes[out_node] = std::move(f);
    ++fused;
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

int FuseNhwcQConvAdd(Graph& g) {
  const GraphUses gu(g);
  std::vector<char> drop(g.nodes.size(), 0);
  int fused = 0;
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    const Node& add = g.nodes[qi];
    if (add.domain != kInternalDomain || add.op_type != kQdqAddOp || add.inputs.size() != 8 || add.outputs.size() != 1)
      continue;
    for (size_t side : {0, 3}) {
      const int v = add.inputs[side], other = add.inputs[3 - side];
      const int pi = gu.SoleConsumer(v) == static_cast<int>(qi) ? gu.Producer(v) : -1;
      if (pi < 0 || drop[pi]) continue;
      const Node& conv = g.nodes[pi];
      if (conv.domain != kInternalDomain || conv.op_type != kNhwcQLinearConvOp || conv.inputs.size() < 8 ||
          conv.inputs.size() > 9 || conv.outputs.size() != 1 || conv.GetInt("group", 1) != 1)
        continue;
      Node f = conv;
      f.inputs.resize(9, -1);  // the bias slot, absent or not
      f.inputs.insert(f.inputs.end(), {other, add.inputs[4 - side], add.inputs[5 - side], add.inputs[side + 1],
                                       add.inputs[side + 2], add.inputs[6], add.inputs[7]});
      f.outputs = add.outputs;
      f.attrs["residual_relu"] = Attribute::Int(add.GetInt("relu", 0));
      drop[pi] = 1;
      g.nodes[qi] = std::move(f);  // in the sum's place: the skip input exists by then
      ++fused;
      break;
    }
  }
  if (fused) RemoveDroppedNodes(g, drop);
  return fused;
}

int SinkDequantizeBelowMaxPool(Graph& g, const OptimizerOptions& opts) {
  if (opts.level < 2 || opts.kernel.prefer_reference || !opts.cpu_only) return 0;
  const GraphUses gu(g);
  int moved = 0;
  for (size_t pi = 0; pi < g.nodes.size(); ++pi) {
    Node& pool = g.nodes[pi];
    if (!pool.domain.empty() || pool.op_type != "MaxPool" || pool.provider != "cpu" || pool.inputs.size() != 1 ||
        pool.inputs[0] < 0 || pool.outputs.empty() || pool.outputs[0] < 0)
      continue;
    bool indices = false;
    for (size_t i = 1; i < pool.outputs.size(); ++i) indices = indices || pool.outputs[i] >= 0;
    const std::vector<int64_t> kernel = pool.GetInts("kernel_shape");
    if (indices || kernel.empty()) continue;
    bool windows_ok = true;
    for (int64_t d : pool.GetInts("dilations")) windows_ok = windows_ok && d == 1;
    const std::vector<int64_t> pads = pool.GetInts("pads");
    for (size_t i = 0; i < pads.size(); ++i) windows_ok = windows_ok && pads[i] < kernel[i % kernel.size()];
    if (!windows_ok || !gu.Intermediate(pool.inputs[0])) continue;
    ScalarDequant d;
    if (!MatchScalarDequant(g, gu, pool.inputs[0], /*zp_required=*/true, &d)) continue;
    const int q = d.q;
    // Only after a fused conv, whose NHWC region the byte pool joins; a lone NCHW pool of
    // bytes would run on the plain reference loops instead of the float kernels.
    const int qp = gu.Producer(q);
    if (qp < 0 || g.nodes[qp].op_type != "QLinearConv" || !g.nodes[qp].domain.empty()) continue;
    const int di = gu.Producer(pool.inputs[0]);
    // The pooled bytes: a new value of x_q's type and the pool output's shape.
    const int y = pool.outputs[0];
    std::string name = g.ValueName(y) + "/q";
    for (int k = 1; g.FindValue(name) >= 0; ++k) name = g.ValueName(y) + "/q_" + std::to_string(k);
    const int pq = g.AddValue(name);
    g.values[pq].type = g.values[y].type;
    g.values[pq].type.elem_type = g.values[q].type.elem_type;
    Node dq = g.nodes[di];  // DequantizeLinear(x_q, scale, zp) -> v
    Node mp = g.nodes[pi];  // MaxPool(v) -> y
    mp.inputs = {q};
    mp.outputs = {pq};
    dq.inputs[0] = pq;
    dq.outputs = {y};
    g.nodes[di] = std::move(mp);  // the pool runs where the DequantizeLinear ran (x_q exists)
    g.nodes[pi] = std::move(dq);
    ++moved;
  }
  return moved;
}

}  // namespace strata
