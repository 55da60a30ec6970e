// The fused inverted-residual block (core/inverted_residual_fusion.cc, cpu/conv_nhwc_block.cc):
// MobileNetV2-style [expand 1x1 + Clip] -> depthwise 3x3 + Clip -> project 1x1 [+ Add]
// sessions, optimized (fused) vs the unoptimized reference, at edge shapes (1x1 spatial,
// odd H/W, channel counts off 16, stride 1 and 2, asymmetric pads, several strips, batch
// 2) on 1 and 2 threads; patterns that must not fuse; clear errors on bad input; in bf16
// sessions the wide blocks' bf16 path against the fp32 reference and which blocks take it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "core/inverted_residual_fusion.h"
#include "core/layout_pass.h"
#include "core/session.h"
#include "cpu/conv_nhwc_block.h"
#include "cpu/gemm_bf16.h"
#include "cpu/sgemm.h"
#include "ir_builder.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // AddInput, AddOutput, AddNode, Serialize
using Feeds = std::vector<std::pair<std::string, Value>>;
using test::AddInit;
using test::Pseudo;

struct Block {
  int64_t n = 1, cin = 8, h = 9, w = 9, ce = 24, cout = 8, k = 3, stride = 1;
  std::vector<int64_t> pads = {1, 1, 1, 1};
  bool expand = true, residual = false, relu6 = true, bias = true;
  int64_t dw_group = 0;  // 0: depthwise (group = ce)
  std::string Name() const {
    return "n" + std::to_string(n) + " " + std::to_string(cin) + "->" + std::to_string(ce) + "->" +
           std::to_string(cout) + " " + std::to_string(h) + "x" + std::to_string(w) + " k" + std::to_string(k) + " s" +
           std::to_string(stride) + (expand ? "" : " no-expand") + (residual ? " residual" : "") +
           (relu6 ? " relu6" : "");
  }
};

void AddConv(onnx::GraphProto* g, const std::string& in, const std::string& out, const std::string& wname, int64_t c,
             int64_t m, int64_t k, int64_t stride, std::vector<int64_t> pads, int64_t group, bool bias, uint32_t seed,
             bool add_weights = true) {
  if (add_weights) {
    AddInit(g, wname + "_w", {m, c / group, k, k}, seed, 1.0f / std::sqrt(static_cast<float>(c / group * k * k)));
    if (bias) AddInit(g, wname + "_b", {m}, seed + 1000, 0.2f);
  }
  auto* n = bias ? AddNode(g, "Conv", {in, wname + "_w", wname + "_b"}, {out})
                 : AddNode(g, "Conv", {in, wname + "_w"}, {out});
  n->set_name(out);
  SetInts(n, "kernel_shape", {k, k});
  SetInts(n, "strides", {stride, stride});
  SetInts(n, "pads", pads);
  if (group != 1) SetInt(n, "group", group);
}

// Clip(0, 6) (ReLU6, as MobileNetV2 exports it) or Relu.
void AddAct(onnx::GraphProto* g, const Block& b, const std::string& in, const std::string& out) {
  if (b.relu6) {
    AddNode(g, "Clip", {in, "zero", "six"}, {out});
  } else {
    AddNode(g, "Relu", {in}, {out});
  }
}

// Appends block `b` reading `in` and writing `out`; weight names start with `wp` (blocks
// given the same `wp` share weights when add_weights is false for the later ones).
void AddBlock(onnx::GraphProto* g, const Block& b, const std::string& in, const std::string& out, const std::string& wp,
              uint32_t seed, bool add_weights = true) {
  std::string x = in;
  if (b.expand) {
    AddConv(g, x, out + "_e", wp + "e", b.cin, b.ce, 1, 1, {0, 0, 0, 0}, 1, b.bias, seed, add_weights);
    AddAct(g, b, out + "_e", out + "_ea");
    x = out + "_ea";
  }
  const int64_t group = b.dw_group ? b.dw_group : b.ce;
  AddConv(g, x, out + "_d", wp + "d", b.ce, b.ce, b.k, b.stride, b.pads, group, b.bias, seed + 1, add_weights);
  AddAct(g, b, out + "_d", out + "_da");
  AddConv(g, out + "_da", b.residual ? out + "_p" : out, wp + "p", b.ce, b.cout, 1, 1, {0, 0, 0, 0}, 1, b.bias,
          seed + 2, add_weights);
  if (b.residual) AddNode(g, "Add", {out + "_p", in}, {out});
}

int64_t OutSize(const Block& b, int64_t in, int64_t pb, int64_t pe) { return (in + pb + pe - b.k) / b.stride + 1; }

onnx::ModelProto BlockModel(const Block& b) {
  onnx::ModelProto m = MakeModel(13, "inverted_residual_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {b.n, b.cin, b.h, b.w});
  AddFloatInit(g, "zero", {}, {0.0f});
  AddFloatInit(g, "six", {}, {6.0f});
  AddBlock(g, b, "x", "y", "b0", 7);
  AddOutput(g, "y", {b.n, b.cout, OutSize(b, b.h, b.pads[0], b.pads[2]), OutSize(b, b.w, b.pads[1], b.pads[3])});
  return m;
}

Value Input(Shape shape, uint32_t seed, float scale = 2.0f) {
  return Value(Tensor::FromVector<float>(Pseudo(static_cast<size_t>(NumElements(shape)), seed, scale), shape));
}

// max |opt - ref| <= tol * max |ref| for every output.
void ExpectClose(const test::OptRefRuns& r, const std::string& what, double tol = 1e-4) {
  ASSERT_EQ(r.opt.size(), r.ref.size()) << what;
  for (size_t i = 0; i < r.opt.size(); ++i) {
    const Tensor& a = r.opt[i].tensor();
    const Tensor& b = r.ref[i].tensor();
    ASSERT_EQ(a.shape(), b.shape()) << what << " output " << i;
    double scale = 0, worst = 0;
    for (int64_t k = 0; k < b.num_elements(); ++k) {
      scale = std::max(scale, std::fabs(static_cast<double>(b.data<float>()[k])));
      worst = std::max(worst, std::fabs(static_cast<double>(a.data<float>()[k]) - b.data<float>()[k]));
    }
    ASSERT_GT(scale, 0.0) << what << ": an all-zero reference proves nothing";
    EXPECT_LE(worst / scale, tol) << what << " output " << i;
  }
}

bool SameBits(const Value& a, const Value& b) {
  const Tensor& x = a.tensor();
  const Tensor& y = b.tensor();
  return x.shape() == y.shape() && std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}

int Fused(const test::OptRefRuns& r) {
  auto it = r.ops.find(kInvertedResidualOp);
  return it == r.ops.end() ? 0 : it->second;
}

TEST(InvertedResidual, FusedBlockMatchesReferenceAtEdgeShapes) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fused block needs AVX-512F";
  std::vector<Block> cases = {
      {.residual = true},                                                                    // stride 1 + residual
      {.cin = 16, .h = 11, .w = 13, .ce = 96, .cout = 24, .stride = 2},                      // odd H/W, stride 2
      {.cin = 24, .h = 1, .w = 1, .ce = 144, .cout = 24, .residual = true},                  // 1x1 spatial
      {.cin = 5, .h = 7, .w = 10, .ce = 37, .cout = 11, .stride = 2, .pads = {0, 0, 1, 1}},  // TF pads, C off 16
      {.cin = 32, .h = 12, .w = 12, .ce = 32, .cout = 16, .expand = false},                  // expansion factor 1
      {.n = 2, .cin = 16, .h = 40, .w = 40, .ce = 96, .cout = 16, .residual = true},         // several strips
      {.cin = 16, .h = 41, .w = 37, .ce = 96, .cout = 24, .stride = 2, .relu6 = false},      // strips at stride 2
      {.cin = 8, .h = 6, .w = 6, .ce = 20, .cout = 12, .k = 5, .pads = {2, 2, 2, 2}, .bias = false},  // 5x5
      {.cin = 8, .h = 2, .w = 3, .ce = 16, .cout = 8, .stride = 2, .pads = {1, 1, 1, 1}, .residual = false},
      {.cin = 4, .h = 3, .w = 2, .ce = 2600, .cout = 5},  // K > 2560: the project GEMM packs A
      // Half-width last panels (expand 144 = 4.5 panels, project 33 and 16) and strips of
      // 14 / 7 pixel rows (even row tiles of 196 / 49 rows).
      {.cin = 24, .h = 14, .w = 14, .ce = 144, .cout = 33},
      {.cin = 16, .h = 7, .w = 7, .ce = 48, .cout = 16, .residual = true, .relu6 = false},
      // Strips of 5 rows (4 at 2 threads' part edges): the depthwise rows go in pairs
      // (dw::ConvRowPair) plus one single row per strip.
      {.cin = 24, .h = 23, .w = 50, .ce = 144, .cout = 24, .residual = true},
  };
  uint32_t seed = 1;
  for (const Block& b : cases) {
    for (int threads : {1, 2}) {
      test::OptRefRuns r =
          test::RunOptimizedAndReference(BlockModel(b), {{"x", Input({b.n, b.cin, b.h, b.w}, seed)}}, threads);
      ExpectClose(r, b.Name() + " threads " + std::to_string(threads));
      EXPECT_EQ(Fused(r), 1) << b.Name();
      EXPECT_EQ(r.ops["NhwcConv"], 0) << b.Name();
    }
    ++seed;
  }
}

// Where parts of rows would recompute many expanded rows, more threads run the whole image
// in phases (expand, depthwise, project; conv_nhwc_block.cc's RunPhased): 7x7 maps at stride
// 1 from 2 threads, a 5x5 kernel, a 3-row map, and two images at 4 threads (image by image).
// Every pixel's sums run as with one thread, so the outputs are the same bits.
TEST(InvertedResidual, PhasedSmallMapsMatchOneThreadBitForBit) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fused block needs AVX-512F";
  const std::vector<std::pair<Block, int>> cases = {
      {{.cin = 16, .h = 7, .w = 7, .ce = 48, .cout = 16, .residual = true}, 2},
      {{.cin = 160, .h = 7, .w = 7, .ce = 960, .cout = 320}, 2},
      {{.cin = 8, .h = 6, .w = 6, .ce = 20, .cout = 12, .k = 5, .pads = {2, 2, 2, 2}}, 2},
      {{.cin = 4, .h = 3, .w = 2, .ce = 40, .cout = 5}, 2},
      {{.n = 2, .cin = 16, .h = 7, .w = 7, .ce = 48, .cout = 16, .residual = true}, 4},
  };
  uint32_t seed = 60;
  for (const auto& [b, threads] : cases) {
    const Feeds feeds = {{"x", Input({b.n, b.cin, b.h, b.w}, seed++)}};
    test::OptRefRuns one = test::RunOptimizedAndReference(BlockModel(b), feeds, 1);
    test::OptRefRuns many = test::RunOptimizedAndReference(BlockModel(b), feeds, threads);
    const std::string what = b.Name() + " threads " + std::to_string(threads);
    ExpectClose(many, what);
    EXPECT_EQ(Fused(many), 1) << what;
    ASSERT_EQ(one.opt.size(), 1u) << what;
    ASSERT_EQ(many.opt.size(), 1u) << what;
    EXPECT_TRUE(SameBits(one.opt[0], many.opt[0])) << what;
  }
}

TEST(InvertedResidual, ChainOfBlocksWithSharedWeightsMatches) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fused block needs AVX-512F";
  // Two identical blocks reading the same weight initializers, then a stride-2 block.
  onnx::ModelProto m = MakeModel(13, "inverted_residual_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 16, 20, 20});
  AddFloatInit(g, "zero", {}, {0.0f});
  AddFloatInit(g, "six", {}, {6.0f});
  const Block b{.cin = 16, .h = 20, .w = 20, .ce = 64, .cout = 16, .residual = true};
  AddBlock(g, b, "x", "y1", "shared", 3);
  AddBlock(g, b, "y1", "y2", "shared", 3, /*add_weights=*/false);
  Block s2 = b;
  s2.stride = 2;
  s2.residual = false;
  s2.cout = 24;
  AddBlock(g, s2, "y2", "y3", "third", 9);
  AddOutput(g, "y3", {1, 24, 10, 10});
  for (int threads : {1, 2}) {
    test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"x", Input({1, 16, 20, 20}, 5)}}, threads);
    ExpectClose(r, "chain threads " + std::to_string(threads));
    EXPECT_EQ(Fused(r), 3);
  }
}

TEST(InvertedResidual, NearMissPatternsDoNotFuse) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fused block needs AVX-512F";
  const Block b{.cin = 8, .h = 9, .w = 9, .ce = 24, .cout = 8};
  const Feeds feeds = {{"x", Input({1, 8, 9, 9}, 21)}};
  auto base = [&](onnx::ModelProto* m) {
    auto* g = m->mutable_graph();
    AddInput(g, "x", {1, 8, 9, 9});
    AddFloatInit(g, "zero", {}, {0.0f});
    AddFloatInit(g, "six", {}, {6.0f});
    AddBlock(g, b, "x", "y", "b0", 7);
    AddOutput(g, "y", {1, 8, 9, 9});
    return g;
  };
  {
    // The depthwise output is also a graph output: nothing fuses.
    onnx::ModelProto m = MakeModel(13);
    AddOutput(base(&m), "y_da", {1, 24, 9, 9});
    test::OptRefRuns r = test::RunOptimizedAndReference(m, feeds);
    ExpectClose(r, "dw output is a graph output");
    EXPECT_EQ(Fused(r), 0);
    EXPECT_EQ(r.ops["NhwcConv"], 3);
  }
  {
    // The expanded tensor is also a graph output: only depthwise + project fuse.
    onnx::ModelProto m = MakeModel(13);
    AddOutput(base(&m), "y_ea", {1, 24, 9, 9});
    test::OptRefRuns r = test::RunOptimizedAndReference(m, feeds);
    ExpectClose(r, "expand output is a graph output");
    EXPECT_EQ(Fused(r), 1);
    EXPECT_EQ(r.ops["NhwcConv"], 1);
  }
  {
    // Another node reads the depthwise output: nothing fuses.
    onnx::ModelProto m = MakeModel(13);
    auto* g = base(&m);
    AddNode(g, "Relu", {"y_da"}, {"side"});
    AddOutput(g, "side", {1, 24, 9, 9});
    test::OptRefRuns r = test::RunOptimizedAndReference(m, feeds);
    ExpectClose(r, "dw output read elsewhere");
    EXPECT_EQ(Fused(r), 0);
  }
  {
    // group != channels in the middle conv: not depthwise, nothing fuses.
    Block g2 = b;
    g2.dw_group = 4;
    test::OptRefRuns r = test::RunOptimizedAndReference(BlockModel(g2), feeds);
    ExpectClose(r, "grouped middle conv");
    EXPECT_EQ(Fused(r), 0);
  }
  {
    // A strided "project" conv is not a 1x1 GEMM over the depthwise rows.
    onnx::ModelProto m = MakeModel(13, "inverted_residual_test");
    auto* g = m.mutable_graph();
    AddInput(g, "x", {1, 8, 9, 9});
    AddConv(g, "x", "d", "d", 8, 8, 3, 1, {1, 1, 1, 1}, 8, true, 3);
    AddConv(g, "d", "y", "p", 8, 8, 1, 2, {0, 0, 0, 0}, 1, true, 4);
    AddOutput(g, "y", {1, 8, 5, 5});
    test::OptRefRuns r = test::RunOptimizedAndReference(m, feeds);
    ExpectClose(r, "strided project");
    EXPECT_EQ(Fused(r), 0);
  }
}

TEST(InvertedResidual, WrongInputChannelsGiveAClearError) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fused block needs AVX-512F";
  // The channel dim is symbolic, so the session accepts any and the fused kernel must check.
  onnx::ModelProto m = MakeModel(13, "inverted_residual_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, -1, 6, 6});
  AddFloatInit(g, "zero", {}, {0.0f});
  AddFloatInit(g, "six", {}, {6.0f});
  AddBlock(g, Block{.h = 6, .w = 6}, "x", "y", "b0", 7);
  AddOutput(g, "y", {1, 8, 6, 6});
  const std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  int fused = 0;
  for (const auto& a : (*s)->assignments()) fused += a.op_type == kInvertedResidualOp;
  ASSERT_EQ(fused, 1);
  auto out = (*s)->Run({{"x", Input({1, 5, 6, 6}, 3)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(kInvertedResidualOp), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("channels"), std::string::npos) << out.status().ToString();
}

// ------------------------------------------------------------------------------ bf16

// One optimized session (bf16 fast math or fp32) on `threads` threads; its outputs.
std::vector<Value> RunSession(const onnx::ModelProto& m, const Feeds& feeds, int threads, bool bf16,
                              std::map<std::string, int>* ops = nullptr) {
  const std::string bytes = Serialize(m);
  SessionOptions so;
  so.threads = threads;
  so.kernel.bf16_fast_math = bf16;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), so);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  if (ops)
    for (const auto& a : (*s)->assignments()) ++(*ops)[a.op_type];
  auto out = (*s)->Run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<Value>{};
}

class InvertedResidualBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sgemm::Available() || !Bf16GemmAvailable()) GTEST_SKIP() << "needs AVX-512F and AVX512_BF16";
  }
};

// Each block on 1 and 2 threads in a bf16 session: fused into one block, within `tol` of the
// unfused fp32 reference graph (max abs difference over max |reference|), and not the fp32
// session's bits (the bf16 path ran). no_nhwc: no NhwcConv is left either.
void ExpectBf16Blocks(const std::vector<Block>& cases, uint32_t seed, double tol, bool no_nhwc) {
  for (const Block& b : cases) {
    const Feeds feeds = {{"x", Input({b.n, b.cin, b.h, b.w}, seed++)}};
    for (int threads : {1, 2}) {
      const std::string what = b.Name() + " threads " + std::to_string(threads);
      test::OptRefRuns r = test::RunOptimizedAndReference(BlockModel(b), feeds, threads);
      std::map<std::string, int> ops;
      r.opt = RunSession(BlockModel(b), feeds, threads, /*bf16=*/true, &ops);
      const std::vector<Value> fp32 = RunSession(BlockModel(b), feeds, threads, /*bf16=*/false);
      ASSERT_EQ(r.opt.size(), 1u) << what;
      ASSERT_EQ(fp32.size(), 1u) << what;
      EXPECT_EQ(ops[kInvertedResidualOp], 1) << what;
      if (no_nhwc) {
        EXPECT_EQ(ops["NhwcConv"], 0) << what;
      }
      ExpectClose(r, what, tol);
      EXPECT_FALSE(SameBits(r.opt[0], fp32[0])) << what << ": the bf16 path should differ from fp32 somewhere";
    }
  }
}

// Wide blocks (expanded width >= 512) in a bf16 session: the fused block on bf16 against the
// unfused fp32 reference graph, within bf16's rounding of activations and 1x1 weights.
TEST_F(InvertedResidualBf16, WideBlocksMatchTheFp32GraphWithinBf16Tolerance) {
  std::vector<Block> cases = {
      {.cin = 64, .h = 9, .w = 11, .ce = 576, .cout = 64, .residual = true},                  // stride 1, odd W
      {.cin = 96, .h = 13, .w = 13, .ce = 576, .cout = 160, .stride = 2},                     // stride 2, odd H/W
      {.cin = 17, .h = 7, .w = 5, .ce = 515, .cout = 33, .stride = 2, .pads = {0, 0, 1, 1}},  // odd K, odd N
      {.cin = 520, .h = 6, .w = 7, .ce = 520, .cout = 40, .expand = false},                   // expansion factor 1
      {.n = 2, .cin = 32, .h = 30, .w = 30, .ce = 576, .cout = 32, .residual = true},         // several strips
      {.cin = 400, .h = 5, .w = 5, .ce = 960, .cout = 320, .relu6 = false, .bias = false},    // K chunks in both GEMMs
      {.cin = 24, .h = 1, .w = 1, .ce = 600, .cout = 24, .residual = true},                   // 1x1 spatial
  };
  // Two roundings to bf16 (2^-9 relative each) per product: a few 1e-3 of the output scale.
  ExpectBf16Blocks(cases, 40, 1e-2, /*no_nhwc=*/true);
}

// Mid-width blocks (192 <= expanded width < 512) in a bf16 session on AMX run their 1x1
// GEMMs on split rows (hi + lo bf16, block_bf16::RoundRowsSplit): close to fp32 (a product
// is off by ~1e-5 of |aw| instead of bf16's ~4e-3), yet not the fp32 kernel's bits.
TEST_F(InvertedResidualBf16, MidWidthBlocksOnAmxStayCloseToFp32) {
  if (!bf16_internal::AmxAvailable()) GTEST_SKIP() << "split rows are used only on AMX";
  std::vector<Block> cases = {
      {.cin = 32, .h = 9, .w = 11, .ce = 192, .cout = 32, .residual = true},                 // stride 1, odd W
      {.cin = 33, .h = 13, .w = 13, .ce = 200, .cout = 17, .stride = 2},                     // odd K and N
      {.cin = 256, .h = 6, .w = 7, .ce = 256, .cout = 40, .expand = false},                  // no expand
      {.n = 2, .cin = 64, .h = 20, .w = 20, .ce = 384, .cout = 64, .residual = true},        // several strips
      {.cin = 24, .h = 1, .w = 1, .ce = 300, .cout = 24, .residual = true, .relu6 = false},  // 1x1 spatial
  };
  ExpectBf16Blocks(cases, 70, 2e-4, /*no_nhwc=*/false);
}

// Narrow blocks stay fp32 in bf16 sessions (see kMinBf16ExpandWidth): bit for bit the
// fp32 session's output.
TEST_F(InvertedResidualBf16, NarrowBlocksStayFp32InBf16Sessions) {
  const Block b{.cin = 16, .h = 11, .w = 13, .ce = 96, .cout = 24, .stride = 2};
  const Feeds feeds = {{"x", Input({1, 16, 11, 13}, 61)}};
  for (int threads : {1, 2}) {
    std::map<std::string, int> ops;
    const std::vector<Value> bf16 = RunSession(BlockModel(b), feeds, threads, true, &ops);
    const std::vector<Value> fp32 = RunSession(BlockModel(b), feeds, threads, false);
    ASSERT_EQ(bf16.size(), 1u);
    ASSERT_EQ(fp32.size(), 1u);
    EXPECT_EQ(ops[kInvertedResidualOp], 1);
    EXPECT_TRUE(SameBits(bf16[0], fp32[0])) << "threads " << threads;
  }
}

// Builds the fused node directly and asks its factory which kernel it makes.
class FusedNodeFactory {
 public:
  FusedNodeFactory(int64_t cin, int64_t ce, int64_t cout) {
    using testing::SetInt;
    using testing::SetInts;
    auto w = [](Shape shape, uint32_t seed) {
      return Tensor::FromVector<float>(test::Pseudo(static_cast<size_t>(NumElements(shape)), seed, 0.1f), shape);
    };
    const int x = b_.Value("x", {1, 7, 7, cin});
    const int we = b_.Const("we", w({ce, cin, 1, 1}, 1)), wd = b_.Const("wd", w({ce, 1, 3, 3}, 2));
    const int wp = b_.Const("wp", w({cout, ce, 1, 1}, 3));
    Node& n = b_.Add(kInvertedResidualOp, {x, we, -1, wd, -1, wp, -1}, {b_.Out("y")}, 1);
    n.domain = kInternalDomain;
    SetInt(n, std::string(kDepthwisePrefix) + "group", ce);
    SetInts(n, std::string(kDepthwisePrefix) + "kernel_shape", {3, 3});
    SetInts(n, std::string(kDepthwisePrefix) + "pads", {1, 1, 1, 1});
  }
  // True if the factory built a bf16 kernel; fails the test if it built nothing.
  bool MakesBf16(bool bf16_fast_math) const {
    KernelConfig config;
    config.bf16_fast_math = bf16_fast_math;
    auto k = MakeNhwcInvertedResidual(KernelInit{b_.g.nodes[0], b_.g, nullptr, config});
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return k.ok() && IsBf16Kernel(**k);
  }

 private:
  testing::IrBuilder b_;
};

TEST_F(InvertedResidualBf16, OnlyBf16SessionsSelectTheBf16BlockKernel) {
  const FusedNodeFactory wide(32, 576, 64), mid(32, 192, 64), narrow(24, 144, 24);
  EXPECT_TRUE(wide.MakesBf16(true));
  EXPECT_FALSE(wide.MakesBf16(false));
  // Mid-width blocks take the split bf16 GEMMs on AMX only (kMinSplitExpandWidth).
  EXPECT_EQ(mid.MakesBf16(true), bf16_internal::AmxAvailable());
  EXPECT_FALSE(mid.MakesBf16(false));
  EXPECT_FALSE(narrow.MakesBf16(true));
  bf16_internal::SetAmxDisabledForTesting(true);
  EXPECT_FALSE(mid.MakesBf16(true));
  EXPECT_TRUE(wide.MakesBf16(true));
  bf16_internal::SetAmxDisabledForTesting(false);
  // A CPU without avx512_bf16 (simulated) keeps the fp32 block.
  SetBf16DisabledForTesting(true);
  EXPECT_FALSE(wide.MakesBf16(true));
  SetBf16DisabledForTesting(false);
}

}  // namespace
}  // namespace strata
