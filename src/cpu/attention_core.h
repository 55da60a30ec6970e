// One attention head, shared by the com.microsoft Attention and MultiHeadAttention kernels
// (attention_contrib.cc, mha_contrib.cc):
//   scores[S, T] += scale * Q K^T (+ bias[S, T]); softmax over T; out[S, hv] = scores V.
// The caller fills `scores` first with its additive mask (0, mask_filter_value, lowest),
// so masks of any form meet the same core.
#pragma once

#include <cstdint>

namespace strata::cpu {

struct HeadAttention {
  const float* q = nullptr;  // [S, hq], row stride ldq
  int64_t ldq = 0;
  const float* k = nullptr;  // [T, hq], dense
  const float* v = nullptr;  // [T, hv], dense
  float* out = nullptr;      // [S, hv], row stride ldo
  int64_t ldo = 0;
  int64_t seq = 0, total = 0, hq = 0, hv = 0;
  float scale = 1.0f;
  const float* bias = nullptr;  // [S, T] added to the scores before the softmax, or null
};

// The reference softmax of one row in place: max-shifted exp, double sum (the test oracle's;
// also strata.internal MaskedSoftmax's reference, attention.cc).
void SoftmaxRowRef(float* row, int64_t n);

// reference: plain loops (the test oracle; double sums in the softmax); otherwise the
// AVX-512 SGEMM and the vectorised softmax row (callers check sgemm::Available()). Runs
// on the calling thread. False only if an SGEMM call failed (it cannot for valid sizes).
bool AttendHead(const HeadAttention& h, float* scores, bool reference);

}  // namespace strata::cpu
