// "ref": the reference accelerator provider. It implements the provider ABI with plain
// loops over host memory ("device memory" is malloc), so it runs anywhere and serves as
// the test oracle for the plugin path and as a template for real providers. It links
// nothing from strata: only include/strata/provider.h.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "../../../providers/common/node_copy.h"
#include "../../../providers/common/shape_util.h"
#include "strata/provider.h"

namespace {

using strata_provider_common::Broadcast;
using strata_provider_common::ShapeStr;

constexpr int32_t kFloat = 1;  // strata_dtype values
constexpr int32_t kInt64 = 7;

const strata_host_api* g_host = nullptr;

struct Error {
  std::string msg;
};

// ---- device memory: host heap ----
}  // namespace
struct strata_device_buffer {
  void* data;
  size_t size;
};
namespace {

// ---- runtime tensors ----
struct RTensor {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::shared_ptr<std::vector<float>> f;    // kFloat
  std::shared_ptr<std::vector<int64_t>> i;  // kInt64
  bool valid() const { return dtype != 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

RTensor NewFloat(std::vector<int64_t> shape) {
  RTensor t;
  t.dtype = kFloat;
  t.shape = std::move(shape);
  t.f = std::make_shared<std::vector<float>>(static_cast<size_t>(t.numel()), 0.0f);
  return t;
}

// ---- compiled form ----
// The node copy every strata provider uses (providers/common/node_copy.h).
using CNode = strata_provider_common::NodeCopy;

}  // namespace
struct strata_compiled_partition {
  std::vector<RTensor> constants;  // by value index; invalid where not constant
  std::vector<CNode> nodes;
  std::vector<int32_t> inputs, outputs;
  size_t value_count = 0;
};
namespace {

bool IsFloatOrUnknown(const strata_value_desc* v) { return v && (v->dtype == kFloat || v->dtype == 0); }

// Returns "" when supported, else the reason.
std::string WhyUnsupported(const strata_node_desc* n) {
  std::string op = n->op_type ? n->op_type : "";
  if (n->domain && n->domain[0] != '\0') return "domain '" + std::string(n->domain) + "' is not handled";
  auto in = [&](size_t i) { return strata_node_input(n, i); };
  auto float_inputs = [&](size_t count) {
    for (size_t k = 0; k < count && k < n->input_count; ++k)
      if (in(k) && !IsFloatOrUnknown(in(k))) return false;
    return true;
  };
  auto rank_is = [&](const strata_value_desc* v, int r) { return v && (v->rank < 0 || v->rank == r); };
  // The optimizer may fuse an activation into Conv/Gemm ("activation" attribute); this
  // provider does not implement fused activations, so it declines such nodes.
  if (!std::string(strata_node_attr_string(n, "activation", "")).empty()) return "fused activation is not handled";
  if (op == "Relu" || op == "Add" || op == "MatMul" || op == "Softmax" || op == "Flatten") {
    if (!float_inputs(2)) return "only float32 is handled";
    if (op == "MatMul" && (!in(0) || !in(1) || in(0)->rank == 1 || in(1)->rank == 1 || in(1)->rank > 2))
      return "MatMul needs A of rank >= 2 and B of rank 2";
    return "";
  }
  if (op == "Gemm") return float_inputs(3) ? "" : "only float32 is handled";
  if (op == "Reshape") {
    if (!float_inputs(1)) return "only float32 data is handled";
    if (!in(1) || (in(1)->dtype != kInt64 && in(1)->dtype != 0)) return "shape must be int64";
    if (strata_node_attr_int(n, "allowzero", 0) != 0) return "allowzero=1 is not handled";
    return "";
  }
  if (op == "Conv") {
    if (!float_inputs(3)) return "only float32 is handled";
    if (!rank_is(in(0), 4) || !in(1) || !rank_is(in(1), 4)) return "only 2-D convolution (rank 4) is handled";
    std::string pad = strata_node_attr_string(n, "auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return "auto_pad " + pad + " is not handled";
    return "";
  }
  if (op == "MaxPool") {
    if (!float_inputs(1)) return "only float32 is handled";
    if (!rank_is(in(0), 4)) return "only 2-D pooling (rank 4) is handled";
    if (n->output_count > 1 && n->outputs[1] >= 0) return "the Indices output is not handled";
    std::string pad = strata_node_attr_string(n, "auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return "auto_pad " + pad + " is not handled";
    if (strata_node_attr_int(n, "ceil_mode", 0) != 0) return "ceil_mode=1 is not handled";
    if (strata_node_attr_int(n, "storage_order", 0) != 0) return "storage_order=1 is not handled";
    return "";
  }
  return "op " + op + " is not handled";
}

// ---- kernels (float32, NCHW) ----
bool Need(const RTensor* t, const CNode& n, const char* what, Error* e) {
  if (t && t->valid() && t->dtype == kFloat) return true;
  e->msg = n.Who() + ": " + what + " is missing or not float32";
  return false;
}

// Element offset into `t` (right-aligned broadcast) for the multi-index of the output.
int64_t BroadcastOffset(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t off = 0;
  size_t skip = idx.size() - shape.size();
  for (size_t k = 0; k < shape.size(); ++k) off = off * shape[k] + (shape[k] == 1 ? 0 : idx[k + skip]);
  return off;
}

bool RunAdd(const CNode& n, const RTensor* a, const RTensor* b, RTensor* out, Error* e) {
  if (!Need(a, n, "input A", e) || !Need(b, n, "input B", e)) return false;
  std::vector<int64_t> shape;
  if (!Broadcast(a->shape, b->shape, &shape)) {
    e->msg = n.Who() + ": shapes " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape) + " do not broadcast";
    return false;
  }
  *out = NewFloat(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < out->numel(); ++k) {
    (*out->f)[k] = (*a->f)[BroadcastOffset(idx, a->shape)] + (*b->f)[BroadcastOffset(idx, b->shape)];
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return true;
}

bool RunGemm(const CNode& n, const RTensor* a, const RTensor* b, const RTensor* c, RTensor* out, Error* e) {
  if (!Need(a, n, "input A", e) || !Need(b, n, "input B", e)) return false;
  if (a->shape.size() != 2 || b->shape.size() != 2) {
    e->msg = n.Who() + ": A and B must be 2-D, got " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape);
    return false;
  }
  const bool ta = n.Int("transA", 0) != 0, tb = n.Int("transB", 0) != 0;
  const float alpha = n.Float("alpha", 1.0f), beta = n.Float("beta", 1.0f);
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != Kb) {
    e->msg = n.Who() + ": inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")";
    return false;
  }
  std::vector<int64_t> cshape;
  if (c && c->valid()) {
    if (!Need(c, n, "input C", e)) return false;
    if (c->shape.size() > 2 || !Broadcast(c->shape, {M, N}, &cshape) || cshape != std::vector<int64_t>{M, N}) {
      e->msg = n.Who() + ": C of shape " + ShapeStr(c->shape) + " does not broadcast to [" + std::to_string(M) + "," +
               std::to_string(N) + "]";
      return false;
    }
  }
  *out = NewFloat({M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        float av = ta ? (*a->f)[k * M + i] : (*a->f)[i * K + k];
        float bv = tb ? (*b->f)[j * K + k] : (*b->f)[k * N + j];
        s += static_cast<double>(av) * bv;
      }
      float v = alpha * static_cast<float>(s);
      if (c && c->valid()) v += beta * (*c->f)[BroadcastOffset({i, j}, c->shape)];
      (*out->f)[i * N + j] = v;
    }
  return true;
}

bool RunMatMul(const CNode& n, const RTensor* a, const RTensor* b, RTensor* out, Error* e) {
  if (!Need(a, n, "input A", e) || !Need(b, n, "input B", e)) return false;
  if (a->shape.size() < 2 || b->shape.size() != 2 || a->shape.back() != b->shape[0]) {
    e->msg = n.Who() + ": cannot multiply " + ShapeStr(a->shape) + " by " + ShapeStr(b->shape);
    return false;
  }
  const int64_t K = b->shape[0], N = b->shape[1];
  const int64_t rows = a->numel() / std::max<int64_t>(K, 1);
  std::vector<int64_t> shape = a->shape;
  shape.back() = N;
  *out = NewFloat(shape);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>((*a->f)[i * K + k]) * (*b->f)[k * N + j];
      (*out->f)[i * N + j] = static_cast<float>(s);
    }
  return true;
}

bool RunConv(const CNode& n, const RTensor* x, const RTensor* w, const RTensor* bias, RTensor* out, Error* e) {
  if (!Need(x, n, "input X", e) || !Need(w, n, "weight W", e)) return false;
  if (x->shape.size() != 4 || w->shape.size() != 4) {
    e->msg = n.Who() + ": only 2-D convolution is handled (X " + ShapeStr(x->shape) + ", W " + ShapeStr(w->shape) + ")";
    return false;
  }
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t M = w->shape[0], CG = w->shape[1], KH = w->shape[2], KW = w->shape[3];
  const int64_t group = n.Int("group", 1);
  if (group <= 0 || C != CG * group || M % group != 0) {
    e->msg = n.Who() + ": X has " + std::to_string(C) + " channels but W expects " + std::to_string(CG) + " x group " +
             std::to_string(group);
    return false;
  }
  std::vector<int64_t> st = n.Ints("strides"), dl = n.Ints("dilations"), pads = n.Ints("pads");
  if (st.empty()) st = {1, 1};
  if (dl.empty()) dl = {1, 1};
  if (pads.empty() || n.Str("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
  if (st.size() != 2 || dl.size() != 2 || pads.size() != 4 || st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0) {
    e->msg = n.Who() + ": strides, dilations and pads must have 2, 2 and 4 positive entries";
    return false;
  }
  const int64_t OH = (H + pads[0] + pads[2] - dl[0] * (KH - 1) - 1) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - dl[1] * (KW - 1) - 1) / st[1] + 1;
  if (OH <= 0 || OW <= 0) {
    e->msg = n.Who() + ": kernel larger than the padded input";
    return false;
  }
  if (bias && bias->valid() && (!Need(bias, n, "bias B", e) || bias->numel() != M)) {
    e->msg = n.Who() + ": bias must have " + std::to_string(M) + " elements";
    return false;
  }
  *out = NewFloat({N, M, OH, OW});
  const int64_t MG = M / group;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / MG;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = (bias && bias->valid()) ? (*bias->f)[m] : 0.0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * st[0] - pads[0] + kh * dl[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * st[1] - pads[1] + kw * dl[1];
                if (iw < 0 || iw >= W) continue;
                s += static_cast<double>((*x->f)[((b * C + g * CG + c) * H + ih) * W + iw]) *
                     (*w->f)[((m * CG + c) * KH + kh) * KW + kw];
              }
            }
          (*out->f)[((b * M + m) * OH + oh) * OW + ow] = static_cast<float>(s);
        }
    }
  return true;
}

bool RunMaxPool(const CNode& n, const RTensor* x, RTensor* out, Error* e) {
  if (!Need(x, n, "input X", e)) return false;
  if (x->shape.size() != 4) {
    e->msg = n.Who() + ": only 2-D pooling is handled, got X " + ShapeStr(x->shape);
    return false;
  }
  std::vector<int64_t> k = n.Ints("kernel_shape"), st = n.Ints("strides"), dl = n.Ints("dilations"),
                       pads = n.Ints("pads");
  if (st.empty()) st = {1, 1};
  if (dl.empty()) dl = {1, 1};
  if (pads.empty() || n.Str("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
  if (k.size() != 2 || st.size() != 2 || dl.size() != 2 || pads.size() != 4 || k[0] <= 0 || k[1] <= 0 || st[0] <= 0 ||
      st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0) {
    e->msg = n.Who() + ": kernel_shape, strides, dilations and pads must have 2, 2, 2 and 4 positive entries";
    return false;
  }
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t OH = (H + pads[0] + pads[2] - dl[0] * (k[0] - 1) - 1) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - dl[1] * (k[1] - 1) - 1) / st[1] + 1;
  if (OH <= 0 || OW <= 0) {
    e->msg = n.Who() + ": kernel larger than the padded input";
    return false;
  }
  *out = NewFloat({N, C, OH, OW});
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t kh = 0; kh < k[0]; ++kh) {
          const int64_t ih = oh * st[0] - pads[0] + kh * dl[0];
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            const int64_t iw = ow * st[1] - pads[1] + kw * dl[1];
            if (iw >= 0 && iw < W) m = std::max(m, (*x->f)[(p * H + ih) * W + iw]);
          }
        }
        (*out->f)[(p * OH + oh) * OW + ow] = m;
      }
  return true;
}

bool NormAxis(const CNode& n, int64_t axis, size_t rank, bool allow_rank, int64_t* out, Error* e) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis > (allow_rank ? r : r - 1)) {
    e->msg = n.Who() + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r);
    return false;
  }
  *out = axis < 0 ? axis + r : axis;
  return true;
}

bool RunSoftmax(const CNode& n, int opset, const RTensor* x, RTensor* out, Error* e) {
  if (!Need(x, n, "input", e)) return false;
  int64_t axis;
  if (!NormAxis(n, n.Int("axis", opset >= 13 ? -1 : 1), x->shape.size(), false, &axis, e)) return false;
  *out = NewFloat(x->shape);
  // opset < 13 flattens to [outer, inner] at axis; opset 13 normalises along one axis.
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x->shape.size()); ++d) {
    if (d < axis)
      outer *= x->shape[d];
    else if (d == axis || opset < 13)
      len *= x->shape[d];
    else
      inner *= x->shape[d];
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* src = x->f->data() + o * len * inner + i;
      float* dst = out->f->data() + o * len * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, src[k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) sum += dst[k * inner] = std::exp(src[k * inner] - mx);
      for (int64_t k = 0; k < len; ++k) dst[k * inner] = static_cast<float>(dst[k * inner] / sum);
    }
  return true;
}

bool RunReshape(const CNode& n, const RTensor* x, const RTensor* s, RTensor* out, Error* e) {
  if (!Need(x, n, "input data", e)) return false;
  if (!s || s->dtype != kInt64 || s->shape.size() != 1) {
    e->msg = n.Who() + ": shape must be a 1-D int64 tensor";
    return false;
  }
  std::vector<int64_t> shape(s->i->begin(), s->i->end());
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0) {
      if (k >= x->shape.size()) {
        e->msg = n.Who() + ": shape entry 0 at " + std::to_string(k) + " has no input dimension to copy";
        return false;
      }
      shape[k] = x->shape[k];
    }
    if (shape[k] == -1) {
      if (infer >= 0) {
        e->msg = n.Who() + ": more than one -1 in shape";
        return false;
      }
      infer = static_cast<int64_t>(k);
    } else if (shape[k] < 0) {
      e->msg = n.Who() + ": negative dimension in shape";
      return false;
    } else {
      known *= shape[k];
    }
  }
  if (infer >= 0) shape[infer] = known ? x->numel() / known : 0;
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total != x->numel()) {
    e->msg = n.Who() + ": cannot reshape " + ShapeStr(x->shape) + " to " + ShapeStr(shape);
    return false;
  }
  *out = *x;  // shares the data: the device keeps one copy
  out->shape = shape;
  return true;
}

bool RunFlatten(const CNode& n, const RTensor* x, RTensor* out, Error* e) {
  if (!Need(x, n, "input", e)) return false;
  int64_t axis;
  if (!NormAxis(n, n.Int("axis", 1), x->shape.size(), true, &axis, e)) return false;
  int64_t a = 1, b = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x->shape.size()); ++d) (d < axis ? a : b) *= x->shape[d];
  *out = *x;
  out->shape = {a, b};
  return true;
}

bool RunNode(const CNode& n, int opset, std::vector<RTensor>& vals, Error* e) {
  auto in = [&](size_t k) -> const RTensor* {
    if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
    return &vals[n.inputs[k]];
  };
  if (n.outputs.empty() || n.outputs[0] < 0) return true;  // nothing asked for
  RTensor out;
  bool ok = false;
  if (n.op == "Relu") {
    if (!Need(in(0), n, "input", e)) return false;
    out = NewFloat(in(0)->shape);
    for (size_t k = 0; k < out.f->size(); ++k) (*out.f)[k] = std::max(0.0f, (*in(0)->f)[k]);
    ok = true;
  } else if (n.op == "Add") {
    ok = RunAdd(n, in(0), in(1), &out, e);
  } else if (n.op == "Gemm") {
    ok = RunGemm(n, in(0), in(1), in(2), &out, e);
  } else if (n.op == "MatMul") {
    ok = RunMatMul(n, in(0), in(1), &out, e);
  } else if (n.op == "Conv") {
    ok = RunConv(n, in(0), in(1), in(2), &out, e);
  } else if (n.op == "MaxPool") {
    ok = RunMaxPool(n, in(0), &out, e);
  } else if (n.op == "Softmax") {
    ok = RunSoftmax(n, opset, in(0), &out, e);
  } else if (n.op == "Reshape") {
    ok = RunReshape(n, in(0), in(1), &out, e);
  } else if (n.op == "Flatten") {
    ok = RunFlatten(n, in(0), &out, e);
  } else {
    e->msg = n.Who() + ": op is not handled";
  }
  if (ok) vals[n.outputs[0]] = std::move(out);
  return ok;
}

int32_t Fail(strata_provider_error* err, int32_t code, const std::string& msg) {
  strata_provider_set_error(err, msg.c_str());
  return code;
}

// ---- ABI entry points ----
int32_t DeviceCount(void*, uint32_t* count, strata_provider_error*) {
  *count = 1;
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t DeviceInfo(void*, uint32_t index, strata_device_info* out, strata_provider_error* err) {
  if (index != 0) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "ref has one device (index 0)");
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  out->name = "strata reference device (host memory)";
  out->memory_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  out->compute_units = 1;
  out->driver_version = "";
  out->api_version = "strata provider ABI 1";
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t SupportsNode(void*, uint32_t, const strata_node_desc* node, int32_t* supported, strata_provider_error*) {
  *supported = WhyUnsupported(node).empty() ? 1 : 0;
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t Compile(void*, uint32_t, const strata_partition_desc* p, strata_compiled_partition** out,
                strata_provider_error* err) {
  try {
    // Options: only "precision" = "fp32" (this reference provider computes in fp32 and
    // refuses anything it cannot honour, as the ABI asks).
    for (size_t i = 0; i < strata_partition_option_count(p); ++i) {
      const std::string key = p->option_keys[i], value = p->option_values[i];
      if (key != "precision") return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "unknown option ref." + key);
      if (value != "fp32")
        return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                    "option ref.precision must be 'fp32' (the ref provider has no other), got '" + value + "'");
    }
    auto cp = std::make_unique<strata_compiled_partition>();
    cp->value_count = p->value_count;
    cp->constants.resize(p->value_count);
    for (size_t v = 0; v < p->value_count; ++v) {
      const strata_value_desc& d = p->values[v];
      if (!d.const_data) continue;
      RTensor t;
      t.dtype = d.dtype;
      t.shape.assign(d.dims, d.dims + std::max(d.rank, 0));
      const size_t n = static_cast<size_t>(t.numel());
      if (d.dtype == kFloat && d.const_bytes == n * sizeof(float)) {
        t.f = std::make_shared<std::vector<float>>(n);
        std::memcpy(t.f->data(), d.const_data, d.const_bytes);
      } else if (d.dtype == kInt64 && d.const_bytes == n * sizeof(int64_t)) {
        t.i = std::make_shared<std::vector<int64_t>>(n);
        std::memcpy(t.i->data(), d.const_data, d.const_bytes);
      } else {
        return Fail(err, STRATA_PROVIDER_RESULT_UNSUPPORTED,
                    std::string("constant '") + d.name + "' has an unsupported dtype or size");
      }
      cp->constants[v] = std::move(t);
    }
    for (size_t k = 0; k < p->node_count; ++k) {
      const strata_node_desc& nd = p->nodes[k];
      std::string why = WhyUnsupported(&nd);
      if (!why.empty())
        return Fail(err, STRATA_PROVIDER_RESULT_UNSUPPORTED, std::string(nd.op_type) + " '" + nd.name + "': " + why);
      CNode c;
      const std::string bad = strata_provider_common::CopyNode(nd, p->value_count, &c);
      if (!bad.empty()) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, c.Who() + ": " + bad);
      cp->nodes.push_back(std::move(c));
    }
    cp->inputs.assign(p->inputs, p->inputs + p->input_count);
    cp->outputs.assign(p->outputs, p->outputs + p->output_count);
    *out = cp.release();
    return STRATA_PROVIDER_RESULT_OK;
  } catch (const std::bad_alloc&) {
    return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of memory while compiling");
  }
}

void ReleasePartition(void*, strata_compiled_partition* p) { delete p; }

int32_t BufferAlloc(void*, uint32_t, size_t bytes, strata_device_buffer** out, strata_provider_error* err) {
  void* data = std::malloc(bytes ? bytes : 1);
  auto* b = static_cast<strata_device_buffer*>(std::malloc(sizeof(strata_device_buffer)));
  if (!data || !b) {
    std::free(data);
    std::free(b);
    return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
  b->data = data;
  b->size = bytes;
  *out = b;
  return STRATA_PROVIDER_RESULT_OK;
}

void BufferFree(void*, strata_device_buffer* b) {
  if (!b) return;
  std::free(b->data);
  std::free(b);
}

int32_t CopyToDevice(void*, strata_device_buffer* dst, size_t offset, const void* src, size_t bytes,
                     strata_provider_error* err) {
  if (!dst || offset > dst->size || bytes > dst->size - offset)
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_device out of the buffer's bounds");
  if (bytes) std::memcpy(static_cast<char*>(dst->data) + offset, src, bytes);
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t CopyToHost(void*, void* dst, const strata_device_buffer* src, size_t offset, size_t bytes,
                   strata_provider_error* err) {
  if (!src || offset > src->size || bytes > src->size - offset)
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_host out of the buffer's bounds");
  if (bytes) std::memcpy(dst, static_cast<const char*>(src->data) + offset, bytes);
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t Execute(void* self, strata_compiled_partition* p, const strata_device_tensor* inputs, size_t input_count,
                strata_device_tensor* outputs, size_t output_count, strata_provider_error* err) {
  if (!p) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no partition");
  if (input_count != p->inputs.size() || output_count != p->outputs.size())
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                "expected " + std::to_string(p->inputs.size()) + " inputs and " + std::to_string(p->outputs.size()) +
                    " outputs, got " + std::to_string(input_count) + " and " + std::to_string(output_count));
  try {
    std::vector<RTensor> vals = p->constants;  // shares the constant data
    for (size_t k = 0; k < input_count; ++k) {
      const strata_device_tensor& d = inputs[k];
      RTensor t;
      t.dtype = d.dtype;
      t.shape.assign(d.dims, d.dims + std::min<uint32_t>(d.rank, STRATA_PROVIDER_MAX_RANK));
      const size_t n = static_cast<size_t>(t.numel());
      const size_t esize = d.dtype == kFloat ? sizeof(float) : d.dtype == kInt64 ? sizeof(int64_t) : 0;
      if (esize == 0)
        return Fail(
            err, STRATA_PROVIDER_RESULT_UNSUPPORTED,
            "input " + std::to_string(k) + " has dtype " + std::to_string(d.dtype) + "; ref handles float32 and int64");
      if (n && (!d.buffer || d.byte_offset > d.buffer->size || n * esize > d.buffer->size - d.byte_offset))
        return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                    "input " + std::to_string(k) + " " + ShapeStr(t.shape) + " does not fit its buffer");
      const char* src = n ? static_cast<const char*>(d.buffer->data) + d.byte_offset : nullptr;
      if (d.dtype == kFloat) {
        t.f = std::make_shared<std::vector<float>>(n);
        if (n) std::memcpy(t.f->data(), src, n * esize);
      } else {
        t.i = std::make_shared<std::vector<int64_t>>(n);
        if (n) std::memcpy(t.i->data(), src, n * esize);
      }
      vals[p->inputs[k]] = std::move(t);
    }
    Error e;
    for (const CNode& n : p->nodes)
      if (!RunNode(n, static_cast<int>(n.opset), vals, &e)) return Fail(err, STRATA_PROVIDER_RESULT_ERROR, e.msg);
    for (size_t k = 0; k < output_count; ++k) {
      const RTensor& t = vals[p->outputs[k]];
      if (!t.valid() || t.shape.size() > STRATA_PROVIDER_MAX_RANK) {
        for (size_t j = 0; j < k; ++j) BufferFree(self, outputs[j].buffer);
        return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "output " + std::to_string(k) + " was not computed");
      }
      const size_t bytes = t.dtype == kFloat ? t.f->size() * sizeof(float) : t.i->size() * sizeof(int64_t);
      strata_device_buffer* b = nullptr;
      if (BufferAlloc(self, 0, bytes, &b, err) != STRATA_PROVIDER_RESULT_OK) {
        for (size_t j = 0; j < k; ++j) BufferFree(self, outputs[j].buffer);
        return STRATA_PROVIDER_RESULT_OUT_OF_MEMORY;
      }
      if (bytes) std::memcpy(b->data, t.dtype == kFloat ? static_cast<const void*>(t.f->data()) : t.i->data(), bytes);
      outputs[k].dtype = t.dtype;
      outputs[k].rank = static_cast<uint32_t>(t.shape.size());
      for (size_t d = 0; d < t.shape.size(); ++d) outputs[k].dims[d] = t.shape[d];
      outputs[k].buffer = b;
      outputs[k].byte_offset = 0;
    }
    return STRATA_PROVIDER_RESULT_OK;
  } catch (const std::bad_alloc&) {
    return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of memory while executing");
  }
}

int32_t Synchronize(void*, uint32_t, strata_provider_error*) { return STRATA_PROVIDER_RESULT_OK; }
void Shutdown(void*) { g_host = nullptr; }
int32_t HasCapability(void*, const char* name) { return name && std::strcmp(name, "reference") == 0; }

const strata_provider_api kApi = {sizeof(strata_provider_api),
                                  STRATA_PROVIDER_ABI_VERSION,
                                  nullptr,
                                  DeviceCount,
                                  DeviceInfo,
                                  SupportsNode,
                                  Compile,
                                  ReleasePartition,
                                  BufferAlloc,
                                  BufferFree,
                                  CopyToDevice,
                                  CopyToHost,
                                  Execute,
                                  Synchronize,
                                  Shutdown,
                                  HasCapability,
                                  /*get_extension=*/nullptr};

const strata_provider_probe_info kProbe = {
    sizeof(strata_provider_probe_info), STRATA_PROVIDER_ABI_VERSION, "ref", "reference-cpu", "1.0.0", "", "", ""};

}  // namespace

extern "C" __attribute__((visibility("default"))) const strata_provider_probe_info* strata_provider_probe(void) {
  return &kProbe;
}

extern "C" __attribute__((visibility("default"))) int32_t strata_provider_init(const strata_host_api* host,
                                                                               const strata_provider_api** out,
                                                                               strata_provider_error* err) {
  if (!host || host->struct_size < sizeof(uint32_t) * 2 || !out)
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "ref: bad host API table");
  g_host = host;
  *out = &kApi;
  return STRATA_PROVIDER_RESULT_OK;
}
