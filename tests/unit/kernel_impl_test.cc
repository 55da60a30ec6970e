// The implementation a session reports per node (NodeAssignment::impl, shown by
// `strata run --verbose` and `strata bench --profile`) is the registry entry whose kernel
// really runs: the bf16 entries (registered ahead of the fp32 ones) must pass the nodes
// they do not cover to the fp32 entries instead of accepting them and delegating.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/session.h"
#include "cpu/gemm_bf16.h"
#include "onnx_builder.h"

namespace strata {
namespace {

// fp32 nodes bf16 covers (MatMul and Gemm with constant B, dense Conv with constant W) and
// two it does not (MatMul with a run-time B, depthwise Conv).
std::string Fp32Model() {
  auto m = onnx_builder::MakeModel(13);
  auto* g = m.mutable_graph();
  onnx_builder::AddInput(g, "x", {4, 64});
  onnx_builder::AddInput(g, "xb", {64, 48});
  onnx_builder::AddInput(g, "img", {1, 8, 10, 10});
  onnx_builder::AddPseudoRandomInit(g, "w", {64, 48}, 1);
  onnx_builder::AddPseudoRandomInit(g, "wt", {48, 64}, 2);
  onnx_builder::AddPseudoRandomInit(g, "c", {48}, 3);
  onnx_builder::AddPseudoRandomInit(g, "cw", {16, 8, 3, 3}, 4);
  onnx_builder::AddPseudoRandomInit(g, "cb", {16}, 5);
  onnx_builder::AddPseudoRandomInit(g, "dw", {8, 1, 3, 3}, 6);
  onnx_builder::AddNode(g, "MatMul", {"x", "w"}, {"mm"})->set_name("matmul");
  auto* gemm = onnx_builder::AddNode(g, "Gemm", {"x", "wt", "c"}, {"gm"});
  gemm->set_name("gemm");
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  onnx_builder::AddNode(g, "Conv", {"img", "cw", "cb"}, {"cv"})->set_name("conv");
  onnx_builder::AddNode(g, "MatMul", {"x", "xb"}, {"mm_rt"})->set_name("matmul_runtime_b");
  auto* dconv = onnx_builder::AddNode(g, "Conv", {"img", "dw"}, {"dc"});
  dconv->set_name("conv_depthwise");
  auto* grp = dconv->add_attribute();
  grp->set_name("group");
  grp->set_type(onnx::AttributeProto::INT);
  grp->set_i(8);
  onnx_builder::AddOutput(g, "mm", {4, 48});
  onnx_builder::AddOutput(g, "gm", {4, 48});
  onnx_builder::AddOutput(g, "cv", {1, 16, 8, 8});
  onnx_builder::AddOutput(g, "mm_rt", {4, 48});
  onnx_builder::AddOutput(g, "dc", {1, 8, 8, 8});
  return onnx_builder::Serialize(m);
}

// node name -> reported implementation.
std::map<std::string, std::string> Impls(bool bf16, bool reference = false) {
  const std::string bytes = Fp32Model();
  SessionOptions so;
  so.threads = 1;
  so.optimization_level = 1;  // keep the NCHW Conv (the NHWC layout pass is level 2)
  so.kernel.bf16_fast_math = bf16;
  so.kernel.prefer_reference = reference;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), so);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::map<std::string, std::string> out;
  if (!s.ok()) return out;
  for (const NodeAssignment& na : (*s)->assignments()) out[na.node_name] = na.impl;
  return out;
}

TEST(KernelImplTest, Fp32WithoutPrecisionOptionReportsFp32Kernels) {
  auto impl = Impls(/*bf16=*/false);
  ASSERT_EQ(impl.size(), 5u);
  for (const char* node : {"matmul", "gemm", "conv", "matmul_runtime_b", "conv_depthwise"})
    EXPECT_EQ(impl[node], "xnnpack") << node;
}

TEST(KernelImplTest, PreferReferenceReportsRef) {
  auto impl = Impls(/*bf16=*/true, /*reference=*/true);
  ASSERT_EQ(impl.size(), 5u);
  for (const auto& [node, name] : impl) EXPECT_EQ(name, "ref") << node;
}

TEST(KernelImplTest, PrecisionBf16ReportsBf16OnlyWhereItRuns) {
  if (!Bf16GemmAvailable()) GTEST_SKIP() << "CPU without avx512_bf16 (or disabled): no bf16 kernels to report";
  auto impl = Impls(/*bf16=*/true);
  ASSERT_EQ(impl.size(), 5u);
  // The bf16 kernels name the tile kernel they run on.
  const std::string tiles = bf16_internal::AmxAvailable() ? "amx_bf16" : "avx512_bf16";
  EXPECT_EQ(impl["matmul"], tiles);
  EXPECT_EQ(impl["gemm"], tiles);
  EXPECT_EQ(impl["conv"], "avx512_bf16");  // the NCHW bf16 conv has no AMX path
  // Shapes the bf16 kernels leave to fp32 name the fp32 kernel.
  EXPECT_EQ(impl["matmul_runtime_b"], "xnnpack");
  EXPECT_EQ(impl["conv_depthwise"], "xnnpack");
}

TEST(KernelImplTest, Bf16DisabledAtRunTimeReportsFp32) {
  if (!Bf16GemmAvailable()) GTEST_SKIP() << "CPU without avx512_bf16 (or disabled): nothing to disable";
  // The bf16 entries stay registered; they must decline once the kernels are switched off.
  SetBf16DisabledForTesting(true);
  auto impl = Impls(/*bf16=*/true);
  SetBf16DisabledForTesting(false);
  ASSERT_EQ(impl.size(), 5u);
  for (const auto& [node, name] : impl) EXPECT_EQ(name, "xnnpack") << node;
}

}  // namespace
}  // namespace strata
