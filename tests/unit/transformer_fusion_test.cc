// Transformer fusions (core/transformer_fusion.cc): each pattern and its near misses run
// optimized (level 99) and as the reference (level 0, reference kernels) and must agree
// within 1e-4 relative; op counts show whether the pattern was (not) fused. The real
// small bert/gpt2 exports (bench/models/make_models.py --small) must match torch and the
// unoptimized graph with every fusion firing.
#include "core/transformer_fusion.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/npy.h"
#include "core/onnx_import.h"
#include "core/optimizer.h"
#include "core/session.h"
#include "cpu/sgemm.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // MakeModel, AddInput, AddOutput, AddNode, Serialize
using Feeds = std::vector<std::pair<std::string, Value>>;
using test::AddInit;
using test::Pseudo;

void AddScalar(onnx::GraphProto* g, const std::string& name, float v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(v);
}

Value Input(Shape shape, uint32_t seed, float scale = 2.0f) {
  return Value(Tensor::FromVector<float>(Pseudo(static_cast<size_t>(NumElements(shape)), seed, scale), shape));
}

using Runs = test::OptRefRuns;
Runs RunBoth(const onnx::ModelProto& m, const Feeds& feeds, int threads = 1) {
  return test::RunOptimizedAndReference(m, feeds, threads);
}

// max |a-b| / max |b| per output; shapes must agree exactly.
void ExpectClose(const Runs& r, double tol = 1e-4) {
  ASSERT_EQ(r.opt.size(), r.ref.size());
  ASSERT_FALSE(r.ref.empty());
  for (size_t i = 0; i < r.opt.size(); ++i) {
    const Tensor& a = r.opt[i].tensor();
    const Tensor& b = r.ref[i].tensor();
    ASSERT_EQ(a.shape(), b.shape()) << "output " << i;
    double scale = 0, worst = 0;
    for (int64_t k = 0; k < b.num_elements(); ++k) {
      scale = std::max(scale, std::fabs(static_cast<double>(b.data<float>()[k])));
      worst = std::max(worst, std::fabs(static_cast<double>(a.data<float>()[k]) - b.data<float>()[k]));
    }
    EXPECT_GT(scale, 0.0) << "output " << i << " is all zeros: the test would prove nothing";
    EXPECT_LE(worst / std::max(scale, 1e-30), tol) << "output " << i;
  }
}

// ---- SiLU ----

// x[2,8,6,6] -> Conv 3x3 -> Sigmoid -> Mul(c, s) (or Mul(s, c)) -> Conv 1x1 -> y: the SiLU
// between two NHWC convs. `other_operand` multiplies the sigmoid by x instead of its input,
// `sig_is_output` makes the sigmoid a graph output too: neither is SiLU. `conv_is_output`
// makes c a graph output: SiLU, but one the conv's store cannot take.
onnx::ModelProto ConvSilu(bool swapped, bool other_operand = false, bool sig_is_output = false,
                          bool conv_is_output = false) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 8, 6, 6});
  test::AddInit(g, "w1", {8, 8, 3, 3}, 1);
  test::AddInit(g, "w2", {8, 8, 1, 1}, 2);
  auto* c = AddNode(g, "Conv", {"x", "w1"}, {"c"});
  auto* pads = c->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  AddNode(g, "Sigmoid", {"c"}, {"s"});
  const std::string other = other_operand ? "x" : "c";
  if (swapped) {
    AddNode(g, "Mul", {"s", other}, {"a"});
  } else {
    AddNode(g, "Mul", {other, "s"}, {"a"});
  }
  AddNode(g, "Conv", {"a", "w2"}, {"y"});
  AddOutput(g, "y", {2, 8, 6, 6});
  if (sig_is_output) AddOutput(g, "s", {2, 8, 6, 6});
  if (conv_is_output) AddOutput(g, "c", {2, 8, 6, 6});
  return m;
}

// x * Sigmoid(x) after a conv becomes QuickGelu (alpha 1), which then joins the conv's store
// (FuseNhwcConvActivation, on AVX-512 CPUs): no Sigmoid, Mul or QuickGelu node is left.
TEST(TransformerFusion, SiluBecomesQuickGeluAndJoinsTheNhwcConv) {
  const int left = sgemm::Available() ? 0 : 1;
  for (bool swapped : {false, true})
    for (int threads : {1, 2}) {
      Runs r = RunBoth(ConvSilu(swapped), {{"x", Input({2, 8, 6, 6}, 5)}}, threads);
      ExpectClose(r);
      EXPECT_EQ(r.ops["QuickGelu"], left) << "swapped " << swapped;
      EXPECT_EQ(r.ops["Sigmoid"], 0);
      EXPECT_EQ(r.ops["Mul"], 0);
      EXPECT_EQ(r.ops["NhwcConv"], 2);
      // Layout-free like ai.onnx's activations: one transpose in, one out, none around it.
      EXPECT_EQ(r.ops["NchwToNhwc"] + r.ops["NhwcToNchw"], 2);
    }
  // c is a graph output too: the conv must store c itself, so the QuickGelu stays a node.
  for (int threads : {1, 2}) {
    Runs r = RunBoth(ConvSilu(false, false, false, /*conv_is_output=*/true), {{"x", Input({2, 8, 6, 6}, 8)}},
                     threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["QuickGelu"], 1);
    EXPECT_EQ(r.ops["Sigmoid"], 0);
  }
}

// x -> Conv 3x3 (groups of 8) -> HardSwish -> Conv 1x1 -> HardSwish -> y (MobileNetV3's
// activation after a grouped and a pointwise conv): both join their convs' stores; a
// HardSwish whose input is also a graph output stays.
TEST(TransformerFusion, HardSwishJoinsTheNhwcConv) {
  for (bool input_is_output : {false, true}) {
    onnx::ModelProto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {1, 16, 9, 9});
    test::AddInit(g, "w1", {16, 8, 3, 3}, 3);
    test::AddInit(g, "w2", {24, 16, 1, 1}, 4);
    auto* c = AddNode(g, "Conv", {"x", "w1"}, {"c"});
    auto* pads = c->add_attribute();
    pads->set_name("pads");
    pads->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads->add_ints(1);
    auto* grp = c->add_attribute();
    grp->set_name("group");
    grp->set_type(onnx::AttributeProto::INT);
    grp->set_i(2);
    AddNode(g, "HardSwish", {"c"}, {"h"});
    AddNode(g, "Conv", {"h", "w2"}, {"d"});
    AddNode(g, "HardSwish", {"d"}, {"y"});
    AddOutput(g, "y", {1, 24, 9, 9});
    if (input_is_output) AddOutput(g, "c", {1, 16, 9, 9});
    for (int threads : {1, 2}) {
      Runs r = RunBoth(m, {{"x", Input({1, 16, 9, 9}, 9, 4.0f)}}, threads);
      ExpectClose(r);
      const int fusable = sgemm::Available() ? (input_is_output ? 1 : 2) : 0;
      EXPECT_EQ(r.ops["HardSwish"], 2 - fusable) << "c is an output: " << input_is_output;
      EXPECT_EQ(r.ops["NhwcConv"], 2);
    }
  }
}

TEST(TransformerFusion, SiluNearMissesStay) {
  // x * Sigmoid(c) with x the graph input: the shapes agree, but it is not SiLU.
  Runs r = RunBoth(ConvSilu(false, /*other_operand=*/true), {{"x", Input({2, 8, 6, 6}, 6)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["QuickGelu"], 0);
  EXPECT_EQ(r.ops["Sigmoid"], 1);
  // The sigmoid is a graph output too: it must still be computed.
  r = RunBoth(ConvSilu(true, false, /*sig_is_output=*/true), {{"x", Input({2, 8, 6, 6}, 7)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["QuickGelu"], 0);
  EXPECT_EQ(r.ops["Sigmoid"], 1);
}

// ---- GELU ----

enum class Tail { kXA1Half, kA1HalfX, kXHalfA1 };

// 0.5 * x * a1 in one of the three association orders; returns the result name.
std::string AddGeluTail(onnx::GraphProto* g, const std::string& x, const std::string& a1, Tail tail) {
  AddScalar(g, "half", 0.5f);
  switch (tail) {
    case Tail::kXA1Half:
      AddNode(g, "Mul", {x, a1}, {"t0"});
      AddNode(g, "Mul", {"t0", "half"}, {"y"});
      break;
    case Tail::kA1HalfX:
      AddNode(g, "Mul", {a1, "half"}, {"t0"});
      AddNode(g, "Mul", {"t0", x}, {"y"});
      break;
    case Tail::kXHalfA1:
      AddNode(g, "Mul", {"half", x}, {"t0"});
      AddNode(g, "Mul", {"t0", a1}, {"y"});
      break;
  }
  return "y";
}

// x[4,40] -> erf GELU -> y; `divisor` is sqrt 2 for the real pattern.
onnx::ModelProto ErfGelu(Tail tail, bool use_mul, float constant, bool erf_is_output = false) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 40});
  AddScalar(g, "c", constant);
  AddScalar(g, "one", 1.0f);
  AddNode(g, use_mul ? "Mul" : "Div", {"x", "c"}, {"s"});
  AddNode(g, "Erf", {"s"}, {"e"});
  AddNode(g, "Add", {"one", "e"}, {"a1"});
  AddGeluTail(g, "x", "a1", tail);
  AddOutput(g, "y", {4, 40});
  if (erf_is_output) AddOutput(g, "e", {4, 40});
  return m;
}

TEST(TransformerFusion, ErfGeluFormsBecomeGelu) {
  for (Tail tail : {Tail::kXA1Half, Tail::kA1HalfX, Tail::kXHalfA1})
    for (bool use_mul : {false, true}) {
      Runs r = RunBoth(ErfGelu(tail, use_mul, use_mul ? static_cast<float>(M_SQRT1_2) : static_cast<float>(M_SQRT2)),
                       {{"x", Input({4, 40}, 3)}});
      ExpectClose(r);
      EXPECT_EQ(r.ops["Gelu"], 1) << "tail " << static_cast<int>(tail) << " mul " << use_mul;
      EXPECT_EQ(r.ops["Erf"], 0);
      EXPECT_EQ(r.ops["Mul"], 0);
    }
}

TEST(TransformerFusion, ErfGeluNearMissesStay) {
  // Wrong constant: x / 1.5 is not GELU.
  Runs r = RunBoth(ErfGelu(Tail::kXA1Half, false, 1.5f), {{"x", Input({4, 40}, 4)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["Gelu"], 0);
  EXPECT_EQ(r.ops["Erf"], 1);
  // The Erf result is also a graph output: it must stay computed.
  r = RunBoth(ErfGelu(Tail::kXA1Half, false, static_cast<float>(M_SQRT2), true), {{"x", Input({4, 40}, 5)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["Gelu"], 0);
  EXPECT_EQ(r.ops["Erf"], 1);
}

// GPT-2's tanh GELU; `cube` 0: x*(x*x), 1: (x*x)*x, 2: Pow(x, 3). `extra_use` also sends x^3
// to a second output.
onnx::ModelProto TanhGelu(int cube, float k = 0.044715f, bool extra_use = false) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {3, 50});
  AddScalar(g, "k", k);
  AddScalar(g, "c", 0.7978845608f);
  AddScalar(g, "one", 1.0f);
  AddScalar(g, "three", 3.0f);
  if (cube == 2) {
    AddNode(g, "Pow", {"x", "three"}, {"x3"});
  } else {
    AddNode(g, "Mul", {"x", "x"}, {"x2"});
    AddNode(g, "Mul",
            cube == 0 ? std::initializer_list<std::string>{"x", "x2"} : std::initializer_list<std::string>{"x2", "x"},
            {"x3"});
  }
  AddNode(g, "Mul", {"k", "x3"}, {"t"});
  AddNode(g, "Add", {"x", "t"}, {"u"});
  AddNode(g, "Mul", {"c", "u"}, {"v"});
  AddNode(g, "Tanh", {"v"}, {"w"});
  AddNode(g, "Add", {"one", "w"}, {"a1"});
  AddGeluTail(g, "x", "a1", Tail::kXA1Half);
  AddOutput(g, "y", {3, 50});
  if (extra_use) AddOutput(g, "x3", {3, 50});
  return m;
}

TEST(TransformerFusion, TanhGeluBecomesFastGelu) {
  for (int cube : {0, 1, 2}) {
    Runs r = RunBoth(TanhGelu(cube), {{"x", Input({3, 50}, 6, 4.0f)}});
    ExpectClose(r);
    EXPECT_EQ(r.ops["FastGelu"], 1) << "cube form " << cube;
    EXPECT_EQ(r.ops["Tanh"], 0);
  }
  Runs r = RunBoth(TanhGelu(0, 0.05f), {{"x", Input({3, 50}, 7)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["FastGelu"], 0) << "0.05 is not GELU's cubic coefficient";
  r = RunBoth(TanhGelu(0, 0.044715f, true), {{"x", Input({3, 50}, 8)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["FastGelu"], 0) << "x^3 is a graph output";
}

// ---- MatMul + bias (+ GELU) ----

// x[2,6,32] x W[32,48] + bias (shape `bias_dims`, bias first or second) [-> erf GELU].
onnx::ModelProto MatMulBias(std::vector<int64_t> bias_dims, bool gelu, bool bias_first, bool mm_is_output = false) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 6, 32});
  AddInit(g, "W", {32, 48}, 11, 0.3f);
  AddInit(g, "b", bias_dims, 12, 0.5f);
  AddNode(g, "MatMul", {"x", "W"}, {"mm"});
  AddNode(g, "Add",
          bias_first ? std::initializer_list<std::string>{"b", "mm"} : std::initializer_list<std::string>{"mm", "b"},
          {gelu ? "h" : "y"});
  if (gelu) {
    AddScalar(g, "sqrt2", static_cast<float>(M_SQRT2));
    AddScalar(g, "one", 1.0f);
    AddNode(g, "Div", {"h", "sqrt2"}, {"s"});
    AddNode(g, "Erf", {"s"}, {"e"});
    AddNode(g, "Add", {"e", "one"}, {"a1"});
    AddGeluTail(g, "h", "a1", Tail::kXA1Half);
  }
  AddOutput(g, "y", {});
  if (mm_is_output) AddOutput(g, "mm", {2, 6, 48});
  return m;
}

TEST(TransformerFusion, MatMulBiasAndGeluFuse) {
  if (!sgemm::Available()) GTEST_SKIP() << "FusedMatMul is emitted only where the AVX-512 SGEMM runs";
  for (int threads : {1, 2})
    for (bool gelu : {false, true})
      for (bool bias_first : {false, true}) {
        Runs r = RunBoth(MatMulBias({48}, gelu, bias_first), {{"x", Input({2, 6, 32}, 13)}}, threads);
        ExpectClose(r);
        EXPECT_EQ(r.ops["FusedMatMul"], 1);
        EXPECT_EQ(r.ops["MatMul"], 0);
        EXPECT_EQ(r.ops["Add"], 0);
        EXPECT_EQ(r.ops["Gelu"], 0) << "GELU belongs in the FusedMatMul";
      }
}

TEST(TransformerFusion, MatMulBiasNearMissesStay) {
  // A [6,48] bias broadcasts over rows, not only columns: no GEMM bias.
  Runs r = RunBoth(MatMulBias({6, 48}, false, false), {{"x", Input({2, 6, 32}, 14)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["FusedMatMul"], 0);
  EXPECT_EQ(r.ops["MatMul"], 1);
  // The product itself is a graph output.
  r = RunBoth(MatMulBias({48}, true, false, true), {{"x", Input({2, 6, 32}, 15)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["FusedMatMul"], 0);
  EXPECT_EQ(r.ops["MatMul"], 1);
  EXPECT_EQ(r.ops["Gelu"], 1) << "the GELU after the unfused Add still fuses on its own";
}

// y = x[2,6,32] x W[32,32] + b[32] + r, r being x itself or a second input of shape `r_dims`.
onnx::ModelProto MatMulResidual(bool r_is_x, std::initializer_list<int64_t> r_dims) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 6, 32});
  if (!r_is_x) AddInput(g, "r", r_dims);
  AddInit(g, "W", {32, 32}, 16, 0.3f);
  AddInit(g, "b", {32}, 17, 0.5f);
  AddNode(g, "MatMul", {"x", "W"}, {"mm"});
  AddNode(g, "Add", {"b", "mm"}, {"h"});
  AddNode(g, "Add", {r_is_x ? "x" : "r", "h"}, {"y"});
  AddOutput(g, "y", {});
  return m;
}

TEST(TransformerFusion, MatMulResidualFuses) {
  if (!sgemm::Available()) GTEST_SKIP() << "FusedMatMul is emitted only where the AVX-512 SGEMM runs";
  for (int threads : {1, 2}) {
    Runs r = RunBoth(MatMulResidual(true, {}), {{"x", Input({2, 6, 32}, 18)}}, threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["FusedMatMul"], 1);
    EXPECT_EQ(r.ops["Add"], 0);
    r = RunBoth(MatMulResidual(false, {2, 6, 32}), {{"x", Input({2, 6, 32}, 18)}, {"r", Input({2, 6, 32}, 19)}},
                threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["Add"], 0);
  }
  // A residual that broadcasts ([6, 32] onto [2, 6, 32]) stays an Add.
  Runs r = RunBoth(MatMulResidual(false, {6, 32}), {{"x", Input({2, 6, 32}, 18)}, {"r", Input({6, 32}, 19)}});
  ExpectClose(r);
  EXPECT_EQ(r.ops["FusedMatMul"], 1);
  EXPECT_EQ(r.ops["Add"], 1);
}

// ---- scale + mask + Softmax ----

// scores = q[1,3,8,16] x k[1,3,16,8]; Softmax(scores {/ 4 | * 0.25} [+ mask]) over `axis`.
onnx::ModelProto Attention(bool divide, std::vector<int64_t> mask_dims, bool mask_const, int64_t axis = -1) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "q", {1, 3, 8, 16});
  AddInput(g, "k", {1, 3, 16, 8});
  AddScalar(g, "c", divide ? 4.0f : 0.25f);
  AddNode(g, "MatMul", {"q", "k"}, {"scores"});
  AddNode(
      g, divide ? "Div" : "Mul",
      divide ? std::initializer_list<std::string>{"scores", "c"} : std::initializer_list<std::string>{"c", "scores"},
      {"scaled"});
  std::string sm_in = "scaled";
  if (!mask_dims.empty()) {
    if (mask_const) {
      AddInit(g, "mask", mask_dims, 21, 3.0f);
    } else {
      auto* v = g->add_input();
      v->set_name("mask");
      auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      for (int64_t d : mask_dims) shape->add_dim()->set_dim_value(d);
    }
    AddNode(g, "Add", {"scaled", "mask"}, {"masked"});
    sm_in = "masked";
  }
  auto* sm = AddNode(g, "Softmax", {sm_in}, {"p"});
  auto* a = sm->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
  AddOutput(g, "p", {});
  return m;
}

Feeds AttentionFeeds(std::vector<int64_t> mask_dims = {}) {
  Feeds f = {{"q", Input({1, 3, 8, 16}, 31)}, {"k", Input({1, 3, 16, 8}, 32)}};
  if (!mask_dims.empty()) f.emplace_back("mask", Input(Shape(mask_dims.begin(), mask_dims.end()), 33, 3.0f));
  return f;
}

TEST(TransformerFusion, ScaleMaskSoftmaxFuses) {
  for (int threads : {1, 2}) {
    // gpt2's causal-mask shape (constant), bert's padding-mask shape (run time), no mask.
    Runs r = RunBoth(Attention(true, {1, 1, 8, 8}, true), AttentionFeeds(), threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["MaskedSoftmax"], 1);
    EXPECT_EQ(r.ops["Softmax"], 0);
    EXPECT_EQ(r.ops["Div"], 0);
    r = RunBoth(Attention(false, {1, 1, 1, 8}, false), AttentionFeeds({1, 1, 1, 8}), threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["MaskedSoftmax"], 1);
    EXPECT_EQ(r.ops["Add"], 0);
    r = RunBoth(Attention(true, {}, false), AttentionFeeds(), threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["MaskedSoftmax"], 1);
  }
}

TEST(TransformerFusion, ScaleMaskSoftmaxNearMissesStay) {
  // Softmax over another axis.
  Runs r = RunBoth(Attention(true, {1, 1, 8, 8}, true, 2), AttentionFeeds());
  ExpectClose(r);
  EXPECT_EQ(r.ops["MaskedSoftmax"], 0);
  EXPECT_EQ(r.ops["Softmax"], 1);
  // A mask that enlarges the scores ([2,3,8,8] onto [1,3,8,8]) changes the output shape.
  r = RunBoth(Attention(true, {2, 3, 8, 8}, true), AttentionFeeds());
  ExpectClose(r);
  EXPECT_EQ(r.ops["MaskedSoftmax"], 0);
  ASSERT_FALSE(r.opt.empty());
  EXPECT_EQ(r.opt[0].tensor().shape(), (Shape{2, 3, 8, 8}));
}

TEST(TransformerFusion, SkippedForReferenceKernelsAndProviders) {
  const std::string bytes = Serialize(MatMulBias({48}, true, false));
  auto model = ImportOnnxBytes(bytes.data(), bytes.size(), ImportOptions{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  OptimizerOptions o;
  o.kernel.prefer_reference = true;
  auto s = FuseTransformerPatterns(*model->graph, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->total(), 0);
  o.kernel.prefer_reference = false;
  o.cpu_only = false;
  s = FuseTransformerPatterns(*model->graph, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->total(), 0);
  o.cpu_only = true;
  s = FuseTransformerPatterns(*model->graph, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gelu, 1);
  EXPECT_EQ(s->matmul_bias, sgemm::Available() ? 1 : 0);
}

TEST(TransformerFusion, MalformedInternalNodesAreErrors) {
  // A hand-written FusedMatMul whose bias does not match W's columns.
  onnx::ModelProto m = MakeModel(17);
  AddOpsetImport(&m, "strata.internal", 1);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 8});
  AddInit(g, "W", {8, 4}, 1);
  AddInit(g, "b", {5}, 2);
  AddNode(g, "FusedMatMul", {"x", "W", "b"}, {"y"})->set_domain("strata.internal");
  AddOutput(g, "y", {2, 4});
  std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bias must be a constant float32 [4]"), std::string::npos)
      << s.status().ToString();
}

// ---- multi-head attention ----

// q[B,Sq,H*D], k/v[B,Skv,H*D] (graph inputs) -> heads -> Softmax(QK^T / 4 + mask) V -> merged
// [B,Sq,H*D]. `probs_out` also exposes the attention probabilities as a graph output.
onnx::ModelProto Mha(int64_t b, int64_t sq, int64_t skv, std::vector<int64_t> mask_dims, bool probs_out = false) {
  const int64_t h = 3, d = 16;
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  auto shape_const = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(dims.size()));
    for (int64_t x : dims) t->add_int64_data(x);
  };
  auto input = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* v = g->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t x : dims) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(x);
  };
  auto perm = [](onnx::NodeProto* n, std::vector<int64_t> p) {
    auto* a = n->add_attribute();
    a->set_name("perm");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : p) a->add_ints(x);
  };
  input("q", {b, sq, h * d});
  input("k", {b, skv, h * d});
  input("v", {b, skv, h * d});
  input("mask", mask_dims);
  shape_const("qs", {b, sq, h, d});
  shape_const("kvs", {b, skv, h, d});
  shape_const("os", {b, sq, h * d});
  AddScalar(g, "c", 4.0f);
  AddNode(g, "Reshape", {"q", "qs"}, {"q4"});
  AddNode(g, "Reshape", {"k", "kvs"}, {"k4"});
  AddNode(g, "Reshape", {"v", "kvs"}, {"v4"});
  perm(AddNode(g, "Transpose", {"q4"}, {"qt"}), {0, 2, 1, 3});
  perm(AddNode(g, "Transpose", {"k4"}, {"kt"}), {0, 2, 3, 1});
  perm(AddNode(g, "Transpose", {"v4"}, {"vt"}), {0, 2, 1, 3});
  AddNode(g, "MatMul", {"qt", "kt"}, {"scores"});
  AddNode(g, "Div", {"scores", "c"}, {"scaled"});
  AddNode(g, "Add", {"scaled", "mask"}, {"masked"});
  AddNode(g, "Softmax", {"masked"}, {"probs"});
  AddNode(g, "MatMul", {"probs", "vt"}, {"ctx"});
  perm(AddNode(g, "Transpose", {"ctx"}, {"ctxt"}), {0, 2, 1, 3});
  AddNode(g, "Reshape", {"ctxt", "os"}, {"y"});
  AddOutput(g, "y", {});
  if (probs_out) AddOutput(g, "probs", {});
  return m;
}

Feeds MhaFeeds(int64_t b, int64_t sq, int64_t skv, Shape mask) {
  return {{"q", Input({b, sq, 48}, 41)},
          {"k", Input({b, skv, 48}, 42)},
          {"v", Input({b, skv, 48}, 43)},
          {"mask", Input(mask, 44, 3.0f)}};
}

TEST(TransformerFusion, MultiHeadAttentionFuses) {
  if (!sgemm::Available()) GTEST_SKIP() << "Attention is emitted only where the AVX-512 SGEMM runs";
  for (int threads : {1, 2}) {
    // gpt2-like causal mask; bert-like padding mask with batch 2 and a shorter K/V.
    Runs r = RunBoth(Mha(1, 8, 8, {1, 1, 8, 8}), MhaFeeds(1, 8, 8, {1, 1, 8, 8}), threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["Attention"], 1);
    EXPECT_EQ(r.ops["Transpose"] + r.ops["Reshape"] + r.ops["MatMul"] + r.ops["Softmax"], 0);
    r = RunBoth(Mha(2, 7, 5, {2, 1, 1, 5}), MhaFeeds(2, 7, 5, {2, 1, 1, 5}), threads);
    ExpectClose(r);
    EXPECT_EQ(r.ops["Attention"], 1);
  }
}

TEST(TransformerFusion, MultiHeadAttentionNearMissStays) {
  // The probabilities are a graph output: scale+mask+softmax still fuse, the heads do not.
  Runs r = RunBoth(Mha(1, 8, 8, {1, 1, 8, 8}, true), MhaFeeds(1, 8, 8, {1, 1, 8, 8}));
  ExpectClose(r);
  EXPECT_EQ(r.ops["Attention"], 0);
  EXPECT_EQ(r.ops["MaskedSoftmax"], 1);
  EXPECT_EQ(r.ops["MatMul"], 2);
}

// ---- the AVX-512 LayerNormalization ----

// x[3,5,37] normalized over the last `dims` axes (37 or 5*37: both leave a masked tail),
// with or without B, with the Mean/InvStdDev outputs.
onnx::ModelProto LayerNorm(int dims, bool bias) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {3, 5, 37});
  const std::vector<int64_t> norm = dims == 1 ? std::vector<int64_t>{37} : std::vector<int64_t>{5, 37};
  AddInit(g, "s", norm, 51, 1.0f);
  if (bias) AddInit(g, "b", norm, 52, 0.5f);
  auto* n = bias ? AddNode(g, "LayerNormalization", {"x", "s", "b"}, {"y", "mean", "inv"})
                 : AddNode(g, "LayerNormalization", {"x", "s"}, {"y", "mean", "inv"});
  auto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(-dims);
  AddOutput(g, "y", {});
  AddOutput(g, "mean", {});
  AddOutput(g, "inv", {});
  return m;
}

TEST(TransformerFusion, VectorLayerNormMatchesReference) {
  for (int dims : {1, 2})
    for (bool bias : {false, true})
      for (int threads : {1, 2}) {
        Runs r = RunBoth(LayerNorm(dims, bias), {{"x", Input({3, 5, 37}, 53, 3.0f)}}, threads);
        ExpectClose(r);
        EXPECT_EQ(r.ops["LayerNormalization"], 1);
      }
}

// A model that carries strata.internal's Attention itself, with the given geometry;
// Q, K, V and Y are float [dims].
std::string AttentionModel(int64_t batch, int64_t q_len, int64_t kv_len, std::initializer_list<int64_t> dims) {
  onnx::ModelProto m = MakeModel(17);
  AddOpsetImport(&m, "strata.internal", 1);
  auto* g = m.mutable_graph();
  for (const char* in : {"q", "k", "v"}) AddInput(g, in, dims);
  auto* n = AddNode(g, "Attention", {"q", "k", "v"}, {"y"});
  n->set_domain("strata.internal");
  auto set_int = [&](const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  set_int("batch", batch);
  set_int("q_len", q_len);
  set_int("kv_len", kv_len);
  set_int("num_heads", 2);
  set_int("head_dim", 4);
  auto* sc = n->add_attribute();
  sc->set_name("scale");
  sc->set_type(onnx::AttributeProto::FLOAT);
  sc->set_f(2.0f);
  auto* os = n->add_attribute();
  os->set_name("output_shape");
  os->set_type(onnx::AttributeProto::INTS);
  for (int64_t d : dims) os->add_ints(d);
  AddOutput(g, "y", dims);
  return Serialize(m);
}

TEST(TransformerFusion, AttentionWithOverflowingGeometryIsAnError) {
  const std::string bytes = AttentionModel(int64_t{1} << 40, int64_t{1} << 40, 4, {1, 4, 8});
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Attention needs"), std::string::npos) << s.status().ToString();
}

// An empty batch passes the element checks, but each head's score tile (q_len x kv_len
// floats, made per thread at creation) would be 2^42 floats: refused with the node named,
// not a bad_alloc thrown through the library.
TEST(TransformerFusion, AttentionScoreTileTooLargeIsAnError) {
  const std::string bytes = AttentionModel(0, int64_t{1} << 21, int64_t{1} << 21, {0, 4, 8});
  for (int threads : {1, 2}) {
    SessionOptions opts;
    opts.threads = threads;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), opts);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kOutOfMemory) << s.status().ToString();
    EXPECT_NE(s.status().message().find("Attention"), std::string::npos) << s.status().ToString();
    EXPECT_NE(s.status().message().find("2097152x2097152"), std::string::npos) << s.status().ToString();
  }
}

// ---- the real (small) exports ----

class TransformerModels : public ::testing::Test {
 protected:
  // One folder per test process: ctest runs each test case in its own process, in parallel,
  // and two exports writing the same files at once corrupt each other.
  static std::string Dir() {
    static const std::string dir =
        std::string(STRATA_BINARY_DIR) + "/transformer_fusion_models." + std::to_string(::getpid());
    return dir;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(Dir(), ec);
  }
  static void SetUpTestSuite() {
    const std::string cmd = "/usr/bin/python3 " + std::string(STRATA_SOURCE_DIR) +
                            "/bench/models/make_models.py --only bert,gpt2 --small " + Dir() + " >/dev/null 2>&1";
    generated_ = std::system(cmd.c_str()) == 0;
    if (!generated_) return;
    std::ifstream f(Dir() + "/manifest.json");
    manifest_ = nlohmann::json::parse(f, nullptr, false);
  }
  void Check(const std::string& name, int threads, int layers, int add_left) {
    ASSERT_TRUE(generated_) << "bench/models/make_models.py --small failed (python3-torch installed?)";
    const nlohmann::json* e = nullptr;
    for (const auto& m : manifest_["models"])
      if (m["name"] == name) e = &m;
    ASSERT_NE(e, nullptr);
    Feeds feeds;
    for (const auto& in : (*e)["inputs"]) {
      auto t = ReadNpy(Dir() + "/" + in["file"].get<std::string>());
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      feeds.emplace_back(in["name"].get<std::string>(), Value(*t));
    }
    SessionOptions fast;
    fast.threads = threads;
    SessionOptions plain = fast;
    plain.optimization_level = 0;
    const std::string path = Dir() + "/" + (*e)["model"].get<std::string>();
    auto sf = Session::CreateFromFile(path, fast);
    auto sp = Session::CreateFromFile(path, plain);
    ASSERT_TRUE(sf.ok() && sp.ok()) << sf.status().ToString() << sp.status().ToString();
    auto of = (*sf)->Run(feeds);
    auto op = (*sp)->Run(feeds);
    ASSERT_TRUE(of.ok() && op.ok()) << of.status().ToString() << op.status().ToString();
    auto want = ReadNpy(Dir() + "/" + (*e)["outputs"][0]["file"].get<std::string>());
    ASSERT_TRUE(want.ok());
    Runs vs_plain{*of, *op, {}}, vs_torch{*of, {Value(*want)}, {}};
    ExpectClose(vs_plain);
    ExpectClose(vs_torch);
    std::map<std::string, int> ops;
    for (const auto& a : (*sf)->assignments()) ++ops[a.op_type];
    EXPECT_EQ(ops["Softmax"], 0);
    EXPECT_EQ(ops["Attention"] + ops["MaskedSoftmax"], layers);
    EXPECT_EQ(ops["Erf"] + ops["Tanh"], 0);
    if (sgemm::Available()) {
      EXPECT_EQ(ops["FusedMatMul"], 6 * layers) << "q, k, v, out, ffn in (with GELU), ffn out";
      EXPECT_EQ(ops["Gelu"] + ops["FastGelu"], 0);
      EXPECT_EQ(ops["Attention"], layers);
      EXPECT_EQ(ops["Transpose"], 0) << "head split/merge transposes belong to Attention";
      // The two skip connections per layer join the out-projection / FFN-out epilogues.
      EXPECT_EQ(ops["Add"], add_left) << "only the embedding sums stay: bias, GELU, mask and skip Adds are fused";
    }
  }
  static bool generated_;
  static nlohmann::json manifest_;
};
bool TransformerModels::generated_ = false;
nlohmann::json TransformerModels::manifest_;

TEST_F(TransformerModels, SmallBertMatchesUnoptimizedAndTorch) {
  for (int threads : {1, 2}) Check("bert", threads, 2, 2);
}
TEST_F(TransformerModels, SmallGpt2MatchesUnoptimizedAndTorch) {
  for (int threads : {1, 2}) Check("gpt2", threads, 2, 1);
}

}  // namespace
}  // namespace strata
