// Shared pieces of the ai.onnx.ml kernels (cpu/ml_tree.cc, cpu/ml_ops.cc): attribute
// enums and the score post-transforms.
//
// The ONNX-ML spec leaves several details open (the binary classifiers' second score
// column, the PROBIT formula, SOFTMAX_ZERO); strata follows ONNX Runtime's CPU kernels in
// each, since models converted by skl2onnx / onnxmltools are validated against it:
//  - PROBIT is sqrt(2) * erfinv(2p - 1) with the closed-form erfinv approximation of
//    Winitzki (a = 0.147) in float, as ONNX Runtime computes it (about 2e-3 relative error;
//    its constant 2 / (pi a) with pi rounded to float, as current ONNX Runtime has it);
//  - LOGISTIC is 1 / (1 + exp(-x)), computed on |x| so it never overflows;
//  - SOFTMAX_ZERO leaves exact zeros out of the softmax (they stay 0);
//  - WriteScores' binary case (one score) makes the two columns as the classifier's
//    `second_class` mode says (see there).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/ir.h"
#include "core/status.h"

namespace strata::ml {

enum class PostTransform { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };

// The node's post_transform attribute (default NONE); an unknown value is an error naming it.
inline Result<PostTransform> ParsePostTransform(const Node& node) {
  const std::string s = node.GetString("post_transform", "NONE");
  if (s == "NONE") return PostTransform::kNone;
  if (s == "LOGISTIC") return PostTransform::kLogistic;
  if (s == "SOFTMAX") return PostTransform::kSoftmax;
  if (s == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  if (s == "PROBIT") return PostTransform::kProbit;
  return InvalidArgument(node.Describe(), ": post_transform '", s,
                         "' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT");
}

inline float Logistic(float x) {
  const float v = 1.0f / (1.0f + std::exp(-std::abs(x)));
  return x < 0 ? 1.0f - v : v;
}

// Winitzki's closed-form inverse error function (a = 0.147).
inline float ErfInvApprox(float x) {
  const float sign = x < 0 ? -1.0f : 1.0f;
  const float ln = std::log((1.0f - x) * (1.0f + x));
  const float t = 2.0f / (static_cast<float>(3.14159265358979323846) * 0.147f) + 0.5f * ln;
  return sign * std::sqrt(-t + std::sqrt(t * t - ln / 0.147f));
}

inline float Probit(float p) { return 1.41421356f * ErfInvApprox(2.0f * p - 1.0f); }

inline void Softmax(float* v, size_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (v[i] = std::exp(v[i] - mx));
  for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

// Softmax over the nonzero entries (|v| > 1e-7); zeros stay zero.
inline void SoftmaxZero(float* v, size_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  const float scale_zero = std::exp(-mx);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i] > 1e-7f || v[i] < -1e-7f) {
      sum += (v[i] = std::exp(v[i] - mx));
    } else {
      v[i] *= scale_zero;
    }
  }
  for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

// How a classifier with a single score makes its two output columns (ONNX Runtime's
// convention): kNegFirst writes [1 - s, s], or with LOGISTIC [logistic(-s), logistic(s)] (as
// ONNX Runtime 1.30 does; older releases ignored LOGISTIC there); kMixedPositive/kMixedNegative (trees whose leaf
// weights have both signs; the winning class is the positive or the negative one) both write
// [-s, s] (LOGISTIC: [logistic(-s), logistic(s)]), as current ONNX Runtime does (older
// releases wrote [s, -s] for kMixedNegative); kNone leaves the single column.
enum class SecondClass { kNone, kNegFirst, kMixedPositive, kMixedNegative };

// Applies `pt` to `scores` and appends the second column of a one-score binary classifier
// (`second`), as ONNX Runtime's write_scores does: a transform applies to two or more
// scores; a single score gets PROBIT, or else the second-column rule (where LOGISTIC only
// applies in the mixed cases).
inline void TransformScores(std::vector<float>& scores, PostTransform pt, SecondClass second) {
  if (scores.size() >= 2) {
    switch (pt) {
      case PostTransform::kProbit:
        for (float& s : scores) s = Probit(s);
        break;
      case PostTransform::kLogistic:
        for (float& s : scores) s = Logistic(s);
        break;
      case PostTransform::kSoftmax:
        Softmax(scores.data(), scores.size());
        break;
      case PostTransform::kSoftmaxZero:
        SoftmaxZero(scores.data(), scores.size());
        break;
      case PostTransform::kNone:
        break;
    }
    return;
  }
  if (scores.size() != 1) return;
  const float s = scores[0];
  if (pt == PostTransform::kProbit) {
    scores[0] = Probit(s);
    return;
  }
  switch (second) {
    case SecondClass::kNone:
      break;
    case SecondClass::kNegFirst:
      scores = pt == PostTransform::kLogistic ? std::vector<float>{Logistic(-s), Logistic(s)}
                                              : std::vector<float>{1.0f - s, s};
      break;
    case SecondClass::kMixedPositive:
    case SecondClass::kMixedNegative:
      scores =
          pt == PostTransform::kLogistic ? std::vector<float>{Logistic(-s), Logistic(s)} : std::vector<float>{-s, s};
      break;
  }
}

}  // namespace strata::ml
