#include "cpu/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata::cpu {
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

bool AttendHead(const HeadAttention& h, float* scores, bool reference) {
  const int64_t S = h.seq, T = h.total;
  if (reference) {
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < T; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < h.hq; ++k) acc += h.q[i * h.ldq + k] * h.k[j * h.hq + k];
        scores[i * T + j] += h.scale * acc;
      }
  } else {
    sgemm::Epilogue ep;
    ep.accumulate = true;
    ep.alpha = h.scale;
    if (!sgemm::GemmUnpacked(S, T, h.hq, h.q, h.ldq, h.k, h.hq, true, scores, T, ep, nullptr).ok()) return false;
  }
  if (h.bias)
    for (int64_t e = 0; e < S * T; ++e) scores[e] += h.bias[e];
  for (int64_t i = 0; i < S; ++i) {
    if (reference)
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
