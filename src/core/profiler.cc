#include "core/profiler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "core/layout_pass.h"

namespace strata {

namespace {

thread_local Profiler* g_active_profiler = nullptr;

const Tensor* TensorAt(const std::vector<const Value*>& v, size_t i) {
  if (i >= v.size() || !v[i] || !v[i]->is_tensor()) return nullptr;
  return &v[i]->tensor();
}

const Tensor* OutTensor(const std::vector<Value>& v, size_t i) {
  if (i >= v.size() || !v[i].is_tensor()) return nullptr;
  return &v[i].tensor();
}

double Prod(const Shape& s, size_t from) {
  double p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= static_cast<double>(s[i]);
  return p;
}

// ONNX Runtime's contrib matmul and attention ops (2 ops per multiply-add): FusedMatMul as
// its product (K from B' after its transposes); Attention as its QKV projection plus Q K^T and
// P V over all keys (past included); MultiHeadAttention and GroupQueryAttention as those two
// products (GroupQueryAttention over the present cache's length: an upper bound for ragged
// batches). -1 for the rest.
double MsContribFlops(const Node& node, const std::vector<const Value*>& inputs, const std::vector<Value>& outputs) {
  const Tensor* y = OutTensor(outputs, 0);
  const Tensor* x = TensorAt(inputs, 0);
  if (!y || !x) return -1;
  const std::string& op = node.op_type;
  if (op == "FusedMatMul") {
    const Tensor* b = TensorAt(inputs, 1);
    if (!b || b->rank() < 1) return -1;
    const size_t r = b->rank();
    // B' = B with its transposes: K is its second-to-last dim (a vector B: its only one).
    int64_t k = b->dim(0);
    if (r >= 2) {
      const bool t = node.GetInt("transB", 0) != 0, tb = node.GetInt("transBatchB", 0) != 0;
      k = tb ? (t ? b->dim(r - 1) : b->dim(0)) : (t ? b->dim(r - 1) : b->dim(r - 2));
    }
    return 2.0 * static_cast<double>(y->num_elements()) * static_cast<double>(k);
  }
  if ((op != "Attention" && op != "MultiHeadAttention" && op != "GroupQueryAttention") || x->rank() != 3 ||
      y->rank() != 3)
    return -1;
  const double b = static_cast<double>(x->dim(0)), s = static_cast<double>(x->dim(1));
  const double dv = static_cast<double>(y->dim(2));
  if (op == "Attention") {
    const Tensor* w = TensorAt(inputs, 1);
    const Tensor* past = TensorAt(inputs, 4);
    if (!w || w->rank() != 2) return -1;
    const double dtot = static_cast<double>(w->dim(1)), dq = (dtot - dv) / 2;
    const double t = s + (past && past->rank() == 5 ? static_cast<double>(past->dim(3)) : 0.0);
    return 2.0 * b * s * static_cast<double>(x->dim(2)) * dtot + 2.0 * b * s * t * (dq + dv);
  }
  if (op == "MultiHeadAttention") {
    const Tensor* k = TensorAt(inputs, 1);
    const Tensor* past = TensorAt(inputs, 6);
    if (!k || (k->rank() != 3 && k->rank() != 4)) return -1;
    const double t = static_cast<double>(k->rank() == 3 ? k->dim(1) : k->dim(2)) +
                     (past && past->rank() == 4 ? static_cast<double>(past->dim(2)) : 0.0);
    return 2.0 * b * s * t * (static_cast<double>(x->dim(2)) + dv);
  }
  const Tensor* present = OutTensor(outputs, 1);
  if (!present || present->rank() != 4) return -1;
  return 2.0 * b * s * static_cast<double>(present->dim(2)) * 2.0 * dv;
}

}  // namespace

double NodeFlops(const Node& node, const std::vector<const Value*>& inputs, const std::vector<Value>& outputs) {
  // NhwcConv (the layout pass's Conv) keeps the OIHW weight, so Conv's count applies as is.
  bool nhwc_conv = node.domain == kInternalDomain && node.op_type == "NhwcConv";
  // The integer convs (ConvInteger, QLinearConv and its NHWC form) likewise, W being input 1
  // or 3, 2 ops per multiply-add.
  const bool int_conv = (node.domain.empty() && (node.op_type == "ConvInteger" || node.op_type == "QLinearConv")) ||
                        (node.domain == kInternalDomain && node.op_type == "NhwcQLinearConv");
  if (int_conv) {
    const Tensor* w = TensorAt(inputs, node.op_type == "ConvInteger" ? 1 : 3);
    const Tensor* y = OutTensor(outputs, 0);
    if (!w || !y || w->rank() < 2) return -1;
    return 2.0 * static_cast<double>(y->num_elements()) * Prod(w->shape(), 1);
  }
  // The transformer fusions' MatMul (bias/GELU/residual in its epilogue) counts as MatMul;
  // Attention as its two products, Q K^T and P V.
  // The integer MatMuls (MatMulInteger, QLinearMatMul and the fused int8 DynQuantMatMul and
  // QdqMatMul) count 2 ops per multiply-add as well.
  bool fused_matmul =
      node.domain == kInternalDomain &&
      (node.op_type == "FusedMatMul" || node.op_type == "DynQuantMatMul" || node.op_type == "QdqMatMul");
  if (node.domain == kInternalDomain && node.op_type == "Attention")
    return 4.0 * static_cast<double>(node.GetInt("batch", 0)) * static_cast<double>(node.GetInt("num_heads", 0)) *
           static_cast<double>(node.GetInt("q_len", 0)) * static_cast<double>(node.GetInt("kv_len", 0)) *
           static_cast<double>(node.GetInt("head_dim", 0));
  if (node.domain == kInternalDomain && node.op_type == "NhwcInvertedResidual") {
    // Its three convs: expand 1x1 over the input pixels (absent without input 1), then the
    // depthwise and project convs over the output pixels.
    const Tensor* x = TensorAt(inputs, 0);
    const Tensor* we = TensorAt(inputs, 1);
    const Tensor* wd = TensorAt(inputs, 3);
    const Tensor* wp = TensorAt(inputs, 5);
    const Tensor* y = OutTensor(outputs, 0);
    if (!x || !wd || !wp || !y || x->rank() != 4 || y->rank() != 4 || wd->rank() != 4 || wp->rank() != 4) return -1;
    const double out_px = Prod(y->shape(), 0) / static_cast<double>(y->dim(3));
    double f =
        2.0 * out_px * static_cast<double>(wd->dim(0)) * Prod(wd->shape(), 2) + 2.0 * out_px * Prod(wp->shape(), 0);
    if (we && we->rank() == 4) f += 2.0 * Prod(x->shape(), 0) / static_cast<double>(x->dim(3)) * Prod(we->shape(), 0);
    return f;
  }
  if (node.domain == "com.microsoft") return MsContribFlops(node, inputs, outputs);
  if (!node.domain.empty() && !nhwc_conv && !fused_matmul) return -1;
  const std::string& op = node.op_type;
  if (op == "Conv" || nhwc_conv) {
    // Every output element is a dot product over (C/group) x kernel window.
    const Tensor* w = TensorAt(inputs, 1);
    const Tensor* y = OutTensor(outputs, 0);
    if (!w || !y || w->rank() < 2) return -1;
    return 2.0 * static_cast<double>(y->num_elements()) * Prod(w->shape(), 1);
  }
  if (op == "ConvTranspose") {
    // Every input element scatters into (M/group) x kernel window outputs.
    const Tensor* x = TensorAt(inputs, 0);
    const Tensor* w = TensorAt(inputs, 1);
    if (!x || !w || w->rank() < 2) return -1;
    return 2.0 * static_cast<double>(x->num_elements()) * Prod(w->shape(), 1);
  }
  if (op == "Gemm") {
    const Tensor* a = TensorAt(inputs, 0);
    const Tensor* y = OutTensor(outputs, 0);
    if (!a || !y || a->rank() != 2) return -1;
    int64_t k = node.GetInt("transA", 0) ? a->dim(0) : a->dim(1);
    return 2.0 * static_cast<double>(y->num_elements()) * static_cast<double>(k);
  }
  if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul" || fused_matmul) {
    const Tensor* a = TensorAt(inputs, 0);
    const Tensor* y = OutTensor(outputs, 0);
    if (!a || !y || a->rank() < 1) return -1;
    return 2.0 * static_cast<double>(y->num_elements()) * static_cast<double>(a->shape().back());
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN") {
    // Input and recurrent projections dominate: W is [dirs, G*H, I], R is [dirs, G*H, H].
    const Tensor* x = TensorAt(inputs, 0);
    const Tensor* w = TensorAt(inputs, 1);
    const Tensor* r = TensorAt(inputs, 2);
    if (!x || !w || !r || x->rank() != 3 || w->rank() != 3 || r->rank() != 3 || x->dim(2) == 0) return -1;
    double steps = static_cast<double>(x->dim(0)) * static_cast<double>(x->dim(1));  // seq * batch
    double gh = static_cast<double>(w->dim(0)) * static_cast<double>(w->dim(1));     // dirs * G*H
    return 2.0 * steps * gh * static_cast<double>(w->dim(2) + r->dim(2));
  }
  return -1;
}

void Profiler::Record(const Node& node, const std::vector<const Value*>& inputs, const std::vector<Value>& outputs,
                      int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = index_.emplace(&node, nodes_.size());
  if (fresh) {
    NodeProfile p;
    p.name = node.name;
    p.op_type = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
    p.provider = node.provider;
    p.flops = NodeFlops(node, inputs, outputs);
    nodes_.push_back(std::move(p));
  }
  NodeProfile& p = nodes_[it->second];
  ++p.calls;
  p.total_ns += static_cast<double>(ns);
}

void Profiler::CountRun(int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++runs_;
  run_ns_ += static_cast<double>(ns);
}

std::vector<NodeProfile> Profiler::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_;
}

std::vector<OpTypeProfile> Profiler::ByOpType() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, OpTypeProfile> by;
  for (const NodeProfile& n : nodes_) {
    OpTypeProfile& o = by[n.op_type];
    o.op_type = n.op_type;
    ++o.nodes;
    o.calls += n.calls;
    o.total_ns += n.total_ns;
    if (n.flops >= 0) o.flops = std::max(0.0, o.flops) + n.flops * static_cast<double>(n.calls);
  }
  std::vector<OpTypeProfile> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTypeProfile& a, const OpTypeProfile& b) { return a.total_ns > b.total_ns; });
  return out;
}

int64_t Profiler::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

double Profiler::run_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_ns_;
}

void Profiler::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  index_.clear();
  nodes_.clear();
  runs_ = 0;
  run_ns_ = 0;
}

Profiler* ActiveProfiler() { return g_active_profiler; }

ScopedProfiling::ScopedProfiling(Profiler* p) : prev_(g_active_profiler) { g_active_profiler = p; }
ScopedProfiling::~ScopedProfiling() { g_active_profiler = prev_; }

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 100.0);
  double pos = q / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

LatencyStats Summarize(std::vector<double> samples) {
  LatencyStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(s.count);
  double var = 0;
  for (double x : samples) var += (x - s.mean) * (x - s.mean);
  s.stddev = s.count > 1 ? std::sqrt(var / static_cast<double>(s.count - 1)) : 0;
  s.min = samples.front();
  s.max = samples.back();
  s.median = Percentile(samples, 50);
  s.p10 = Percentile(samples, 10);
  s.p90 = Percentile(samples, 90);
  s.p99 = Percentile(samples, 99);
  return s;
}

Result<std::pair<std::string, Shape>> ParseShapeSpec(const std::string& spec) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return InvalidArgument("--shape expects NAME=D1xD2x... (e.g. input=1x3x224x224), got '", spec, "'");
  std::string name = spec.substr(0, eq);
  std::string dims = spec.substr(eq + 1);
  Shape shape;
  if (dims.empty()) return std::make_pair(name, shape);  // scalar
  size_t pos = 0;
  while (true) {
    size_t x = dims.find_first_of("xX", pos);
    std::string tok = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (tok.empty() || tok.size() > 12 || tok.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument("--shape '", spec, "': dimension '", tok, "' is not a positive integer",
                             // "1,3,224,224" (numpy's and ONNX Runtime's spelling) reads as one bad dim.
                             tok.find(',') != std::string::npos ? " (dims are separated by 'x': NAME=D1xD2x...)" : "");
    int64_t d = std::stoll(tok);
    if (d <= 0) return InvalidArgument("--shape '", spec, "': dimension ", d, " must be positive");
    shape.push_back(d);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return std::make_pair(name, shape);
}

Result<std::vector<Shape>> ResolveInputShapes(const std::vector<ValueInfo>& inputs,
                                              const std::vector<std::string>& specs) {
  std::vector<Shape> shapes(inputs.size());
  std::vector<bool> given(inputs.size(), false);
  for (const std::string& spec : specs) {
    ASSIGN_OR_RETURN(auto parsed, ParseShapeSpec(spec));
    size_t pos = inputs.size();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].name == parsed.first) pos = i;
    if (pos == inputs.size()) {
      std::string names;
      for (const auto& vi : inputs) names += (names.empty() ? "" : ", ") + vi.name;
      return InvalidArgument("--shape '", spec, "': '", parsed.first, "' is not an input of the model (inputs: ", names,
                             ")");
    }
    if (given[pos]) return InvalidArgument("--shape given twice for input '", parsed.first, "'");
    const TypeInfo& t = inputs[pos].type;
    if (t.has_shape) {
      if (parsed.second.size() != t.dims.size())
        return InvalidArgument("--shape '", spec, "': input '", parsed.first, "' has rank ", t.dims.size(), " (",
                               t.ToString(), "), got ", parsed.second.size(), " dims");
      for (size_t d = 0; d < t.dims.size(); ++d)
        if (t.dims[d].known() && t.dims[d].value != parsed.second[d])
          return InvalidArgument("--shape '", spec, "': dim ", d, " of input '", parsed.first, "' is fixed to ",
                                 t.dims[d].value, " by the model (", t.ToString(), "), got ", parsed.second[d]);
    }
    shapes[pos] = parsed.second;
    given[pos] = true;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (given[i]) continue;
    const TypeInfo& t = inputs[i].type;
    if (t.kind != TypeInfo::Kind::kTensor && t.kind != TypeInfo::Kind::kUnknown)
      return Unsupported("input '", inputs[i].name, "' is ", t.ToString(), ": bench feeds tensors only");
    if (!t.has_shape)
      return InvalidArgument("input '", inputs[i].name, "' has no declared shape: give it with --shape ",
                             inputs[i].name, "=D1xD2...");
    for (const Dim& d : t.dims) shapes[i].push_back(d.known() ? d.value : 1);
  }
  return shapes;
}

Status FillRandom(Tensor* t, uint32_t seed, int64_t int_high) {
  std::mt19937 rng(seed);
  const int64_t n = t->num_elements();
  if (int_high < 1) int_high = 1;
  auto uniform_int = [&]() { return static_cast<int64_t>(rng() % static_cast<uint64_t>(int_high)); };
  switch (t->dtype()) {
    case DataType::kFloat: {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      float* p = t->mutable_data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
      return Status::Ok();
    }
    case DataType::kDouble: {
      std::normal_distribution<double> dist(0.0, 1.0);
      double* p = t->mutable_data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
      return Status::Ok();
    }
    case DataType::kFloat16: {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      uint16_t* p = static_cast<uint16_t*>(t->raw_mutable_data());
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToHalf(dist(rng));
      return Status::Ok();
    }
    case DataType::kBFloat16: {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      uint16_t* p = static_cast<uint16_t*>(t->raw_mutable_data());
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToBFloat16(dist(rng));
      return Status::Ok();
    }
    case DataType::kBool: {
      bool* p = t->mutable_data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = (rng() & 1) != 0;
      return Status::Ok();
    }
    case DataType::kInt64: {
      int64_t* p = t->mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = uniform_int();
      return Status::Ok();
    }
    case DataType::kInt32: {
      int32_t* p = t->mutable_data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(uniform_int());
      return Status::Ok();
    }
    case DataType::kInt16:
    case DataType::kUInt16: {
      uint16_t* p = static_cast<uint16_t*>(t->raw_mutable_data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint16_t>(uniform_int());
      return Status::Ok();
    }
    case DataType::kUInt32: {
      uint32_t* p = t->mutable_data<uint32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(uniform_int());
      return Status::Ok();
    }
    case DataType::kUInt64: {
      uint64_t* p = t->mutable_data<uint64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint64_t>(uniform_int());
      return Status::Ok();
    }
    case DataType::kInt8:
    case DataType::kUInt8: {
      uint8_t* p = static_cast<uint8_t*>(t->raw_mutable_data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(uniform_int() & 0x7f);
      return Status::Ok();
    }
    default:
      return Unsupported("cannot generate random data of type ", DataTypeName(t->dtype()));
  }
}

}  // namespace strata
