// ai.onnx.ml TreeEnsembleRegressor / TreeEnsembleClassifier (cpu/ml_tree.cc): small trees
// whose outputs are worked out by hand, random ensembles against an evaluator written here
// from the attribute lists (a map from (tree, node) ids and a recursive descent, nothing
// shared with the kernel), every branch mode and NaN routing, the binary classifier rules,
// the input types, thread counts (bit-identical results), and one error per bad attribute or
// input. (Against ONNX Runtime itself: bench/compare-ort/ml_parity.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RunKernel;
using testing::RunOptions;
using testing::ToVector;

constexpr const char* kMl = "ai.onnx.ml";
const float kNan = std::numeric_limits<float>::quiet_NaN();

// An ensemble as attribute lists, for both the kernel and the reference evaluator.
struct Forest {
  std::vector<int64_t> tree, id, feature, yes, no, missing;
  std::vector<std::string> mode;
  std::vector<float> value;
  std::vector<int64_t> w_tree, w_node, w_target;
  std::vector<float> w_value;

  void Branch(int64_t t, int64_t i, const std::string& m, int64_t f, float v, int64_t y, int64_t n, int64_t miss = 0) {
    tree.push_back(t), id.push_back(i), mode.push_back(m), feature.push_back(f), value.push_back(v);
    yes.push_back(y), no.push_back(n), missing.push_back(miss);
  }
  void Leaf(int64_t t, int64_t i, std::vector<std::pair<int64_t, float>> votes) {
    Branch(t, i, "LEAF", 0, 0.0f, 0, 0);
    for (auto [k, w] : votes) w_tree.push_back(t), w_node.push_back(i), w_target.push_back(k), w_value.push_back(w);
  }
  OpSpec Spec(bool classifier) const {
    OpSpec s(classifier ? "TreeEnsembleClassifier" : "TreeEnsembleRegressor", 3, kMl);
    s.Attr("nodes_treeids", tree).Attr("nodes_nodeids", id).Attr("nodes_modes", mode);
    s.Attr("nodes_featureids", feature).Attr("nodes_values", value);
    s.Attr("nodes_truenodeids", yes).Attr("nodes_falsenodeids", no);
    s.Attr("nodes_missing_value_tracks_true", missing);
    const std::string p = classifier ? "class" : "target";
    s.Attr(p + "_treeids", w_tree).Attr(p + "_nodeids", w_node).Attr(p + "_ids", w_target);
    s.Attr(p + "_weights", w_value);
    if (classifier) s.Outputs(2);
    return s;
  }
};

// Random full binary trees of the given depth.
Forest RandomForestOf(int trees, int depth, int features, int targets, int votes, uint32_t seed,
                      const std::vector<std::string>& modes = {"BRANCH_LEQ"}, double missing_rate = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Forest f;
  for (int t = 0; t < trees; ++t) {
    const int inner = (1 << depth) - 1;
    for (int i = 0; i < (1 << (depth + 1)) - 1; ++i) {
      if (i < inner) {
        f.Branch(t, i, modes[rng() % modes.size()], rng() % features, u(rng), 2 * i + 1, 2 * i + 2,
                 (rng() % 1000) < missing_rate * 1000 ? 1 : 0);
      } else {
        std::vector<std::pair<int64_t, float>> v;
        for (int k = 0; k < votes; ++k) v.push_back({static_cast<int64_t>(rng() % targets), u(rng)});
        f.Leaf(t, i, v);
      }
    }
  }
  return f;
}

// The reference: descend by ids, in double.
using NodeIndex = std::map<std::pair<int64_t, int64_t>, int>;
int RefLeaf(const Forest& f, const NodeIndex& at, int64_t t, int64_t i, const float* x) {
  int k = at.at({t, i});
  while (f.mode[k] != "LEAF") {
    const double v = x[f.feature[k]], th = f.value[k];
    const std::string& m = f.mode[k];
    bool go = m == "BRANCH_LEQ" ? v <= th : m == "BRANCH_LT" ? v < th : m == "BRANCH_GTE" ? v >= th
            : m == "BRANCH_GT" ? v > th : m == "BRANCH_EQ" ? v == th : v != th;
    if (std::isnan(v) && f.missing[k]) go = true;
    k = at.at({t, go ? f.yes[k] : f.no[k]});
  }
  return k;
}

// Per-target sums / mins / maxes over trees, and whether any leaf voted, for one row.
// first_only: a leaf's first vote alone counts (the single-target regressor).
void RefScores(const Forest& f, const float* x, int targets, const std::string& agg, std::vector<double>* s,
               std::vector<bool>* has, bool first_only = false) {
  s->assign(targets, 0.0);
  has->assign(targets, false);
  std::vector<int64_t> roots;
  NodeIndex at;
  for (size_t k = 0; k < f.tree.size(); ++k) {
    at[{f.tree[k], f.id[k]}] = static_cast<int>(k);
    if (k == 0 || f.tree[k] != f.tree[k - 1]) roots.push_back(f.tree[k]);
  }
  for (int64_t t : roots) {
    const int leaf = RefLeaf(f, at, t, 0, x);
    bool counted = false;
    for (size_t w = 0; w < f.w_tree.size(); ++w) {
      if (f.w_tree[w] != f.tree[leaf] || f.w_node[w] != f.id[leaf]) continue;
      if (first_only && counted) break;
      counted = true;
      const int k = static_cast<int>(f.w_target[w]);
      const double v = f.w_value[w];
      if (agg == "MIN") (*s)[k] = (*has)[k] ? std::min((*s)[k], v) : v;
      else if (agg == "MAX") (*s)[k] = (*has)[k] ? std::max((*s)[k], v) : v;
      else (*s)[k] += v;
      (*has)[k] = true;
    }
  }
}

std::vector<float> RandomRows(int rows, int cols, uint32_t seed, double nan_rate = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = (rng() % 1000) < nan_rate * 1000 ? kNan : n(rng) * 0.7f;
  return x;
}

TEST(MlTree, SmallRegressorByHand) {
  Forest f;  // x0 <= 0.5 ? (x1 < 2 ? 1 : 2) : 3 ; a second tree adds 10 when x1 >= 0
  f.Branch(0, 0, "BRANCH_LEQ", 0, 0.5f, 1, 2);
  f.Branch(0, 1, "BRANCH_LT", 1, 2.0f, 3, 4);
  f.Leaf(0, 2, {{0, 3.0f}});
  f.Leaf(0, 3, {{0, 1.0f}});
  f.Leaf(0, 4, {{0, 2.0f}});
  f.Branch(1, 0, "BRANCH_GTE", 1, 0.0f, 1, 2);
  f.Leaf(1, 1, {{0, 10.0f}});
  f.Leaf(1, 2, {{0, 0.0f}});
  OpSpec spec = f.Spec(false);
  spec.Attr("base_values", std::vector<float>{0.5f});
  const Tensor x = MakeTensor(DataType::kFloat, {4, 2}, {0.5, 1.9, 0.5, 2.0, 0.6, -1, 0.0, -0.5});
  auto out = RunKernel(spec, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 1}));
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{11.5f, 12.5f, 3.5f, 1.5f}));
  spec.Attr("aggregate_function", "AVERAGE");
  out = RunKernel(spec, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{6.0f, 6.5f, 2.0f, 1.0f}));
  // A 1-D input is one row; no rows give an empty output.
  out = RunKernel(spec, {MakeTensor(DataType::kFloat, {2}, {0.6, -1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{2.0f}));
  out = RunKernel(spec, {MakeTensor(DataType::kFloat, {0, 2}, {})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 1}));
}

TEST(MlTree, EveryModeAndNanRouting) {
  const char* modes[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"};
  const float xs[] = {0.9f, 1.0f, 1.1f, kNan};
  for (const char* m : modes) {
    for (int miss = 0; miss < 2; ++miss) {
      Forest f;
      f.Branch(0, 0, m, 0, 1.0f, 1, 2, miss);
      f.Leaf(0, 1, {{0, 1.0f}});
      f.Leaf(0, 2, {{0, -1.0f}});
      auto out = RunKernel(f.Spec(false), {MakeTensor(DataType::kFloat, {4, 1}, {xs[0], xs[1], xs[2], xs[3]})});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const std::vector<float> y = ToVector<float>((*out)[0]);
      for (int r = 0; r < 4; ++r) {
        std::vector<double> s;
        std::vector<bool> h;
        RefScores(f, &xs[r], 1, "SUM", &s, &h);
        EXPECT_EQ(y[r], static_cast<float>(s[0])) << m << " missing " << miss << " x " << xs[r];
      }
      // NaN: only a missing-tracking node sends it to the true branch (or NEQ, where NaN != t).
      const bool nan_true = miss || std::string(m) == "BRANCH_NEQ";
      EXPECT_EQ(y[3], nan_true ? 1.0f : -1.0f) << m;
    }
  }
}

class MlTreeRandom : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(MlTreeRandom, RegressorMatchesReference) {
  const auto& [agg, targets, n_base] = GetParam();
  const std::vector<std::string> modes = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GT", "BRANCH_NEQ"};
  Forest f = RandomForestOf(70, 4, 7, targets, 2, 42 + targets, modes, 0.3);
  OpSpec spec = f.Spec(false);
  spec.Attr("n_targets", static_cast<int64_t>(targets)).Attr("aggregate_function", agg);
  std::vector<float> base;
  for (int k = 0; k < n_base; ++k) base.push_back(0.25f * (k + 1));
  if (n_base) spec.Attr("base_values", base);
  for (int rows : {1, 3, 65, 200}) {
    const std::vector<float> x = RandomRows(rows, 7, rows, 0.1);
    std::vector<double> xd(x.begin(), x.end());
    const Tensor in = MakeTensor(DataType::kFloat, {rows, 7}, xd);
    auto one = RunKernel(spec, {in});
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    RunOptions two;
    two.threads = 2;
    auto par = RunKernel(spec, {in}, two);
    ASSERT_TRUE(par.ok());
    EXPECT_TRUE(testing::TensorsEqual((*one)[0], (*par)[0])) << "threads change the result, rows " << rows;
    const std::vector<float> y = ToVector<float>((*one)[0]);
    for (int r = 0; r < rows; ++r) {
      std::vector<double> s;
      std::vector<bool> has;
      RefScores(f, &x[r * 7], targets, agg, &s, &has, targets == 1);
      for (int k = 0; k < targets; ++k) {
        double want;
        const double b = targets == 1 ? (n_base == 1 ? base[0] : 0.0) : (n_base == targets ? base[k] : 0.0);
        if (targets == 1) {
          // One target: every tree's first vote counts (an unvoted leaf adds 0).
          want = agg == "AVERAGE" ? s[0] / 70 + b : s[0] + b;
          if ((agg == "MIN" || agg == "MAX") && !has[0]) want = b;
        } else {
          want = !has[k] ? 0.0 : agg == "AVERAGE" ? s[k] / 70 + b : s[k] + b;
        }
        EXPECT_NEAR(y[r * targets + k], want, 1e-5 * std::max(1.0, std::abs(want)))
            << agg << " row " << r << " target " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Aggregates, MlTreeRandom,
                         ::testing::Values(std::make_tuple("SUM", 1, 1), std::make_tuple("SUM", 3, 3),
                                           std::make_tuple("SUM", 3, 0), std::make_tuple("AVERAGE", 1, 0),
                                           std::make_tuple("AVERAGE", 4, 4), std::make_tuple("MIN", 1, 1),
                                           std::make_tuple("MIN", 3, 3), std::make_tuple("MAX", 1, 0),
                                           std::make_tuple("MAX", 2, 2)));

// Only the first vote of a leaf counts for one target (ONNX Runtime's single-target path).
TEST(MlTree, SingleTargetUsesTheFirstVote) {
  Forest f;
  f.Branch(0, 0, "BRANCH_LEQ", 0, 0.0f, 1, 2);
  f.Leaf(0, 1, {{0, 1.0f}, {0, 100.0f}});
  f.Leaf(0, 2, {});
  auto out = RunKernel(f.Spec(false), {MakeTensor(DataType::kFloat, {2, 1}, {-1, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{1.0f, 0.0f}));
}

TEST(MlTree, MulticlassLabelsScoresAndTransforms) {
  Forest f = RandomForestOf(9, 3, 5, 4, 2, 7);
  OpSpec spec = f.Spec(true);
  spec.Attr("classlabels_int64s", std::vector<int64_t>{10, 20, 30, 40});
  const std::vector<float> base = {0.1f, -0.2f, 0.3f, 0.0f};
  spec.Attr("base_values", base);
  const std::vector<float> x = RandomRows(50, 5, 3);
  const Tensor in = MakeTensor(DataType::kFloat, {50, 5}, std::vector<double>(x.begin(), x.end()));
  for (const char* post : {"NONE", "SOFTMAX", "LOGISTIC"}) {
    spec.Attr("post_transform", post);
    auto out = RunKernel(spec, {in});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const auto labels = ToVector<int64_t>((*out)[0]);
    const auto z = ToVector<float>((*out)[1]);
    for (int r = 0; r < 50; ++r) {
      std::vector<double> s;
      std::vector<bool> has;
      RefScores(f, &x[r * 5], 4, "SUM", &s, &has);
      int best = 0;
      for (int k = 0; k < 4; ++k) {
        s[k] += base[k];  // more than two classes: every class starts at its base value
        if (s[k] > s[best]) best = k;
      }
      EXPECT_EQ(labels[r], 10 * (best + 1)) << r;
      double mx = *std::max_element(s.begin(), s.end()), sum = 0;
      for (double v : s) sum += std::exp(v - mx);
      for (int k = 0; k < 4; ++k) {
        const double want = std::string(post) == "NONE" ? s[k]
                            : std::string(post) == "SOFTMAX" ? std::exp(s[k] - mx) / sum
                                                             : 1 / (1 + std::exp(-s[k]));
        EXPECT_NEAR(z[r * 4 + k], want, 1e-5) << post << " row " << r;
      }
    }
  }
  // String labels.
  OpSpec named = f.Spec(true);
  named.Attr("classlabels_strings", std::vector<std::string>{"a", "b", "c", "d"});
  auto out = RunKernel(named, {in});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype(), DataType::kString);
}

// The two-class rules, worked by hand on a one-split tree (x <= 0 ? leaf 1 : leaf 2).
struct BinaryCase {
  std::vector<std::pair<int64_t, float>> left, right;
  std::vector<float> base;
  std::string post;
  std::vector<int64_t> labels;      // for x = -1 and x = 1
  std::vector<float> scores;        // 2 x 2
};

TEST(MlTree, BinaryClassifierRules) {
  const BinaryCase cases[] = {
      // votes for class 0 only, all positive, no base: label at p > 0.5, scores [1 - p, p]
      {{{0, 0.3f}}, {{0, 0.8f}}, {}, "NONE", {3, 7}, {0.7f, 0.3f, 0.2f, 0.8f}},
      // votes for class 0 only, mixed signs: label by sign, scores [-s, s]
      {{{0, -0.4f}}, {{0, 0.6f}}, {}, "NONE", {3, 7}, {0.4f, -0.4f, -0.6f, 0.6f}},
      // votes for class 1 only: label by class 1's score, class 0 (never voted) scores 0
      {{{1, -0.4f}}, {{1, 0.6f}}, {}, "NONE", {3, 7}, {0.0f, -0.4f, 0.0f, 0.6f}},
      // class 0 votes, one base value, LOGISTIC (gradient boosting's layout)
      {{{0, -0.5f}}, {{0, 0.25f}}, {0.5f}, "LOGISTIC", {3, 7}, {0.5f, 0.5f, 0.320821f, 0.679179f}},
      // votes for both classes: ONNX Runtime labels 1 or 0 by class 1's sign, not the labels
      {{{0, 0.9f}, {1, 0.1f}}, {{0, 0.2f}, {1, -0.3f}}, {}, "NONE", {1, 0}, {0.9f, 0.1f, 0.2f, -0.3f}},
      // two base values with class 1 votes: class 1 becomes base[1] plus class 0's (unvoted, so 0)
      // score, and class 0, never voted, is written as 0
      {{{1, 0.3f}}, {{1, -0.2f}}, {0.1f, 0.2f}, "NONE", {7, 7}, {0.0f, 0.2f, 0.0f, 0.2f}},
  };
  for (const BinaryCase& c : cases) {
    Forest f;
    f.Branch(0, 0, "BRANCH_LEQ", 0, 0.0f, 1, 2);
    f.Leaf(0, 1, c.left);
    f.Leaf(0, 2, c.right);
    OpSpec spec = f.Spec(true);
    spec.Attr("classlabels_int64s", std::vector<int64_t>{3, 7}).Attr("post_transform", c.post);
    if (!c.base.empty()) spec.Attr("base_values", c.base);
    auto out = RunKernel(spec, {MakeTensor(DataType::kFloat, {2, 1}, {-1, 1})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(ToVector<int64_t>((*out)[0]), c.labels);
    const auto z = ToVector<float>((*out)[1]);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(z[i], c.scores[i], 1e-6) << i;
  }
}

TEST(MlTree, InputTypesAndDoubleAttributes) {
  Forest f = RandomForestOf(5, 3, 4, 1, 1, 9);
  OpSpec spec = f.Spec(false);
  const std::vector<float> x = RandomRows(20, 4, 5);
  std::vector<double> xi;
  for (float v : x) xi.push_back(std::round(v * 3));
  auto as_float = RunKernel(spec, {MakeTensor(DataType::kFloat, {20, 4}, xi)});
  ASSERT_TRUE(as_float.ok());
  for (DataType dt : {DataType::kDouble, DataType::kInt64, DataType::kInt32}) {
    auto out = RunKernel(spec, {MakeTensor(dt, {20, 4}, xi)});
    ASSERT_TRUE(out.ok()) << DataTypeName(dt) << ": " << out.status().ToString();
    EXPECT_TRUE(testing::TensorsEqual((*as_float)[0], (*out)[0])) << DataTypeName(dt);
  }
  // Thresholds as a double tensor: compared in double, so 1 + 1e-12 is above 1.
  Forest g;
  g.Branch(0, 0, "BRANCH_LEQ", 0, 0.0f, 1, 2);
  g.Leaf(0, 1, {{0, 1.0f}});
  g.Leaf(0, 2, {{0, 2.0f}});
  OpSpec d = g.Spec(false);
  d.attrs.erase("nodes_values");
  d.Attr("nodes_values_as_tensor", MakeTensor(DataType::kDouble, {3}, {1.0 + 1e-12, 0, 0}));
  auto out = RunKernel(d, {MakeTensor(DataType::kDouble, {2, 1}, {1.0 + 2e-12, 1.0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ToVector<float>((*out)[0]), (std::vector<float>{2.0f, 1.0f}));
}

TEST(MlTree, BadModelsAndInputsAreNamed) {
  auto expect_error = [](OpSpec spec, const Tensor& x, const std::string& what) {
    auto out = RunKernel(spec, {x});
    ASSERT_FALSE(out.ok()) << what;
    EXPECT_NE(out.status().message().find(what), std::string::npos) << out.status().message();
  };
  Forest f;
  f.Branch(0, 0, "BRANCH_LEQ", 1, 0.0f, 1, 2);
  f.Leaf(0, 1, {{0, 1.0f}});
  f.Leaf(0, 2, {{0, 2.0f}});
  const Tensor x = MakeTensor(DataType::kFloat, {2, 2}, {0, 0, 1, 1});
  Forest bad = f;
  bad.mode[0] = "BRANCH_SOMETIMES";
  expect_error(bad.Spec(false), x, "nodes_modes[0] is 'BRANCH_SOMETIMES'");
  bad = f;
  bad.no[0] = 9;
  expect_error(bad.Spec(false), x, "false branch of node 0 in tree 0 names node 9");
  bad = f;
  bad.yes[0] = 0;
  expect_error(bad.Spec(false), x, "has a cycle through node 0");
  bad = f;
  bad.id[2] = 1;
  expect_error(bad.Spec(false), x, "node 1 of tree 0 is defined twice");
  bad = f;
  bad.value.pop_back();
  expect_error(bad.Spec(false), x, "nodes_values has 2 entries but nodes_treeids has 3");
  bad = f;
  bad.w_target[0] = 5;
  expect_error(bad.Spec(false), x, "target_ids[0] is 5, outside [0, 1)");
  bad = f;
  bad.w_node[1] = 7;
  expect_error(bad.Spec(false), x, "is for node 7 of tree 0, which does not exist");
  bad = f;
  bad.feature[0] = -2;
  expect_error(bad.Spec(false), x, "nodes_featureids[0] is -2");
  // A longer cycle, through a second branch.
  Forest loop;
  loop.Branch(0, 0, "BRANCH_LEQ", 0, 0.0f, 1, 2);
  loop.Branch(0, 1, "BRANCH_LEQ", 0, 0.0f, 2, 0);
  loop.Leaf(0, 2, {{0, 1.0f}});
  expect_error(loop.Spec(false), x, "cycle through node 0");
  OpSpec s = f.Spec(false);
  s.Attr("aggregate_function", "MEDIAN");
  expect_error(s, x, "aggregate_function 'MEDIAN'");
  s = f.Spec(false);
  s.Attr("post_transform", "TANH");
  expect_error(s, x, "post_transform 'TANH'");
  s = f.Spec(false);
  s.Attr("nodes_values_as_tensor", MakeTensor(DataType::kInt64, {3}, {0, 0, 0}));
  expect_error(s, x, "nodes_values_as_tensor must be float or double");
  // Inputs: too few features, a wrong rank, a wrong type.
  expect_error(f.Spec(false), MakeTensor(DataType::kFloat, {2, 1}, {0, 1}), "tests feature 1 but X has 1 features");
  expect_error(f.Spec(false), MakeTensor(DataType::kFloat, {1, 2, 2}, {0, 0, 0, 0}), "X must be [N, F] or [F]");
  expect_error(f.Spec(false), MakeTensor(DataType::kInt8, {2, 2}, {0, 0, 0, 0}), "");
  // Classifier labels.
  Forest c;
  c.Branch(0, 0, "BRANCH_LEQ", 0, 0.0f, 1, 2);
  c.Leaf(0, 1, {{1, 1.0f}});
  c.Leaf(0, 2, {{0, 1.0f}});
  s = c.Spec(true);
  expect_error(s, x, "exactly one of classlabels_int64s and classlabels_strings");
  s.Attr("classlabels_int64s", std::vector<int64_t>{0, 1}).Attr("classlabels_strings", std::vector<std::string>{"a"});
  expect_error(s, x, "exactly one of classlabels_int64s and classlabels_strings");
  s = c.Spec(true);
  s.Attr("classlabels_int64s", std::vector<int64_t>{5});
  expect_error(s, x, "a classifier with 1 class label is not supported");
  s = c.Spec(true);
  s.Attr("classlabels_int64s", std::vector<int64_t>{5, 6});
  Forest c3 = c;
  c3.w_target[0] = 2;
  s = c3.Spec(true);
  s.Attr("classlabels_int64s", std::vector<int64_t>{5, 6});
  expect_error(s, x, "class_ids[0] is 2, outside [0, 2)");
}

}  // namespace
}  // namespace strata
