#include "core/quantize_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace strata {

namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Float values of a float32 initializer, or a reason why it cannot be used.
Result<std::vector<float>> FloatValues(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::FLOAT) return Unsupported("weight is not float32");
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return Unsupported("weight uses external data");
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 40) / d)) return InvalidModel("weight has a bad shape");
    count *= d;
  }
  std::vector<float> v(static_cast<size_t>(count));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != v.size() * sizeof(float))
      return InvalidModel("weight raw_data holds ", t.raw_data().size(), " bytes, expected ", v.size() * 4);
    std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != count)
      return InvalidModel("weight float_data holds ", t.float_data_size(), " values, expected ", count);
    std::copy(t.float_data().begin(), t.float_data().end(), v.begin());
  }
  return v;
}

onnx::TensorProto MakeTensor(const std::string& name, onnx::TensorProto::DataType dt, const std::vector<int64_t>& dims,
                             const void* data, size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dt);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(data), bytes));
  return t;
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

onnx::NodeProto MakeNodeProto(const std::string& name, const std::string& op, std::vector<std::string> in,
                              std::vector<std::string> out) {
  onnx::NodeProto n;
  n.set_name(name);
  n.set_op_type(op);
  for (auto& i : in) n.add_input(std::move(i));
  for (auto& o : out) n.add_output(std::move(o));
  return n;
}

// W [K, N] (element (k, n) at w[n * K + k] when w_is_nk) as symmetric int8 in [-127, 127]:
// one scale max|W| / 127 per tensor, or per column n with per_channel (an all-zero range
// gets scale 1), values rounded half to even as numpy's rint in ONNX Runtime's quantizer.
Status QuantizeSymmetricInt8(const float* w, int64_t K, int64_t N, bool w_is_nk, bool per_channel,
                             std::vector<int8_t>* q, std::vector<float>* scales) {
  auto at = [&](int64_t k, int64_t n) { return w_is_nk ? w[n * K + k] : w[k * N + n]; };
  const int64_t groups = per_channel ? N : 1;
  scales->assign(static_cast<size_t>(groups), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const float v = at(k, n);
      if (!std::isfinite(v)) return InvalidArgument("weight holds a non-finite value at [", k, ", ", n, "]");
      float& s = (*scales)[per_channel ? n : 0];
      s = std::max(s, std::fabs(v));
    }
  for (float& s : *scales) s = s > 0 ? s / 127.0f : 1.0f;
  q->resize(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const float r = std::nearbyint(at(k, n) / (*scales)[per_channel ? n : 0]);
      (*q)[k * N + n] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
  return Status::Ok();
}

}  // namespace

Result<BlockQuantized> QuantizeBlockwise(const float* w, int64_t K, int64_t N, bool w_is_nk, int bits,
                                         int64_t block_size, bool symmetric) {
  if (bits != 4 && bits != 8) return InvalidArgument("bits must be 4 or 8, got ", bits);
  if (block_size < 16 || !IsPowerOfTwo(block_size))
    return InvalidArgument("block size must be a power of two >= 16, got ", block_size);
  if (K <= 0 || N <= 0) return InvalidArgument("weight must be non-empty, got K=", K, " N=", N);
  BlockQuantized q;
  const int64_t nb = (K + block_size - 1) / block_size, blob = block_size * bits / 8;
  const int64_t zp_row = (nb * bits + 7) / 8;
  const int qmax = (1 << bits) - 1, mid = 1 << (bits - 1);
  q.n_blocks = nb;
  q.b.assign(static_cast<size_t>(N * nb * blob), 0);
  q.scales.assign(static_cast<size_t>(N * nb), 0.0f);
  if (!symmetric) q.zero_points.assign(static_cast<size_t>(N * zp_row), 0);
  auto at = [&](int64_t k, int64_t n) { return w_is_nk ? w[n * K + k] : w[k * N + n]; };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int64_t k0 = blk * block_size, k1 = std::min(K, k0 + block_size);
      float lo = 0, hi = 0, extreme = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const float v = at(k, n);
        if (!std::isfinite(v)) return InvalidArgument("weight holds a non-finite value at [", k, ", ", n, "]");
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (std::fabs(v) > std::fabs(extreme)) extreme = v;
      }
      float scale;
      int zp;
      if (symmetric) {
        // As ONNX Runtime: the largest-magnitude value maps to code 0 (q - zp = -2^(bits-1)),
        // using the full signed range; the scale is negative when that value is positive.
        scale = extreme / static_cast<float>(-mid);
        zp = mid;
      } else {
        scale = (hi - lo) / static_cast<float>(qmax);
        zp = scale > 0 ? static_cast<int>(std::clamp(std::lround(-lo / scale), 0L, static_cast<long>(qmax))) : 0;
      }
      q.scales[n * nb + blk] = scale;
      if (!symmetric) {
        uint8_t& z = q.zero_points[n * zp_row + (bits == 8 ? blk : blk / 2)];
        z |= static_cast<uint8_t>(bits == 8 ? zp : (blk & 1 ? zp << 4 : zp));
      }
      uint8_t* out = q.b.data() + (n * nb + blk) * blob;
      for (int64_t i = 0; i < block_size; ++i) {
        int code = zp;  // padding past K dequantizes to 0
        if (k0 + i < k1 && scale != 0) {
          const long r = std::lround(at(k0 + i, n) / scale) + zp;
          code = static_cast<int>(std::clamp(r, 0L, static_cast<long>(qmax)));
        }
        if (bits == 8) {
          out[i] = static_cast<uint8_t>(code);
        } else {
          out[i / 2] |= static_cast<uint8_t>(i & 1 ? code << 4 : code);
        }
      }
    }
  }
  return q;
}

Result<QuantizeReport> QuantizeModelProto(onnx::ModelProto* model, const QuantizeOptions& opts) {
  if (opts.dynamic_int8) {
    int64_t opset = 0;
    for (const auto& op : model->opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
    if (opset < 11)
      return InvalidArgument("--dynamic-int8 needs opset >= 11 (DynamicQuantizeLinear); the model imports opset ",
                             opset);
  } else {
    if (opts.per_channel) return InvalidArgument("--per-channel goes with --dynamic-int8");
    if (opts.bits != 4 && opts.bits != 8) return InvalidArgument("--bits must be 4 or 8, got ", opts.bits);
    if (opts.block_size < 16 || !IsPowerOfTwo(opts.block_size))
      return InvalidArgument("--block-size must be a power of two >= 16, got ", opts.block_size);
    if (opts.accuracy_level < 0 || opts.accuracy_level > 4)
      return InvalidArgument("--accuracy-level must be in [0, 4], got ", opts.accuracy_level);
  }
  onnx::GraphProto* g = model->mutable_graph();
  QuantizeReport report;
  std::unordered_map<std::string, int> inits;
  std::set<std::string> names, graph_inputs;
  for (int i = 0; i < g->initializer_size(); ++i) {
    inits[g->initializer(i).name()] = i;
    names.insert(g->initializer(i).name());
  }
  for (const auto& in : g->input()) graph_inputs.insert(in.name());
  for (const auto& n : g->node())
    for (const auto& o : n.output()) names.insert(o);
  auto unique = [&](const std::string& base) {
    std::string s = base;
    for (int i = 1; names.count(s); ++i) s = base + "_" + std::to_string(i);
    names.insert(s);
    return s;
  };
  const std::set<std::string> exclude(opts.exclude.begin(), opts.exclude.end());

  // Candidates first, so progress can report a total.
  std::vector<int> todo;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (!onnx_domain || (n.op_type() != "MatMul" && n.op_type() != "Gemm")) continue;
    const std::string label = n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name();
    auto skip = [&](const std::string& why) {
      report.skipped.push_back(n.op_type() + " node '" + label + "': " + why);
    };
    if (exclude.count(n.name()) || (n.output_size() && exclude.count(n.output(0)))) {
      skip("excluded");
      continue;
    }
    if (n.input_size() < 2 || !inits.count(n.input(1)) || graph_inputs.count(n.input(1))) {
      skip("B is not a constant initializer");
      continue;
    }
    if (g->initializer(inits[n.input(1)]).dims_size() != 2) {
      skip("B is not 2-D");
      continue;
    }
    if (n.op_type() == "Gemm") {
      const auto* alpha = FindAttr(n, "alpha");
      const auto* ta = FindAttr(n, "transA");
      if (alpha && alpha->f() != 1.0f) {
        skip("alpha != 1");
        continue;
      }
      if (ta && ta->i() != 0) {
        skip("transA = 1");
        continue;
      }
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const auto it = inits.find(n.input(2));
        const auto* beta = FindAttr(n, "beta");
        const bool beta_zero = beta && beta->f() == 0.0f;
        if (!beta_zero && (it == inits.end() || graph_inputs.count(n.input(2)))) {
          skip("C is not a constant");
          continue;
        }
      }
    }
    todo.push_back(i);
  }

  std::set<std::string> replaced;
  size_t done = 0;
  // dynamic_int8: the nodes each quantized node becomes, and each input's quantized form.
  std::map<int, std::vector<onnx::NodeProto>> replacement;
  std::map<std::string, std::array<std::string, 3>> dql_of;
  for (int idx : todo) {
    onnx::NodeProto& n = *g->mutable_node(idx);
    const std::string label = n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name();
    const onnx::TensorProto& bt = g->initializer(inits[n.input(1)]);
    auto vals = FloatValues(bt);
    if (!vals.ok()) {
      report.skipped.push_back(n.op_type() + " node '" + label + "': " + vals.status().message());
      continue;
    }
    bool trans_b = false;
    std::vector<float> bias;
    if (n.op_type() == "Gemm") {
      const auto* tb = FindAttr(n, "transB");
      trans_b = tb && tb->i() != 0;
    }
    const int64_t K = trans_b ? bt.dims(1) : bt.dims(0), N = trans_b ? bt.dims(0) : bt.dims(1);
    if (n.op_type() == "Gemm" && n.input_size() > 2 && !n.input(2).empty()) {
      const auto* beta_attr = FindAttr(n, "beta");
      const float beta = beta_attr ? beta_attr->f() : 1.0f;
      if (beta != 0.0f) {
        const onnx::TensorProto& ct = g->initializer(inits[n.input(2)]);
        auto cv = FloatValues(ct);
        int64_t rows = 1;
        for (int i = 0; i + 1 < ct.dims_size(); ++i) rows *= ct.dims(i);
        const int64_t last = ct.dims_size() ? ct.dims(ct.dims_size() - 1) : 1;
        if (!cv.ok() || rows != 1 || (last != N && last != 1)) {
          report.skipped.push_back("Gemm node '" + label +
                                   "': C is not a float32 row vector of N=" + std::to_string(N) + " values");
          continue;
        }
        bias.resize(N);
        for (int64_t j = 0; j < N; ++j) bias[j] = beta * (*cv)[last == 1 ? 0 : j];
      }
    }
    if (opts.dynamic_int8) {
      std::vector<int8_t> wq;
      std::vector<float> ws;
      Status st = QuantizeSymmetricInt8(vals->data(), K, N, trans_b, opts.per_channel, &wq, &ws);
      if (!st.ok()) return MakeStatus(st.code(), n.op_type(), " node '", label, "': ", st.message());
      const std::string base = n.input(1);
      const std::string wq_name = unique(base + "_quantized"), ws_name = unique(base + "_scale"),
                        wz_name = unique(base + "_zero_point");
      const int8_t zero = 0;
      *g->add_initializer() = MakeTensor(wq_name, onnx::TensorProto::INT8, {K, N}, wq.data(), wq.size());
      *g->add_initializer() =
          MakeTensor(ws_name, onnx::TensorProto::FLOAT,
                     opts.per_channel ? std::vector<int64_t>{N} : std::vector<int64_t>{}, ws.data(), ws.size() * 4);
      *g->add_initializer() = MakeTensor(wz_name, onnx::TensorProto::INT8, {}, &zero, 1);
      std::vector<onnx::NodeProto>& out = replacement[idx];
      // One DynamicQuantizeLinear per input, shared by every MatMul reading it (as ORT does).
      const std::string a = n.input(0);
      auto dq = dql_of.find(a);
      if (dq == dql_of.end()) {
        const std::array<std::string, 3> names{unique(a + "_quantized"), unique(a + "_scale"),
                                               unique(a + "_zero_point")};
        out.push_back(MakeNodeProto(unique(a + "_DynamicQuantizeLinear"), "DynamicQuantizeLinear", {a},
                                    {names[0], names[1], names[2]}));
        dq = dql_of.emplace(a, names).first;
      }
      const auto& [aq, as, az] = dq->second;
      const std::string acc = unique(label + "_MatMulInteger_output"), accf = unique(label + "_cast_output"),
                        scale = unique(label + "_scales"),
                        prod = bias.empty() ? n.output(0) : unique(label + "_mul_output");
      out.push_back(
          MakeNodeProto(unique(label + "_MatMulInteger"), "MatMulInteger", {aq, wq_name, az, wz_name}, {acc}));
      out.push_back(MakeNodeProto(unique(label + "_cast"), "Cast", {acc}, {accf}));
      SetInt(&out.back(), "to", onnx::TensorProto::FLOAT);
      out.push_back(MakeNodeProto(unique(label + "_scales_mul"), "Mul", {as, ws_name}, {scale}));
      out.push_back(MakeNodeProto(unique(label + "_output_scale_mul"), "Mul", {accf, scale}, {prod}));
      if (!bias.empty()) {
        const std::string bias_name = unique(base + "_bias");
        *g->add_initializer() = MakeTensor(bias_name, onnx::TensorProto::FLOAT, {N}, bias.data(), bias.size() * 4);
        out.push_back(MakeNodeProto(unique(label + "_bias_add"), "Add", {prod, bias_name}, {n.output(0)}));
      }
      report.weight_bytes_before += static_cast<size_t>(K * N * 4) + bias.size() * 4;
      report.weight_bytes_after += wq.size() + ws.size() * 4 + 1 + bias.size() * 4;
      replaced.insert(n.input(1));
      if (n.op_type() == "Gemm" && n.input_size() > 2 && !n.input(2).empty()) replaced.insert(n.input(2));
      ++report.quantized;
      if (opts.progress) opts.progress(++done, todo.size());
      continue;
    }
    auto q = QuantizeBlockwise(vals->data(), K, N, trans_b, opts.bits, opts.block_size, opts.symmetric);
    if (!q.ok()) return MakeStatus(q.status().code(), n.op_type(), " node '", label, "': ", q.status().message());
    const std::string base = n.input(1);
    const std::string b_name = unique(base + "_Q" + std::to_string(opts.bits));
    const std::string s_name = unique(base + "_scales");
    *g->add_initializer() = MakeTensor(b_name, onnx::TensorProto::UINT8,
                                       {N, q->n_blocks, opts.block_size * opts.bits / 8}, q->b.data(), q->b.size());
    *g->add_initializer() =
        MakeTensor(s_name, onnx::TensorProto::FLOAT, {N * q->n_blocks}, q->scales.data(), q->scales.size() * 4);
    std::string zp_name, bias_name;
    if (!q->zero_points.empty()) {
      zp_name = unique(base + "_zero_points");
      *g->add_initializer() =
          MakeTensor(zp_name, onnx::TensorProto::UINT8, {static_cast<int64_t>(q->zero_points.size())},
                     q->zero_points.data(), q->zero_points.size());
    }
    if (!bias.empty()) {
      bias_name = unique(base + "_bias");
      *g->add_initializer() = MakeTensor(bias_name, onnx::TensorProto::FLOAT, {N}, bias.data(), bias.size() * 4);
    }
    report.weight_bytes_before += static_cast<size_t>(K * N * 4) + bias.size() * 4;
    report.weight_bytes_after += q->b.size() + q->scales.size() * 4 + q->zero_points.size() + bias.size() * 4;
    replaced.insert(n.input(1));
    if (n.op_type() == "Gemm" && n.input_size() > 2 && !n.input(2).empty()) replaced.insert(n.input(2));

    onnx::NodeProto nn;
    nn.set_name(n.name().empty() ? unique(label + "_MatMulNBits") : n.name());
    nn.set_op_type("MatMulNBits");
    nn.set_domain("com.microsoft");
    nn.add_input(n.input(0));
    nn.add_input(b_name);
    nn.add_input(s_name);
    if (!zp_name.empty() || !bias_name.empty()) nn.add_input(zp_name);
    if (!bias_name.empty()) {
      nn.add_input("");  // g_idx
      nn.add_input(bias_name);
    }
    for (const auto& o : n.output()) nn.add_output(o);
    SetInt(&nn, "K", K);
    SetInt(&nn, "N", N);
    SetInt(&nn, "bits", opts.bits);
    SetInt(&nn, "block_size", opts.block_size);
    SetInt(&nn, "accuracy_level", opts.accuracy_level);
    n = std::move(nn);
    ++report.quantized;
    if (opts.progress) opts.progress(++done, todo.size());
  }

  if (!replacement.empty()) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g->node_size(); ++i) {
      auto it = replacement.find(i);
      if (it == replacement.end()) {
        *nodes.Add() = g->node(i);
      } else {
        for (auto& r : it->second) *nodes.Add() = std::move(r);
      }
    }
    g->mutable_node()->Swap(&nodes);
  }
  // Drop replaced float weights nothing else reads any more.
  std::set<std::string> used;
  for (const auto& n : g->node())
    for (const auto& i : n.input()) used.insert(i);
  for (const auto& o : g->output()) used.insert(o.name());
  auto* list = g->mutable_initializer();
  list->erase(std::remove_if(list->begin(), list->end(),
                             [&](const onnx::TensorProto& t) {
                               return replaced.count(t.name()) && !used.count(t.name()) &&
                                      !graph_inputs.count(t.name());
                             }),
              list->end());
  if (report.quantized > 0 && !opts.dynamic_int8) {
    bool has = false;
    for (const auto& op : model->opset_import()) has = has || op.domain() == "com.microsoft";
    if (!has) {
      auto* op = model->add_opset_import();
      op->set_domain("com.microsoft");
      op->set_version(1);
    }
  }
  return report;
}

Result<QuantizeReport> QuantizeModelBytes(const std::string& in, std::string* out, const QuantizeOptions& opts) {
  onnx::ModelProto m;
  if (!m.ParseFromString(in)) return InvalidModel("the input is not a valid ONNX model (protobuf parse failed)");
  ASSIGN_OR_RETURN(QuantizeReport r, QuantizeModelProto(&m, opts));
  if (!m.SerializeToString(out)) return InternalError("serializing the quantized model failed (over 2 GiB?)");
  return r;
}

}  // namespace strata
