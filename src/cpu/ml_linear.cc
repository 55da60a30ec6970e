// ai.onnx.ml linear models and support vector machines: LinearClassifier, LinearRegressor,
// SVMClassifier and SVMRegressor (all opset 1).
//
// Where the ONNX-ML spec is open (the columns of a one-score binary classifier, which label it
// picks, how an SVM's pairwise scores become class probabilities, which transforms apply to a
// single score), these kernels follow ONNX Runtime's CPU kernels, quirks included: converted
// models (skl2onnx, onnxmltools) are validated against it. Scores are float as there; dot
// products accumulate in double and round once (ONNX Runtime's SGEMM rounds along the way, so
// the last bit may differ). Malformed attributes that ONNX Runtime reads out of bounds are errors.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "cpu/ml_common.h"
#include "cpu/ml_kernels.h"

namespace strata {
namespace {

using ml::AsFloats;
using ml::FloatRowsAndCols;
using ml::PostTransform;
using ml::RequireInput;
using ml::RowsAndCols;
using ml::RowsCols;

// Runs run(begin, end) over `rows`, on the pool when there is enough work per row to pay.
template <typename F>
void ForRows(KernelContext& ctx, int64_t rows, int64_t work_per_row, F&& run) {
  ThreadPool* pool = ctx.pool();
  if (pool && pool->num_threads() > 1 && rows > 1) {
    pool->ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_row)), run);
  } else {
    run(0, rows);
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(acc);
}

// Index of the first largest value (std::max_element's choice).
template <typename T>
int64_t ArgMax(const T* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[best] < v[i]) best = i;
  return best;
}

// The class-label attributes of the classifiers: strings when classlabels_strings is non-empty
// (as ONNX Runtime decides), else classlabels_ints.
struct ClassLabels {
  bool strings = false;
  std::vector<std::string> s;
  std::vector<int64_t> i;

  void Read(const Node& node) {
    s = node.GetStrings("classlabels_strings");
    i = node.GetInts("classlabels_ints");
    strings = !s.empty();
  }
  size_t size() const { return strings ? s.size() : i.size(); }
  DataType dtype() const { return strings ? DataType::kString : DataType::kInt64; }
  void Write(Tensor* y, int64_t row, size_t label) const {
    if (strings) {
      y->mutable_data<std::string>()[row] = s[label];
    } else {
      y->mutable_data<int64_t>()[row] = i[label];
    }
  }
};

// ---------------------------------------------------------------------------------------------
// LinearClassifier: scores = X * coefficients^T + intercepts, one row of coefficients per class.

class LinearClassifierKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const Attribute* c = node.FindAttr("coefficients");
    if (!c || c->type != Attribute::Type::kFloats || c->floats.empty())
      return InvalidArgument(node.Describe(), ": coefficients is required (a non-empty list of floats)");
    coef_ = c->floats;
    intercepts_ = node.GetFloats("intercepts");
    // ONNX Runtime takes the class count from intercepts.
    if (intercepts_.empty())
      return InvalidArgument(node.Describe(), ": intercepts is empty; it must hold one value per class");
    classes_ = static_cast<int64_t>(intercepts_.size());
    if (coef_.size() % intercepts_.size() != 0)
      return InvalidArgument(node.Describe(), ": coefficients has ", coef_.size(), " values, not a multiple of the ",
                             classes_, " classes that intercepts gives");
    labels_.Read(node);
    if (!labels_.s.empty() && !labels_.i.empty())
      return InvalidArgument(node.Describe(), ": only one of classlabels_strings, classlabels_ints may be given");
    if (classes_ >= 2 && labels_.size() < intercepts_.size())
      return InvalidArgument(node.Describe(), ": ", classes_, " classes (intercepts) but ", labels_.size(),
                             " class labels (classlabels_strings / classlabels_ints)");
    // One score: no labels (1 / 0) or exactly two, and then a first column is added.
    if (classes_ == 1 && labels_.size() != 0 && labels_.size() != 2)
      return InvalidArgument(node.Describe(), ": one score (binary) needs 0 or 2 class labels, got ", labels_.size());
    add_second_ = classes_ == 1 && labels_.size() == 2;
    // multi_class is read by ONNX Runtime but changes nothing; it is accepted and ignored here too.
    ASSIGN_OR_RETURN(pt_, ml::ParsePostTransform(node));
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    ASSIGN_OR_RETURN(RowsCols rc, RowsAndCols(node, *x));
    // As ONNX Runtime: class c's coefficients start at c * features (the input's), so extra
    // coefficients are ignored and too few are an error.
    const int64_t f = rc.cols;
    RETURN_IF_ERROR(ml::CheckCoefficientRows(node, f, coef_.size(), classes_, "classes"));
    std::vector<float> buf;
    ASSIGN_OR_RETURN(const float* xd, AsFloats(node, *x, buf));
    const int64_t rows = rc.rows;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, labels_.dtype(), Shape{rows}));
    float* z = nullptr;
    const int64_t zcols = add_second_ ? 2 : classes_;
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ASSIGN_OR_RETURN(Tensor * zt, ctx.AllocateOutput(1, DataType::kFloat, Shape{rows, zcols}));
      z = zt->mutable_data<float>();
    }
    // PROBIT with an added first column: ONNX Runtime transforms the N packed scores in place
    // and never expands them, so Z holds probit(score) of row i at flat index i and its second
    // half is never written (uninitialised there; zeros here).
    const bool probit_packed = add_second_ && pt_ == PostTransform::kProbit;
    if (z && probit_packed) std::fill(z, z + rows * 2, 0.0f);

    auto run = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(static_cast<size_t>(classes_));
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = xd + r * f;
        for (int64_t c = 0; c < classes_; ++c) scores[c] = Dot(xr, coef_.data() + c * f, f) + intercepts_[c];
        if (classes_ == 1) {
          // The label is the raw score's sign: the second label (or 1) when positive.
          const size_t pos = scores[0] > 0 ? 1 : 0;
          if (add_second_) {
            labels_.Write(y, r, pos);
          } else {
            y->mutable_data<int64_t>()[r] = static_cast<int64_t>(pos);
          }
        } else {
          labels_.Write(y, r, static_cast<size_t>(ArgMax(scores.data(), classes_)));
        }
        if (!z) continue;
        if (classes_ == 1) {
          const float s = scores[0];
          if (probit_packed) {
            z[r] = ml::Probit(s);
          } else if (add_second_ && pt_ == PostTransform::kLogistic) {
            z[2 * r] = ml::Logistic(-s);
            z[2 * r + 1] = ml::Logistic(s);
          } else if (add_second_) {
            // [1 - s, s]: SOFTMAX and SOFTMAX_ZERO are not applied to one score.
            z[2 * r] = 1.0f - s;
            z[2 * r + 1] = s;
          } else {
            // Without labels the single column gets PROBIT only.
            z[r] = pt_ == PostTransform::kProbit ? ml::Probit(s) : s;
          }
        } else {
          ml::TransformScores(scores, pt_, ml::SecondClass::kNone);
          std::copy(scores.begin(), scores.end(), z + r * classes_);
        }
      }
    };
    ForRows(ctx, rows, f * classes_, run);
    return Status::Ok();
  }

 private:
  std::vector<float> coef_, intercepts_;
  int64_t classes_ = 0;
  ClassLabels labels_;
  bool add_second_ = false;
  PostTransform pt_ = PostTransform::kNone;
};

// ---------------------------------------------------------------------------------------------
// LinearRegressor: Y = X * coefficients^T + intercepts, [N, targets].

class LinearRegressorKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const Attribute* c = node.FindAttr("coefficients");
    if (!c || c->type != Attribute::Type::kFloats || c->floats.empty())
      return InvalidArgument(node.Describe(), ": coefficients is required (a non-empty list of floats)");
    coef_ = c->floats;
    targets_ = node.GetInt("targets", 1);
    if (targets_ < 1) return InvalidArgument(node.Describe(), ": targets must be at least 1, got ", targets_);
    // ONNX Runtime uses intercepts only when there is one per target and ignores them otherwise.
    intercepts_ = node.GetFloats("intercepts");
    if (intercepts_.size() != static_cast<uint64_t>(targets_)) intercepts_.clear();
    ASSIGN_OR_RETURN(pt_, ml::ParsePostTransform(node));
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    ASSIGN_OR_RETURN(RowsCols rc, FloatRowsAndCols(node, *x));
    // Target t's coefficients start at t * features (the input's); extra ones are ignored.
    const int64_t f = rc.cols;
    RETURN_IF_ERROR(ml::CheckCoefficientRows(node, f, coef_.size(), targets_, "targets"));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, Shape{rc.rows, targets_}));
    const float* xd = x->data<float>();
    float* yd = y->mutable_data<float>();
    std::vector<float> s(static_cast<size_t>(targets_));
    for (int64_t r = 0; r < rc.rows; ++r) {
      for (int64_t t = 0; t < targets_; ++t) {
        s[t] = Dot(xd + r * f, coef_.data() + t * f, f);
        if (!intercepts_.empty()) s[t] += intercepts_[t];
      }
      // One target gets PROBIT only (ONNX Runtime's rule for a single score); more get any transform.
      ml::TransformScores(s, pt_, ml::SecondClass::kNone);
      std::copy(s.begin(), s.end(), yd + r * targets_);
    }
    return Status::Ok();
  }

 private:
  std::vector<float> coef_, intercepts_;
  int64_t targets_ = 1;
  PostTransform pt_ = PostTransform::kNone;
};

// ---------------------------------------------------------------------------------------------
// SVM kernels (kernel_type and kernel_params = [gamma, coef0, degree]).

enum class SvmKernel { kLinear, kPoly, kRbf, kSigmoid };

struct SvmParams {
  SvmKernel kernel = SvmKernel::kLinear;
  float gamma = 0, coef0 = 0, degree = 0;

  Status Parse(const Node& node) {
    const std::string k = node.GetString("kernel_type", "LINEAR");
    if (k == "LINEAR") {
      kernel = SvmKernel::kLinear;
    } else if (k == "POLY") {
      kernel = SvmKernel::kPoly;
    } else if (k == "RBF") {
      kernel = SvmKernel::kRbf;
    } else if (k == "SIGMOID") {
      kernel = SvmKernel::kSigmoid;
    } else {
      return InvalidArgument(node.Describe(), ": kernel_type '", k, "' is not one of LINEAR, POLY, RBF, SIGMOID");
    }
    const std::vector<float> p = node.GetFloats("kernel_params");
    if (!p.empty()) {
      if (p.size() != 3)
        return InvalidArgument(node.Describe(), ": kernel_params must be empty or hold [gamma, coef0, degree], got ",
                               p.size(), " values");
      gamma = p[0];
      coef0 = p[1];
      degree = p[2];
    }
    return Status::Ok();
  }

  // The kernel of input row x and support vector v (n features each), in float as ONNX
  // Runtime computes it: POLY (gamma x.v + coef0)^degree, SIGMOID tanh(gamma x.v + coef0),
  // RBF exp(-gamma |x - v|^2).
  float Apply(const float* x, const float* v, int64_t n) const {
    if (kernel == SvmKernel::kRbf) {
      float sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - v[i];
        sum += d * d;
      }
      return std::exp(-gamma * sum);
    }
    const float dot = Dot(x, v, n);
    if (kernel == SvmKernel::kLinear) return dot;
    const float t = gamma * dot + coef0;
    if (kernel == SvmKernel::kSigmoid) return std::tanh(t);
    if (degree == 2) return t * t;
    if (degree == 3) return t * t * t;
    return std::pow(t, degree);
  }
};

// libsvm's pairwise coupling ("method 2" of Wu, Lin and Weng), in float with ONNX Runtime's
// operation order: r[i * k + j] estimates P(i | i or j); writes k class probabilities to p.
void PairwiseCoupling(int64_t k, const std::vector<float>& r, float* p) {
  std::vector<float> q(static_cast<size_t>(k * k), 0.0f), qp(static_cast<size_t>(k), 0.0f);
  const float eps = 0.005f / static_cast<float>(k);
  for (int64_t i = 0; i < k; ++i) {
    p[i] = 1.0f / static_cast<float>(k);
    for (int64_t j = 0; j < i; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = q[j * k + i];
    }
    for (int64_t j = i + 1; j < k; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = -r[j * k + i] * r[i * k + j];
    }
  }
  for (int iter = 0; iter < 100; ++iter) {
    float pqp = 0;
    for (int64_t i = 0; i < k; ++i) {
      qp[i] = 0;
      for (int64_t j = 0; j < k; ++j) qp[i] += q[i * k + j] * p[j];
      pqp += p[i] * qp[i];
    }
    float max_error = 0;
    for (int64_t i = 0; i < k; ++i) max_error = std::max(max_error, std::fabs(qp[i] - pqp));
    if (max_error < eps) break;
    for (int64_t i = 0; i < k; ++i) {
      const float diff = (-qp[i] + pqp) / q[i * k + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; ++j) {
        qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// SVMClassifier. With support vectors (vectors_per_class sums to V > 0) it is libsvm's SVC:
// one-vs-one classifiers over the kernel values, voting, and Platt-scaled probabilities when
// prob_a / prob_b are given. Without support vectors it is liblinear's model: one row of
// coefficients per class plus rho[0].

class SvmClassifierKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    RETURN_IF_ERROR(params_.Parse(node));
    ASSIGN_OR_RETURN(pt_, ml::ParsePostTransform(node));
    labels_.Read(node);
    classes_ = static_cast<int64_t>(labels_.size());
    if (classes_ == 0)
      return InvalidArgument(node.Describe(), ": one of classlabels_strings, classlabels_ints is required");
    if (classes_ > 65535) return InvalidArgument(node.Describe(), ": ", classes_, " classes is more than 65535");
    coef_ = node.GetFloats("coefficients");
    if (coef_.empty()) return InvalidArgument(node.Describe(), ": coefficients is empty");
    rho_ = node.GetFloats("rho");
    if (rho_.empty()) return InvalidArgument(node.Describe(), ": rho is empty");
    prob_a_ = node.GetFloats("prob_a");
    const std::vector<float> prob_b = node.GetFloats("prob_b");
    if (prob_a_.size() != prob_b.size())
      return InvalidArgument(node.Describe(), ": prob_a has ", prob_a_.size(), " values but prob_b has ",
                             prob_b.size());
    prob_b_ = prob_b;
    support_ = node.GetFloats("support_vectors");
    vectors_per_class_ = node.GetInts("vectors_per_class");
    int64_t total = 0;
    for (int64_t v : vectors_per_class_) {
      // Checked against what support_vectors holds, so the sum cannot overflow.
      if (v < 0 || static_cast<uint64_t>(v) > support_.size() - static_cast<uint64_t>(total))
        return InvalidArgument(node.Describe(), ": vectors_per_class ", v, " is negative or needs more support vectors",
                               " than support_vectors (", support_.size(), " values) holds");
      starts_.push_back(total);
      total += v;
    }
    vectors_ = total;
    pairs_ = classes_ * (classes_ - 1) / 2;
    all_positive_ = std::all_of(coef_.begin(), coef_.end(), [](float c) { return c >= 0; });
    if (vectors_ > 0) {
      svc_ = true;
      if (static_cast<int64_t>(vectors_per_class_.size()) != classes_)
        return InvalidArgument(node.Describe(), ": vectors_per_class has ", vectors_per_class_.size(),
                               " entries but there are ", classes_, " class labels");
      if (support_.size() % static_cast<uint64_t>(vectors_) != 0)
        return InvalidArgument(node.Describe(), ": support_vectors has ", support_.size(), " values, not a multiple of",
                               " the ", vectors_, " support vectors");
      features_ = static_cast<int64_t>(support_.size()) / vectors_;
      // Coefficients are [classes - 1, V]; rho and prob_a / prob_b hold one value per class pair.
      if (coef_.size() < static_cast<uint64_t>((classes_ - 1) * vectors_))
        return InvalidArgument(node.Describe(), ": coefficients has ", coef_.size(), " values but ", classes_,
                               " classes and ", vectors_, " support vectors need ", (classes_ - 1) * vectors_);
      if (rho_.size() < static_cast<uint64_t>(pairs_))
        return InvalidArgument(node.Describe(), ": rho has ", rho_.size(), " values but the ", classes_,
                               " classes make ", pairs_, " class pairs");
      if (!prob_a_.empty() && prob_a_.size() < static_cast<uint64_t>(pairs_))
        return InvalidArgument(node.Describe(), ": prob_a / prob_b have ", prob_a_.size(), " values but the ", classes_,
                               " classes make ", pairs_, " class pairs");
    } else {
      svc_ = false;
      params_.kernel = SvmKernel::kLinear;  // as ONNX Runtime: the kernel type does not apply
      // One row of coefficients per class; as ONNX Runtime, a remainder is ignored.
      features_ = static_cast<int64_t>(coef_.size()) / classes_;
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    ASSIGN_OR_RETURN(RowsCols rc, RowsAndCols(node, *x));
    if (rc.cols != features_)
      return InvalidArgument(node.Describe(), ": input has ", rc.cols, " features but the model has ", features_);
    std::vector<float> buf;
    ASSIGN_OR_RETURN(const float* xd, AsFloats(node, *x, buf));
    const int64_t rows = rc.rows;
    const bool proba = !prob_a_.empty();
    // SVC without probabilities writes the pairwise scores (two columns for two classes).
    const int64_t zcols = svc_ && !proba ? (classes_ > 2 ? pairs_ : 2) : classes_;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, labels_.dtype(), Shape{rows}));
    float* z = nullptr;
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ASSIGN_OR_RETURN(Tensor * zt, ctx.AllocateOutput(1, DataType::kFloat, Shape{rows, zcols}));
      z = zt->mutable_data<float>();
    }
    auto run = [&](int64_t begin, int64_t end) {
      std::vector<float> kern(static_cast<size_t>(vectors_)), scores, r2;
      std::vector<int64_t> votes(static_cast<size_t>(classes_));
      for (int64_t row = begin; row < end; ++row) {
        const float* xr = xd + row * features_;
        int64_t best = 0;
        float max_weight = 0;
        if (!svc_) {
          scores.resize(static_cast<size_t>(classes_));
          for (int64_t c = 0; c < classes_; ++c) scores[c] = Dot(xr, coef_.data() + c * features_, features_) + rho_[0];
          best = ArgMax(scores.data(), classes_);
          max_weight = scores[best];
        } else {
          for (int64_t v = 0; v < vectors_; ++v)
            kern[v] = params_.Apply(xr, support_.data() + v * features_, features_);
          PairScores(kern, scores, votes);
          best = ArgMax(votes.data(), classes_);  // the vote decides the label, with probabilities too
          if (proba) {
            // Platt-scaled pairwise probabilities, clamped as libsvm does, then coupled.
            r2.assign(static_cast<size_t>(classes_ * classes_), 0.0f);
            for (int64_t i = 0, k = 0; i < classes_; ++i) {
              for (int64_t j = i + 1; j < classes_; ++j, ++k) {
                const float p = 1.0f - ml::Logistic(scores[k] * prob_a_[k] + prob_b_[k]);
                const float pc = std::min(std::max(p, 1.0e-7f), 1 - 1.0e-7f);
                r2[i * classes_ + j] = pc;
                r2[j * classes_ + i] = 1 - pc;
              }
            }
            scores.resize(static_cast<size_t>(classes_));
            PairwiseCoupling(classes_, r2, scores.data());
          }
        }
        // Two classes without probabilities: ONNX Runtime's label rule reads the top score of the
        // linear model (0 for SVC, where the vote decides).
        size_t label = static_cast<size_t>(best);
        if (classes_ == 2 && !proba && ((all_positive_ && max_weight >= 0.5f) || (max_weight > 0 && !all_positive_)))
          label = 1;
        labels_.Write(y, row, label);
        if (!z) continue;
        float* zr = z + row * zcols;
        if (svc_ && !proba && classes_ <= 2) {
          // One pairwise score s, positive for the first class: NONE writes [-s, s], LOGISTIC
          // [logistic(-s), logistic(s)], PROBIT probit(s) and leaves the second column unwritten
          // (0 here), SOFTMAX and SOFTMAX_ZERO [1 - s, s].
          const float s = classes_ == 2 ? scores[0] : 0.0f;
          if (classes_ == 1) {
            zr[0] = zr[1] = 0.0f;  // no class pair: ONNX Runtime leaves Z unwritten
          } else if (pt_ == PostTransform::kNone) {
            zr[0] = -s;
            zr[1] = s;
          } else if (pt_ == PostTransform::kLogistic) {
            zr[0] = ml::Logistic(-s);
            zr[1] = ml::Logistic(s);
          } else if (pt_ == PostTransform::kProbit) {
            zr[0] = ml::Probit(s);
            zr[1] = 0.0f;
          } else {
            zr[0] = 1.0f - s;
            zr[1] = s;
          }
        } else {
          ml::TransformScores(scores, pt_, ml::SecondClass::kNone);
          std::copy(scores.begin(), scores.end(), zr);
        }
      }
    };
    ForRows(ctx, rows, (svc_ ? vectors_ : classes_) * std::max<int64_t>(1, features_), run);
    return Status::Ok();
  }

 private:
  // The one-vs-one decision values of the kernel row (pair (i, j) for i < j in order) and the
  // votes: a positive value votes for i, otherwise for j.
  void PairScores(const std::vector<float>& kern, std::vector<float>& scores, std::vector<int64_t>& votes) const {
    scores.resize(static_cast<size_t>(pairs_));
    std::fill(votes.begin(), votes.end(), 0);
    int64_t k = 0;
    for (int64_t i = 0; i < classes_; ++i) {
      for (int64_t j = i + 1; j < classes_; ++j, ++k) {
        // Class i's vectors weigh with coefficient row j - 1, class j's with row i.
        double sum = 0;
        const float* ci = coef_.data() + (j - 1) * vectors_ + starts_[i];
        const float* ki = kern.data() + starts_[i];
        for (int64_t m = 0; m < vectors_per_class_[i]; ++m) {
          const float prod = ci[m] * ki[m];
          sum += prod;
        }
        const float* cj = coef_.data() + i * vectors_ + starts_[j];
        const float* kj = kern.data() + starts_[j];
        for (int64_t m = 0; m < vectors_per_class_[j]; ++m) {
          const float prod = cj[m] * kj[m];
          sum += prod;
        }
        sum += rho_[k];
        scores[k] = static_cast<float>(sum);
        ++votes[sum > 0 ? i : j];
      }
    }
  }

  SvmParams params_;
  PostTransform pt_ = PostTransform::kNone;
  ClassLabels labels_;
  int64_t classes_ = 0, pairs_ = 0, vectors_ = 0, features_ = 0;
  bool svc_ = false, all_positive_ = false;
  std::vector<float> coef_, rho_, prob_a_, prob_b_, support_;
  std::vector<int64_t> vectors_per_class_, starts_;
};

// ---------------------------------------------------------------------------------------------
// SVMRegressor: sum over support vectors of coefficient * kernel + rho[0] (or, without support
// vectors, X . coefficients + rho[0]); one_class maps the value to +1 / -1.

class SvmRegressorKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    RETURN_IF_ERROR(params_.Parse(node));
    // post_transform is validated, but ONNX Runtime never applies it to the regression value.
    RETURN_IF_ERROR(ml::ParsePostTransform(node).status());
    coef_ = node.GetFloats("coefficients");
    if (coef_.empty()) return InvalidArgument(node.Describe(), ": coefficients is empty");
    rho_ = node.GetFloats("rho");
    if (rho_.empty()) return InvalidArgument(node.Describe(), ": rho is empty");
    one_class_ = node.GetInt("one_class", 0) != 0;
    support_ = node.GetFloats("support_vectors");
    // n_supports <= 0 is the linear model, as ONNX Runtime reads it.
    vectors_ = std::max<int64_t>(0, node.GetInt("n_supports", 0));
    if (vectors_ > 0) {
      if (support_.empty() || support_.size() % static_cast<uint64_t>(vectors_) != 0)
        return InvalidArgument(node.Describe(), ": support_vectors has ", support_.size(),
                               " values, not a positive multiple of n_supports (", vectors_, ")");
      features_ = static_cast<int64_t>(support_.size()) / vectors_;
      if (coef_.size() < static_cast<uint64_t>(vectors_))
        return InvalidArgument(node.Describe(), ": coefficients has ", coef_.size(), " values but n_supports is ",
                               vectors_);
    } else {
      params_.kernel = SvmKernel::kLinear;
      features_ = static_cast<int64_t>(coef_.size());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    ASSIGN_OR_RETURN(RowsCols rc, FloatRowsAndCols(node, *x));
    if (rc.cols != features_)
      return InvalidArgument(node.Describe(), ": input has ", rc.cols, " features but the model has ", features_);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, Shape{rc.rows, 1}));
    const float* xd = x->data<float>();
    float* yd = y->mutable_data<float>();
    std::vector<float> kern(static_cast<size_t>(vectors_));
    for (int64_t r = 0; r < rc.rows; ++r) {
      const float* xr = xd + r * features_;
      float v;
      if (vectors_ > 0) {
        for (int64_t s = 0; s < vectors_; ++s) kern[s] = params_.Apply(xr, support_.data() + s * features_, features_);
        v = Dot(kern.data(), coef_.data(), vectors_) + rho_[0];
      } else {
        v = Dot(xr, coef_.data(), features_) + rho_[0];
      }
      yd[r] = one_class_ ? (v > 0 ? 1.0f : -1.0f) : v;
    }
    return Status::Ok();
  }

 private:
  SvmParams params_;
  std::vector<float> coef_, rho_, support_;
  int64_t vectors_ = 0, features_ = 0;
  bool one_class_ = false;
};

}  // namespace

void RegisterMlLinearKernels(KernelRegistry& r) {
  const std::vector<DataType> numeric = {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64};
  // Input dtypes as ONNX Runtime registers them: the regressors take float only.
  ml::RegisterMl(r, "LinearClassifier", 1, INT_MAX, numeric, ml::InitFactory<LinearClassifierKernel>());
  ml::RegisterMl(r, "LinearRegressor", 1, INT_MAX, {DataType::kFloat}, ml::InitFactory<LinearRegressorKernel>());
  ml::RegisterMl(r, "SVMClassifier", 1, INT_MAX, numeric, ml::InitFactory<SvmClassifierKernel>());
  ml::RegisterMl(r, "SVMRegressor", 1, INT_MAX, {DataType::kFloat}, ml::InitFactory<SvmRegressorKernel>());
}

}  // namespace strata
