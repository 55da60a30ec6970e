// Tests for the normalization, softmax, reduction, Einsum and recurrent CPU kernels.
// Kernels are constructed directly through CpuKernels().Find(); the optimised kernels
// are compared against the reference ones on random shapes including edge sizes, and
// both against hand-checked or PyTorch-derived values (generated offline, pasted below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/threadpool.h"

namespace strata {
namespace {

// One node plus its graph and input values, run through a registered kernel.
class Harness {
 public:
  Harness(const std::string& op, int opset, const std::string& domain = "") {
    node_.op_type = op;
    node_.opset = opset;
    node_.domain = domain;
    node_.name = "n0";
  }
  Harness& Int(const std::string& n, int64_t v) {
    Attribute a;
    a.type = Attribute::Type::kInt;
    a.i = v;
    node_.attrs[n] = a;
    return *this;
  }
  Harness& Float(const std::string& n, float v) {
    Attribute a;
    a.type = Attribute::Type::kFloat;
    a.f = v;
    node_.attrs[n] = a;
    return *this;
  }
  Harness& Str(const std::string& n, const std::string& v) {
    Attribute a;
    a.type = Attribute::Type::kString;
    a.s = v;
    node_.attrs[n] = a;
    return *this;
  }
  Harness& Ints(const std::string& n, std::vector<int64_t> v) {
    Attribute a;
    a.type = Attribute::Type::kInts;
    a.ints = std::move(v);
    node_.attrs[n] = a;
    return *this;
  }
  Harness& Floats(const std::string& n, std::vector<float> v) {
    Attribute a;
    a.type = Attribute::Type::kFloats;
    a.floats = std::move(v);
    node_.attrs[n] = a;
    return *this;
  }
  Harness& Strs(const std::string& n, std::vector<std::string> v) {
    Attribute a;
    a.type = Attribute::Type::kStrings;
    a.strings = std::move(v);
    node_.attrs[n] = a;
    return *this;
  }
  // constant: also registers the tensor as an initializer (lets factories prepack).
  Harness& In(const Tensor& t, bool constant = false) {
    int v = graph_.AddValue("in" + std::to_string(node_.inputs.size()));
    node_.inputs.push_back(v);
    if (constant) graph_.initializers[v] = t;
    values_.push_back(Value(t));
    return *this;
  }
  Harness& Missing() {
    node_.inputs.push_back(-1);
    values_.push_back(Value());
    return *this;
  }
  // Output slots; `requested[i] == false` leaves output i unnamed.
  Harness& Outs(std::vector<bool> requested) {
    for (size_t i = 0; i < requested.size(); ++i)
      node_.outputs.push_back(requested[i] ? graph_.AddValue("out" + std::to_string(i)) : -1);
    return *this;
  }

  // Creates the kernel the registry picks (optimised unless `reference`).
  Result<std::unique_ptr<OpKernel>> Make(bool reference, ThreadPool* pool = nullptr) const {
    DataType dt = values_.empty() || !values_[0].is_tensor() ? DataType::kUndefined : values_[0].tensor().dtype();
    const KernelDef* def = CpuKernels().Find(node_.domain, node_.op_type, node_.opset, dt, reference);
    if (!def) return NotFound("no kernel for ", node_.op_type, " opset ", node_.opset);
    if (!reference && def->reference) return NotFound("no optimised kernel for ", node_.op_type);
    KernelInit init{node_, graph_, pool, KernelConfig{}};
    return def->factory(init);
  }
  Result<std::vector<Value>> Exec(const OpKernel& k, ThreadPool* pool = nullptr) const {
    if (node_.outputs.empty()) return InternalError("test harness: no outputs");
    std::vector<const Value*> ins;
    for (const Value& v : values_) ins.push_back(v.empty() ? nullptr : &v);
    std::vector<Value> outs(node_.outputs.size());
    KernelContext ctx(node_, ins, &outs, pool, DefaultAllocator(), nullptr);
    RETURN_IF_ERROR(k.Compute(ctx));
    return outs;
  }
  Result<std::vector<Value>> Run(bool reference, ThreadPool* pool = nullptr) const {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, Make(reference, pool));
    return Exec(*k, pool);
  }
  // Runs and returns output `i` as floats (any float dtype); fails the test on error.
  std::vector<float> RunF(bool reference = true, size_t i = 0, ThreadPool* pool = nullptr) const {
    auto r = Run(reference, pool);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !(*r)[i].is_tensor()) return {};
    return ToFloats((*r)[i].tensor());
  }
  static std::vector<float> ToFloats(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.num_elements()));
    DispatchNumeric(t.dtype(), [&]<typename T>() {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<T>()[i]);
    });
    return out;
  }

 private:
  Node node_;
  Graph graph_;
  std::vector<Value> values_;
};

Tensor F(std::vector<float> v, Shape s) { return Tensor::FromVector<float>(v, std::move(s)); }
Tensor I64(std::vector<int64_t> v, Shape s) { return Tensor::FromVector<int64_t>(v, std::move(s)); }

Tensor Random(Shape s, std::mt19937& rng, float lo = -3.0f, float hi = 3.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(NumElements(s)));
  for (auto& x : v) x = dist(rng);
  return F(v, std::move(s));
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double abs_tol, double rel_tol = 0,
                const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], abs_tol + rel_tol * std::abs(want[i])) << what << " at " << i;
  }
}

Shape OutShape(const Result<std::vector<Value>>& r, size_t i = 0) { return (*r)[i].tensor().shape(); }

// ------------------------------------------------------------------ softmax family

TEST(NormRnnSoftmax, LegacyAxisCoercesTo2D) {
  // Opset 11, axis=1 on [2,3,2]: each row is the 6 trailing elements.
  std::vector<float> x = {1, 2, 3, 4, 5, 6, -1, 0, 1, 0, -1, 2};
  auto got = Harness("Softmax", 11).Int("axis", 1).In(F(x, {2, 3, 2})).Outs({true}).RunF();
  ASSERT_EQ(got.size(), 12u);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int k = 0; k < 6; ++k) sum += std::exp(x[r * 6 + k]);
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(got[r * 6 + k], std::exp(x[r * 6 + k]) / sum, 1e-6);
  }
  // Opset 13 with the same axis normalises over dimension 1 only (3 elements, stride 2).
  auto g13 = Harness("Softmax", 13).Int("axis", 1).In(F(x, {2, 3, 2})).Outs({true}).RunF();
  double s = std::exp(1.0) + std::exp(3.0) + std::exp(5.0);
  EXPECT_NEAR(g13[0], std::exp(1.0) / s, 1e-6);
  EXPECT_NEAR(g13[2], std::exp(3.0) / s, 1e-6);
  // Default axis differs too: legacy default 1, new default -1.
  auto legacy_default = Harness("LogSoftmax", 1).In(F(x, {2, 3, 2})).Outs({true}).RunF();
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0) + std::exp(5.0) + std::exp(6.0));
  EXPECT_NEAR(legacy_default[0], 1.0 - lse, 1e-5);
}

TEST(NormRnnSoftmax, HardmaxPicksFirstMax) {
  auto got = Harness("Hardmax", 13).In(F({1, 3, 3, 0, -1, -2}, {2, 3})).Outs({true}).RunF();
  ExpectNear(got, {0, 1, 0, 1, 0, 0}, 0);
  auto legacy = Harness("Hardmax", 11).Int("axis", 0).In(F({1, 3, 3, 0, -1, -2}, {2, 3})).Outs({true}).RunF();
  ExpectNear(legacy, {0, 1, 0, 0, 0, 0}, 0);
}

TEST(NormRnnSoftmax, OptimisedMatchesReference) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (int64_t n : {1, 2, 7, 15, 16, 17, 31, 33, 100, 1000})
      for (int64_t rows : {1, 3, 64}) {
        // Large spread exercises the underflow of exp for far-below-max entries.
        Tensor x = Random({rows, n}, rng, -100.0f, 20.0f);
        Harness h(op, 13);
        h.In(x).Outs({true});
        auto ref = h.RunF(true);
        auto opt = h.RunF(false, 0, &pool);
        // Softmax: 1e-6 relative. LogSoftmax outputs are logs, so their error is absolute.
        const bool log = std::string(op) == "LogSoftmax";
        ExpectNear(opt, ref, log ? 2e-6 : 1e-7, log ? 2e-7 : 1e-6, std::string(op) + " n=" + std::to_string(n));
      }
  // Non-innermost axis falls back to the reference loop inside the optimised kernel.
  Tensor x = Random({4, 5, 6}, rng);
  Harness h("Softmax", 13);
  h.Int("axis", 1).In(x).Outs({true});
  ExpectNear(h.RunF(false), h.RunF(true), 1e-7, 1e-6);
}

TEST(NormRnnSoftmax, DoubleAndHalf) {
  auto d = Harness("Softmax", 13).In(Tensor::FromVector<double>({0, std::log(3.0)}, {2})).Outs({true}).RunF();
  ExpectNear(d, {0.25f, 0.75f}, 1e-7);
  std::vector<Float16> hv = {Float16(0.0f), Float16(0.0f)};
  auto h = Harness("Softmax", 13).In(Tensor::FromVector<Float16>(hv, {2})).Outs({true}).RunF();
  ExpectNear(h, {0.5f, 0.5f}, 1e-3);
}

TEST(NormRnnSoftmax, BadAxisNamesNode) {
  auto r = Harness("Softmax", 13).Int("axis", 3).In(F({1, 2}, {2})).Outs({true}).Run(true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Softmax node 'n0'"), std::string::npos) << r.status().message();
}

// ------------------------------------------------------------------ normalization

TEST(NormRnnNorm, BatchNormInference) {
  // X [1,2,2]: channel 0 {1,2}, channel 1 {3,4}.
  Harness h("BatchNormalization", 15);
  h.In(F({1, 2, 3, 4}, {1, 2, 2}))
      .In(F({1, 2}, {2}))
      .In(F({0, 1}, {2}))
      .In(F({1, 3}, {2}))
      .In(F({4, 1}, {2}))
      .Float("epsilon", 0.0f)
      .Outs({true});
  ExpectNear(h.RunF(), {0.0f, 0.5f, 1.0f, 3.0f}, 1e-6);
  // Opset 7 spatial=0: per-activation parameters of shape [C, D].
  Harness s("BatchNormalization", 7);
  s.In(F({1, 2, 3, 4}, {1, 2, 2}))
      .In(F({1, 1, 1, 1}, {2, 2}))
      .In(F({0, 0, 0, 0}, {2, 2}))
      .In(F({1, 2, 3, 4}, {2, 2}))
      .In(F({1, 1, 1, 1}, {2, 2}))
      .Int("spatial", 0)
      .Float("epsilon", 0.0f)
      .Outs({true});
  ExpectNear(s.RunF(), {0, 0, 0, 0}, 1e-6);
  // Training mode normalises with the batch statistics: per channel, the batch of one
  // value has mean x and variance 0, so Y = B.
  Harness t("BatchNormalization", 15);
  t.In(F({1, 2}, {1, 2})).In(F({1, 1}, {2})).In(F({0.5f, -1}, {2})).In(F({0, 0}, {2})).In(F({1, 1}, {2}));
  t.Int("training_mode", 1).Outs({true});
  auto r = t.Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectNear(t.RunF(), {0.5f, -1}, 1e-6);
  // Wrong parameter size.
  Harness b("BatchNormalization", 15);
  b.In(F({1, 2}, {1, 2})).In(F({1, 1, 1}, {3})).In(F({0, 0}, {2})).In(F({0, 0}, {2})).In(F({1, 1}, {2}));
  b.Outs({true});
  EXPECT_EQ(b.Run(true).status().code(), StatusCode::kInvalidArgument);
}

TEST(NormRnnNorm, InstanceNorm) {
  Harness h("InstanceNormalization", 6);
  // Channel 1 is constant: zero variance relies on epsilon (default 1e-5) to stay finite.
  h.In(F({1, 3, 10, 10}, {1, 2, 2})).In(F({1, 2}, {2})).In(F({0, 1}, {2})).Outs({true});
  ExpectNear(h.RunF(), {-1, 1, 1, 1}, 1e-4);
}

TEST(NormRnnNorm, LayerNormWithStats) {
  Harness h("LayerNormalization", 17);
  h.In(F({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4})).In(F({1, 1, 2, 2}, {4})).In(F({0, 0, 0, 1}, {4}));
  h.Outs({true, true, true});
  auto r = h.Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double inv = 1.0 / std::sqrt(1.25);
  ExpectNear(Harness::ToFloats((*r)[0].tensor()),
             {float(-1.5 * inv), float(-0.5 * inv), float(2 * 0.5 * inv), float(2 * 1.5 * inv + 1), 0, 0, 0, 1}, 1e-4);
  EXPECT_EQ(OutShape(r, 1), (Shape{2, 1}));
  ExpectNear(Harness::ToFloats((*r)[1].tensor()), {2.5f, 2.0f}, 1e-6);
  // Zero variance: inv std = 1/sqrt(epsilon).
  ExpectNear(Harness::ToFloats((*r)[2].tensor()), {float(inv), 316.227766f}, 1e-2);
  // Registered for old opsets too (the optimizer fuses LayerNorm patterns there).
  EXPECT_NE(CpuKernels().Find("", "LayerNormalization", 11, DataType::kFloat), nullptr);
  // axis=0 normalises everything; scale broadcasts from [4].
  Harness a("LayerNormalization", 17);
  a.In(F({1, 2, 3, 4, 1, 2, 3, 4}, {2, 4})).In(F({1, 1, 1, 1}, {4})).Int("axis", 0).Outs({true});
  EXPECT_EQ(a.RunF().size(), 8u);
  Harness bad("LayerNormalization", 17);
  bad.In(F({1, 2, 3, 4}, {1, 4})).In(F({1, 1, 1}, {3})).Outs({true});
  EXPECT_EQ(bad.Run(true).status().code(), StatusCode::kInvalidArgument);
}

TEST(NormRnnNorm, LpMvnLrnDropout) {
  auto lp2 = Harness("LpNormalization", 1).In(F({3, 4, 0, 0}, {2, 2})).Outs({true}).RunF();
  ExpectNear(lp2, {0.6f, 0.8f, 0, 0}, 1e-6);
  auto lp1 = Harness("LpNormalization", 1).Int("p", 1).Int("axis", 0).In(F({1, 1, 3, 1}, {2, 2})).Outs({true}).RunF();
  ExpectNear(lp1, {0.25f, 0.5f, 0.75f, 0.5f}, 1e-6);
  EXPECT_EQ(Harness("LpNormalization", 1).Int("p", 3).In(F({1}, {1})).Outs({true}).Run(true).status().code(),
            StatusCode::kInvalidArgument);
  auto mvn = Harness("MeanVarianceNormalization", 13).Ints("axes", {1}).In(F({1, 3, 5, 5}, {2, 2})).Outs({true});
  ExpectNear(mvn.RunF(), {-1, 1, 0, 0}, 1e-6);
  // LRN size 3 over 2 channels at one pixel: square sums include the neighbour.
  auto lrn = Harness("LRN", 13).Int("size", 3).Float("alpha", 3.0f).Float("beta", 1.0f).Float("bias", 1.0f);
  lrn.In(F({1, 2}, {1, 2, 1, 1})).Outs({true});
  ExpectNear(lrn.RunF(), {1.0f / 6.0f, 2.0f / 6.0f}, 1e-6);
  Harness d("Dropout", 13);
  d.In(F({1, 2, 3}, {3})).Outs({true, true});
  auto r = d.Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectNear(Harness::ToFloats((*r)[0].tensor()), {1, 2, 3}, 0);
  EXPECT_EQ((*r)[1].tensor().dtype(), DataType::kBool);
  ExpectNear(Harness::ToFloats((*r)[1].tensor()), {1, 1, 1}, 0);
  Harness dt("Dropout", 13);
  dt.In(F({1}, {1})).In(F({0.5f}, {})).In(Tensor::FromVector<bool>({true}, {})).Outs({true});
  EXPECT_EQ(dt.Run(true).status().code(), StatusCode::kUnsupported);
}

// ------------------------------------------------------------------ reductions

TEST(NormRnnReduce, EmptyAxesAndKeepdims) {
  Tensor x = F({1, 2, 3, 4, 5, 6}, {2, 3});
  // Opset 13 ReduceSum without axes reduces everything.
  auto all = Harness("ReduceSum", 13).In(x).Outs({true}).Run(true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(OutShape(all), (Shape{1, 1}));
  ExpectNear(Harness::ToFloats((*all)[0].tensor()), {21}, 0);
  // noop_with_empty_axes: identity, also with an empty axes tensor.
  auto noop = Harness("ReduceSum", 13).Int("noop_with_empty_axes", 1).In(x).In(I64({}, {0})).Outs({true}).RunF();
  ExpectNear(noop, {1, 2, 3, 4, 5, 6}, 0);
  // Axes attribute before 13/18, keepdims=0.
  auto s = Harness("ReduceSum", 11).Ints("axes", {1}).Int("keepdims", 0).In(x).Outs({true}).Run(true);
  EXPECT_EQ(OutShape(s), (Shape{2}));
  ExpectNear(Harness::ToFloats((*s)[0].tensor()), {6, 15}, 0);
  // Axes as an input since 18 for the others.
  auto m = Harness("ReduceMean", 18).In(x).In(I64({-2}, {1})).Outs({true}).Run(true);
  EXPECT_EQ(OutShape(m), (Shape{1, 3}));
  ExpectNear(Harness::ToFloats((*m)[0].tensor()), {2.5f, 3.5f, 4.5f}, 1e-6);
  auto cases = std::vector<std::pair<const char*, std::vector<float>>>{
      {"ReduceMax", {3, 6}},
      {"ReduceMin", {1, 4}},
      {"ReduceProd", {6, 120}},
      {"ReduceL1", {6, 15}},
      {"ReduceL2", {std::sqrt(14.0f), std::sqrt(77.0f)}},
      {"ReduceSumSquare", {14, 77}},
      {"ReduceLogSum", {std::log(6.0f), std::log(15.0f)}},
      {"ReduceLogSumExp",
       {float(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))),
        float(std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0)))}}};
  for (const auto& [op, want] : cases) {
    auto got = Harness(op, 13).Ints("axes", {1}).Int("keepdims", 0).In(x).Outs({true}).RunF();
    ExpectNear(got, want, 1e-5, 1e-6, op);
  }
  // Repeated and out-of-range axes are errors naming the node.
  auto rep = Harness("ReduceMax", 13).Ints("axes", {1, -1}).In(x).Outs({true}).Run(true);
  EXPECT_EQ(rep.status().code(), StatusCode::kInvalidArgument);
  auto oor = Harness("ReduceMax", 13).Ints("axes", {2}).In(x).Outs({true}).Run(true);
  EXPECT_NE(oor.status().message().find("ReduceMax node"), std::string::npos);
}

TEST(NormRnnReduce, EmptySetIdentities) {
  Tensor x = F({}, {2, 0});
  const float inf = std::numeric_limits<float>::infinity();
  auto cases = std::vector<std::pair<const char*, float>>{
      {"ReduceSum", 0}, {"ReduceProd", 1},      {"ReduceMax", -inf},       {"ReduceMin", inf},
      {"ReduceL2", 0},  {"ReduceLogSum", -inf}, {"ReduceLogSumExp", -inf}, {"ReduceSumSquare", 0}};
  for (const auto& [op, want] : cases) {
    auto r = Harness(op, 11).Ints("axes", {1}).In(x).Outs({true}).Run(true);
    ASSERT_TRUE(r.ok()) << op << ": " << r.status().ToString();
    EXPECT_EQ(OutShape(r), (Shape{2, 1})) << op;
    ExpectNear(Harness::ToFloats((*r)[0].tensor()), {want, want}, 0, 0, op);
  }
  auto mean = Harness("ReduceMean", 13).Ints("axes", {1}).In(x).Outs({true}).RunF();
  EXPECT_TRUE(std::isnan(mean[0]));
  // Integer max of an empty set is the lowest value.
  auto imax = Harness("ReduceMax", 13).Ints("axes", {1}).In(Tensor::FromVector<int32_t>({}, {1, 0})).Outs({true});
  auto ir = imax.Run(true);
  ASSERT_TRUE(ir.ok());
  EXPECT_EQ((*ir)[0].tensor().data<int32_t>()[0], std::numeric_limits<int32_t>::lowest());
}

TEST(NormRnnReduce, RandomAxesMatchBruteForce) {
  std::mt19937 rng(7);
  Shape shape = {3, 1, 4, 5};
  Tensor x = Random(shape, rng);
  const float* xp = x.data<float>();
  ThreadPool pool(2);
  for (int mask = 1; mask < 16; ++mask) {
    std::vector<int64_t> axes;
    for (int d = 0; d < 4; ++d)
      if (mask & (1 << d)) axes.push_back(d);
    auto got = Harness("ReduceSum", 11).Ints("axes", axes).In(x).Outs({true}).RunF(true, 0, &pool);
    // Brute force with keepdims=1.
    Shape os = shape;
    for (int64_t a : axes) os[a] = 1;
    std::vector<double> want(static_cast<size_t>(NumElements(os)), 0.0);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 1; ++b)
        for (int64_t c = 0; c < 4; ++c)
          for (int64_t d = 0; d < 5; ++d) {
            int64_t i[4] = {a, b, c, d};
            for (int64_t ax : axes) i[ax] = 0;
            want[((i[0] * os[1] + i[1]) * os[2] + i[2]) * os[3] + i[3]] += xp[((a * 1 + b) * 4 + c) * 5 + d];
          }
    ExpectNear(got, std::vector<float>(want.begin(), want.end()), 1e-5, 0, "mask " + std::to_string(mask));
  }
}

TEST(NormRnnReduce, IntegerAndHalfTypes) {
  auto i = Harness("ReduceSum", 13).In(Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2})).In(I64({0}, {1}));
  auto r = i.Outs({true}).Run(true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].tensor().dtype(), DataType::kInt64);
  EXPECT_EQ((*r)[0].tensor().data<int64_t>()[1], 6);
  std::vector<Float16> hv = {Float16(1.0f), Float16(2.0f), Float16(3.0f)};
  auto h = Harness("ReduceMean", 13).In(Tensor::FromVector<Float16>(hv, {3})).Outs({true}).RunF();
  ExpectNear(h, {2.0f}, 1e-3);
  auto u = Harness("ReduceMin", 13).In(Tensor::FromVector<uint8_t>({9, 4, 7}, {3})).Int("keepdims", 0).Outs({true});
  ExpectNear(u.RunF(), {4}, 0);
}

TEST(NormRnnReduce, ArgMaxArgMin) {
  Tensor x = F({1, 5, 5, 2, 0, 2}, {2, 3});
  ExpectNear(Harness("ArgMax", 13).Int("axis", 1).In(x).Outs({true}).RunF(), {1, 0}, 0);
  ExpectNear(Harness("ArgMax", 13).Int("axis", 1).Int("select_last_index", 1).In(x).Outs({true}).RunF(), {2, 2}, 0);
  ExpectNear(Harness("ArgMin", 13).Int("axis", 1).Int("select_last_index", 1).In(x).Outs({true}).RunF(), {0, 1}, 0);
  auto r = Harness("ArgMin", 13).Int("axis", 0).Int("keepdims", 0).In(x).Outs({true}).Run(true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(OutShape(r), (Shape{3}));
  EXPECT_EQ((*r)[0].tensor().dtype(), DataType::kInt64);
  ExpectNear(Harness::ToFloats((*r)[0].tensor()), {0, 1, 1}, 0);
}

// ------------------------------------------------------------------ Einsum

TEST(NormRnnEinsum, CommonEquations) {
  Tensor a = F({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = F({1, 0, 0, 1, 1, 1}, {3, 2});
  ExpectNear(Harness("Einsum", 12).Str("equation", "ij,jk->ik").In(a).In(b).Outs({true}).RunF(), {4, 5, 10, 11}, 0);
  // Implicit output: alphabetical free labels.
  ExpectNear(Harness("Einsum", 12).Str("equation", "ij,jk").In(a).In(b).Outs({true}).RunF(), {4, 5, 10, 11}, 0);
  ExpectNear(Harness("Einsum", 12).Str("equation", "ij->ji").In(a).Outs({true}).RunF(), {1, 4, 2, 5, 3, 6}, 0);
  ExpectNear(Harness("Einsum", 12).Str("equation", "ij->").In(a).Outs({true}).RunF(), {21}, 0);
  Tensor sq = F({1, 2, 3, 4}, {2, 2});
  ExpectNear(Harness("Einsum", 12).Str("equation", "ii->i").In(sq).Outs({true}).RunF(), {1, 4}, 0);
  ExpectNear(Harness("Einsum", 12).Str("equation", "ii").In(sq).Outs({true}).RunF(), {5}, 0);
  // Batched matmul with a broadcast ellipsis: [2,1,2] x [2,1] (no batch) -> [2,1,1].
  Tensor x = F({1, 2, 3, 4}, {2, 1, 2});
  Tensor y = F({10, 1}, {2, 1});
  auto r = Harness("Einsum", 12).Str("equation", "...ij,jk->...ik").In(x).In(y).Outs({true}).Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(OutShape(r), (Shape{2, 1, 1}));
  ExpectNear(Harness::ToFloats((*r)[0].tensor()), {12, 34}, 0);
  // Outer product, int64.
  auto o = Harness("Einsum", 12).Str("equation", "i,j->ij").In(I64({1, 2}, {2})).In(I64({3, 4}, {2})).Outs({true});
  ExpectNear(o.RunF(), {3, 4, 6, 8}, 0);
  // Errors.
  EXPECT_EQ(Harness("Einsum", 12).Str("equation", "ij,jk->ik").In(a).In(a).Outs({true}).Run(true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Harness("Einsum", 12).Str("equation", "ij->iz").In(a).Outs({true}).Run(true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Harness("Einsum", 12).Str("equation", "i1").In(a).Outs({true}).Run(true).status().code(),
            StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------ recurrent

// Values from torch.nn.LSTM / torch.nn.GRU (seed 0), weights reordered to ONNX gate order
// (LSTM i,o,f,c; GRU z,r,h) by /usr/bin/python3 offline.
namespace torch_ref {
inline const std::vector<float> kx = {-0.97592443f, 0.71123719f,  -0.75822645f, -0.64358306f,
                                      -0.64615238f, -0.15909262f, -1.77866364f, 0.84765124f,
                                      0.24594283f,  -0.13116787f, -0.17851807f, -0.59589309f};
inline const std::vector<float> kw = {
    -0.00432252f, 0.30971584f,  -0.47518533f, -0.42489460f, -0.22236897f, 0.15482073f,  -0.39140946f, -0.25141457f,
    0.20970349f,  0.47942469f,  -0.11881878f, 0.43203798f,  -0.01143914f, 0.45777494f,  -0.05123640f, 0.15277413f,
    -0.17448279f, -0.11348708f, -0.55157071f, -0.38236874f, -0.23799711f, 0.02138712f,  0.22824688f,  0.34642333f,
    0.10806383f,  -0.09726043f, -0.09500942f, -0.26428604f, 0.22202361f,  -0.34196660f, -0.25173923f, -0.14531028f,
    -0.54998279f, -0.01037737f, -0.43477875f, -0.44534299f, 0.21165161f,  0.29197070f,  0.41330865f,  0.21587770f,
    -0.57142389f, -0.37452531f, 0.28827965f,  0.12084019f,  -0.45038170f, -0.33244953f, 0.54314184f,  0.38902894f};
inline const std::vector<float> kr = {
    -0.09305926f, 0.06109180f,  0.52277690f,  -0.53559071f, -0.36346388f, -0.14616501f, -0.22505111f, 0.49883109f,
    -0.37422669f, 0.57396299f,  0.22914003f,  0.07799590f,  0.38710546f,  -0.33994517f, 0.10758577f,  -0.44762284f,
    -0.40015346f, -0.29824966f, -0.26577330f, -0.40336025f, -0.54072374f, -0.33702272f, 0.49628916f,  0.25762430f,
    0.27982581f,  0.03036375f,  -0.29599795f, 0.09767882f,  -0.53906888f, -0.41717380f, -0.29764137f, 0.36427218f,
    0.33851272f,  -0.25605199f, -0.02083218f, 0.36925054f,  -0.03181177f, 0.08668628f,  -0.23644242f, 0.34258670f,
    -0.35134020f, 0.52387035f,  0.39565805f,  -0.48686963f, -0.14369343f, -0.05935175f, 0.01604584f,  -0.04980737f,
    0.11684494f,  0.36710209f,  0.54689282f,  0.36664969f,  0.54814416f,  -0.04175492f, 0.02605156f,  0.08423603f,
    0.13693263f,  0.22656856f,  0.03458337f,  -0.28170580f, 0.27319580f,  -0.55382258f, -0.34219936f, -0.14452800f,
    -0.28123501f, -0.20197639f, -0.47320879f, -0.12281115f, 0.12341234f,  -0.37612393f, -0.02962925f, 0.41329667f};
inline const std::vector<float> kb = {
    0.26123542f,  0.23218742f,  -0.34199488f, 0.55436832f,  -0.44491971f, -0.21158139f, 0.17442161f,  0.31694913f,
    -0.07287163f, 0.02204412f,  0.13377477f,  0.35817459f,  0.22690436f,  0.47836322f,  0.50241441f,  0.51297134f,
    0.43899390f,  -0.57592303f, 0.50942892f,  0.11490110f,  -0.50205380f, 0.05311189f,  -0.36119342f, -0.53806394f,
    -0.51864618f, -0.27370861f, 0.39312080f,  0.31662235f,  0.31213927f,  -0.55681497f, -0.00374266f, -0.28696984f,
    -0.44243029f, -0.54031444f, -0.48728836f, -0.11710785f, 0.36014071f,  -0.45178202f, -0.12205778f, 0.00746640f,
    -0.26227573f, 0.21748738f,  -0.23409973f, -0.11120648f, -0.11335851f, -0.51808524f, -0.49850610f, -0.09034347f};
inline const std::vector<float> kh0 = {0.27386975f,  0.56792629f, -0.67310244f, -1.20953238f,
                                       1.34407032f,  2.38321948f, -0.56646389f, -1.15361679f,
                                       -2.50230098f, 0.87555778f, -2.67256498f, -0.03133260f};
inline const std::vector<float> kc0 = {0.49878615f,  -0.52332324f, -0.25147951f, -1.05553186f,
                                       -0.55926126f, -0.11970861f, -0.16354573f, -0.25046325f,
                                       -1.08822453f, 0.00440725f,  0.23278888f,  -0.82014161f};
inline const std::vector<float> kY = {
    0.42043537f,  -0.18387815f, -0.15498805f, -0.58119226f, 0.04874748f,  0.04217973f,  -0.30237886f, -0.13957414f,
    -0.23248743f, -0.32588911f, -0.09218184f, -0.39822769f, 0.50998706f,  -0.20450847f, -0.12785245f, -0.24901651f,
    0.19528687f,  0.00646206f,  -0.25234881f, -0.14614084f, -0.36385822f, -0.27126810f, -0.14890364f, -0.37235191f,
    0.41022184f,  -0.27553546f, -0.08869769f, -0.03501996f, 0.09537918f,  -0.05145150f, -0.06586958f, -0.02980172f,
    -0.20902294f, -0.11800606f, -0.10846826f, -0.20645285f};
inline const std::vector<float> kYh = {0.41022184f,  -0.27553546f, -0.08869769f, -0.03501996f,
                                       0.09537918f,  -0.05145150f, -0.30237886f, -0.13957414f,
                                       -0.23248743f, -0.32588911f, -0.09218184f, -0.39822769f};
inline const std::vector<float> kYc = {0.58867425f,  -0.54022610f, -0.33771253f, -0.04571246f,
                                       0.25674120f,  -0.19259143f, -0.53120315f, -0.24825075f,
                                       -0.65584487f, -0.54611236f, -0.17053941f, -0.98324984f};
inline const std::vector<float> kgx = {0.21764195f,  -0.11678166f, -0.33588210f, -1.12226081f,
                                       -0.92702401f, 0.83416051f,  -0.14618154f, -0.24315408f,
                                       -0.45712578f, 1.08405674f,  -0.53582340f, 1.25214887f};
inline const std::vector<float> kgw = {0.41741306f,  -0.47742388f, 0.00795733f, -0.09815922f, -0.30407476f,
                                       0.07630898f,  0.19063649f,  0.43314436f, -0.18585820f, 0.00092426f,
                                       0.29723352f,  -0.55835092f, 0.47742173f, -0.16877076f, -0.34276944f,
                                       -0.21352655f, -0.57223976f, 0.26061243f};
inline const std::vector<float> kgr = {
    0.17056656f,  0.47460195f,  0.15697703f,  -0.27317059f, -0.27139932f, -0.54586679f, 0.12473537f,
    -0.32399887f, -0.51475155f, -0.27728039f, -0.38528907f, -0.33261231f, 0.33195102f,  0.30574951f,
    0.44312894f,  0.20941828f,  -0.19281171f, -0.16133946f, 0.50626487f,  -0.37493771f, -0.06568026f,
    0.16540712f,  0.01839341f,  -0.38848844f, -0.46668476f, 0.46019575f,  0.09401496f};
inline const std::vector<float> kgb = {-0.13202627f, -0.02567543f, -0.35163182f, 0.47898394f,  -0.19355124f,
                                       0.17006165f,  0.19526039f,  0.18253848f,  -0.01190991f, -0.42979345f,
                                       0.23652047f,  -0.19413605f, -0.12984732f, -0.35589591f, 0.39926356f,
                                       -0.27855304f, 0.10371812f,  -0.29990864f};
inline const std::vector<float> kgh0 = {-0.32496402f, -0.07481211f, -1.15642667f,
                                        -0.46051657f, -3.30305576f, -1.42864144f};
inline const std::vector<float> kgY = {-0.05440828f, 0.01218793f,  -0.74678230f, 0.58703816f,  -2.89278650f,
                                       -1.31361270f, -0.42795020f, 0.16238996f,  -0.16965437f, 0.79193163f,
                                       -2.33485842f, -1.22278202f, -0.50626206f, 0.15360694f,  0.20633399f,
                                       0.59571445f,  -1.72841358f, -1.05467856f};
inline const std::vector<float> kgYh = {-0.50626206f, 0.15360694f,  0.20633399f,
                                        0.59571445f,  -1.72841358f, -1.05467856f};
}  // namespace torch_ref

TEST(NormRnnLstm, MatchesTorchBidirectional) {
  using namespace torch_ref;
  for (bool reference : {true, false}) {
    for (bool constant : {false, true}) {
      Harness h("LSTM", 14);
      h.Str("direction", "bidirectional").Int("hidden_size", 3);
      h.In(F(kx, {3, 2, 2})).In(F(kw, {2, 12, 2}), constant).In(F(kr, {2, 12, 3}), constant).In(F(kb, {2, 24}));
      h.Missing().In(F(kh0, {2, 2, 3})).In(F(kc0, {2, 2, 3})).Outs({true, true, true});
      auto r = h.Run(reference);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(OutShape(r), (Shape{3, 2, 2, 3}));
      ExpectNear(Harness::ToFloats((*r)[0].tensor()), kY, 2e-6, 0, "Y");
      ExpectNear(Harness::ToFloats((*r)[1].tensor()), kYh, 2e-6, 0, "Y_h");
      ExpectNear(Harness::ToFloats((*r)[2].tensor()), kYc, 2e-6, 0, "Y_c");
    }
  }
}

TEST(NormRnnGru, MatchesTorchLinearBeforeReset) {
  using namespace torch_ref;
  Harness h("GRU", 14);
  h.Int("hidden_size", 3).Int("linear_before_reset", 1);
  h.In(F(kgx, {3, 2, 2})).In(F(kgw, {1, 9, 2})).In(F(kgr, {1, 9, 3})).In(F(kgb, {1, 18}));
  h.Missing().In(F(kgh0, {1, 2, 3})).Outs({true, true});
  auto r = h.Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectNear(Harness::ToFloats((*r)[0].tensor()), kgY, 2e-6, 0, "Y");
  ExpectNear(Harness::ToFloats((*r)[1].tensor()), kgYh, 2e-6, 0, "Y_h");
}

TEST(NormRnnGru, ResetBeforeLinearHandComputed) {
  // H = 1, I = 1: z = sig(wz x + rz h), r = sig(wr x + rr h), hh = tanh(wh x + rh (r h)).
  const double wz = 0.5, wr = -0.3, wh = 0.8, rz = 0.2, rr = 0.4, rh = -0.6, x = 1.5, h0 = 0.7;
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double z = sig(wz * x + rz * h0), r = sig(wr * x + rr * h0), hh = std::tanh(wh * x + rh * (r * h0));
  const double want = (1 - z) * hh + z * h0;
  Harness g("GRU", 7);
  g.Int("hidden_size", 1).In(F({float(x)}, {1, 1, 1})).In(F({float(wz), float(wr), float(wh)}, {1, 3, 1}));
  g.In(F({float(rz), float(rr), float(rh)}, {1, 3, 1})).Missing().Missing().In(F({float(h0)}, {1, 1, 1}));
  g.Outs({false, true});
  ExpectNear(g.RunF(true, 1), {float(want)}, 1e-6);
}

TEST(NormRnnRnn, HandComputedReverseWithSeqLens) {
  // I = H = 1, W = 0.5, R = 0.25, batch 2 with lengths {2, 1}; reverse direction.
  Harness h("RNN", 14);
  h.Str("direction", "reverse").Int("hidden_size", 1);
  h.In(F({1, 3, 2, 9}, {2, 2, 1})).In(F({0.5f}, {1, 1, 1})).In(F({0.25f}, {1, 1, 1})).Missing();
  h.In(Tensor::FromVector<int32_t>({2, 1}, {2})).Outs({true, true});
  auto r = h.Run(true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Batch 0 runs t=1 then t=0; batch 1 only t=0; padded Y entries are 0.
  const double b0t1 = std::tanh(0.5 * 2), b0t0 = std::tanh(0.5 * 1 + 0.25 * b0t1), b1t0 = std::tanh(0.5 * 3);
  ExpectNear(Harness::ToFloats((*r)[0].tensor()), {float(b0t0), float(b1t0), float(b0t1), 0}, 1e-6);
  ExpectNear(Harness::ToFloats((*r)[1].tensor()), {float(b0t0), float(b1t0)}, 1e-6);
}

struct LstmCase {
  int64_t seq, batch, input, hidden;
  const char* direction;
  int64_t layout;
  bool peephole, clip, input_forget, seq_lens, init, constant;
  std::vector<std::string> acts;
};

TEST(NormRnnLstm, FastMatchesReferenceRandom) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const std::vector<LstmCase> cases = {
      {5, 1, 4, 8, "forward", 0, false, false, false, false, false, true, {}},
      {4, 3, 7, 16, "reverse", 0, true, false, false, false, true, true, {}},
      {6, 5, 3, 17, "bidirectional", 0, true, true, false, true, true, false, {}},
      {3, 2, 5, 33, "bidirectional", 1, false, false, true, true, true, true, {}},
      {1, 4, 1, 1, "forward", 1, true, true, true, false, true, false, {}},
      {7, 2, 6, 130, "forward", 0, false, false, false, true, false, true, {}},
      {4,
       2,
       3,
       5,
       "bidirectional",
       0,
       true,
       true,
       false,
       true,
       true,
       true,
       {"HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Tanh"}},
      {0, 2, 3, 4, "forward", 0, false, false, false, false, true, true, {}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const LstmCase& c = cases[ci];
    const int64_t D = std::string(c.direction) == "bidirectional" ? 2 : 1;
    Harness h("LSTM", 14);
    h.Str("direction", c.direction).Int("hidden_size", c.hidden).Int("layout", c.layout);
    if (c.clip) h.Float("clip", 0.7f);
    if (c.input_forget) h.Int("input_forget", 1);
    if (!c.acts.empty()) h.Strs("activations", c.acts).Floats("activation_alpha", {0.3f, 0.1f, 1.5f});
    Shape xs = c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
    Shape ss = c.layout == 0 ? Shape{D, c.batch, c.hidden} : Shape{c.batch, D, c.hidden};
    h.In(Random(xs, rng, -1, 1));
    h.In(Random({D, 4 * c.hidden, c.input}, rng, -0.5f, 0.5f), c.constant);
    h.In(Random({D, 4 * c.hidden, c.hidden}, rng, -0.5f, 0.5f), c.constant);
    h.In(Random({D, 8 * c.hidden}, rng, -0.5f, 0.5f), c.constant);
    if (c.seq_lens) {
      std::vector<int32_t> lens;
      for (int64_t b = 0; b < c.batch; ++b) lens.push_back(static_cast<int32_t>((b * 7 + 1) % (c.seq + 1)));
      h.In(Tensor::FromVector<int32_t>(lens, {c.batch}));
    } else {
      h.Missing();
    }
    if (c.init) {
      h.In(Random(ss, rng)).In(Random(ss, rng));
    } else {
      h.Missing().Missing();
    }
    if (c.peephole)
      h.In(Random({D, 3 * c.hidden}, rng, -0.5f, 0.5f));
    else
      h.Missing();
    h.Outs({true, true, true});
    auto ref = h.Run(true);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto opt = h.Run(false, p);
      ASSERT_TRUE(opt.ok()) << opt.status().ToString();
      for (size_t o = 0; o < 3; ++o) {
        EXPECT_EQ(OutShape(opt, o), OutShape(ref, o));
        ExpectNear(Harness::ToFloats((*opt)[o].tensor()), Harness::ToFloats((*ref)[o].tensor()), 2e-5, 1e-5,
                   "case " + std::to_string(ci) + " output " + std::to_string(o));
      }
    }
  }
}

TEST(NormRnnLstm, BadInputsAreErrors) {
  auto base = [](Harness& h) { h.Int("hidden_size", 2); };
  Harness w("LSTM", 14);
  base(w);
  w.In(F(std::vector<float>(6, 0), {3, 1, 2})).In(F(std::vector<float>(8, 0), {1, 4, 2}));
  w.In(F(std::vector<float>(16, 0), {1, 8, 2})).Outs({true});
  for (bool ref : {true, false}) {
    auto r = w.Run(ref);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("LSTM node 'n0'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("W"), std::string::npos);
  }
  Harness l("LSTM", 14);
  base(l);
  l.In(F(std::vector<float>(6, 0), {3, 1, 2})).In(F(std::vector<float>(16, 0), {1, 8, 2}));
  l.In(F(std::vector<float>(16, 0), {1, 8, 2})).Missing().In(Tensor::FromVector<int32_t>({4}, {1})).Outs({true});
  EXPECT_EQ(l.Run(false).status().code(), StatusCode::kInvalidArgument);
  Harness a("LSTM", 14);
  base(a);
  a.Strs("activations", {"Sigmoid", "Bogus", "Tanh"});
  a.In(F(std::vector<float>(6, 0), {3, 1, 2})).In(F(std::vector<float>(16, 0), {1, 8, 2}));
  a.In(F(std::vector<float>(16, 0), {1, 8, 2})).Outs({true});
  auto ar = a.Run(false);
  ASSERT_FALSE(ar.ok());
  EXPECT_NE(ar.status().message().find("Bogus"), std::string::npos);
}

TEST(NormRnnLstm, OptimisedKernelIsPreferred) {
  const KernelDef* d = CpuKernels().Find("", "LSTM", 14, DataType::kFloat);
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->reference);
  const KernelDef* r = CpuKernels().Find("", "LSTM", 7, DataType::kDouble);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->reference);
}

// The recurrent steps of a big enough LSTM (B * 4H * H >= 2^18 multiply-adds) are shared
// between threads chunk by chunk; every panel runs the same arithmetic whichever thread
// takes it, so any thread count must give bit-identical outputs. A race in the step
// protocol (a chunk run twice, or before the previous step's h is complete) breaks that.
TEST(NormRnnLstm, SharedStepsAreBitIdenticalToOneThread) {
  std::mt19937 rng(21);
  // pool8 oversubscribes small machines: preempted chunk holders and chunks taken over
  // from late owners must not change a bit either.
  ThreadPool pool2(2), pool3(3), pool8(8);
  struct Case {
    int64_t seq, batch, input, hidden;
    const char* direction;
    int64_t layout;
    bool lens, init, peephole;
  };
  const std::vector<Case> cases = {
      {12, 1, 16, 256, "forward", 0, false, true, false},    // the benchmark's shape, shorter
      {9, 4, 8, 128, "forward", 1, true, true, false},       // batch 4, padding, batch-major
      {7, 2, 5, 200, "reverse", 0, false, false, true},      // partial last panel, peepholes
      {5, 2, 3, 200, "bidirectional", 0, true, true, true},  // directions on the pool: steps inline
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t D = std::string(c.direction) == "bidirectional" ? 2 : 1;
    Harness h("LSTM", 14);
    h.Str("direction", c.direction).Int("hidden_size", c.hidden).Int("layout", c.layout);
    Shape xs = c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
    Shape ss = c.layout == 0 ? Shape{D, c.batch, c.hidden} : Shape{c.batch, D, c.hidden};
    h.In(Random(xs, rng, -1, 1));
    h.In(Random({D, 4 * c.hidden, c.input}, rng, -0.2f, 0.2f), true);
    h.In(Random({D, 4 * c.hidden, c.hidden}, rng, -0.1f, 0.1f), true);
    h.In(Random({D, 8 * c.hidden}, rng, -0.2f, 0.2f), true);
    if (c.lens) {
      std::vector<int32_t> lens;
      for (int64_t b = 0; b < c.batch; ++b) lens.push_back(static_cast<int32_t>((b * 5 + 2) % (c.seq + 1)));
      h.In(Tensor::FromVector<int32_t>(lens, {c.batch}));
    } else {
      h.Missing();
    }
    if (c.init)
      h.In(Random(ss, rng)).In(Random(ss, rng));
    else
      h.Missing().Missing();
    if (c.peephole)
      h.In(Random({D, 3 * c.hidden}, rng, -0.5f, 0.5f));
    else
      h.Missing();
    h.Outs({true, true, true});
    auto ref = h.Run(true);
    auto one = h.Run(false);
    ASSERT_TRUE(ref.ok() && one.ok()) << ref.status().ToString() << one.status().ToString();
    // A region already running on the pool makes the participants run one after another
    // on one thread: the first then takes every chunk, its own and the others'.
    Result<std::vector<Value>> nested = InternalError("not run");
    pool2.Run(2, 1, [&](int64_t b, int64_t e) {
      if (b == 0) nested = h.Run(false, &pool2);
    });
    const std::string what = "case " + std::to_string(ci);
    for (size_t o = 0; o < 3; ++o) {
      const std::vector<float> base = Harness::ToFloats((*one)[o].tensor());
      ExpectNear(base, Harness::ToFloats((*ref)[o].tensor()), 2e-5, 1e-5, what + " output " + std::to_string(o));
      for (int rep = 0; rep < 3; ++rep) {
        for (ThreadPool* p : {&pool2, &pool3, &pool8}) {
          auto par = h.Run(false, p);
          ASSERT_TRUE(par.ok()) << par.status().ToString();
          EXPECT_EQ(Harness::ToFloats((*par)[o].tensor()), base)
              << what << " output " << o << " threads " << p->num_threads();
        }
      }
      ASSERT_TRUE(nested.ok()) << nested.status().ToString();
      EXPECT_EQ(Harness::ToFloats((*nested)[o].tensor()), base) << what << " output " << o << " nested";
    }
  }
}

// Transposes dims 0 and 1 of a float tensor (time-major <-> batch-major).
Tensor Swap01(const Tensor& t) {
  Shape s = t.shape();
  std::swap(s[0], s[1]);
  const int64_t a = t.dim(0), b = t.dim(1), rest = t.num_elements() / std::max<int64_t>(1, a * b);
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  const float* p = t.data<float>();
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < rest; ++k) v[(j * a + i) * rest + k] = p[(i * b + j) * rest + k];
  return F(v, s);
}

TEST(NormRnnRecurrent, Layout1MatchesLayout0) {
  std::mt19937 rng(11);
  const int64_t T = 4, B = 3, I = 2, H = 5, D = 2;
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    const int64_t G = std::string(op) == "LSTM" ? 4 : (std::string(op) == "GRU" ? 3 : 1);
    Tensor x = Random({T, B, I}, rng), w = Random({D, G * H, I}, rng, -0.5f, 0.5f);
    Tensor r = Random({D, G * H, H}, rng, -0.5f, 0.5f), b = Random({D, 2 * G * H}, rng, -0.5f, 0.5f);
    Tensor h0 = Random({D, B, H}, rng);
    Tensor lens = Tensor::FromVector<int32_t>({4, 2, 3}, {B});
    for (bool reference : {true, false}) {
      if (!reference && std::string(op) != "LSTM") continue;
      Harness l0(op, 14), l1(op, 14);
      l0.Str("direction", "bidirectional").Int("hidden_size", H).In(x).In(w).In(r).In(b).In(lens).In(h0);
      l1.Str("direction", "bidirectional").Int("hidden_size", H).Int("layout", 1);
      l1.In(Swap01(x)).In(w).In(r).In(b).In(lens).In(Swap01(h0));
      l0.Outs({true, true});
      l1.Outs({true, true});
      auto r0 = l0.Run(reference);
      auto r1 = l1.Run(reference);
      ASSERT_TRUE(r0.ok() && r1.ok()) << r0.status().ToString() << r1.status().ToString();
      // Y: [T, D, B, H] vs [B, T, D, H].
      const Tensor& y0 = (*r0)[0].tensor();
      const Tensor& y1 = (*r1)[0].tensor();
      EXPECT_EQ(y1.shape(), (Shape{B, T, D, H}));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t bb = 0; bb < B; ++bb)
            for (int64_t h = 0; h < H; ++h)
              EXPECT_NEAR(y0.data<float>()[((t * D + d) * B + bb) * H + h],
                          y1.data<float>()[((bb * T + t) * D + d) * H + h], 1e-5)
                  << op;
      ExpectNear(Harness::ToFloats(Swap01((*r0)[1].tensor())), Harness::ToFloats((*r1)[1].tensor()), 1e-5, 0, op);
    }
  }
}

// The performance target: a 2-layer LSTM (input 128, hidden 256, seq 100, batch 1) on one
// thread, constant weights. Disabled by default (timing, not correctness); run with
// --gtest_also_run_disabled_tests --gtest_filter='NormRnnLstm.DISABLED_Timing*'.
TEST(NormRnnLstm, DISABLED_Timing2Layer) {
  std::mt19937 rng(5);
  const int64_t T = 100, I = 128, H = 256;
  Harness l1("LSTM", 14), l2("LSTM", 14);
  l1.Int("hidden_size", H).In(Random({T, 1, I}, rng, -1, 1));
  l1.In(Random({1, 4 * H, I}, rng, -0.1f, 0.1f), true).In(Random({1, 4 * H, H}, rng, -0.1f, 0.1f), true);
  l1.In(Random({1, 8 * H}, rng, -0.1f, 0.1f), true).Outs({true});
  l2.Int("hidden_size", H).In(Random({T, 1, H}, rng, -1, 1));
  l2.In(Random({1, 4 * H, H}, rng, -0.1f, 0.1f), true).In(Random({1, 4 * H, H}, rng, -0.1f, 0.1f), true);
  l2.In(Random({1, 8 * H}, rng, -0.1f, 0.1f), true).Outs({true});
  auto k1 = l1.Make(false);
  auto k2 = l2.Make(false);
  ASSERT_TRUE(k1.ok() && k2.ok());
  auto once = [&] {
    ASSERT_TRUE(l1.Exec(**k1).ok());
    ASSERT_TRUE(l2.Exec(**k2).ok());
  };
  once();
  const int iters = 50;
  double best = 1e30;
  // Best of several rounds: the build machine is shared, so the minimum is the honest number.
  for (int round = 0; round < 5; ++round) {
    // Thread CPU time, so that other processes on a shared machine do not inflate it.
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < iters; ++i) once();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    best = std::min(best, (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6);
  }
  const double ms = best / iters;
  std::printf("2-layer LSTM (I=128, H=256, T=100, B=1), one thread: %.3f ms per run (best of 5 x %d)\n", ms, iters);
}

}  // namespace
}  // namespace strata
