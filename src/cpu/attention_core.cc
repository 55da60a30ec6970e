#include "cpu/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata::cpu {
Result<KeyMask> ReadKeyMask(const Node& node, const Tensor* m, const char* what, int64_t batch, int64_t seq,
                            int64_t total, bool allow_starts) {
  KeyMask v;
  if (!m) return v;
  if (m->dtype() != DataType::kInt32)
    return InvalidArgument(node.Describe(), ": ", what, " must be int32, got ", DataTypeName(m->dtype()));
  v.data = m->data<int32_t>();
  const Shape& s = m->shape();
  if (s.size() == 1 && s[0] == batch) {
    v.kind = KeyMask::kEnds;
  } else if (allow_starts && s.size() == 1 && s[0] == 2 * batch) {
    v.kind = KeyMask::kEndsStarts;
  } else if (s.size() == 2 && s[0] == batch && s[1] == total) {
    v.kind = KeyMask::kRaw2D;
  } else if (s.size() == 3 && s[0] == batch && s[1] == seq && s[2] == total) {
    v.kind = KeyMask::kRaw3D;
  } else if (s.size() == 1 && s[0] == 3 * batch + 2) {
    return Unsupported(node.Describe(), ": ", what, " of shape [3 * batch + 2] is not supported on the CPU");
  } else if (s.size() == 4) {
    return Unsupported(node.Describe(), ": a 4-D ", what, " ", ShapeToString(s), " is not supported on the CPU");
  } else {
    return InvalidArgument(node.Describe(), ": ", what, " ", ShapeToString(s), " must be [", batch, "], ",
                           allow_starts ? "[" + std::to_string(2 * batch) + "], " : std::string(), "[", batch, ",",
                           total, "] or [", batch, ",", seq, ",", total, "] (batch ", batch, ", sequence ", seq,
                           ", total sequence ", total, ")");
  }
  if (v.kind == KeyMask::kEnds || v.kind == KeyMask::kEndsStarts)
    for (int64_t i = 0; i < s[0]; ++i)
      if (v.data[i] < 0) return InvalidArgument(node.Describe(), ": ", what, "[", i, "] = ", v.data[i], " is negative");
  return v;
}

namespace {
void MaskRow(const KeyMask& m, float mask_filter, bool unidirectional, int64_t b, int64_t batch, int64_t seq,
             int64_t past, int64_t i, int64_t total, float* row) {
  switch (m.kind) {
    case KeyMask::kNone:
      std::fill(row, row + total, 0.0f);
      break;
    case KeyMask::kEnds:
    case KeyMask::kEndsStarts: {
      const int64_t end = m.data[b];
      const int64_t start = m.kind == KeyMask::kEndsStarts ? std::min<int64_t>(m.data[batch + b], total) : 0;
      for (int64_t j = 0; j < total; ++j) row[j] = j < start || j >= end ? mask_filter : 0.0f;
      break;
    }
    case KeyMask::kRaw2D:
    case KeyMask::kRaw3D: {
      const int32_t* r = m.kind == KeyMask::kRaw2D ? m.data + b * total : m.data + (b * seq + i) * total;
      for (int64_t j = 0; j < total; ++j) row[j] = r[j] > 0 ? 0.0f : mask_filter;
      break;
    }
  }
  if (unidirectional && seq > 1)
    for (int64_t j = past + i + 1; j < total; ++j) row[j] = std::numeric_limits<float>::lowest();
}
}  // namespace

void MaskRows(const KeyMask& m, float mask_filter, bool unidirectional, int64_t b, int64_t batch, int64_t seq,
              int64_t past, int64_t total, float* rows) {
  for (int64_t i = 0; i < seq; ++i)
    MaskRow(m, mask_filter, unidirectional, b, batch, seq, past, i, total, rows + i * total);
}

Status CheckAttentionBias(const Node& node, const Tensor* ab, int64_t batch, int64_t heads, int64_t seq,
                          int64_t total) {
  if (!ab) return Status::Ok();
  if (ab->dtype() != DataType::kFloat || ab->rank() != 4 || (ab->dim(0) != batch && ab->dim(0) != 1) ||
      (ab->dim(1) != heads && ab->dim(1) != 1) || ab->dim(2) != seq || ab->dim(3) != total)
    return InvalidArgument(node.Describe(), ": attention_bias must be [", batch, " or 1, ", heads, " or 1, ", seq, ", ",
                           total, "] float32, got ", DataTypeName(ab->dtype()), " ", ShapeToString(ab->shape()));
  return Status::Ok();
}

const float* AttentionBiasHead(const Tensor& ab, int64_t b, int64_t n) {
  const int64_t bb = ab.dim(0) == 1 ? 0 : b, nn = ab.dim(1) == 1 ? 0 : n;
  return ab.data<float>() + (bb * ab.dim(1) + nn) * ab.dim(2) * ab.dim(3);
}

void RegisterRefAndSgemm(KernelRegistry& r, const char* op, MakeRefOrSgemm make) {
  KernelDef ref;
  ref.domain = "com.microsoft";
  ref.op_type = op;
  ref.type_input = -1;
  ref.factory = [make](const KernelInit& init) { return make(init, true); };
  r.Register(ref);
  KernelDef fast = ref;
  fast.factory = [make](const KernelInit& init) { return make(init, false); };
  fast.covers = [](const KernelInit&) { return sgemm::Available(); };
  fast.reference = false;
  fast.impl = "avx512";
  r.Register(std::move(fast));
}

void SoftmaxRowRef(float* row, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

// e^x / (e^sink + sum e^x), shifted by max(max x, sink) (one plain loop for both kernels:
// only GroupQueryAttention's smooth softmax and head sinks take it).
void SoftmaxRowWithSink(float* row, int64_t n, float sink) {
  float mx = sink;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  double sum = std::exp(static_cast<double>(sink) - mx);
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

bool AttendHead(const HeadAttention& h, float* scores, bool reference) {
  const int64_t S = h.seq, T = h.total;
  if (reference) {
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < T; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < h.hq; ++k) acc += h.q[i * h.ldq + k] * h.k[j * h.hq + k];
        scores[i * T + j] = h.scale * acc;
      }
  } else {
    sgemm::Epilogue ep;
    ep.alpha = h.scale;
    if (!sgemm::GemmUnpacked(S, T, h.hq, h.q, h.ldq, h.k, h.hq, true, scores, T, ep, nullptr).ok()) return false;
  }
  if (h.softcap > 0)
    for (int64_t e = 0; e < S * T; ++e) scores[e] = h.softcap * std::tanh(scores[e] / h.softcap);
  if (h.mask)
    for (int64_t e = 0; e < S * T; ++e) scores[e] += h.mask[e];
  if (h.bias) {
    const int64_t ld = h.ld_bias ? h.ld_bias : T;
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < T; ++j) scores[i * T + j] += h.bias[i * ld + j];
  }
  for (int64_t i = 0; i < S; ++i) {
    if (h.sink)
      SoftmaxRowWithSink(scores + i * T, T, *h.sink);
    else if (reference)
      SoftmaxRowRef(scores + i * T, T);
    else
      SoftmaxRowInPlace(scores + i * T, T);
  }
  if (reference) {
    for (int64_t i = 0; i < S; ++i)
      for (int64_t k = 0; k < h.hv; ++k) {
        float acc = 0;
        for (int64_t j = 0; j < T; ++j) acc += scores[i * T + j] * h.v[j * h.hv + k];
        h.out[i * h.ldo + k] = acc;
      }
    return true;
  }
  sgemm::Epilogue ep;
  return sgemm::GemmUnpacked(S, h.hv, T, scores, T, h.v, h.hv, false, h.out, h.ldo, ep, nullptr).ok();
}

}  // namespace strata::cpu
