// The fusion passes' shared view of a graph (core/fusion_util.h) and their question to the
// kernel registry: a fused form that no registered kernel covers is left as written.
#include "core/fusion_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/executor.h"
#include "core/layout_pass.h"
#include "core/optimizer.h"
#include "cpu/sgemm.h"
#include "ir_builder.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::IrBuilder;
using testing::RandomTensor;

TEST(FusionUtil, GraphUsesFindsSingleReaders) {
  IrBuilder b;
  const int x = b.Input("x", RandomTensor(DataType::kFloat, {2, 3}, 1));
  const int a = b.Value("a", {2, 3}), c = b.Value("c", {2, 3}), d = b.Value("d", {2, 3}), e = b.Value("e", {2, 3});
  b.Add("Relu", {x}, {a});    // node 0: a feeds node 1 only
  b.Add("Neg", {a}, {c});     // node 1: c feeds nodes 2 and 3
  b.Add("Abs", {c}, {d});     // node 2: d is a graph output as well as read by node 3
  b.Add("Add", {c, d}, {e});  // node 3
  b.g.outputs = {d, e};
  const GraphUses gu(b.g);
  EXPECT_EQ(gu.Producer(a), 0);
  EXPECT_EQ(gu.Producer(x), -1);
  EXPECT_EQ(gu.Producer(-1), -1);
  EXPECT_TRUE(gu.Intermediate(a));
  EXPECT_EQ(gu.SoleConsumer(a), 1);
  EXPECT_EQ(gu.Uses(c), 2);
  EXPECT_FALSE(gu.Intermediate(c));  // two readers
  EXPECT_FALSE(gu.Intermediate(d));  // a graph output too
  EXPECT_EQ(gu.SoleConsumer(d), -1);
  EXPECT_FALSE(gu.Intermediate(e));  // only a graph output

  RemoveDroppedNodes(b.g, {0, 1, 0, 1});
  ASSERT_EQ(b.g.nodes.size(), 2u);
  EXPECT_EQ(b.g.nodes[0].op_type, "Relu");
  EXPECT_EQ(b.g.nodes[1].op_type, "Abs");
}

// NhwcConv(x, w) -> Add(residual) -> Relu, as the layout pass leaves a ResNet block tail.
IrBuilder ResidualTail(int64_t group) {
  IrBuilder b;
  const int x = b.Input("x", RandomTensor(DataType::kFloat, {1, 6, 6, 4}, 1));
  const int r = b.Input("r", RandomTensor(DataType::kFloat, {1, 6, 6, 4}, 2));
  const int w = b.Const("w", RandomTensor(DataType::kFloat, {4, 4 / group, 3, 3}, 3));
  const int y = b.Value("y", {1, 6, 6, 4}), s = b.Value("s", {1, 6, 6, 4}), out = b.Value("out", {1, 6, 6, 4});
  Node& conv = b.Add("NhwcConv", {x, w}, {y}, 1);
  conv.domain = kInternalDomain;
  conv.attrs["group"] = Attribute::Int(group);
  conv.attrs["pads"] = Attribute::Ints({1, 1, 1, 1});
  conv.attrs[kOriginalOpsetAttr] = Attribute::Int(13);
  b.Add("Add", {y, r}, {s});
  b.Add("Relu", {s}, {out});
  b.g.outputs = {out};
  return b;
}

// x -> A(Conv) -> B(Relu) -> C(Conv) -> y1, and A -> D(Conv) -> E(Abs) -> F(Conv) -> G(Conv) -> y2;
// H(Conv) reads x and feeds nothing.
TEST(FusionUtil, LongestChainAfterCountsTheLongestPathToAnOutput) {
  IrBuilder b;
  const int x = b.Input("x", RandomTensor(DataType::kFloat, {1, 4}, 1));
  int v[8];
  for (int i = 0; i < 8; ++i) v[i] = b.Value("v" + std::to_string(i), {1, 4});
  const int y1 = b.Out("y1"), y2 = b.Out("y2");
  Node& a = b.Add("Conv", {x}, {v[0]});
  const Node a_copy = a;
  b.Add("Relu", {v[0]}, {v[1]});
  b.Add("Conv", {v[1]}, {y1});
  b.Add("Conv", {v[0]}, {v[2]});
  b.Add("Abs", {v[2]}, {v[3]});
  b.Add("Conv", {v[3]}, {v[4]});
  b.Add("Conv", {v[4]}, {y2});
  b.Add("Conv", {x}, {v[5]});
  b.g.outputs = {y1, y2};
  auto conv = [](const Node& n) { return n.op_type == "Conv"; };
  const Graph& g = b.g;
  EXPECT_EQ(LongestChainAfter(g, a_copy, conv), 3);                              // D, F, G
  EXPECT_EQ(LongestChainAfter(g, g.nodes[1], conv), 1);                          // B: C
  EXPECT_EQ(LongestChainAfter(g, g.nodes[2], conv), 0);                          // C writes an output
  EXPECT_EQ(LongestChainAfter(g, g.nodes[3], conv), 2);                          // D: F, G
  EXPECT_EQ(LongestChainAfter(g, g.nodes[4], conv), 2);                          // E (not counted itself): F, G
  EXPECT_EQ(LongestChainAfter(g, g.nodes[7], conv), 0);                          // H: its output is never read
  EXPECT_EQ(LongestChainAfter(g, a_copy, [](const Node&) { return true; }), 4);  // D, E, F, G
}

TEST(FusionUtil, ResidualFusionNeedsAKernelThatCoversTheFusedNode) {
  // Grouped: the registered NhwcConv kernel runs it, but not with a residual input (only the
  // SGEMM conv takes one), so the fusion must leave Add and Relu in place.
  IrBuilder grouped = ResidualTail(2);
  EXPECT_TRUE(OptimizedKernelCovers(grouped.g.nodes[0], grouped.g, KernelConfig{}));
  Node with_residual = grouped.g.nodes[0];
  with_residual.inputs = {with_residual.inputs[0], with_residual.inputs[1], -1, grouped.g.FindValue("r")};
  EXPECT_FALSE(OptimizedKernelCovers(with_residual, grouped.g, KernelConfig{}));
  EXPECT_EQ(FuseNhwcConvResidual(grouped.g), 0);
  ASSERT_EQ(grouped.g.nodes.size(), 3u);
  EXPECT_EQ(grouped.g.nodes[1].op_type, "Add");

  // Ungrouped: fused exactly where the SGEMM conv is available.
  IrBuilder plain = ResidualTail(1);
  const bool sgemm = sgemm::Available();
  EXPECT_EQ(FuseNhwcConvResidual(plain.g), sgemm ? 1 : 0);
  if (sgemm) {
    ASSERT_EQ(plain.g.nodes.size(), 1u);
    const Node& f = plain.g.nodes[0];
    EXPECT_EQ(f.op_type, "NhwcConv");
    ASSERT_EQ(f.inputs.size(), 4u);
    EXPECT_EQ(f.inputs[3], plain.g.FindValue("r"));
    EXPECT_EQ(f.GetString("activation", ""), "Relu");
    EXPECT_EQ(f.outputs, std::vector<int>{plain.g.FindValue("out")});
  }
}

TEST(FusionUtil, UncoveredNodeIsAnErrorNamingIt) {
  // A grouped NhwcConv given a residual anyway (a hand-written graph): the session fails
  // with an error naming the node, not a crash.
  IrBuilder b = ResidualTail(2);
  Node& conv = b.g.nodes[0];
  conv.inputs = {conv.inputs[0], conv.inputs[1], -1, b.g.FindValue("r")};
  auto g = std::make_shared<Graph>(std::move(b.g));
  ThreadPool pool(1);
  auto ex = Executor::Create(g, &pool, ExecOptions{});
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(ex.status().message().find("NhwcConv node"), std::string::npos) << ex.status().message();
  EXPECT_NE(ex.status().message().find("covers"), std::string::npos) << ex.status().message();
}

TEST(FusionUtil, TransformerFusedOpsAskForTheFastKernel) {
  // FusedMatMul and Attention have a reference entry everywhere; the fast one covers them
  // only with the SGEMM (AVX-512F; STRATA_SGEMM=0 turns it off), which is what the
  // transformer fusion asks before emitting them.
  IrBuilder b;
  for (const char* op : {"FusedMatMul", "Attention"}) {
    Node probe;
    probe.domain = kInternalDomain;
    probe.op_type = op;
    probe.opset = 1;
    EXPECT_EQ(OptimizedKernelCovers(probe, b.g, KernelConfig{}), sgemm::Available()) << op;
  }
  Node unknown;
  unknown.domain = kInternalDomain;
  unknown.op_type = "NoSuchFusedOp";
  unknown.opset = 1;
  EXPECT_FALSE(OptimizedKernelCovers(unknown, b.g, KernelConfig{}));
}

}  // namespace
}  // namespace strata
