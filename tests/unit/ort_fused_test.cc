// ONNX Runtime's com.microsoft FusedConv and FusedGemm, which the import rewrites into the
// standard ops they fuse (core/import_ort_fused.cc): each model's outputs against the same
// model written with the standard ops, at optimization level 0 (reference kernels) and the
// default level, for every activation, Clip under opsets 10 and 17, the Z input, and a
// FusedConv inside an If branch; bad nodes give errors naming them.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "kernel_harness.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

namespace ob = onnx_builder;

void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void SetFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void SetFloats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float f : v) a->add_floats(f);
}

struct Act {
  std::string name;
  std::vector<float> params;  // FusedConv's activation_params
};

// x [1,4,7,7] -> conv 3x3 (8 out, pad 1) [+ z] -> act, fused (FusedConv) or written out.
onnx::ModelProto ConvModel(const Act& act, bool with_z, bool fused, int opset) {
  auto m = ob::MakeModel(opset);
  if (fused) ob::AddOpsetImport(&m, "com.microsoft", 1);
  auto* g = m.mutable_graph();
  ob::AddInput(g, "x", {1, 4, 7, 7});
  ob::AddOutput(g, "y", {1, 8, 7, 7});
  test::AddInit(g, "w", {8, 4, 3, 3}, 11);
  test::AddInit(g, "b", {8}, 12);
  if (with_z) ob::AddInput(g, "z", {1, 8, 7, 7});
  onnx::NodeProto* conv;
  const bool has_act = !act.name.empty();
  if (fused) {
    conv = with_z ? ob::AddNode(g, "FusedConv", {"x", "w", "b", "z"}, {"y"}, "fc")
                  : ob::AddNode(g, "FusedConv", {"x", "w", "b"}, {"y"}, "fc");
    conv->set_domain("com.microsoft");
    if (has_act) SetString(conv, "activation", act.name);
    if (!act.params.empty()) SetFloats(conv, "activation_params", act.params);
  } else {
    conv = ob::AddNode(g, "Conv", {"x", "w", "b"}, {has_act || with_z ? "c" : "y"}, "fc");
    std::string cur = "c";
    if (with_z) {
      ob::AddNode(g, "Add", {"c", "z"}, {has_act ? "s" : "y"});
      cur = "s";
    }
    if (has_act) {
      onnx::NodeProto* a;
      if (act.name == "Clip") {
        ob::AddFloatInit(g, "lo", {}, {act.params[0]});
        ob::AddFloatInit(g, "hi", {}, {act.params[1]});
        a = ob::AddNode(g, "Clip", {cur, "lo", "hi"}, {"y"});
      } else {
        a = ob::AddNode(g, act.name, {cur}, {"y"});
      }
      if (act.name == "LeakyRelu") SetFloat(a, "alpha", act.params.empty() ? 0.01f : act.params[0]);
      if (act.name == "HardSigmoid") {
        SetFloat(a, "alpha", act.params[0]);
        SetFloat(a, "beta", act.params[1]);
      }
    }
  }
  ob::SetInts(conv, "pads", {1, 1, 1, 1});
  ob::SetInts(conv, "kernel_shape", {3, 3});
  return m;
}

std::vector<Value> RunModel(const onnx::ModelProto& m, const std::vector<std::pair<std::string, Value>>& feeds, int level) {
  const std::string bytes = ob::Serialize(m);
  SessionOptions o;
  o.optimization_level = level;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  auto out = (*s)->Run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<Value>{};
}

void ExpectSame(const std::vector<Value>& a, const std::vector<Value>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].tensor();
    const Tensor& y = b[i].tensor();
    ASSERT_EQ(x.shape(), y.shape());
    for (int64_t e = 0; e < x.num_elements(); ++e)
      ASSERT_NEAR(x.data<float>()[e], y.data<float>()[e], 1e-5f * (1 + std::fabs(y.data<float>()[e]))) << e;
  }
}

Value Feed(const Shape& s, uint32_t seed) {
  return Value(Tensor::FromVector(test::Pseudo(static_cast<size_t>(NumElements(s)), seed, 2.0f), s));
}

TEST(OrtFusedOps, FusedConvRunsAsConvAddActivation) {
  const std::vector<Act> acts = {{"", {}},
                                 {"Relu", {}},
                                 {"Clip", {0.0f, 6.0f}},
                                 {"Clip", {-0.5f, 0.25f}},
                                 {"LeakyRelu", {0.2f}},
                                 {"HardSigmoid", {0.3f, 0.4f}},
                                 {"Sigmoid", {}},
                                 {"Tanh", {}}};
  for (int opset : {10, 17})
    for (const Act& act : acts)
      for (bool z : {false, true}) {
        if (opset == 10 && act.name == "Clip") continue;  // the written-out model uses Clip-11 inputs
        SCOPED_TRACE("opset " + std::to_string(opset) + " act '" + act.name + "'" + (z ? " with Z" : ""));
        std::vector<std::pair<std::string, Value>> feeds = {{"x", Feed({1, 4, 7, 7}, 1)}};
        if (z) feeds.push_back({"z", Feed({1, 8, 7, 7}, 2)});
        const auto want = RunModel(ConvModel(act, z, false, opset), feeds, 0);
        for (int level : {0, 99}) ExpectSame(RunModel(ConvModel(act, z, true, opset), feeds, level), want);
      }
  // Clip under opset 10 (Clip-6 bounds as attributes) against the formula.
  const std::vector<std::pair<std::string, Value>> feeds = {{"x", Feed({1, 4, 7, 7}, 1)}};
  const auto plain = RunModel(ConvModel({"", {}}, false, false, 10), feeds, 0);
  const auto clipped = RunModel(ConvModel({"Clip", {-0.5f, 0.25f}}, false, true, 10), feeds, 0);
  ASSERT_EQ(clipped.size(), 1u);
  const Tensor& p = plain[0].tensor();
  for (int64_t e = 0; e < p.num_elements(); ++e)
    ASSERT_EQ(clipped[0].tensor().data<float>()[e], std::fmin(0.25f, std::fmax(-0.5f, p.data<float>()[e]))) << e;
}

onnx::ModelProto GemmModel(const std::string& act, bool fused) {
  auto m = ob::MakeModel(17);
  if (fused) ob::AddOpsetImport(&m, "com.microsoft", 1);
  auto* g = m.mutable_graph();
  ob::AddInput(g, "a", {3, 5});
  ob::AddOutput(g, "y", {3, 6});
  test::AddInit(g, "w", {6, 5}, 21);
  test::AddInit(g, "c", {6}, 22);
  onnx::NodeProto* gemm;
  if (fused) {
    gemm = ob::AddNode(g, "FusedGemm", {"a", "w", "c"}, {"y"}, "fg");
    gemm->set_domain("com.microsoft");
    if (!act.empty()) SetString(gemm, "activation", act);
    if (act == "LeakyRelu") SetFloat(gemm, "activation_alpha", 0.15f);
  } else {
    gemm = ob::AddNode(g, "Gemm", {"a", "w", "c"}, {act.empty() ? "y" : "t"}, "fg");
    if (!act.empty()) {
      auto* a = ob::AddNode(g, act, {"t"}, {"y"});
      if (act == "LeakyRelu") SetFloat(a, "alpha", 0.15f);
    }
  }
  ob::SetInt(gemm, "transB", 1);
  SetFloat(gemm, "alpha", 0.5f);
  return m;
}

TEST(OrtFusedOps, FusedGemmRunsAsGemmActivation) {
  for (const std::string act : {"", "Relu", "LeakyRelu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE("act '" + act + "'");
    const std::vector<std::pair<std::string, Value>> feeds = {{"a", Feed({3, 5}, 3)}};
    const auto want = RunModel(GemmModel(act, false), feeds, 0);
    for (int level : {0, 99}) ExpectSame(RunModel(GemmModel(act, true), feeds, level), want);
  }
}

TEST(OrtFusedOps, FusedConvInsideASubgraphIsRewritten) {
  // If(cond) then: FusedConv(x) with Relu; else: Identity(zeros). The branch reads x, w, b from
  // the outer scope.
  auto m = ConvModel({"Relu", {}}, false, true, 17);
  auto* g = m.mutable_graph();
  onnx::NodeProto conv = g->node(0);
  g->clear_node();
  ob::AddInput(g, "cond", {});
  g->mutable_input(g->input_size() - 1)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  auto* iff = ob::AddNode(g, "If", {"cond"}, {"y"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* bg = a->mutable_g();
    bg->set_name(branch);
    if (std::string(branch) == "then_branch") {
      *bg->add_node() = conv;
      bg->mutable_node(0)->set_output(0, "yb");
    } else {
      ob::AddNode(bg, "Relu", {"x"}, {"yb"});
    }
    ob::AddOutput(bg, "yb", {});
    bg->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  }
  const Value cond(testing::MakeTensor(DataType::kBool, {}, {1}));
  const std::vector<std::pair<std::string, Value>> feeds = {{"x", Feed({1, 4, 7, 7}, 1)}, {"cond", cond}};
  const auto want = RunModel(ConvModel({"Relu", {}}, false, false, 17), {{"x", Feed({1, 4, 7, 7}, 1)}}, 0);
  ExpectSame(RunModel(m, feeds, 0), want);
}

TEST(OrtFusedOps, BadNodesNameTheProblem) {
  auto expect_error = [](const onnx::ModelProto& m, StatusCode code, const std::string& needle) {
    const std::string bytes = ob::Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    ASSERT_FALSE(s.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_EQ(s.status().code(), code) << s.status().ToString();
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().ToString();
  };
  expect_error(ConvModel({"Selu", {}}, false, true, 17), StatusCode::kUnsupported,
               "node 'fc' (FusedConv, com.microsoft): activation 'Selu' is not supported");
  expect_error(ConvModel({"Clip", {1.0f}}, false, true, 17), StatusCode::kInvalidModel,
               "activation Clip needs activation_params [min, max], got 1 values");
  expect_error(GemmModel("Clip", true), StatusCode::kUnsupported,
               "node 'fg' (FusedGemm, com.microsoft): activation 'Clip' is not supported");
  auto one_input = ConvModel({"Relu", {}}, false, true, 17);
  one_input.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
  one_input.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
  expect_error(one_input, StatusCode::kInvalidModel, "takes 2 to 4 inputs");
}

}  // namespace
}  // namespace strata
