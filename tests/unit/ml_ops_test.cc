// The ai.onnx.ml kernels other than the tree ensembles (cpu/ml_ops.cc, cpu/ml_linear.cc) against
// values derived by hand or computed here in double from the ops' formulas. Where ONNX Runtime's
// CPU kernels settle what the spec leaves open (a one-score classifier's columns and label, which
// transforms reach a single score, SVM vote ties and score signs, Imputer / Scaler strides, ...),
// the expected values spell its behaviour out. Edge sizes ([C] inputs, N = 1, N = 0), every
// dtype and mode, and one error per bad attribute or input (the message must name it). The quirk
// values were checked against onnxruntime-node 1.30 (bench/ort) on the same single-node models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsEqual;
using testing::ToDoubles;
using testing::ToVector;

constexpr char kMl[] = "ai.onnx.ml";
const double kNaN = std::numeric_limits<double>::quiet_NaN();

OpSpec Ml(const char* op, int opset = 1) { return OpSpec(op, opset, kMl); }
Tensor F32(const Shape& s, const std::vector<double>& v) { return MakeTensor(DataType::kFloat, s, v); }
Tensor I64(const Shape& s, const std::vector<double>& v) { return MakeTensor(DataType::kInt64, s, v); }
Tensor Str(const Shape& s, const std::vector<std::string>& v) { return Tensor::FromVector<std::string>(v, s); }

// Runs the node; a failed run fails the test and returns no outputs.
std::vector<Tensor> RunOk(const OpSpec& spec, const std::vector<Tensor>& in, int threads = 1) {
  RunOptions opts;
  opts.threads = threads;
  auto out = RunKernel(spec, in, opts);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<Tensor>{};
}

void ExpectError(const OpSpec& spec, const std::vector<Tensor>& in, const std::string& needle) {
  auto out = RunKernel(spec, in);
  ASSERT_FALSE(out.ok()) << spec.op_type << ": expected an error naming '" << needle << "'";
  EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().ToString();
}

void ExpectFloats(const Tensor& t, const Shape& shape, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_TRUE(t.valid());
  ASSERT_EQ(t.dtype(), DataType::kFloat);
  ASSERT_EQ(ShapeToString(t.shape()), ShapeToString(shape));
  const std::vector<double> got = ToDoubles(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", want NaN";
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
    }
  }
}
void ExpectInts(const Tensor& t, const Shape& shape, const std::vector<int64_t>& want) {
  ASSERT_TRUE(t.valid());
  ASSERT_EQ(t.dtype(), DataType::kInt64);
  ASSERT_EQ(ShapeToString(t.shape()), ShapeToString(shape));
  EXPECT_EQ(ToVector<int64_t>(t), want);
}
void ExpectStrings(const Tensor& t, const Shape& shape, const std::vector<std::string>& want) {
  ASSERT_TRUE(t.valid());
  ASSERT_EQ(t.dtype(), DataType::kString);
  ASSERT_EQ(ShapeToString(t.shape()), ShapeToString(shape));
  EXPECT_EQ(ToVector<std::string>(t), want);
}

// The score transforms, in double.
double Logistic(double x) { return 1 / (1 + std::exp(-x)); }
// PROBIT as ONNX Runtime computes it: sqrt(2) * erfinv(2p - 1) with Winitzki's erfinv (a = 0.147).
double Probit(double p) {
  const double x = 2 * p - 1, a = 0.147, ln = std::log((1 - x) * (1 + x));
  const double t = 2 / (M_PI * a) + ln / 2;
  return std::sqrt(2.0) * (x < 0 ? -1 : 1) * std::sqrt(std::sqrt(t * t - ln / a) - t);
}
std::vector<double> Transform(std::vector<double> v, const std::string& pt) {
  double mx = -1e300, sum = 0;
  for (double s : v) mx = std::max(mx, s);
  if (pt == "LOGISTIC") {
    for (double& s : v) s = Logistic(s);
  } else if (pt == "PROBIT") {
    for (double& s : v) s = Probit(s);
  } else if (pt == "SOFTMAX") {
    for (double s : v) sum += std::exp(s - mx);
    for (double& s : v) s = std::exp(s - mx) / sum;
  } else if (pt == "SOFTMAX_ZERO") {  // zeros stay zero and are left out of the sum
    for (double s : v) sum += s != 0 ? std::exp(s - mx) : 0;
    for (double& s : v) s = s != 0 ? std::exp(s - mx) / sum : 0;
  }
  return v;
}

// x (rows of f features) times coef^T ([k, f]) plus bias, in double.
std::vector<double> Affine(const std::vector<double>& x, int64_t f, const std::vector<float>& coef,
                           const std::vector<double>& bias) {
  const int64_t k = static_cast<int64_t>(bias.size()), n = static_cast<int64_t>(x.size()) / f;
  std::vector<double> out;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      double s = bias[c];
      for (int64_t j = 0; j < f; ++j) s += x[r * f + j] * coef[c * f + j];
      out.push_back(s);
    }
  return out;
}

// Applies Transform to each row of k values.
std::vector<double> TransformRows(const std::vector<double>& v, int64_t k, const std::string& pt) {
  std::vector<double> out;
  for (size_t r = 0; r < v.size(); r += k) {
    const std::vector<double> row = Transform(std::vector<double>(v.begin() + r, v.begin() + r + k), pt);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// =============================================================================================
// LinearClassifier

OpSpec ThreeClassLinear() {
  OpSpec spec = Ml("LinearClassifier");
  spec.Attr("coefficients", std::vector<float>{1, 2, -1, 0.5f, 0, -1});
  spec.Attr("intercepts", std::vector<float>{0.5f, -0.25f, 0.25f});
  spec.Attr("classlabels_ints", std::vector<int64_t>{10, 20, 30});
  spec.Outputs(2);
  return spec;
}

TEST(MlLinearClassifier, MulticlassPicksTheTopScoreAndTheFirstOfTies) {
  // Scores (exact in float): [5.5, -0.25, -1.75], [-3.5, 1.25, 1.25] (a tie: class 20), [-8.5, -1.25, 4.25].
  auto out = RunOk(ThreeClassLinear(), {F32({3, 2}, {1, 2, -2, -1, -1, -4})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {3}, {10, 20, 30});
  ExpectFloats(out[1], {3, 3}, {5.5, -0.25, -1.75, -3.5, 1.25, 1.25, -8.5, -1.25, 4.25});
}

TEST(MlLinearClassifier, PostTransformsWithStringLabels) {
  const std::vector<double> x = {1, 2, -0.25, 0};  // the second row scores [0.25, 0, 0.25]
  const std::vector<double> raw = Affine(x, 2, {1, 2, -1, 0.5f, 0, -1}, {0.5, -0.25, 0.25});
  for (const char* pt : {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = ThreeClassLinear();
    spec.attrs.erase("classlabels_ints");
    spec.Attr("classlabels_strings", std::vector<std::string>{"a", "b", "c"});
    spec.Attr("post_transform", pt);
    spec.Attr("multi_class", 1);  // read but ignored, as ONNX Runtime does
    auto out = RunOk(spec, {F32({2, 2}, x)});
    ASSERT_EQ(out.size(), 2u);
    ExpectStrings(out[0], {2}, {"a", "a"});
    ExpectFloats(out[1], {2, 3}, TransformRows(raw, 3, pt));
  }
}

TEST(MlLinearClassifier, OneCoefficientRowWithTwoLabelsAddsAFirstColumn) {
  // s = x0 - x1 + 0.25: 0.75, -0.75, 0. The label is the raw score's sign (0 is negative); the
  // columns are [1 - s, s] (SOFTMAX and SOFTMAX_ZERO are not applied to one score), or
  // [logistic(-s), logistic(s)] for LOGISTIC.
  for (const char* pt : {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = Ml("LinearClassifier");
    spec.Attr("coefficients", std::vector<float>{1, -1});
    spec.Attr("intercepts", std::vector<float>{0.25f});
    spec.Attr("classlabels_ints", std::vector<int64_t>{5, 7});
    spec.Attr("post_transform", pt);
    spec.Outputs(2);
    auto out = RunOk(spec, {F32({3, 2}, {1, 0.5, 0, 1, 0.25, 0.5})});
    ASSERT_EQ(out.size(), 2u);
    ExpectInts(out[0], {3}, {7, 5, 5});
    std::vector<double> z;
    for (double s : {0.75, -0.75, 0.0}) {
      if (std::string(pt) == "LOGISTIC") {
        z.insert(z.end(), {Logistic(-s), Logistic(s)});
      } else {
        z.insert(z.end(), {1 - s, s});
      }
    }
    ExpectFloats(out[1], {3, 2}, z);
  }
}

TEST(MlLinearClassifier, OneCoefficientRowWithoutLabelsKeepsOneColumn) {
  OpSpec spec = Ml("LinearClassifier");
  spec.Attr("coefficients", std::vector<float>{1, -1});
  spec.Attr("intercepts", std::vector<float>{0.25f});
  spec.Outputs(2);
  // Labels 1 / 0; only PROBIT reaches a single score.
  for (const char* pt : {"NONE", "LOGISTIC", "SOFTMAX"}) {
    spec.Attr("post_transform", pt);
    auto out = RunOk(spec, {F32({3, 2}, {1, 0.5, 0, 1, 0.25, 0.5})});
    ASSERT_EQ(out.size(), 2u);
    ExpectInts(out[0], {3}, {1, 0, 0});
    ExpectFloats(out[1], {3, 1}, {0.75, -0.75, 0});
  }
  spec.Attr("post_transform", "PROBIT");
  auto out = RunOk(spec, {F32({3, 2}, {1, 0.5, 0, 0, 0.25, 0})});  // scores 0.75, 0.25, 0.5
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {3}, {1, 1, 1});
  ExpectFloats(out[1], {3, 1}, {Probit(0.75), Probit(0.25), 0}, 1e-4);
}

TEST(MlLinearClassifier, BinaryStringLabels) {
  OpSpec spec = Ml("LinearClassifier");
  spec.Attr("coefficients", std::vector<float>{1, -1});
  spec.Attr("intercepts", std::vector<float>{0.25f});
  spec.Attr("classlabels_strings", std::vector<std::string>{"neg", "pos"});
  spec.Outputs(2);
  auto out = RunOk(spec, {F32({1, 2}, {0, 1})});  // s = -0.75
  ASSERT_EQ(out.size(), 2u);
  ExpectStrings(out[0], {1}, {"neg"});
  ExpectFloats(out[1], {1, 2}, {1.75, -0.75});
  // PROBIT with the added class: ONNX Runtime transforms the N packed scores and never expands
  // them, so Z's flat start holds probit(s) per row and the rest is not written (zeros here).
  spec.Attr("post_transform", "PROBIT");
  out = RunOk(spec, {F32({2, 2}, {1, 0.5, 0, 0})});  // s = 0.75, 0.25
  ASSERT_EQ(out.size(), 2u);
  ExpectStrings(out[0], {2}, {"pos", "pos"});
  ExpectFloats(out[1], {2, 2}, {Probit(0.75), Probit(0.25), 0, 0}, 1e-4);
}

TEST(MlLinearClassifier, CoefficientRowsFollowTheInputFeatureCount) {
  // As ONNX Runtime: class c's coefficients start at c * (input features), so one feature reads
  // coefficients 1, 2, -1 (scores 1.5, 1.75, -0.75), and coefficients past 3 x 2 are ignored.
  auto out = RunOk(ThreeClassLinear(), {F32({1, 1}, {1})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {20});
  ExpectFloats(out[1], {1, 3}, {1.5, 1.75, -0.75});
  OpSpec extra = ThreeClassLinear();
  extra.Attr("coefficients", std::vector<float>{1, 2, -1, 0.5f, 0, -1, 100, 100, 100});
  out = RunOk(extra, {F32({1, 2}, {1, 2})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {10});
  ExpectFloats(out[1], {1, 3}, {5.5, -0.25, -1.75});
}

TEST(MlLinearClassifier, OneDimInputEmptyBatchAndLabelsOnly) {
  auto out = RunOk(ThreeClassLinear(), {F32({2}, {1, 2})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {10});
  ExpectFloats(out[1], {1, 3}, {5.5, -0.25, -1.75});
  out = RunOk(ThreeClassLinear(), {F32({0, 2}, {})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {0}, {});
  ExpectFloats(out[1], {0, 3}, {});
  OpSpec labels_only = ThreeClassLinear();
  labels_only.Outputs(1);
  out = RunOk(labels_only, {F32({1, 2}, {-1, -4})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {1}, {30});
}

TEST(MlLinearClassifier, DoubleAndIntegerInputs) {
  for (DataType dt : {DataType::kDouble, DataType::kInt32, DataType::kInt64}) {
    SCOPED_TRACE(DataTypeName(dt));
    auto out = RunOk(ThreeClassLinear(), {MakeTensor(dt, {2, 2}, {1, 2, -1, -4})});
    ASSERT_EQ(out.size(), 2u);
    ExpectInts(out[0], {2}, {10, 30});
    ExpectFloats(out[1], {2, 3}, {5.5, -0.25, -1.75, -8.5, -1.25, 4.25});
  }
}

TEST(MlLinearClassifier, LargeBatchWithTwoThreads) {
  const int64_t n = 2000, f = 5, k = 4;
  const std::vector<float> coef = ToVector<float>(RandomTensor(DataType::kFloat, {k * f}, 11, -1, 1));
  const std::vector<float> icpt = ToVector<float>(RandomTensor(DataType::kFloat, {k}, 12, -1, 1));
  const Tensor x = RandomTensor(DataType::kFloat, {n, f}, 13, -2, 2);
  OpSpec spec = Ml("LinearClassifier");
  spec.Attr("coefficients", coef);
  spec.Attr("intercepts", icpt);
  spec.Attr("classlabels_ints", std::vector<int64_t>{0, 1, 2, 3});
  spec.Attr("post_transform", "SOFTMAX");
  spec.Outputs(2);
  const std::vector<double> raw = Affine(ToDoubles(x), f, coef, std::vector<double>(icpt.begin(), icpt.end()));
  auto one = RunOk(spec, {x}, 1);
  auto two = RunOk(spec, {x}, 2);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(TensorsEqual(one[0], two[0]));
  EXPECT_TRUE(TensorsEqual(one[1], two[1]));
  ExpectFloats(two[1], {n, k}, TransformRows(raw, k, "SOFTMAX"));
  const std::vector<int64_t> labels = ToVector<int64_t>(two[0]);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> row(raw.begin() + r * k, raw.begin() + (r + 1) * k);
    const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
    std::sort(row.begin(), row.end());
    if (row[k - 1] - row[k - 2] > 1e-4) {
      EXPECT_EQ(labels[r], best) << "row " << r;
    }
  }
}

TEST(MlLinearClassifier, Errors) {
  const Tensor x = F32({1, 2}, {1, 2});
  OpSpec spec = ThreeClassLinear();
  spec.attrs.erase("coefficients");
  ExpectError(spec, {x}, "coefficients");
  spec = ThreeClassLinear();
  spec.attrs.erase("intercepts");
  ExpectError(spec, {x}, "intercepts");
  spec = ThreeClassLinear();
  spec.Attr("coefficients", std::vector<float>{1, 2, 3, 4, 5});
  ExpectError(spec, {x}, "not a multiple");
  spec = ThreeClassLinear();
  spec.Attr("classlabels_ints", std::vector<int64_t>{1, 2});
  ExpectError(spec, {x}, "class labels");
  spec.attrs.erase("classlabels_ints");
  ExpectError(spec, {x}, "class labels");
  spec = ThreeClassLinear();
  spec.Attr("classlabels_strings", std::vector<std::string>{"a", "b", "c"});
  ExpectError(spec, {x}, "only one of");
  spec = ThreeClassLinear();
  spec.Attr("post_transform", "CUBE");
  ExpectError(spec, {x}, "post_transform");
  // One score takes no labels or exactly two.
  OpSpec binary = Ml("LinearClassifier");
  binary.Attr("coefficients", std::vector<float>{1, -1});
  binary.Attr("intercepts", std::vector<float>{0.25f});
  binary.Attr("classlabels_strings", std::vector<std::string>{"only"});
  binary.Outputs(2);
  ExpectError(binary, {x}, "0 or 2 class labels");
  binary.attrs.erase("classlabels_strings");
  binary.Attr("classlabels_ints", std::vector<int64_t>{1, 2, 3});
  ExpectError(binary, {x}, "0 or 2 class labels");
  ExpectError(ThreeClassLinear(), {F32({1, 3}, {1, 2, 3})}, "fewer than");
  ExpectError(ThreeClassLinear(), {F32({1, 1, 2}, {1, 2})}, "[C] or [N, C]");
  ExpectError(ThreeClassLinear(), {F32({}, {1})}, "[C] or [N, C]");
  ExpectError(ThreeClassLinear(), {Str({2}, {"a", "b"})}, "no CPU kernel");
}

// =============================================================================================
// LinearRegressor

OpSpec TwoTargetRegressor() {
  OpSpec spec = Ml("LinearRegressor");
  spec.Attr("coefficients", std::vector<float>{1, 0, -1, 0.5f, 2, 0});
  spec.Attr("intercepts", std::vector<float>{0.25f, -1});
  spec.Attr("targets", 2);
  return spec;
}

TEST(MlLinearRegressor, TargetsAndTransforms) {
  const std::vector<double> x = {1, 2, 3, 0, -1, 0.5};
  const std::vector<double> raw = {-1.75, 3.5, -0.25, -3};
  for (const char* pt : {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = TwoTargetRegressor();
    spec.Attr("post_transform", pt);
    auto out = RunOk(spec, {F32({2, 3}, x)});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {2, 2}, TransformRows(raw, 2, pt));
  }
}

TEST(MlLinearRegressor, OneTargetTakesProbitOnly) {
  OpSpec spec = Ml("LinearRegressor");
  spec.Attr("coefficients", std::vector<float>{0.5f, 0.25f});
  spec.Attr("intercepts", std::vector<float>{0.125f});
  for (const char* pt : {"NONE", "LOGISTIC", "SOFTMAX"}) {  // targets defaults to 1
    spec.Attr("post_transform", pt);
    auto out = RunOk(spec, {F32({1, 2}, {1, 1})});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {1, 1}, {0.875});
  }
  spec.Attr("post_transform", "PROBIT");
  auto out = RunOk(spec, {F32({1, 2}, {1, 1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 1}, {Probit(0.875)}, 1e-4);
}

TEST(MlLinearRegressor, InterceptsOfTheWrongCountAreIgnored) {
  OpSpec spec = TwoTargetRegressor();
  spec.Attr("intercepts", std::vector<float>{5});
  auto out = RunOk(spec, {F32({1, 3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 2}, {-2, 4.5});
}

TEST(MlLinearRegressor, OneDimEmptyAndFewerFeatures) {
  auto out = RunOk(TwoTargetRegressor(), {F32({3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 2}, {-1.75, 3.5});
  out = RunOk(TwoTargetRegressor(), {F32({0, 3}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 2}, {});
  // Target t's coefficients start at t * (input features): [1, 0] and [-1, 0.5] here.
  out = RunOk(TwoTargetRegressor(), {F32({1, 2}, {1, 2})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 2}, {1.25, -1});
}

TEST(MlLinearRegressor, Errors) {
  const Tensor x = F32({1, 3}, {1, 2, 3});
  OpSpec spec = TwoTargetRegressor();
  spec.attrs.erase("coefficients");
  ExpectError(spec, {x}, "coefficients");
  spec = TwoTargetRegressor();
  spec.Attr("targets", 0);
  ExpectError(spec, {x}, "targets");
  spec = TwoTargetRegressor();
  spec.Attr("targets", 4);
  ExpectError(spec, {x}, "fewer than");
  ExpectError(TwoTargetRegressor(), {F32({1, 4}, {1, 2, 3, 4})}, "fewer than");
  ExpectError(TwoTargetRegressor(), {F32({1, 1, 3}, {1, 2, 3})}, "[C] or [N, C]");
  ExpectError(TwoTargetRegressor(), {F32({}, {3})}, "[C] or [N, C]");
  // ONNX Runtime registers float input only.
  ExpectError(TwoTargetRegressor(), {MakeTensor(DataType::kDouble, {1, 3}, {1, 2, 3})}, "no CPU kernel");
}

// =============================================================================================
// SVMClassifier and SVMRegressor

struct Svm {
  std::string kernel = "LINEAR";
  std::vector<float> params;  // gamma, coef0, degree
  std::vector<int64_t> vpc;
  std::vector<float> sv, coef, rho, pa, pb;
  int64_t classes = 0;

  void Set(OpSpec& spec) const {
    spec.Attr("kernel_type", kernel);
    if (!params.empty()) spec.Attr("kernel_params", params);
    if (!vpc.empty()) spec.Attr("vectors_per_class", vpc);
    if (!sv.empty()) spec.Attr("support_vectors", sv);
    spec.Attr("coefficients", coef);
    spec.Attr("rho", rho);
    if (!pa.empty()) {
      spec.Attr("prob_a", pa);
      spec.Attr("prob_b", pb);
    }
  }
  int64_t Vectors() const {
    int64_t v = 0;
    for (int64_t c : vpc) v += c;
    return v;
  }
  int64_t Features() const {
    return Vectors() > 0 ? static_cast<int64_t>(sv.size()) / Vectors() : static_cast<int64_t>(coef.size()) / classes;
  }
  double K(const double* x, const float* v) const {
    const int64_t f = Features();
    double dot = 0, d2 = 0;
    for (int64_t j = 0; j < f; ++j) {
      dot += x[j] * v[j];
      d2 += (x[j] - v[j]) * (x[j] - v[j]);
    }
    const double g = params.empty() ? 0 : params[0], c0 = params.empty() ? 0 : params[1];
    if (kernel == "RBF") return std::exp(-g * d2);
    if (kernel == "POLY") return std::pow(g * dot + c0, params[2]);
    if (kernel == "SIGMOID") return std::tanh(g * dot + c0);
    return dot;
  }
  // libsvm's one-vs-one decision values of row x, pairs (0,1), (0,2), ..., (1,2), ...: class i's
  // vectors weigh with coefficient row j - 1 and class j's with row i; plus rho.
  std::vector<double> Decisions(const double* x) const {
    const int64_t v = Vectors(), f = Features();
    std::vector<double> k(v);
    for (int64_t s = 0; s < v; ++s) k[s] = K(x, sv.data() + s * f);
    std::vector<int64_t> start(classes, 0);
    for (int64_t c = 1; c < classes; ++c) start[c] = start[c - 1] + vpc[c - 1];
    std::vector<double> d;
    for (int64_t i = 0; i < classes; ++i)
      for (int64_t j = i + 1; j < classes; ++j) {
        double s = rho[d.size()];
        for (int64_t m = 0; m < vpc[i]; ++m) s += coef[(j - 1) * v + start[i] + m] * k[start[i] + m];
        for (int64_t m = 0; m < vpc[j]; ++m) s += coef[i * v + start[j] + m] * k[start[j] + m];
        d.push_back(s);
      }
    return d;
  }
  // A positive decision value votes for the pair's first class; the label is the first most voted.
  int64_t Vote(const std::vector<double>& d) const {
    std::vector<int64_t> votes(classes, 0);
    size_t p = 0;
    for (int64_t i = 0; i < classes; ++i)
      for (int64_t j = i + 1; j < classes; ++j) ++votes[d[p++] > 0 ? i : j];
    return std::max_element(votes.begin(), votes.end()) - votes.begin();
  }
  // Platt's sigmoid per pair (clamped to [1e-7, 1 - 1e-7]), then libsvm's pairwise coupling.
  std::vector<double> Probabilities(const std::vector<double>& d) const {
    const int64_t k = classes;
    std::vector<double> r(k * k, 0);
    size_t p = 0;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = i + 1; j < k; ++j, ++p) {
        const double q = std::min(std::max(1 / (1 + std::exp(d[p] * pa[p] + pb[p])), 1e-7), 1 - 1e-7);
        r[i * k + j] = q;
        r[j * k + i] = 1 - q;
      }
    // libsvm's multiclass_probability (Wu, Lin and Weng, method 2).
    std::vector<double> Q(k * k, 0), Qp(k, 0), P(k, 1.0 / k);
    for (int64_t t = 0; t < k; ++t) {
      for (int64_t j = 0; j < t; ++j) {
        Q[t * k + t] += r[j * k + t] * r[j * k + t];
        Q[t * k + j] = Q[j * k + t];
      }
      for (int64_t j = t + 1; j < k; ++j) {
        Q[t * k + t] += r[j * k + t] * r[j * k + t];
        Q[t * k + j] = -r[j * k + t] * r[t * k + j];
      }
    }
    for (int iter = 0; iter < 100; ++iter) {
      double pQp = 0;
      for (int64_t t = 0; t < k; ++t) {
        Qp[t] = 0;
        for (int64_t j = 0; j < k; ++j) Qp[t] += Q[t * k + j] * P[j];
        pQp += P[t] * Qp[t];
      }
      double err = 0;
      for (int64_t t = 0; t < k; ++t) err = std::max(err, std::fabs(Qp[t] - pQp));
      if (err < 0.005 / k) break;
      for (int64_t t = 0; t < k; ++t) {
        const double diff = (-Qp[t] + pQp) / Q[t * k + t];
        P[t] += diff;
        pQp = (pQp + diff * (diff * Q[t * k + t] + 2 * Qp[t])) / (1 + diff) / (1 + diff);
        for (int64_t j = 0; j < k; ++j) {
          Qp[j] = (Qp[j] + diff * Q[t * k + j]) / (1 + diff);
          P[j] /= (1 + diff);
        }
      }
    }
    return P;
  }
};

// Three classes with 2, 1 and 2 RBF support vectors of 2 features.
Svm ThreeClassRbf() {
  Svm m;
  m.kernel = "RBF";
  m.params = {0.5f, 0, 0};
  m.vpc = {2, 1, 2};
  m.sv = {0, 0, 1, 1, 2, 0, -1, 1, 0, -2};
  m.coef = {0.5f, -0.3f, 0.8f, -0.6f, 0.2f, 0.4f, 0.7f, -0.5f, 0.3f, -0.9f};
  m.rho = {0.1f, -0.2f, 0.05f};
  m.classes = 3;
  return m;
}

OpSpec SvmSpec(const Svm& m, const std::vector<int64_t>& labels) {
  OpSpec spec = Ml("SVMClassifier");
  m.Set(spec);
  spec.Attr("classlabels_ints", labels);
  spec.Outputs(2);
  return spec;
}

TEST(MlSvmClassifier, MulticlassVotesAndPairwiseScores) {
  const Svm m = ThreeClassRbf();
  const std::vector<double> x = {0.5, 0.5, 1.5, -0.5, -1, 0, 0, 0, 2, 0.25};
  for (const char* pt : {"NONE", "SOFTMAX", "LOGISTIC"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = SvmSpec(m, {4, 5, 6});
    spec.Attr("post_transform", pt);
    auto out = RunOk(spec, {F32({5, 2}, x)});
    ASSERT_EQ(out.size(), 2u);
    std::vector<int64_t> labels;
    std::vector<double> z;
    for (int r = 0; r < 5; ++r) {
      const std::vector<double> d = m.Decisions(&x[2 * r]);
      labels.push_back(4 + m.Vote(d));
      const std::vector<double> t = Transform(d, pt);
      z.insert(z.end(), t.begin(), t.end());
    }
    ExpectInts(out[0], {5}, labels);
    ExpectFloats(out[1], {5, 3}, z);
  }
}

TEST(MlSvmClassifier, VoteTiesAndZeroScores) {
  // Zero coefficients leave the pairwise scores at rho. [1, -1, 1] gives each class one vote: the
  // first class wins the tie. A zero score votes for the pair's second class: [0, 0, 0] gives
  // class 2 two votes.
  Svm m;
  m.vpc = {1, 1, 1};
  m.sv = {1, 1, 1};
  m.coef = std::vector<float>(6, 0.0f);
  m.classes = 3;
  m.rho = {1, -1, 1};
  auto out = RunOk(SvmSpec(m, {4, 5, 6}), {F32({1, 1}, {2})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {4});
  ExpectFloats(out[1], {1, 3}, {1, -1, 1});
  m.rho = {0, 0, 0};
  out = RunOk(SvmSpec(m, {4, 5, 6}), {F32({1, 1}, {2})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {6});
  ExpectFloats(out[1], {1, 3}, {0, 0, 0});
}

TEST(MlSvmClassifier, MulticlassProbabilities) {
  Svm m = ThreeClassRbf();
  m.pa = {-1.2f, -0.8f, -1.5f};
  m.pb = {0.1f, -0.2f, 0.05f};
  const std::vector<double> x = {0.5, 0.5, 1.5, -0.5, -1, 0, 0, 0};
  auto out = RunOk(SvmSpec(m, {0, 1, 2}), {F32({4, 2}, x)});
  ASSERT_EQ(out.size(), 2u);
  std::vector<int64_t> labels;
  std::vector<double> z;
  for (int r = 0; r < 4; ++r) {
    const std::vector<double> d = m.Decisions(&x[2 * r]);
    labels.push_back(m.Vote(d));  // the vote decides the label even with probabilities
    const std::vector<double> p = m.Probabilities(d);
    EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-9);
    z.insert(z.end(), p.begin(), p.end());
  }
  ExpectInts(out[0], {4}, labels);
  ExpectFloats(out[1], {4, 3}, z, 1e-4);
}

TEST(MlSvmClassifier, BinaryScoreColumnsFollowTheTransform) {
  // One pairwise score s, positive for the first class. NONE writes [-s, s], LOGISTIC
  // [logistic(-s), logistic(s)], SOFTMAX and SOFTMAX_ZERO [1 - s, s] untransformed; PROBIT writes
  // probit(s) and leaves the second column unwritten (0 here).
  Svm m;
  m.vpc = {1, 2};
  m.sv = {1, 0, 0, 1, 1, 1};
  m.coef = {0.7f, -0.4f, -0.3f};
  m.rho = {0.2f};
  m.classes = 2;
  const std::vector<double> x = {0.5, 0, 0, 1, 1, 1};  // s = 0.4, -0.5, -0.1
  for (const char* pt : {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = Ml("SVMClassifier");
    m.Set(spec);
    spec.Attr("classlabels_strings", std::vector<std::string>{"no", "yes"});
    spec.Attr("post_transform", pt);
    spec.Outputs(2);
    auto out = RunOk(spec, {F32({3, 2}, x)});
    ASSERT_EQ(out.size(), 2u);
    ExpectStrings(out[0], {3}, {"no", "yes", "yes"});
    std::vector<double> z;
    for (int r = 0; r < 3; ++r) {
      const double s = m.Decisions(&x[2 * r])[0];
      const std::string p = pt;
      if (p == "NONE") {
        z.insert(z.end(), {-s, s});
      } else if (p == "LOGISTIC") {
        z.insert(z.end(), {Logistic(-s), Logistic(s)});
      } else if (p == "PROBIT") {
        z.insert(z.end(), {Probit(s), 0});
      } else {
        z.insert(z.end(), {1 - s, s});
      }
    }
    ExpectFloats(out[1], {3, 2}, z, 1e-4);
  }
}

TEST(MlSvmClassifier, BinaryPolyProbabilities) {
  Svm m;
  m.kernel = "POLY";
  m.params = {0.5f, 1, 3};
  m.vpc = {1, 1};
  m.sv = {1, 0, 0, 1};
  m.coef = {0.3f, -0.2f};
  m.rho = {-0.1f};
  m.pa = {-2};
  m.pb = {0.3f};
  m.classes = 2;
  const std::vector<double> x = {1, 1, -1, 0.5, 0, 2};
  for (const char* pt : {"NONE", "SOFTMAX"}) {
    SCOPED_TRACE(pt);
    OpSpec spec = SvmSpec(m, {0, 1});
    spec.Attr("post_transform", pt);
    auto out = RunOk(spec, {F32({3, 2}, x)});
    ASSERT_EQ(out.size(), 2u);
    std::vector<int64_t> labels;
    std::vector<double> z;
    for (int r = 0; r < 3; ++r) {
      const std::vector<double> d = m.Decisions(&x[2 * r]);
      labels.push_back(m.Vote(d));
      const std::vector<double> p = Transform(m.Probabilities(d), pt);
      z.insert(z.end(), p.begin(), p.end());
    }
    ExpectInts(out[0], {3}, labels);
    ExpectFloats(out[1], {3, 2}, z, 1e-4);
  }
}

TEST(MlSvmClassifier, SigmoidKernel) {
  Svm m = ThreeClassRbf();
  m.kernel = "SIGMOID";
  m.params = {0.3f, -0.2f, 0};
  const std::vector<double> x = {0.5, 0.5, 1.5, -0.5, -1, 0};
  auto out = RunOk(SvmSpec(m, {0, 1, 2}), {F32({3, 2}, x)});
  ASSERT_EQ(out.size(), 2u);
  std::vector<int64_t> labels;
  std::vector<double> z;
  for (int r = 0; r < 3; ++r) {
    const std::vector<double> d = m.Decisions(&x[2 * r]);
    labels.push_back(m.Vote(d));
    z.insert(z.end(), d.begin(), d.end());
  }
  ExpectInts(out[0], {3}, labels);
  ExpectFloats(out[1], {3, 3}, z);
}

TEST(MlSvmClassifier, LinearModeWithoutSupportVectors) {
  // liblinear: scores = X . coefficients[c] + rho[0] for every class; the kernel type is ignored.
  Svm m;
  m.kernel = "RBF";
  m.params = {1, 0, 0};
  m.coef = {1, 0, 0, 1, -1, -1};
  m.rho = {0.5f};
  m.classes = 3;
  OpSpec spec = SvmSpec(m, {7, 8, 9});
  spec.Attr("post_transform", "SOFTMAX");
  auto out = RunOk(spec, {F32({2, 2}, {1, 2, 3, -1})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {2}, {8, 7});
  ExpectFloats(out[1], {2, 3}, TransformRows({1.5, 2.5, -2.5, 3.5, -0.5, -1.5}, 3, "SOFTMAX"));
  // Coefficients that do not split evenly: the features are 5 / 2 = 2 and the last one is unused.
  Svm odd;
  odd.coef = {1, 2, 3, 4, 5};
  odd.rho = {0};
  odd.classes = 2;
  out = RunOk(SvmSpec(odd, {0, 1}), {F32({1, 2}, {1, 2})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {1});
  ExpectFloats(out[1], {1, 2}, {5, 11});
  ExpectError(SvmSpec(odd, {0, 1}), {F32({1, 3}, {1, 2, 3})}, "features");
}

TEST(MlSvmClassifier, LinearModeBinaryLabelRule) {
  // Two classes without probabilities: with all coefficients >= 0 the second label wins once the
  // top score reaches 0.5, even when it is the first class's; with mixed signs once it is > 0.
  Svm pos;
  pos.coef = {0.5f, 0, 0, 0.25f};
  pos.rho = {0};
  pos.classes = 2;
  auto out = RunOk(SvmSpec(pos, {100, 200}), {F32({3, 2}, {1, 0, 0.5, 0, 0, 4})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {3}, {200, 100, 200});  // scores [0.5, 0], [0.25, 0], [0, 1]
  ExpectFloats(out[1], {3, 2}, {0.5, 0, 0.25, 0, 0, 1});
  Svm mixed = pos;
  mixed.coef = {1, 0, -1, 0};
  mixed.rho = {-0.5f};
  out = RunOk(SvmSpec(mixed, {100, 200}), {F32({3, 2}, {2, 0, -2, 0, 0, 0})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {3}, {200, 200, 100});  // scores [1.5, -2.5], [-2.5, 1.5], [-0.5, -0.5]
  ExpectFloats(out[1], {3, 2}, {1.5, -2.5, -2.5, 1.5, -0.5, -0.5});
}

TEST(MlSvmClassifier, OneDimEmptyAndOtherDtypes) {
  const Svm m = ThreeClassRbf();
  const std::vector<double> d = m.Decisions(std::vector<double>{1, 0}.data());
  auto out = RunOk(SvmSpec(m, {0, 1, 2}), {F32({2}, {1, 0})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {1}, {m.Vote(d)});
  ExpectFloats(out[1], {1, 3}, d);
  out = RunOk(SvmSpec(m, {0, 1, 2}), {F32({0, 2}, {})});
  ASSERT_EQ(out.size(), 2u);
  ExpectInts(out[0], {0}, {});
  ExpectFloats(out[1], {0, 3}, {});
  for (DataType dt : {DataType::kDouble, DataType::kInt32, DataType::kInt64}) {
    SCOPED_TRACE(DataTypeName(dt));
    out = RunOk(SvmSpec(m, {0, 1, 2}), {MakeTensor(dt, {1, 2}, {1, 0})});
    ASSERT_EQ(out.size(), 2u);
    ExpectInts(out[0], {1}, {m.Vote(d)});
    ExpectFloats(out[1], {1, 3}, d);
  }
}

TEST(MlSvmClassifier, LargeBatchWithTwoThreads) {
  Svm m;
  m.kernel = "RBF";
  m.params = {0.3f, 0, 0};
  m.vpc = {3, 2, 4, 1};
  m.classes = 4;
  const int64_t f = 6, v = 10, n = 1200;
  m.sv = ToVector<float>(RandomTensor(DataType::kFloat, {v * f}, 21, -1, 1));
  m.coef = ToVector<float>(RandomTensor(DataType::kFloat, {(m.classes - 1) * v}, 22, -1, 1));
  m.rho = ToVector<float>(RandomTensor(DataType::kFloat, {6}, 23, -0.5, 0.5));
  m.pa = ToVector<float>(RandomTensor(DataType::kFloat, {6}, 24, -2, -0.5));
  m.pb = ToVector<float>(RandomTensor(DataType::kFloat, {6}, 25, -0.5, 0.5));
  const Tensor x = RandomTensor(DataType::kFloat, {n, f}, 26, -1.5, 1.5);
  const std::vector<double> xd = ToDoubles(x);
  auto one = RunOk(SvmSpec(m, {0, 1, 2, 3}), {x}, 1);
  auto two = RunOk(SvmSpec(m, {0, 1, 2, 3}), {x}, 2);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(TensorsEqual(one[0], two[0]));
  EXPECT_TRUE(TensorsEqual(one[1], two[1]));
  const std::vector<int64_t> labels = ToVector<int64_t>(two[0]);
  const std::vector<double> z = ToDoubles(two[1]);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<double> d = m.Decisions(&xd[r * f]);
    bool clear = true;  // no decision value so near 0 that float rounding may flip its vote
    for (double s : d) clear = clear && std::fabs(s) > 1e-4;
    if (clear) {
      EXPECT_EQ(labels[r], m.Vote(d)) << "row " << r;
    }
    const std::vector<double> p = m.Probabilities(d);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(z[r * 4 + c], p[c], 1e-4) << "row " << r << " class " << c;
  }
}

TEST(MlSvmClassifier, Errors) {
  const Tensor x = F32({1, 2}, {1, 0});
  const Svm good = ThreeClassRbf();
  auto check = [&](const char* needle, auto&& edit) {
    OpSpec spec = SvmSpec(good, {0, 1, 2});
    edit(spec);
    ExpectError(spec, {x}, needle);
  };
  check("kernel_type", [](OpSpec& s) { s.Attr("kernel_type", "CUBIC"); });
  check("kernel_params", [](OpSpec& s) { s.Attr("kernel_params", std::vector<float>{1, 2}); });
  check("kernel_params", [](OpSpec& s) { s.Attr("kernel_params", std::vector<float>{1, 2, 3, 4}); });
  check("classlabels", [](OpSpec& s) { s.attrs.erase("classlabels_ints"); });
  check("coefficients", [](OpSpec& s) { s.Attr("coefficients", std::vector<float>{}); });
  check("rho", [](OpSpec& s) { s.attrs.erase("rho"); });
  check("prob_b", [](OpSpec& s) { s.Attr("prob_a", std::vector<float>{1, 2, 3}); });
  check("vectors_per_class", [](OpSpec& s) { s.Attr("vectors_per_class", std::vector<int64_t>{2, 3}); });
  check("vectors_per_class", [](OpSpec& s) { s.Attr("vectors_per_class", std::vector<int64_t>{2, -1, 2}); });
  check("vectors_per_class", [](OpSpec& s) { s.Attr("vectors_per_class", std::vector<int64_t>{2, 1, 1000}); });
  check("not a multiple", [](OpSpec& s) { s.Attr("support_vectors", std::vector<float>(11, 1.0f)); });
  check("coefficients", [](OpSpec& s) { s.Attr("coefficients", std::vector<float>(9, 1.0f)); });
  check("rho", [](OpSpec& s) { s.Attr("rho", std::vector<float>{1, 2}); });
  check("prob_a", [](OpSpec& s) {
    s.Attr("prob_a", std::vector<float>{1});
    s.Attr("prob_b", std::vector<float>{1});
  });
  check("post_transform", [](OpSpec& s) { s.Attr("post_transform", "SIGMOID"); });
  ExpectError(SvmSpec(good, {0, 1, 2}), {F32({1, 3}, {1, 2, 3})}, "features");
  ExpectError(SvmSpec(good, {0, 1, 2}), {F32({1, 1, 2}, {1, 2})}, "[C] or [N, C]");
  ExpectError(SvmSpec(good, {0, 1, 2}), {F32({}, {1})}, "[C] or [N, C]");
}

OpSpec SvmRegressorSpec(const std::string& kernel, const std::vector<float>& params) {
  OpSpec spec = Ml("SVMRegressor");
  spec.Attr("kernel_type", kernel);
  spec.Attr("kernel_params", params);
  spec.Attr("n_supports", 3);
  spec.Attr("support_vectors", std::vector<float>{0, 0, 1, 2, -1, 0.5f});
  spec.Attr("coefficients", std::vector<float>{0.5f, -1, 2});
  spec.Attr("rho", std::vector<float>{0.25f});
  return spec;
}

TEST(MlSvmRegressor, KernelsOneClassAndIgnoredTransform) {
  const std::vector<double> x = {0, 0, 1, 2, 0.5, 0.5};
  const std::vector<double> sv = {0, 0, 1, 2, -1, 0.5}, coef = {0.5, -1, 2};
  struct Case {
    std::string kernel;
    std::vector<float> params;
  };
  for (const Case& c : std::vector<Case>{{"LINEAR", {0, 0, 0}},
                                         {"RBF", {0.7f, 0, 0}},
                                         {"POLY", {0.5f, 1, 2}},
                                         {"POLY", {0.5f, 1, 3}},
                                         {"POLY", {0.5f, 2, 2.5f}},
                                         {"SIGMOID", {0.4f, -0.1f, 0}}}) {
    SCOPED_TRACE(c.kernel + " degree " + std::to_string(c.params[2]));
    std::vector<double> want;
    for (int r = 0; r < 3; ++r) {
      double y = 0.25;
      for (int s = 0; s < 3; ++s) {
        double dot = 0, d2 = 0;
        for (int j = 0; j < 2; ++j) {
          dot += x[2 * r + j] * sv[2 * s + j];
          d2 += (x[2 * r + j] - sv[2 * s + j]) * (x[2 * r + j] - sv[2 * s + j]);
        }
        const double t = c.params[0] * dot + c.params[1];
        const double k = c.kernel == "LINEAR" ? dot
                         : c.kernel == "RBF"  ? std::exp(-c.params[0] * d2)
                         : c.kernel == "POLY" ? std::pow(t, c.params[2])
                                              : std::tanh(t);
        y += coef[s] * k;
      }
      want.push_back(y);
    }
    OpSpec spec = SvmRegressorSpec(c.kernel, c.params);
    spec.Attr("post_transform", "LOGISTIC");  // ONNX Runtime never applies it to the regression
    auto out = RunOk(spec, {F32({3, 2}, x)});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {3, 1}, want);
    spec.Attr("one_class", 1);
    out = RunOk(spec, {F32({3, 2}, x)});
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> sign;
    for (double y : want) sign.push_back(y > 0 ? 1 : -1);
    ExpectFloats(out[0], {3, 1}, sign);
  }
}

TEST(MlSvmRegressor, LinearModeOneDimAndEmptyInputs) {
  OpSpec spec = Ml("SVMRegressor");
  spec.Attr("kernel_type", "RBF");  // forced to LINEAR without support vectors
  spec.Attr("kernel_params", std::vector<float>{1, 0, 0});
  spec.Attr("coefficients", std::vector<float>{1, -2});
  spec.Attr("rho", std::vector<float>{0.5f});
  auto out = RunOk(spec, {F32({2, 2}, {1, 1, 3, 0.5})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 1}, {-0.5, 2.5});
  out = RunOk(spec, {F32({2}, {1, 1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 1}, {-0.5});
  out = RunOk(spec, {F32({0, 2}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 1}, {});
  // A negative n_supports is the linear model too (ONNX Runtime's reading).
  spec.Attr("n_supports", -1);
  out = RunOk(spec, {F32({1, 2}, {1, 1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 1}, {-0.5});
}

TEST(MlSvmRegressor, Errors) {
  const Tensor x = F32({1, 2}, {1, 0});
  OpSpec spec = SvmRegressorSpec("RBF", {1, 0, 0});
  spec.Attr("n_supports", 4);
  ExpectError(spec, {x}, "n_supports");
  spec = SvmRegressorSpec("RBF", {1, 0, 0});
  spec.Attr("coefficients", std::vector<float>{1, 2});
  ExpectError(spec, {x}, "coefficients");
  spec = SvmRegressorSpec("RBF", {1, 0, 0});
  spec.attrs.erase("rho");
  ExpectError(spec, {x}, "rho");
  ExpectError(SvmRegressorSpec("FANCY", {1, 0, 0}), {x}, "kernel_type");
  ExpectError(SvmRegressorSpec("RBF", {1}), {x}, "kernel_params");
  ExpectError(SvmRegressorSpec("RBF", {1, 0, 0}), {F32({}, {1})}, "[C] or [N, C]");
  ExpectError(SvmRegressorSpec("RBF", {1, 0, 0}), {F32({1, 3}, {1, 2, 3})}, "features");
  ExpectError(SvmRegressorSpec("RBF", {1, 0, 0}), {MakeTensor(DataType::kInt64, {1, 2}, {1, 0})}, "no CPU kernel");
}

// =============================================================================================
// Normalizer, Scaler, Binarizer, Imputer

TEST(MlNormalizer, Modes) {
  const std::vector<double> x = {1, -2, 4, -1, -2, -4, 0, 0, 0};
  struct Case {
    const char* norm;
    std::vector<double> want;
  };
  // MAX divides by the row max even when it is negative; a zero divisor copies the row.
  for (const Case& c :
       std::vector<Case>{{"MAX", {0.25, -0.5, 1, 1, 2, 4, 0, 0, 0}},
                         {"L1", {1 / 7.0, -2 / 7.0, 4 / 7.0, -1 / 7.0, -2 / 7.0, -4 / 7.0, 0, 0, 0}},
                         {"L2",
                          {1 / std::sqrt(21.0), -2 / std::sqrt(21.0), 4 / std::sqrt(21.0), -1 / std::sqrt(21.0),
                           -2 / std::sqrt(21.0), -4 / std::sqrt(21.0), 0, 0, 0}}}) {
    SCOPED_TRACE(c.norm);
    OpSpec spec = Ml("Normalizer");
    spec.Attr("norm", c.norm);
    auto out = RunOk(spec, {F32({3, 3}, x)});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {3, 3}, c.want);
  }
}

TEST(MlNormalizer, DtypesOneDimAndEmpty) {
  OpSpec spec = Ml("Normalizer");  // norm defaults to MAX
  auto out = RunOk(spec, {MakeTensor(DataType::kInt64, {2}, {2, 8})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2}, {0.25, 1});
  spec.Attr("norm", "L2");
  for (DataType dt : {DataType::kInt32, DataType::kDouble}) {
    out = RunOk(spec, {MakeTensor(dt, {2, 2}, {3, -4, 0, 5})});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {2, 2}, {0.6, -0.8, 0, 1});
  }
  out = RunOk(spec, {F32({0, 3}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 3}, {});
}

TEST(MlNormalizer, Errors) {
  OpSpec spec = Ml("Normalizer");
  spec.Attr("norm", "L3");
  ExpectError(spec, {F32({1, 2}, {1, 2})}, "norm");
  ExpectError(Ml("Normalizer"), {F32({1, 1, 2}, {1, 2})}, "[C] or [N, C]");
  ExpectError(Ml("Normalizer"), {F32({}, {1})}, "[C] or [N, C]");
  ExpectError(Ml("Normalizer"), {Str({1}, {"a"})}, "no CPU kernel");
}

TEST(MlScaler, PerFeatureAndBroadcast) {
  OpSpec spec = Ml("Scaler");
  spec.Attr("offset", std::vector<float>{1, 2, 3});
  spec.Attr("scale", std::vector<float>{2, 0.5f, -1});
  auto out = RunOk(spec, {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {0, 0, 0, 6, 1.5, -3});
  for (DataType dt : {DataType::kDouble, DataType::kInt32, DataType::kInt64}) {
    out = RunOk(spec, {MakeTensor(dt, {3}, {1, 2, 3})});
    ASSERT_EQ(out.size(), 1u);
    ExpectFloats(out[0], {3}, {0, 0, 0});
  }
  OpSpec one = Ml("Scaler");
  one.Attr("offset", std::vector<float>{1});
  one.Attr("scale", std::vector<float>{2});
  out = RunOk(one, {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {0, 2, 4, 6, 8, 10});
  out = RunOk(one, {F32({0, 3}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 3}, {});
}

TEST(MlScaler, RankThreeUsesDimOneAsTheStride) {
  // ONNX Runtime's stride is dim 1 for any rank >= 2, applied to the flat index.
  OpSpec spec = Ml("Scaler");
  spec.Attr("offset", std::vector<float>{0, 10});
  spec.Attr("scale", std::vector<float>{1, 1});
  auto out = RunOk(spec, {F32({2, 2, 1}, {1, 2, 3, 4})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 2, 1}, {1, -8, 3, -6});
}

TEST(MlScaler, Errors) {
  const Tensor x = F32({1, 3}, {1, 2, 3});
  OpSpec spec = Ml("Scaler");
  spec.Attr("offset", std::vector<float>{1});
  ExpectError(spec, {x}, "scale is empty");
  spec.Attr("scale", std::vector<float>{1, 2});
  ExpectError(spec, {x}, "offset");
  spec.Attr("offset", std::vector<float>{1, 2});
  ExpectError(spec, {x}, "one per feature");
  ExpectError(spec, {F32({}, {1})}, "scalar");
}

TEST(MlBinarizer, ThresholdNaNAndDtype) {
  OpSpec spec = Ml("Binarizer");
  auto out = RunOk(spec, {F32({3}, {-0.1, 0, 0.1})});  // threshold defaults to 0
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {3}, {0, 0, 1});
  spec.Attr("threshold", 0.5f);
  out = RunOk(spec, {F32({2, 2}, {0.2, 0.5, 0.7, -1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 2}, {0, 0, 1, 0});
  out = RunOk(spec, {F32({0}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0}, {});
  ExpectError(spec, {F32({2}, {1, kNaN})}, "NaN");
  ExpectError(spec, {MakeTensor(DataType::kDouble, {1}, {1})}, "no CPU kernel");
}

TEST(MlImputer, FloatsWithNaNAndPerFeatureValues) {
  OpSpec spec = Ml("Imputer");
  spec.Attr("imputed_value_floats", std::vector<float>{10, 20, 30});
  spec.Attr("replaced_value_float", static_cast<float>(kNaN));
  const Tensor x = F32({2, 3}, {kNaN, 1, 2, 3, kNaN, 0});
  auto out = RunOk(spec, {x});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {10, 1, 2, 3, 20, 0});
  // One value for every feature, replacing the default 0 (NaN is left alone).
  spec.Attr("imputed_value_floats", std::vector<float>{5});
  spec.attrs.erase("replaced_value_float");
  out = RunOk(spec, {x});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {kNaN, 1, 2, 3, kNaN, 5});
  // A list that is neither 1 long nor one per feature: ONNX Runtime uses its first value.
  spec.Attr("imputed_value_floats", std::vector<float>{7, 8});
  out = RunOk(spec, {x});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {kNaN, 1, 2, 3, kNaN, 7});
  out = RunOk(spec, {F32({0, 3}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 3}, {});
}

TEST(MlImputer, Int64) {
  OpSpec spec = Ml("Imputer");
  spec.Attr("imputed_value_int64s", std::vector<int64_t>{-1, -2});
  spec.Attr("replaced_value_int64", 7);
  auto out = RunOk(spec, {I64({2, 2}, {7, 1, 2, 7})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {2, 2}, {-1, 1, 2, -2});
  out = RunOk(spec, {I64({2}, {7, 7})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {2}, {-1, -2});
}

TEST(MlImputer, Errors) {
  const Tensor x = F32({1, 2}, {1, 2});
  OpSpec spec = Ml("Imputer");
  ExpectError(spec, {x}, "imputed_value_floats");
  spec.Attr("imputed_value_floats", std::vector<float>{1});
  spec.Attr("imputed_value_int64s", std::vector<int64_t>{1});
  ExpectError(spec, {x}, "exactly one");
  OpSpec ints = Ml("Imputer");
  ints.Attr("imputed_value_int64s", std::vector<int64_t>{1});
  ExpectError(ints, {x}, "imputed_value_floats is empty");
  OpSpec floats = Ml("Imputer");
  floats.Attr("imputed_value_floats", std::vector<float>{1});
  ExpectError(floats, {I64({1}, {1})}, "imputed_value_int64s is empty");
  ExpectError(floats, {F32({}, {1})}, "scalar");
  ExpectError(floats, {MakeTensor(DataType::kInt32, {1}, {1})}, "no CPU kernel");
}

// =============================================================================================
// ArrayFeatureExtractor, OneHotEncoder

TEST(MlArrayFeatureExtractor, LastAxisAndShapes) {
  const OpSpec spec = Ml("ArrayFeatureExtractor");
  auto out = RunOk(spec, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), I64({2}, {2, 0})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 2}, {3, 1, 6, 4});
  out = RunOk(spec, {F32({3}, {1, 2, 3}), I64({1, 2}, {1, 1})});  // [C] gives [1, K]
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 2}, {2, 2});
  out = RunOk(spec, {MakeTensor(DataType::kInt32, {2, 1, 3}, {1, 2, 3, 4, 5, 6}), I64({1}, {1})});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dtype(), DataType::kInt32);
  EXPECT_EQ(ToVector<int32_t>(out[0]), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(ShapeToString(out[0].shape()), "[2,1,1]");
  out = RunOk(spec, {Str({2, 2}, {"a", "b", "c", "d"}), I64({3}, {1, 0, 1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {2, 3}, {"b", "a", "b", "d", "c", "d"});
  out = RunOk(spec, {MakeTensor(DataType::kDouble, {0, 3}, {}), I64({1}, {2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ShapeToString(out[0].shape()), "[0,1]");
  out = RunOk(spec, {I64({1, 2}, {5, 6}), I64({}, {1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {1, 1}, {6});
}

TEST(MlArrayFeatureExtractor, Errors) {
  const OpSpec spec = Ml("ArrayFeatureExtractor");
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectError(spec, {x, I64({1}, {3})}, "out of range");
  ExpectError(spec, {x, I64({1}, {-1})}, "out of range");
  ExpectError(spec, {x, I64({0}, {})}, "empty");
  ExpectError(spec, {F32({}, {1}), I64({1}, {0})}, "scalar");
  ExpectError(spec, {x, MakeTensor(DataType::kInt32, {1}, {0})}, "int64");
  ExpectError(spec, {x}, "input 1");
}

TEST(MlOneHotEncoder, IntFloatAndStringCategories) {
  OpSpec spec = Ml("OneHotEncoder");
  spec.Attr("cats_int64s", std::vector<int64_t>{1, 3, 5});
  auto out = RunOk(spec, {I64({2}, {3, 4})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 3}, {0, 1, 0, 0, 0, 0});
  // Floats truncate toward zero; NaN matches nothing.
  out = RunOk(spec, {F32({2, 2}, {1.9, 5.2, -0.5, kNaN})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 2, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  out = RunOk(spec, {MakeTensor(DataType::kDouble, {}, {3.99})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {3}, {0, 1, 0});
  OpSpec strs = Ml("OneHotEncoder");
  strs.Attr("cats_strings", std::vector<std::string>{"x", "y", "x"});  // a repeat maps to its last position
  out = RunOk(strs, {Str({3}, {"x", "y", "z"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {3, 3}, {0, 0, 1, 0, 1, 0, 0, 0, 0});
  // String input against int categories matches nothing.
  out = RunOk(spec, {Str({1}, {"3"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 3}, {0, 0, 0});
  out = RunOk(spec, {I64({0, 2}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 2, 3}, {});
  out = RunOk(spec, {I64({1, 2, 1}, {5, 1})});  // any rank
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 2, 1, 3}, {0, 0, 1, 1, 0, 0});
}

TEST(MlOneHotEncoder, Errors) {
  OpSpec spec = Ml("OneHotEncoder");
  spec.Attr("cats_int64s", std::vector<int64_t>{1, 3, 5});
  spec.Attr("zeros", 0);
  ExpectError(spec, {I64({2}, {1, 2})}, "category");
  spec.Attr("cats_strings", std::vector<std::string>{"a"});
  ExpectError(spec, {I64({1}, {1})}, "only one of");
  ExpectError(Ml("OneHotEncoder"), {I64({1}, {1})}, "non-empty");
  OpSpec ok = Ml("OneHotEncoder");
  ok.Attr("cats_int64s", std::vector<int64_t>{1});
  ExpectError(ok, {MakeTensor(DataType::kInt32, {1}, {1})}, "no CPU kernel");
}

// =============================================================================================
// LabelEncoder, CategoryMapper

TEST(MlLabelEncoder, V1StringsAndIndices) {
  OpSpec spec = Ml("LabelEncoder", 1);
  spec.Attr("classes_strings", std::vector<std::string>{"a", "b", "c"});
  auto out = RunOk(spec, {Str({3}, {"b", "z", "a"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {3}, {1, -1, 0});
  out = RunOk(spec, {I64({2, 2}, {2, 5, -1, 0})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {2, 2}, {"c", "_Unused", "_Unused", "a"});
  spec.Attr("default_int64", 9);
  spec.Attr("default_string", "?");
  out = RunOk(spec, {Str({1}, {"q"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {1}, {9});
  out = RunOk(spec, {I64({1}, {3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {1}, {"?"});
  ExpectError(spec, {F32({1}, {1})}, "no CPU kernel");
  ExpectError(Ml("LabelEncoder", 1), {Str({1}, {"a"})}, "classes_strings");
}

TEST(MlLabelEncoder, V2FloatKeysNaNAndSignedZero) {
  // ONNX Runtime's v2 map compares keys with ==: a NaN key never matches (v4 matches NaN to NaN),
  // and -0.0 matches 0.0.
  OpSpec spec = Ml("LabelEncoder", 2);
  spec.Attr("keys_floats", std::vector<float>{1.5f, std::numeric_limits<float>::quiet_NaN(), -0.0f});
  spec.Attr("values_strings", std::vector<std::string>{"x", "nan", "zero"});
  auto out = RunOk(spec, {F32({4}, {1.5, kNaN, 0.0, 2})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {4}, {"x", "_Unused", "zero", "_Unused"});
}

TEST(MlLabelEncoder, V2TypePairsAndDefaults) {
  OpSpec s2i = Ml("LabelEncoder", 2);
  s2i.Attr("keys_strings", std::vector<std::string>{"a", "b", "a"});  // the first of repeated keys wins
  s2i.Attr("values_int64s", std::vector<int64_t>{1, 2, 3});
  auto out = RunOk(s2i, {Str({2, 2}, {"a", "b", "c", "a"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {2, 2}, {1, 2, -1, 1});
  OpSpec i2f = Ml("LabelEncoder", 3);
  i2f.Attr("keys_int64s", std::vector<int64_t>{4, 5});
  i2f.Attr("values_floats", std::vector<float>{0.5f, 1.5f});
  out = RunOk(i2f, {I64({3}, {5, 4, 6})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {3}, {1.5, 0.5, 0});
  EXPECT_TRUE(std::signbit(ToVector<float>(out[0])[2])) << "default_float is -0.0";
  i2f.Attr("default_float", 7.0f);
  out = RunOk(i2f, {I64({1}, {6})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1}, {7});
  OpSpec f2f = Ml("LabelEncoder", 2);
  f2f.Attr("keys_floats", std::vector<float>{0.25f});
  f2f.Attr("values_floats", std::vector<float>{-3});
  out = RunOk(f2f, {F32({2}, {0.25, 1})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2}, {-3, -0.0});
  OpSpec i2s = Ml("LabelEncoder", 2);
  i2s.Attr("keys_int64s", std::vector<int64_t>{1});
  i2s.Attr("values_strings", std::vector<std::string>{"one"});
  i2s.Attr("default_string", "none");
  out = RunOk(i2s, {I64({2}, {1, 2})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {2}, {"one", "none"});
  OpSpec s2s = Ml("LabelEncoder", 2);
  s2s.Attr("keys_strings", std::vector<std::string>{"k"});
  s2s.Attr("values_strings", std::vector<std::string>{"v"});
  out = RunOk(s2s, {Str({0}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {0}, {});
  OpSpec i2i = Ml("LabelEncoder", 2);
  i2i.Attr("keys_int64s", std::vector<int64_t>{1, 2});
  i2i.Attr("values_int64s", std::vector<int64_t>{10, 20});
  i2i.Attr("default_int64", 0);
  out = RunOk(i2i, {I64({}, {2})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {}, {20});
  OpSpec f2i = Ml("LabelEncoder", 2);
  f2i.Attr("keys_floats", std::vector<float>{2.5f});
  f2i.Attr("values_int64s", std::vector<int64_t>{3});
  out = RunOk(f2i, {F32({2}, {2.5, 0})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {2}, {3, -1});
}

TEST(MlLabelEncoder, V2Errors) {
  const Tensor x = Str({1}, {"a"});
  OpSpec spec = Ml("LabelEncoder", 2);
  spec.Attr("values_int64s", std::vector<int64_t>{1});
  ExpectError(spec, {x}, "keys_");
  spec = Ml("LabelEncoder", 2);
  spec.Attr("keys_strings", std::vector<std::string>{"a"});
  ExpectError(spec, {x}, "values_");
  spec.Attr("values_int64s", std::vector<int64_t>{1, 2});
  ExpectError(spec, {x}, "values_int64s has 2");
  spec.Attr("values_int64s", std::vector<int64_t>{1});
  spec.Attr("keys_int64s", std::vector<int64_t>{1});
  ExpectError(spec, {x}, "only one of keys");
  spec.attrs.erase("keys_int64s");
  ExpectError(spec, {I64({1}, {1})}, "keys_strings");
  ExpectError(spec, {MakeTensor(DataType::kInt32, {1}, {1})}, "no CPU kernel");
}

TEST(MlCategoryMapper, BothDirections) {
  OpSpec spec = Ml("CategoryMapper");
  spec.Attr("cats_strings", std::vector<std::string>{"cat", "dog", "cow"});
  spec.Attr("cats_int64s", std::vector<int64_t>{1, 2, 1});  // 1 maps back to the last, "cow"
  auto out = RunOk(spec, {Str({2, 2}, {"dog", "pig", "cat", "cow"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {2, 2}, {2, -1, 1, 1});
  out = RunOk(spec, {I64({3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {3}, {"cow", "dog", "_Unused"});
  spec.Attr("default_int64", 42);
  spec.Attr("default_string", "n/a");
  out = RunOk(spec, {Str({1}, {"x"})});
  ASSERT_EQ(out.size(), 1u);
  ExpectInts(out[0], {1}, {42});
  out = RunOk(spec, {I64({1}, {0})});
  ASSERT_EQ(out.size(), 1u);
  ExpectStrings(out[0], {1}, {"n/a"});
  spec.Attr("cats_int64s", std::vector<int64_t>{1});
  ExpectError(spec, {Str({1}, {"x"})}, "cats_int64s");
  spec.attrs.erase("cats_int64s");
  ExpectError(spec, {Str({1}, {"x"})}, "both required");
  ExpectError(Ml("CategoryMapper"), {F32({1}, {1})}, "no CPU kernel");
}

// =============================================================================================
// FeatureVectorizer

TEST(MlFeatureVectorizer, ConcatenatesTruncatesAndPads) {
  OpSpec spec = Ml("FeatureVectorizer");
  spec.Attr("inputdimensions", std::vector<int64_t>{2, 3});
  const Tensor a = I64({2, 2}, {1, 2, 3, 4});
  const Tensor b = I64({2, 3}, {5, 6, 7, 8, 9, 10});
  auto out = RunOk(spec, {a, b});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 5}, {1, 2, 5, 6, 7, 3, 4, 8, 9, 10});
  // Input 0 truncated to 1 column, input 1 padded to 4.
  spec.Attr("inputdimensions", std::vector<int64_t>{1, 4});
  out = RunOk(spec, {a, b});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 5}, {1, 5, 6, 7, 0, 3, 8, 9, 10, 0});
  // [C] inputs are one row; double and int32 inputs are cast to float.
  spec.Attr("inputdimensions", std::vector<int64_t>{2, 1, 2});
  out = RunOk(spec, {MakeTensor(DataType::kDouble, {2}, {0.5, 1.5}), MakeTensor(DataType::kDouble, {1}, {-3}),
                     MakeTensor(DataType::kDouble, {1, 2}, {7, 8})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {1, 5}, {0.5, 1.5, -3, 7, 8});
  spec.Attr("inputdimensions", std::vector<int64_t>{1});
  out = RunOk(spec, {MakeTensor(DataType::kInt32, {2, 1}, {-1, 9})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 1}, {-1, 9});
  // The features of a row are all dims after the first.
  spec.Attr("inputdimensions", std::vector<int64_t>{1, 4});
  out = RunOk(spec, {F32({2, 1}, {1, 2}), F32({2, 2, 2}, {3, 4, 5, 6, 7, 8, 9, 10})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {2, 5}, {1, 3, 4, 5, 6, 2, 7, 8, 9, 10});
  out = RunOk(spec, {F32({0, 1}, {}), F32({0, 4}, {})});
  ASSERT_EQ(out.size(), 1u);
  ExpectFloats(out[0], {0, 5}, {});
}

TEST(MlFeatureVectorizer, Errors) {
  const Tensor a = F32({2, 2}, {1, 2, 3, 4});
  ExpectError(Ml("FeatureVectorizer"), {a}, "inputdimensions");
  OpSpec spec = Ml("FeatureVectorizer");
  spec.Attr("inputdimensions", std::vector<int64_t>{2, -1});
  ExpectError(spec, {a, a}, "negative");
  spec.Attr("inputdimensions", std::vector<int64_t>{2, 2});
  ExpectError(spec, {a}, "inputdimensions has 2");
  ExpectError(spec, {a, F32({3, 2}, {1, 2, 3, 4, 5, 6})}, "rows");
  ExpectError(spec, {a, F32({1, 2}, {1, 2})}, "same batch size");
  ExpectError(spec, {F32({}, {1}), a}, "scalar");
  ExpectError(spec, {a, Str({2, 2}, {"a", "b", "c", "d"})}, "dtype");
  ExpectError(spec, {Str({2}, {"a", "b"}), a}, "no CPU kernel");
}

}  // namespace
}  // namespace strata
