// The NHWC layout pass (core/layout_pass.cc) and its internal kernels: optimized sessions
// must match the unoptimized reference within 1e-4 relative on small conv nets covering
// residual Add, ReLU/Clip, pools, GlobalAveragePool+Flatten+Gemm, odd channel counts,
// stride, padding, depthwise groups, graph-output convs, run-time weights and batch 2.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/layout_pass.h"
#include "core/onnx_import.h"
#include "core/optimizer.h"
#include "core/session.h"
#include "core/threadpool.h"
#include "cpu/sgemm.h"
#include "cpu/xnnpack_util.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // AddInput, AddOutput, AddNode, Serialize
using Feeds = std::vector<std::pair<std::string, Value>>;
using test::AddInit;
using test::Pseudo;

void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// Conv `out` = Conv(in, W[m, c/group, k, k], B[m]) with the given stride/pad/group.
void AddConv(onnx::GraphProto* g, const std::string& in, const std::string& out, int64_t c, int64_t m, int64_t k,
             int64_t stride, int64_t pad, int64_t group, uint32_t seed, bool bias = true) {
  AddInit(g, out + "_w", {m, c / group, k, k}, seed, 1.0f / std::sqrt(static_cast<float>(c / group * k * k)));
  if (bias) AddInit(g, out + "_b", {m}, seed + 1000, 0.1f);
  auto* n =
      bias ? AddNode(g, "Conv", {in, out + "_w", out + "_b"}, {out}) : AddNode(g, "Conv", {in, out + "_w"}, {out});
  n->set_name(out);
  SetInts(n, "kernel_shape", {k, k});
  SetInts(n, "strides", {stride, stride});
  SetInts(n, "pads", {pad, pad, pad, pad});
  if (group != 1) SetInt(n, "group", group);
}

Tensor Input(Shape shape, uint32_t seed) {
  return Tensor::FromVector<float>(Pseudo(static_cast<size_t>(NumElements(shape)), seed), shape);
}

using Runs = test::OptRefRuns;
Runs RunBoth(const onnx::ModelProto& m, const Feeds& feeds, int threads = 1) {
  return test::RunOptimizedAndReference(m, feeds, threads);
}

// max |a-b| / max |b|, per output; shapes must agree exactly.
void ExpectClose(const Runs& r, double tol = 1e-4) {
  ASSERT_EQ(r.opt.size(), r.ref.size());
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

std::map<std::string, int> OpCounts(const std::vector<NodeAssignment>& as) {
  std::map<std::string, int> c;
  for (const auto& a : as) ++c[a.op_type];
  return c;
}

// x[2,3,16,16] -> Conv+Relu(17) -> MaxPool s2 -> Conv+Clip -> depthwise Conv -> 1x1 Conv
// -> Add(residual from the pool) -> Relu -> Mul(per-channel constant) -> AveragePool
// -> Conv s2 (also a graph output) -> GlobalAveragePool -> Flatten -> Gemm.
onnx::ModelProto SmallNet() {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 3, 16, 16});
  AddConv(g, "x", "c1", 3, 17, 3, 1, 1, 1, 1);
  AddNode(g, "Relu", {"c1"}, {"r1"});
  auto* mp = AddNode(g, "MaxPool", {"r1"}, {"mp"});
  SetInts(mp, "kernel_shape", {3, 3});
  SetInts(mp, "strides", {2, 2});
  SetInts(mp, "pads", {1, 1, 1, 1});
  AddConv(g, "mp", "c2", 17, 17, 3, 1, 1, 1, 2);
  AddInit(g, "lo", {}, 3, 0.0f);
  auto* hi = g->add_initializer();
  hi->set_name("hi");
  hi->set_data_type(onnx::TensorProto::FLOAT);
  hi->add_float_data(0.5f);
  AddNode(g, "Clip", {"c2", "lo", "hi"}, {"cl"});
  AddConv(g, "cl", "dw", 17, 17, 3, 1, 1, 17, 4);
  AddConv(g, "dw", "pw", 17, 17, 1, 1, 0, 1, 5);
  AddNode(g, "Add", {"pw", "mp"}, {"add"});
  AddNode(g, "Relu", {"add"}, {"r2"});
  AddInit(g, "scale", {17, 1, 1}, 6, 2.0f);
  AddNode(g, "Mul", {"r2", "scale"}, {"mul"});
  auto* ap = AddNode(g, "AveragePool", {"mul"}, {"ap"});
  SetInts(ap, "kernel_shape", {2, 2});
  SetInts(ap, "strides", {2, 2});
  AddConv(g, "ap", "feat", 17, 8, 3, 2, 1, 1, 7);
  AddNode(g, "GlobalAveragePool", {"feat"}, {"gap"});
  AddNode(g, "Flatten", {"gap"}, {"flat"});
  AddInit(g, "fc_w", {8, 5}, 8);
  AddInit(g, "fc_b", {5}, 9);
  AddNode(g, "Gemm", {"flat", "fc_w", "fc_b"}, {"out"});
  AddOutput(g, "out", {2, 5});
  AddOutput(g, "feat", {2, 8, 2, 2});
  return m;
}

// The layout changes themselves, exactly, at channel counts with fast paths (3: RGB inputs)
// and without, pixel counts off the 16-pixel vector, batch 2, with and without a pool.
TEST(Layout, TransposesMatchElementwiseDefinition) {
  ThreadPool pool(2);
  for (int64_t c : {1, 2, 3, 4, 17}) {
    for (int64_t hw : {1, 15, 16, 33, 4099, 150 * 150}) {
      for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const int64_t n = 2, total = n * c * hw;
        std::vector<float> in(static_cast<size_t>(total)), nhwc(in.size()), back(in.size());
        for (int64_t i = 0; i < total; ++i) in[i] = static_cast<float>(i);
        TransposeNchwToNhwc(in.data(), nhwc.data(), n, c, hw, tp);
        bool ok = true;
        for (int64_t b = 0; b < n && ok; ++b)
          for (int64_t p = 0; p < hw && ok; ++p)
            for (int64_t ch = 0; ch < c && ok; ++ch) ok = nhwc[(b * hw + p) * c + ch] == in[(b * c + ch) * hw + p];
        EXPECT_TRUE(ok) << "NCHW -> NHWC c=" << c << " hw=" << hw << (tp ? " pool" : "");
        TransposeNhwcToNchw(nhwc.data(), back.data(), n, c, hw, tp);
        EXPECT_EQ(back, in) << "round trip c=" << c << " hw=" << hw << (tp ? " pool" : "");
      }
    }
  }
}

TEST(Layout, SmallNetMatchesReference) {
  for (int threads : {1, 2}) {
    Runs r = RunBoth(SmallNet(), {{"x", Value(Input({2, 3, 16, 16}, 11))}}, threads);
    ExpectClose(r);
    auto ops = OpCounts(r.assignments);
    // dw -> pw (+Add +Relu) is an inverted-residual block without expansion (c2 is 3x3):
    // one fused node where AVX-512F runs it (core/inverted_residual_fusion.cc).
    EXPECT_EQ(ops["NhwcConv"], sgemm::Available() ? 3 : 5);
    EXPECT_EQ(ops["NhwcInvertedResidual"], sgemm::Available() ? 1 : 0);
    EXPECT_EQ(ops["NhwcMaxPool"], 1);
    EXPECT_EQ(ops["NhwcAveragePool"], 1);
    EXPECT_EQ(ops["NhwcGlobalAveragePool"], 1);
    EXPECT_EQ(ops["Conv"], 0);
    // One transpose in (x), one out (the 'feat' graph output); GlobalAveragePool ->
    // Flatten needs none.
    EXPECT_EQ(ops["NchwToNhwc"], 1);
    EXPECT_EQ(ops["NhwcToNchw"], 1);
    // The first Relu is fused into its Conv; the residual Add + Relu join their conv's SGEMM
    // epilogue (FuseNhwcConvResidual) when the SGEMM runs that conv, else they stay.
    EXPECT_EQ(ops["Relu"], sgemm::Available() ? 0 : 1) << threads << " threads";
  }
}

// DenseNet / SqueezeNet-style: channel Concats (axis 1 and -3) of NHWC convs, a standalone
// inference BatchNormalization + Relu on the concat (DenseNet's pre-activation), a
// zero-padding Pad before an AveragePool (torch's export of DenseNet's transitions), a
// MaxPool after a Concat (SqueezeNet), batch 2: all inside the region, no transposes but at
// the edges. `pad` > 0 makes the Pad real (it then stays, with its transposes).
// `bn_is_output` makes the BN's output a graph output too (its Relu then stays a node);
// `relu_is_output` the Relu's (which the fused BN then writes).
onnx::ModelProto ConcatBnNet(int64_t pad, bool bn_is_output = false, bool relu_is_output = false) {
  onnx::ModelProto m = MakeModel(17, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 5, 9, 9});
  AddConv(g, "x", "a", 5, 6, 3, 1, 1, 1, 41);
  AddConv(g, "x", "b", 5, 7, 1, 1, 0, 1, 42);
  SetInt(AddNode(g, "Concat", {"a", "b"}, {"cat"}), "axis", 1);
  for (const char* p : {"bn_scale", "bn_b", "bn_mean", "bn_var"}) {
    auto* t = g->add_initializer();
    t->set_name(p);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(13);
    for (int i = 0; i < 13; ++i) t->add_float_data(std::string(p) == "bn_var" ? 0.5f + 0.1f * i : 0.05f * (i - 6));
  }
  auto* bn = AddNode(g, "BatchNormalization", {"cat", "bn_scale", "bn_b", "bn_mean", "bn_var"}, {"bn"});
  auto* eps = bn->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-3f);
  AddNode(g, "Relu", {"bn"}, {"r"});
  AddConv(g, "r", "c", 13, 8, 1, 1, 0, 1, 43);
  auto* pads = g->add_initializer();
  pads->set_name("pads");
  pads->set_data_type(onnx::TensorProto::INT64);
  pads->add_dims(8);
  for (int i = 0; i < 8; ++i) pads->add_int64_data(i == 2 || i == 7 ? pad : 0);
  AddNode(g, "Pad", {"c", "pads"}, {"padded"});
  auto* ap = AddNode(g, "AveragePool", {"padded"}, {"ap"});
  SetInts(ap, "kernel_shape", {2, 2});
  SetInts(ap, "strides", {2, 2});
  AddConv(g, "ap", "d", 8, 4, 3, 1, 1, 1, 44);
  SetInt(AddNode(g, "Concat", {"d", "ap"}, {"cat2"}), "axis", -3);
  auto* mp = AddNode(g, "MaxPool", {"cat2"}, {"mp"});
  SetInts(mp, "kernel_shape", {3, 3});
  SetInts(mp, "strides", {2, 2});
  SetInt(mp, "ceil_mode", 1);
  AddConv(g, "mp", "y", 12, 3, 1, 1, 0, 1, 45);
  AddOutput(g, "y", {2, 3, 2, 2});
  if (bn_is_output) AddOutput(g, "bn", {2, 13, 9, 9});
  if (relu_is_output) AddOutput(g, "r", {2, 13, 9, 9});
  return m;
}

// The fused BN+Relu clamps by comparison: a NaN reaching it stays NaN, at exactly the
// reference's positions (a max(0, x) instruction would turn it into 0).
TEST(Layout, FusedBatchNormReluKeepsNaN) {
  Tensor x = Input({2, 5, 9, 9}, 16);
  x.mutable_data<float>()[(1 * 5 + 2) * 81 + 4 * 9 + 4] = std::numeric_limits<float>::quiet_NaN();
  for (int threads : {1, 2}) {
    Runs r = RunBoth(ConcatBnNet(0, false, /*relu_is_output=*/true), {{"x", Value(x)}}, threads);
    ASSERT_EQ(r.opt.size(), 2u);
    EXPECT_EQ(OpCounts(r.assignments)["Relu"], 0) << "the Relu must have joined the BN";
    const Tensor& got = r.opt[1].tensor();
    const Tensor& want = r.ref[1].tensor();
    ASSERT_EQ(got.shape(), want.shape());
    int64_t nans = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      const bool ref_nan = std::isnan(want.data<float>()[i]);
      nans += ref_nan;
      ASSERT_EQ(std::isnan(got.data<float>()[i]), ref_nan) << "element " << i;
    }
    EXPECT_GT(nans, 0) << "the NaN must reach the Relu's output, or the test proves nothing";
  }
}

TEST(Layout, ConcatBatchNormAndZeroPadStayInTheRegion) {
  for (int threads : {1, 2}) {
    Runs r = RunBoth(ConcatBnNet(0), {{"x", Value(Input({2, 5, 9, 9}, 13))}}, threads);
    ExpectClose(r);
    auto ops = OpCounts(r.assignments);
    // The BN (with its Relu, FuseNhwcBatchNormRelu) and the Concat before it join the 1x1
    // conv that reads them (FuseNhwcConvInputNorm); the MaxPool after the second Concat
    // pools each part (SplitNhwcPoolOverConcat) and the last 1x1 conv reads the pooled parts.
    EXPECT_EQ(ops["NhwcBatchNormalization"], 0);
    EXPECT_EQ(ops["BatchNormalization"], 0);
    EXPECT_EQ(ops["Relu"], 0);
    EXPECT_EQ(ops["Concat"], 0);
    EXPECT_EQ(ops["Pad"], 0) << "all-zero pads are an identity";
    EXPECT_EQ(ops["NhwcAveragePool"], 1);
    EXPECT_EQ(ops["NhwcMaxPool"], 2);
    EXPECT_EQ(ops["NchwToNhwc"], 1);
    EXPECT_EQ(ops["NhwcToNchw"], 1);
  }
  // The BN's output is a graph output too: the BN must store it unclamped, so the Relu stays.
  for (int threads : {1, 2}) {
    Runs r = RunBoth(ConcatBnNet(0, /*bn_is_output=*/true), {{"x", Value(Input({2, 5, 9, 9}, 15))}}, threads);
    ExpectClose(r);
    auto ops = OpCounts(r.assignments);
    EXPECT_EQ(ops["NhwcBatchNormalization"], 1);
    EXPECT_EQ(ops["Relu"], 1);
  }
  // A real Pad is not a layout-free op: it stays NCHW, between transposes, and still matches.
  Runs r = RunBoth(ConcatBnNet(1), {{"x", Value(Input({2, 5, 9, 9}, 14))}});
  ExpectClose(r);
  auto ops = OpCounts(r.assignments);
  EXPECT_EQ(ops["Pad"], 1);
  EXPECT_EQ(ops["NchwToNhwc"], 2);
}

// Odd channel counts 1 -> 3 -> 1, a 1-channel conv as graph output, SAME padding with
// stride 2 on an odd size, a 7x7 stride-2 stem.
TEST(Layout, OddChannelsAndStemMatchReference) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 1, 23, 19});
  AddConv(g, "x", "stem", 1, 3, 7, 2, 3, 1, 21);
  AddInit(g, "same_w", {3, 3, 3, 3}, 22, 0.3f);
  auto* same = AddNode(g, "Conv", {"stem", "same_w"}, {"same"});
  SetString(same, "auto_pad", "SAME_UPPER");
  SetInts(same, "strides", {2, 2});
  AddNode(g, "Sigmoid", {"same"}, {"sig"});
  AddConv(g, "sig", "y", 3, 1, 3, 1, 1, 1, 23, /*bias=*/false);
  AddOutput(g, "y", {1, 1, 6, 5});
  Runs r = RunBoth(m, {{"x", Value(Input({1, 1, 23, 19}, 12))}});
  ExpectClose(r);
  EXPECT_EQ(OpCounts(r.assignments)["NhwcConv"], 3);
}

// A Conv whose weight is a graph input must stay NCHW; constant-weight Convs around it
// still go NHWC with transposes at the boundaries.
TEST(Layout, RuntimeWeightConvStaysNchw) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 4, 10, 10});
  AddInput(g, "w", {4, 4, 3, 3});
  AddConv(g, "x", "a", 4, 4, 3, 1, 1, 1, 31);
  auto* rt = AddNode(g, "Conv", {"a", "w"}, {"b"});
  SetInts(rt, "pads", {1, 1, 1, 1});
  AddConv(g, "b", "c", 4, 4, 3, 1, 1, 1, 32);
  AddNode(g, "Relu", {"c"}, {"y"});
  AddOutput(g, "y", {2, 4, 10, 10});
  Runs r = RunBoth(m, {{"x", Value(Input({2, 4, 10, 10}, 13))}, {"w", Value(Input({4, 4, 3, 3}, 14))}});
  ExpectClose(r);
  auto ops = OpCounts(r.assignments);
  EXPECT_EQ(ops["Conv"], 1);
  EXPECT_EQ(ops["NhwcConv"], 2);
  EXPECT_EQ(ops["NchwToNhwc"], 2);
  EXPECT_EQ(ops["NhwcToNchw"], 2);
}

// Bad input at run time: a clear error naming the node, never a crash.
TEST(Layout, ChannelMismatchIsAnError) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {-1, -1, -1, -1});
  AddConv(g, "x", "c", 3, 8, 3, 1, 1, 1, 41);
  AddNode(g, "Relu", {"c"}, {"y"});
  AddOutput(g, "y", {-1, 8, -1, -1});
  std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpCounts((*s)->assignments())["NhwcConv"], 1);
  auto out = (*s)->Run({{"x", Value(Input({1, 5, 6, 6}, 15))}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'c'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("channel"), std::string::npos) << out.status().message();
  // The right shape still works afterwards, at another spatial size (operator re-setup).
  for (int64_t hw : {6, 9}) {
    auto ok = (*s)->Run({{"x", Value(Input({2, 3, hw, hw}, 16))}});
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ((*ok)[0].tensor().shape(), (Shape{2, 8, hw, hw}));
  }
}

void AddI64(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

// Reshape [1, 2, 4, H, W] -> Transpose (0, 2, 1, 3, 4) -> Reshape [1, -1, H, W]: torch's
// channel shuffle of 8 channels in 2 groups, from `in` to `out`.
void AddShuffle(onnx::GraphProto* g, const std::string& in, const std::string& out, int64_t h, int64_t w) {
  AddI64(g, out + "_s5", {1, 2, 4, h, w});
  AddI64(g, out + "_s4", {1, -1, h, w});
  AddNode(g, "Reshape", {in, out + "_s5"}, {out + "_r5"});
  SetInts(AddNode(g, "Transpose", {out + "_r5"}, {out + "_t"}), "perm", {0, 2, 1, 3, 4});
  AddNode(g, "Reshape", {out + "_t", out + "_s4"}, {out});
}

// A ShuffleNetV2 unit as torch exports it: the channel split's bounds computed from
// Shape(a) (Gather, Add, Div, Mul), two Slices on axis 1, a branch, Concat, channel shuffle.
TEST(Layout, ShuffleNetUnitStaysInTheRegion) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 8, 6, 6});
  AddConv(g, "x", "a", 8, 8, 1, 1, 0, 1, 61);
  AddNode(g, "Shape", {"a"}, {"shape"});
  AddI64(g, "one_idx", {1});
  AddNode(g, "Gather", {"shape", "one_idx"}, {"ch"});
  AddI64(g, "i0", {0});
  AddI64(g, "i1", {1});
  AddI64(g, "i2", {2});
  AddNode(g, "Add", {"ch", "i1"}, {"ch1"});
  AddNode(g, "Div", {"ch1", "i2"}, {"half"});
  AddNode(g, "Mul", {"half", "i1"}, {"e1"});
  AddNode(g, "Mul", {"half", "i2"}, {"e2"});
  AddNode(g, "Slice", {"a", "i0", "e1", "i1"}, {"s1"});
  AddNode(g, "Slice", {"a", "e1", "e2", "i1"}, {"s2"});
  AddConv(g, "s2", "b", 4, 4, 3, 1, 1, 1, 62);
  AddNode(g, "Relu", {"b"}, {"br"});
  SetInt(AddNode(g, "Concat", {"s1", "br"}, {"cat"}), "axis", 1);
  AddShuffle(g, "cat", "sh", 6, 6);
  AddConv(g, "sh", "y", 8, 3, 1, 1, 0, 1, 63);
  AddOutput(g, "y", {1, 3, 6, 6});
  for (int threads : {1, 2}) {
    Runs r = RunBoth(m, {{"x", Value(Input({1, 8, 6, 6}, 18))}}, threads);
    ExpectClose(r);
    auto ops = OpCounts(r.assignments);
    EXPECT_EQ(ops["NhwcChannelShuffle"], 1);
    EXPECT_EQ(ops["Transpose"], 0);
    EXPECT_EQ(ops["Shape"] + ops["Gather"] + ops["Div"], 0) << "the bounds fold from the static shape";
    EXPECT_EQ(ops["Slice"], 2);
    EXPECT_EQ(ops["NchwToNhwc"], 1);
    EXPECT_EQ(ops["NhwcToNchw"], 1);
  }
}

// The shuffle with X of unknown dims: fused on the 5-D shape's dims, it still gives what
// the Reshapes gave for any X of that many elements (one of another shape is reinterpreted,
// in NCHW from the graph input and in NHWC after a conv), and an X of another element
// count is an error as the Reshape's was.
TEST(Layout, ChannelShuffleOfUnknownShapeMatchesTheReshapes) {
  for (bool after_conv : {false, true}) {
    onnx::ModelProto m = MakeModel(13, "layout_test");
    auto* g = m.mutable_graph();
    AddInput(g, "x", {-1, -1, -1, -1});
    if (after_conv) AddConv(g, "x", "a", 8, 8, 1, 1, 0, 1, 64);
    AddShuffle(g, after_conv ? "a" : "x", "y", 6, 6);
    AddOutput(g, "y", {1, 8, 6, 6});
    for (const Shape& xs : {Shape{1, 8, 6, 6}, Shape{1, 8, 3, 12}}) {
      Runs r = RunBoth(m, {{"x", Value(Input(xs, 19))}});
      ExpectClose(r, after_conv ? 1e-4 : 0.0);  // the conv rounds differently; the shuffle copies
      auto ops = OpCounts(r.assignments);
      EXPECT_EQ(ops[after_conv ? "NhwcChannelShuffle" : "ChannelShuffle"], 1) << ShapeToString(xs);
      EXPECT_EQ(ops["Transpose"], 0);
    }
    std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto out = (*s)->Run({{"x", Value(Input({1, 8, 6, 5}, 20))}});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("[1,8,6,6]"), std::string::npos) << out.status().message();
  }
}

// A shuffle-shaped chain whose constant 5-D shape overflows int64 when multiplied out (the
// model fuzzer's 15 * (2^63 - 1), UB before the products were checked): not fused, and the
// Reshape it stays reports the bad shape, from X's static dims and from unknown ones.
TEST(Layout, ChannelShuffleWithOverflowingDimsIsAnError) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (bool static_x : {true, false}) {
    onnx::ModelProto m = MakeModel(13, "layout_test");
    auto* g = m.mutable_graph();
    if (static_x) {
      AddInput(g, "x", {1, 8, 6, 6});
    } else {
      AddInput(g, "x", {-1, -1, -1, -1});
    }
    AddI64(g, "s5", {1, 2, big / 2 + 1, 6, 6});
    AddI64(g, "s4", {1, -1, 6, 6});
    AddNode(g, "Reshape", {"x", "s5"}, {"r5"});
    SetInts(AddNode(g, "Transpose", {"r5"}, {"t"}), "perm", {0, 2, 1, 3, 4});
    AddNode(g, "Reshape", {"t", "s4"}, {"y"});
    AddOutput(g, "y", {1, 8, 6, 6});
    std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    std::string message;
    if (s.ok()) {
      EXPECT_EQ(OpCounts((*s)->assignments())["ChannelShuffle"], 0);
      auto out = (*s)->Run({{"x", Value(Input({1, 8, 6, 6}, 22))}});
      ASSERT_FALSE(out.ok()) << "static_x " << static_x;
      message = out.status().message();
    } else {
      message = s.status().message();
    }
    EXPECT_NE(message.find("Reshape"), std::string::npos) << message;
  }
}

// Shape of a value whose dims are statically known folds to a constant, with opset 15's
// start and end (negative, clamped); with a symbolic dim it stays a run-time Shape.
TEST(Layout, StaticShapesFoldWithStartAndEnd) {
  for (bool symbolic : {false, true}) {
    onnx::ModelProto m = MakeModel(15, "layout_test");
    auto* g = m.mutable_graph();
    AddInput(g, "x", {symbolic ? -1 : 2, 3, 4, 5});
    AddConv(g, "x", "c", 3, 8, 3, 1, 1, 1, 71);
    auto* mid = AddNode(g, "Shape", {"c"}, {"mid"});
    SetInt(mid, "start", 1);
    SetInt(mid, "end", -1);
    SetInt(AddNode(g, "Shape", {"c"}, {"all"}), "start", -10);
    AddOutput(g, "mid", {2});
    AddOutput(g, "all", {4});
    std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(OpCounts((*s)->assignments())["Shape"], symbolic ? 2 : 0);
    auto out = (*s)->Run({{"x", Value(Input({2, 3, 4, 5}, 21))}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Tensor& a = (*out)[0].tensor();
    const Tensor& b = (*out)[1].tensor();
    EXPECT_EQ(std::vector<int64_t>(a.data<int64_t>(), a.data<int64_t>() + a.num_elements()),
              (std::vector<int64_t>{8, 4}));
    EXPECT_EQ(std::vector<int64_t>(b.data<int64_t>(), b.data<int64_t>() + b.num_elements()),
              (std::vector<int64_t>{2, 8, 4, 5}));
  }
}

// A ConvNeXt block as torch exports it: depthwise 7x7 conv, permute to NHWC, LayerNorm over
// channels, two Linears (MatMul + Add), permute back, residual Add, then a conv. The
// permutes are the region's own layout: no transposes but at the edges. With the NHWC
// permute's output also a graph output, that Transpose stays (and the results still match).
TEST(Layout, ExplicitPermutesJoinTheRegion) {
  for (bool nhwc_is_output : {false, true}) {
    onnx::ModelProto m = MakeModel(17, "layout_test");
    auto* g = m.mutable_graph();
    AddInput(g, "x", {2, 8, 6, 6});
    AddConv(g, "x", "a", 8, 8, 1, 1, 0, 1, 81);
    AddConv(g, "a", "dw", 8, 8, 7, 1, 3, 8, 82);
    SetInts(AddNode(g, "Transpose", {"dw"}, {"p"}), "perm", {0, 2, 3, 1});
    AddInit(g, "ln_s", {8}, 83, 1.0f);
    AddInit(g, "ln_b", {8}, 84, 0.1f);
    SetInt(AddNode(g, "LayerNormalization", {"p", "ln_s", "ln_b"}, {"ln"}), "axis", -1);
    AddInit(g, "w1", {8, 16}, 85, 0.3f);
    AddInit(g, "b1", {16}, 86, 0.1f);
    AddInit(g, "w2", {16, 8}, 87, 0.3f);
    AddNode(g, "MatMul", {"ln", "w1"}, {"h0"});
    AddNode(g, "Add", {"h0", "b1"}, {"h1"});
    AddNode(g, "Relu", {"h1"}, {"h2"});
    AddNode(g, "MatMul", {"h2", "w2"}, {"h3"});
    SetInts(AddNode(g, "Transpose", {"h3"}, {"back"}), "perm", {0, 3, 1, 2});
    AddNode(g, "Add", {"back", "a"}, {"res"});
    AddConv(g, "res", "y", 8, 3, 3, 1, 1, 1, 88);
    AddOutput(g, "y", {2, 3, 6, 6});
    if (nhwc_is_output) AddOutput(g, "p", {2, 6, 6, 8});
    for (int threads : {1, 2}) {
      Runs r = RunBoth(m, {{"x", Value(Input({2, 8, 6, 6}, 22))}}, threads);
      ExpectClose(r);
      auto ops = OpCounts(r.assignments);
      EXPECT_EQ(ops["Transpose"], nhwc_is_output ? 1 : 0);
      EXPECT_EQ(ops["NchwToNhwc"], 1);
      EXPECT_EQ(ops["NhwcToNchw"], nhwc_is_output ? 2 : 1);
    }
  }
}

// A BatchNormalization whose parameters do not match the channels it gets (a model that
// shape inference could not check) is an error naming the node, not a read past them.
TEST(Layout, BatchNormChannelMismatchIsAnError) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {-1, -1, -1, -1});
  AddConv(g, "x", "c", 3, 8, 3, 1, 1, 1, 51);
  for (const char* p : {"s", "b", "mu", "var"}) AddInit(g, p, {6}, 52, 0.5f);
  for (int i = 0; i < g->initializer_size(); ++i)
    if (g->initializer(i).name() == "var")
      for (int k = 0; k < 6; ++k) g->mutable_initializer(i)->set_float_data(k, 1.0f);
  auto* bn = AddNode(g, "BatchNormalization", {"c", "s", "b", "mu", "var"}, {"y"});
  bn->set_name("bn");
  AddOutput(g, "y", {-1, -1, -1, -1});
  std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpCounts((*s)->assignments())["NhwcBatchNormalization"], 1);
  auto out = (*s)->Run({{"x", Value(Input({1, 3, 5, 5}, 17))}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'bn'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("channels"), std::string::npos) << out.status().message();
}

// x -> Conv -> ReduceMean(`axes`, keepdims) -> output (axes empty: none given, every axis
// reduced).
onnx::ModelProto ConvMeanNet(const std::vector<int64_t>& axes, int64_t keepdims) {
  onnx::ModelProto m = MakeModel(13, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 3, 7, 5});
  AddConv(g, "x", "c1", 3, 19, 3, 1, 1, 1, 41);
  onnx::NodeProto* n = AddNode(g, "ReduceMean", {"c1"}, {"mean"});
  if (!axes.empty()) SetInts(n, "axes", axes);
  SetInt(n, "keepdims", keepdims);
  AddOutput(g, "mean", {});
  return m;
}

// A spatial mean written as ReduceMean over H and W (MNASNet's head, x.mean([2, 3])) stays in
// the NHWC region as a global average pool; any other axes keep the ONNX op, and its transpose.
TEST(Layout, SpatialReduceMeanIsAGlobalAveragePool) {
  struct Case {
    std::vector<int64_t> axes;
    int64_t keepdims;
    bool pooled;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {{2, 3}, 0, true, {2, 19}},   {{3, 2}, 1, true, {2, 19, 1, 1}},
      {{-2, -1}, 0, true, {2, 19}}, {{-1, 2}, 1, true, {2, 19, 1, 1}},
      {{1, 2, 3}, 0, false, {2}},   {{2}, 1, false, {2, 19, 1, 5}},
      {{}, 1, false, {1, 1, 1, 1}}, {{}, 0, false, {}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    for (int threads : {1, 2}) {
      Runs r = RunBoth(ConvMeanNet(c.axes, c.keepdims), {{"x", Value(Input({2, 3, 7, 5}, 43))}}, threads);
      ExpectClose(r);
      ASSERT_EQ(r.opt.size(), 1u);
      EXPECT_EQ(r.opt[0].tensor().shape(), c.shape) << "case " << i;
      auto ops = OpCounts(r.assignments);
      EXPECT_EQ(ops["NhwcGlobalAveragePool"], c.pooled ? 1 : 0) << "case " << i;
      EXPECT_EQ(ops["ReduceMean"], c.pooled ? 0 : 1) << "case " << i;
      EXPECT_EQ(ops["NhwcToNchw"], c.pooled ? 0 : 1) << "case " << i;
    }
  }
  // A repeated axis (3 and -1) is still the ONNX op's error, not a pool.
  std::string bytes = Serialize(ConvMeanNet({2, 3, -1}, 0));
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpCounts((*s)->assignments())["NhwcGlobalAveragePool"], 0);
  auto out = (*s)->Run({{"x", Value(Input({2, 3, 7, 5}, 43))}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("repeated"), std::string::npos) << out.status().message();
}

// x -> Conv 3x3 (e) -> depthwise Conv 3x3 (d) -> squeeze-excitation: GlobalAveragePool -> Conv 1x1 (c -> 4) -> Relu ->
// Conv 1x1 (4 -> c) -> Sigmoid (s) -> Mul(d, s) (scale first when `scale_first`) -> Conv 1x1
// (c -> m) -> + d's conv when m == c (EfficientNet's residual) -> output. `extra_reader`: the
// Mul's product is also a graph output.
// A bf16 fast-math session of `model` (1 thread) against the reference, within 2e-2.
void ExpectBf16SessionClose(const onnx::ModelProto& model, const Feeds& feeds) {
  const std::string bytes = Serialize(model);
  SessionOptions o;
  o.threads = 1;
  o.kernel.bf16_fast_math = true;
  auto bf = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  auto out = (*bf)->Run(feeds);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Runs r = RunBoth(model, feeds, 1);
  r.opt = *out;
  ExpectClose(r, 2e-2);
}

onnx::ModelProto SqueezeExciteNet(int64_t n, int64_t c, int64_t m, int64_t hw, bool scale_first, bool extra_reader) {
  onnx::ModelProto model = MakeModel(13, "layout_test");
  auto* g = model.mutable_graph();
  AddInput(g, "x", {n, 3, hw, hw});
  AddConv(g, "x", "e", 3, c, 3, 1, 1, 1, 61);
  AddConv(g, "e", "d", c, c, 3, 1, 1, c, 62);
  AddNode(g, "GlobalAveragePool", {"d"}, {"pooled"});
  AddConv(g, "pooled", "sq", c, 4, 1, 1, 0, 1, 63);
  AddNode(g, "Relu", {"sq"}, {"sq_relu"});
  AddConv(g, "sq_relu", "ex", 4, c, 1, 1, 0, 1, 65);
  AddNode(g, "Sigmoid", {"ex"}, {"s"});
  AddNode(g, "Mul", {scale_first ? "s" : "d", scale_first ? "d" : "s"}, {"scaled"});
  AddConv(g, "scaled", "proj", c, m, 1, 1, 0, 1, 67);
  if (m == c) {
    AddConv(g, "x", "skip", 3, c, 1, 1, 0, 1, 69);
    AddNode(g, "Add", {"proj", "skip"}, {"y"});
  } else {
    AddNode(g, "Identity", {"proj"}, {"y"});
  }
  AddOutput(g, "y", {n, m, hw, hw});  // a static shape: the residual fusion needs one
  if (extra_reader) AddOutput(g, "scaled", {n, c, hw, hw});
  return model;
}

// The SE Mul joins the projection conv as its input scale (no pass of its own over the map),
// and the pool becomes the depthwise conv's second output;
// results match the reference for one scale per image (batch 2), either operand order, both
// pointwise paths (few and many output channels), a fused residual, 1 and 2 threads, and in
// a bf16 session (whose convs take a scaled copy). A product something else reads stays a Mul.
TEST(Layout, SqueezeExcitationScaleJoinsTheProjection) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fusion needs the SGEMM conv (AVX-512F)";
  struct Case {
    int64_t n, c, m, hw;
    bool scale_first, extra_reader;
  };
  const Case cases[] = {
      {2, 24, 16, 9, false, false},
      {1, 40, 40, 8, true, false},
      {2, 32, 160, 5, false, false},
      {1, 24, 24, 7, false, true},
  };
  for (const Case& c : cases) {
    const std::string what = "n" + std::to_string(c.n) + " c" + std::to_string(c.c) + " m" + std::to_string(c.m) +
                             (c.extra_reader ? " shared product" : "");
    const onnx::ModelProto model = SqueezeExciteNet(c.n, c.c, c.m, c.hw, c.scale_first, c.extra_reader);
    const Feeds feeds = {{"x", Value(Input({c.n, 3, c.hw, c.hw}, 71))}};
    for (int threads : {1, 2}) {
      Runs r = RunBoth(model, feeds, threads);
      ExpectClose(r);
      auto ops = OpCounts(r.assignments);
      EXPECT_EQ(ops["Mul"], c.extra_reader ? 1 : 0) << what;
      EXPECT_EQ(ops["Add"], 0) << what;  // the residual is fused too
      EXPECT_EQ(ops["NhwcGlobalAveragePool"], 0) << what;
    }
    // bf16: every conv on the bf16 GEMM (the net is shallow), the scale on a copy of X.
    ExpectBf16SessionClose(model, feeds);
  }
}

// A DenseNet block: layer i reads Concat(f0 .. f_{i-1}) (torchvision concatenates a list of
// one map for the first layer) through BatchNormalization -> Relu -> 1x1 conv, then a 3x3
// conv makes f_i; the transition reads the Concat of all of them the same way. c0 and
// `growth` set the parts' widths. `transition_bn` false: the transition's 1x1 conv reads the
// Concat itself (SqueezeNet's fire output into the next squeeze). `cat_is_output`: the last
// Concat is a graph output too (it must then stay a node).
void AddBatchNorm(onnx::GraphProto* g, const std::string& in, const std::string& out, int64_t c, int seed) {
  const std::string p = out + "_";
  for (const char* name : {"scale", "b", "mean", "var"}) {
    auto* t = g->add_initializer();
    t->set_name(p + name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(c);
    for (int64_t i = 0; i < c; ++i) {
      const float u = static_cast<float>((i * 37 + seed * 11) % 17) / 17.0f;  // in [0, 1)
      t->add_float_data(std::string(name) == "var" ? 0.5f + u : std::string(name) == "scale" ? 0.5f + u : u - 0.5f);
    }
  }
  AddNode(g, "BatchNormalization", {in, p + "scale", p + "b", p + "mean", p + "var"}, {out});
}

onnx::ModelProto DenseBlockNet(int64_t n, int64_t c0, int64_t growth, int layers, bool transition_bn,
                               bool cat_is_output) {
  onnx::ModelProto model = MakeModel(17, "layout_test");
  auto* g = model.mutable_graph();
  const int64_t hw = 7;
  AddInput(g, "x", {n, 3, hw, hw});
  AddConv(g, "x", "f0", 3, c0, 3, 1, 1, 1, 81);
  std::vector<std::string> feats = {"f0"};
  int64_t c = c0;
  for (int i = 1; i <= layers; ++i) {
    const std::string s = std::to_string(i);
    auto* cat = AddNode(g, "Concat", {}, {"cat" + s});
    for (const std::string& f : feats) cat->add_input(f);
    SetInt(cat, "axis", 1);
    AddBatchNorm(g, "cat" + s, "bn" + s, c, i);
    AddNode(g, "Relu", {"bn" + s}, {"r" + s});
    AddConv(g, "r" + s, "h" + s, c, 4 * growth, 1, 1, 0, 1, 90 + i);
    AddNode(g, "Relu", {"h" + s}, {"hr" + s});
    AddConv(g, "hr" + s, "f" + s, 4 * growth, growth, 3, 1, 1, 1, 120 + i);
    feats.push_back("f" + s);
    c += growth;
  }
  auto* cat = AddNode(g, "Concat", {}, {"cat"});
  for (const std::string& f : feats) cat->add_input(f);
  SetInt(cat, "axis", 1);
  if (transition_bn) {
    AddBatchNorm(g, "cat", "tbn", c, 99);
    AddNode(g, "Relu", {"tbn"}, {"tr"});
    AddConv(g, "tr", "y", c, c / 2, 1, 1, 0, 1, 150);
  } else {
    AddConv(g, "cat", "y", c, c / 2, 1, 1, 0, 1, 150);
  }
  AddOutput(g, "y", {n, c / 2, hw, hw});
  if (cat_is_output) AddOutput(g, "cat", {n, c, hw, hw});
  return model;
}

// DenseNet's Concat -> BN -> Relu -> 1x1 conv becomes the conv alone, reading the Concat's
// inputs and applying the BN as it packs them (FuseNhwcConvInputNorm): no Concat and no BN
// node is left, and the results match the reference at 1 and 2 threads, batch 1 and 2, for
// widths that put part boundaries inside vectors (c0 5, growth 3) and DenseNet's own (c0
// 64, growth 32), with and without the transition's BN; in a bf16 session too (its convs
// read a transformed copy). A Concat that is also a graph output stays a node.
TEST(Layout, DenseBlockConcatAndNormJoinTheConv) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fusion needs the SGEMM conv (AVX-512F)";
  struct Case {
    int64_t n, c0, growth;
    int layers;
    bool transition_bn, cat_is_output;
  };
  const Case cases[] = {
      {1, 5, 3, 3, true, false}, {2, 64, 32, 3, true, false}, {2, 16, 8, 2, false, false}, {1, 8, 4, 2, true, true}};
  for (const Case& c : cases) {
    const std::string what = "n" + std::to_string(c.n) + " c0 " + std::to_string(c.c0) + " growth " +
                             std::to_string(c.growth) + (c.transition_bn ? "" : " no transition BN") +
                             (c.cat_is_output ? " last Concat an output" : "");
    const onnx::ModelProto model = DenseBlockNet(c.n, c.c0, c.growth, c.layers, c.transition_bn, c.cat_is_output);
    const Feeds feeds = {{"x", Value(Input({c.n, 3, 7, 7}, 83))}};
    for (int threads : {1, 2}) {
      Runs r = RunBoth(model, feeds, threads);
      ExpectClose(r);
      auto ops = OpCounts(r.assignments);
      // With the last Concat an output, it stays, and the transition conv reads it whole
      // (the BN still joins the conv).
      EXPECT_EQ(ops["Concat"], c.cat_is_output ? 1 : 0) << what;
      EXPECT_EQ(ops["NhwcBatchNormalization"], 0) << what;
      EXPECT_EQ(ops["Relu"], 0) << what;
    }
    ExpectBf16SessionClose(model, feeds);
  }
}

// SqueezeNet's fire module: a squeeze conv, two expand convs (1x1 and 3x3) concatenated,
// a pool, then the next squeeze conv. `pool` is MaxPool (ceil_mode, as torchvision's) or
// AveragePool (padded, counting the padding); `next_k` the next conv's kernel (3: not
// pointwise, so nothing is split); `cat_is_output` makes the Concat a graph output too.
onnx::ModelProto FireNet(const std::string& pool, int64_t next_k, bool cat_is_output) {
  onnx::ModelProto m = MakeModel(17, "layout_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 5, 11, 11});
  AddConv(g, "x", "sq", 5, 8, 1, 1, 0, 1, 171);
  AddNode(g, "Relu", {"sq"}, {"sqr"});
  AddConv(g, "sqr", "e1", 8, 16, 1, 1, 0, 1, 172);
  AddConv(g, "sqr", "e3", 8, 19, 3, 1, 1, 1, 173);
  SetInt(AddNode(g, "Concat", {"e1", "e3"}, {"cat"}), "axis", 1);
  auto* p = AddNode(g, pool, {"cat"}, {"p"});
  SetInts(p, "kernel_shape", {3, 3});
  SetInts(p, "strides", {2, 2});
  if (pool == "MaxPool") {
    SetInt(p, "ceil_mode", 1);
  } else {
    SetInts(p, "pads", {1, 1, 1, 1});
    SetInt(p, "count_include_pad", 1);
  }
  AddConv(g, "p", "y", 35, 6, next_k, 1, next_k / 2, 1, 174);
  const int64_t out = pool == "MaxPool" ? 5 : 6;
  AddOutput(g, "y", {2, 6, out, out});
  if (cat_is_output) AddOutput(g, "cat", {2, 35, 11, 11});
  return m;
}

// The pool after a fire module's Concat pools each expand conv's output, and the next
// squeeze conv reads the pooled parts: no Concat is left. Not where the next conv is not
// pointwise, nor where the Concat is a graph output; results match the reference either way.
TEST(Layout, PoolOverConcatPoolsTheParts) {
  if (!sgemm::Available()) GTEST_SKIP() << "the fusion needs the SGEMM conv (AVX-512F)";
  struct Case {
    const char* pool;
    int64_t next_k;
    bool cat_is_output, split;
  };
  const Case cases[] = {{"MaxPool", 1, false, true},
                        {"AveragePool", 1, false, true},
                        {"MaxPool", 3, false, false},
                        {"MaxPool", 1, true, false}};
  for (const Case& c : cases) {
    const std::string what = std::string(c.pool) + " then a " + std::to_string(c.next_k) + "x" +
                             std::to_string(c.next_k) + " conv" + (c.cat_is_output ? ", Concat an output" : "");
    for (int threads : {1, 2}) {
      Runs r = RunBoth(FireNet(c.pool, c.next_k, c.cat_is_output), {{"x", Value(Input({2, 5, 11, 11}, 175))}}, threads);
      ExpectClose(r);
      auto ops = OpCounts(r.assignments);
      EXPECT_EQ(ops["Concat"], c.split ? 0 : 1) << what;
      EXPECT_EQ(ops[std::string("Nhwc") + c.pool], c.split ? 2 : 1) << what;
    }
  }
}

// Reference kernels requested: the pass must leave the graph as written.
TEST(Layout, SkippedForReferenceKernels) {
  std::string bytes = Serialize(SmallNet());
  SessionOptions o;
  o.kernel.prefer_reference = true;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpCounts((*s)->assignments())["NhwcConv"], 0);
}

// With accelerator providers possibly partitioning afterwards, Conv must stay an ONNX Conv
// (providers do not know the internal ops); the CPU-only graph is rewritten.
TEST(Layout, SkippedWhenProvidersMayPartition) {
  std::string bytes = Serialize(SmallNet());
  for (bool cpu_only : {false, true}) {
    auto model = ImportOnnxBytes(bytes.data(), bytes.size(), ImportOptions{});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    OptimizerOptions o;
    o.cpu_only = cpu_only;
    ASSERT_TRUE(OptimizeGraph(*model->graph, o).ok());
    int internal = 0, conv = 0;
    for (const Node& n : model->graph->nodes) {
      internal += n.domain == kInternalDomain;
      conv += n.op_type == "Conv";
    }
    EXPECT_EQ(internal > 0, cpu_only);
    EXPECT_EQ(conv, cpu_only ? 0 : 5);
  }
}

}  // namespace
}  // namespace strata
