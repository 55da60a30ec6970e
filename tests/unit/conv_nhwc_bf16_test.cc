// bf16 fast math on the NHWC conv path (conv_nhwc_bf16.cc) and the bf16 FusedMatMul
// epilogues (gemm_bf16_ops.cc): bf16 sessions against the fp32 reference.
//
// Tolerances (see bf16_test.cc): each product of bf16-rounded operands is within ~2^-8
// relative of the exact one, so outputs are checked against 1e-2 of the output scale. A
// second, tight check compares with the fp32 reference run on bf16-rounded X and W, which
// differs only by the order of fp32 sums: this one fails for a dropped, doubled or
// misplaced term that the loose bound would hide, and for a kernel that is not bf16 at all.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/layout_pass.h"
#include "core/session.h"
#include "cpu/conv_nhwc_winograd.h"
#include "cpu/gemm_bf16.h"
#include "kernel_harness.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // MakeModel, AddInput, AddOutput, AddNode, Serialize
using Feeds = std::vector<std::pair<std::string, Value>>;
using test::Pseudo;

float RoundBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

std::vector<float> Rounded(std::vector<float> v, bool round) {
  if (round)
    for (float& x : v) x = RoundBf16(x);
  return v;
}

void AddValues(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<float>& vals) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : vals) t->add_float_data(v);
}

// Conv `out` = Conv(in, W[m, c, k, k], B[m]); W scaled by 1/sqrt(c*k*k) keeps outputs O(1).
// With round_w, W holds its bf16-rounded values (the tight reference).
void AddConv(onnx::GraphProto* g, const std::string& in, const std::string& out, int64_t c, int64_t m, int64_t k,
             int64_t stride, int64_t pad, int64_t dilation, uint32_t seed, bool round_w) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(c * k * k));
  AddValues(g, out + "_w", {m, c, k, k}, Rounded(Pseudo(static_cast<size_t>(m * c * k * k), seed, scale), round_w));
  AddValues(g, out + "_b", {m}, Pseudo(static_cast<size_t>(m), seed + 1000, 0.1f));
  auto* n = AddNode(g, "Conv", {in, out + "_w", out + "_b"}, {out});
  n->set_name(out);
  SetInts(n, "kernel_shape", {k, k});
  SetInts(n, "strides", {stride, stride});
  SetInts(n, "pads", {pad, pad, pad, pad});
  SetInts(n, "dilations", {dilation, dilation});
}

struct Case {
  int64_t n, c, h, w, m, k, stride, pad, dilation;
  bool residual, relu;
  int64_t Out(int64_t in) const { return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1; }
};

// x -> Conv [-> Add(r)] [-> Relu] -> y; r is a second graph input shaped like the conv output.
onnx::ModelProto ConvModel(const Case& c, bool round_w) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  const int64_t oh = c.Out(c.h), ow = c.Out(c.w);
  AddInput(g, "x", {c.n, c.c, c.h, c.w});
  if (c.residual) AddInput(g, "r", {c.n, c.m, oh, ow});  // through a 1x1 conv into the NHWC region
  AddOutput(g, "y", {c.n, c.m, oh, ow});
  std::string cur = "conv";
  AddConv(g, "x", cur, c.c, c.m, c.k, c.stride, c.pad, c.dilation, 11, round_w);
  if (c.residual) {
    AddConv(g, "r", "skip", c.m, c.m, 1, 1, 0, 1, 12, round_w);
    AddNode(g, "Add", {cur, "skip"}, {"sum"});
    cur = "sum";
  }
  if (c.relu) {
    AddNode(g, "Relu", {cur}, {"act"});
    cur = "act";
  }
  AddNode(g, "Identity", {cur}, {"y"});
  return m;
}

Result<std::vector<Value>> RunModel(const onnx::ModelProto& m, const Feeds& feeds, int threads, bool bf16,
                                    bool reference, std::vector<NodeAssignment>* assignments = nullptr) {
  const std::string bytes = Serialize(m);
  SessionOptions so;
  so.threads = threads;
  so.kernel.bf16_fast_math = bf16;
  if (reference) {
    so.optimization_level = 0;
    so.kernel.prefer_reference = true;
  }
  ASSIGN_OR_RETURN(auto s, Session::CreateFromBytes(bytes.data(), bytes.size(), so));
  if (assignments) *assignments = s->assignments();
  return s->Run(feeds);
}

// max |a - b| over max |b|.
double MaxRelError(const Tensor& a, const Tensor& b) {
  double scale = 0, err = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    scale = std::max<double>(scale, std::fabs(b.data<float>()[i]));
    err = std::max<double>(err, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  }
  return scale > 0 ? err / scale : err;
}

double MaxAbsError(const Tensor& a, const Tensor& b) {
  double err = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i)
    err = std::max<double>(err, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return err;
}

bool SameBits(const Tensor& x, const Tensor& y) {
  return x.shape() == y.shape() && std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}

class Bf16NhwcConv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Bf16GemmAvailable()) GTEST_SKIP() << "CPU without avx512_bf16 (or disabled): bf16 kernels not usable";
  }
};

TEST_F(Bf16NhwcConv, MatchesFp32ReferenceThroughLayoutPass) {
  const Case cases[] = {
      {1, 16, 9, 11, 13, 1, 1, 0, 1, false, false},   // 1x1 direct, M = 13 (partial panel)
      {2, 24, 7, 7, 40, 1, 1, 0, 1, true, true},      // 1x1 direct, batch 2, residual + Relu
      {1, 20, 12, 12, 33, 1, 2, 0, 1, false, false},  // 1x1 stride 2 (downsample): gathered
      {2, 7, 10, 9, 24, 3, 1, 1, 1, false, true},     // 3x3 pad 1, odd C (pairs straddle taps)
      {1, 64, 13, 13, 64, 3, 1, 1, 1, true, true},    // 3x3 K = 576 (two K chunks), residual
      {1, 48, 15, 13, 72, 3, 2, 1, 1, false, true},   // 3x3 stride 2, odd spatial
      {1, 3, 23, 23, 20, 7, 2, 3, 1, false, true},    // 7x7 stem (C = 3)
      {1, 3, 17, 17, 16, 3, 2, 1, 1, false, true},    // 3x3 RGB stem: the fp32 stem kernel
      {1, 10, 11, 11, 17, 3, 1, 2, 2, false, false},  // dilation 2
      {1, 33, 1, 1, 31, 3, 1, 1, 1, false, false},    // single pixel: only the centre tap is inside
      {1, 130, 5, 6, 50, 3, 1, 0, 1, true, false},    // no padding, K = 1170 (odd pairs)
      {2, 200, 7, 7, 520, 1, 1, 0, 1, true, true},    // N > 512: two column blocks
      // Kernel rows of odd KW*C are padded to whole pairs (S = 92 here, K = 644): the K chunk
      // boundary (pair 192) falls inside a kernel row.
      {1, 13, 9, 9, 20, 7, 1, 3, 1, false, true},
      {1, 7, 6, 5, 9, 1, 1, 0, 1, false, false},   // 1x1 stride 1, odd C: gathered pairs, K = 8
      {2, 3, 19, 17, 33, 7, 2, 3, 1, true, true},  // 7x7 stem, batch 2, residual, partial panel
      {1, 5, 12, 12, 9, 3, 1, 2, 2, false, true},  // dilation 2 with odd KW*C (per-tap gather + pad)
      {1, 8, 13, 1, 5, 3, 1, 1, 1, true, true},    // 13 output pixels: one 12-row tile + 1
      {1, 16, 1, 1, 8, 3, 1, 6, 1, false, false},  // padding far larger than X: unpadded bf16 copy
      // 1x1 with several GEMM column blocks (A rounded per block): 49 rows x 300 (3 blocks
      // at 2 threads, 1 at 1), 1 pixel x 600 with C = 2 (one pair), 13 rows (a tile + 1) x
      // 1100 with K = 450 (two K chunks).
      {1, 64, 7, 7, 300, 1, 1, 0, 1, true, true},
      {1, 2, 1, 1, 600, 1, 1, 0, 1, false, false},
      {1, 450, 13, 1, 1100, 1, 1, 0, 1, false, true},
      // A map over 14x14 (bf16 because no conv follows: see EarlyConvsOfADeepNetStayFp32),
      // and a 3x3 stride-1 conv on a 14x14 map (bf16, not the fp32 Winograd F(2x2, 3x3)).
      {1, 16, 16, 16, 24, 1, 1, 0, 1, false, false},
      {1, 32, 14, 14, 32, 3, 1, 1, 1, false, true},
      // A 3x3 stride-1 conv on a 28x28 map: the fp32 Winograd F(4x4, 3x3), faster there.
      {1, 32, 28, 28, 32, 3, 1, 1, 1, false, false},
  };
  for (const Case& c : cases) {
    const int64_t oh = c.Out(c.h), ow = c.Out(c.w);
    const int64_t kdim = c.c * c.k * c.k;
    const std::vector<float> xv = Pseudo(static_cast<size_t>(c.n * c.c * c.h * c.w), 5);
    Feeds feeds = {{"x", Value(Tensor::FromVector<float>(xv, {c.n, c.c, c.h, c.w}))}};
    Feeds rounded = {{"x", Value(Tensor::FromVector<float>(Rounded(xv, true), {c.n, c.c, c.h, c.w}))}};
    if (c.residual) {
      Tensor r = Tensor::FromVector<float>(Pseudo(static_cast<size_t>(c.n * c.m * oh * ow), 6), {c.n, c.m, oh, ow});
      feeds.push_back({"r", Value(r)});
      rounded.push_back({"r", Value(Tensor::FromVector<float>(Rounded(Pseudo(r.num_elements(), 6), true), r.shape()))});
    }
    const std::string what = "C=" + std::to_string(c.c) + " M=" + std::to_string(c.m) + " k=" + std::to_string(c.k) +
                             " s=" + std::to_string(c.stride) + " p=" + std::to_string(c.pad);
    auto ref = RunModel(ConvModel(c, false), feeds, 1, false, true);
    auto ref16 = RunModel(ConvModel(c, true), rounded, 1, false, true);
    auto fp32 = RunModel(ConvModel(c, false), feeds, 1, false, false);
    ASSERT_TRUE(ref.ok() && ref16.ok() && fp32.ok()) << what;
    std::vector<Value> one_thread;
    for (int threads : {1, 2}) {
      std::vector<NodeAssignment> as;
      auto got = RunModel(ConvModel(c, false), feeds, threads, true, false, &as);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      int nhwc = 0, conv = 0, add = 0;
      for (const auto& a : as) {
        nhwc += a.op_type == "NhwcConv";
        conv += a.op_type == "Conv";
        add += a.op_type == "Add";
      }
      EXPECT_EQ(nhwc, c.residual ? 2 : 1) << what;
      EXPECT_EQ(conv, 0) << what;
      EXPECT_EQ(add, 0) << what << ": the residual Add belongs in the conv's epilogue";
      const Tensor& y = (*got)[0].tensor();
      ASSERT_EQ(y.shape(), (*ref)[0].tensor().shape()) << what;
      EXPECT_LT(MaxRelError(y, (*ref)[0].tensor()), 1e-2) << what << " threads=" << threads;
      const bool winograd =
          c.k == 3 && c.stride == 1 && c.dilation == 1 && c.c >= 16 && c.m >= 16 && oh * ow >= kWinogradF4MinPixels;
      if (winograd) {
        // fp32 kernels in a bf16 session: the fp32 session's bits (neither depends on threads).
        EXPECT_TRUE(SameBits(y, (*fp32)[0].tensor())) << what << " threads=" << threads << ": not the fp32 kernel";
        continue;
      }
      if (c.c <= 4 && c.c * c.k < 16 && !c.residual) {
        // Stems whose kernel rows span < 16 floats (3x3 over RGB) take the direct fp32 stem
        // kernel in every precision: faster than either GEMM there, and exact.
        EXPECT_LT(MaxRelError(y, (*fp32)[0].tensor()), 1e-5) << what << " threads=" << threads;
        continue;
      }
      // |x| <= 1 and |w| <= 1/sqrt(K): sum |x w| <= sqrt(K); fp32 summation-order noise only
      // (the skip conv's output, added in fp32, is O(1) too).
      EXPECT_LT(MaxAbsError(y, (*ref16)[0].tensor()), 2e-6 * std::sqrt(static_cast<double>(kdim)) + 1e-6)
          << what << " threads=" << threads;
      EXPECT_FALSE(SameBits(y, (*fp32)[0].tensor())) << what << ": bf16 rounding should be visible";
      // Even-C 1x1 convs split their columns by the thread count: the same bf16 values are
      // summed in the same order whatever the blocking.
      if (c.k == 1 && c.stride == 1 && c.pad == 0 && c.c % 2 == 0) {
        if (threads == 1) {
          one_thread = *got;
        } else {
          EXPECT_TRUE(SameBits(y, one_thread[0].tensor())) << what << ": 2 threads differ from 1";
        }
      }
    }
  }
}

// A chain of 28 1x1 convs (16 -> 16 channels) as the layout pass leaves them: in a bf16
// session each one runs on bf16 when at most 23 convs follow it, whatever its map size (on
// 14x14 as on 16x16); the first four (27, 26, 25, 24 convs after them) keep fp32's
// accuracy: on AMX on split rows (amx_bf16x3), else, or with STRATA_BF16_SPLIT=0, in fp32.
// Asked of the registry's NhwcConv factory, node by node.
TEST_F(Bf16NhwcConv, EarlyConvsOfADeepNetStayFp32) {
  for (const bool split_off : {false, true})
    for (int64_t hw : {16, 14}) {
      if (split_off) {
        setenv("STRATA_BF16_SPLIT", "0", 1);
      } else {
        unsetenv("STRATA_BF16_SPLIT");
      }
      Graph g;
      constexpr int kConvs = 28;
      auto typed = [&](const std::string& name) {
        const int v = g.AddValue(name);
        g.values[v].type.kind = TypeInfo::Kind::kTensor;
        g.values[v].type.elem_type = DataType::kFloat;
        g.values[v].type.has_shape = true;
        for (int64_t d : {int64_t{1}, hw, hw, int64_t{16}}) g.values[v].type.dims.push_back(Dim{d, ""});
        return v;
      };
      int prev = typed("x");
      g.inputs = {prev};
      const Tensor w = Tensor::FromVector<float>(Pseudo(16 * 16, 7, 0.25f), {16, 16, 1, 1});
      for (int i = 0; i < kConvs; ++i) {
        Node n;
        n.name = "conv" + std::to_string(i);
        n.op_type = "NhwcConv";
        n.domain = kInternalDomain;
        n.opset = 1;
        n.attrs[kOriginalOpsetAttr] = Attribute::Int(13);
        n.attrs["kernel_shape"] = Attribute::Ints({1, 1});
        const int wv = g.AddValue(n.name + "_w");
        g.initializers[wv] = w;
        const int out = typed(n.name + "_y");
        n.inputs = {prev, wv};
        n.outputs = {out};
        g.nodes.push_back(n);
        prev = out;
      }
      g.outputs = {prev};
      const KernelDef* def = CpuKernels().Find(kInternalDomain, "NhwcConv", 1, DataType::kFloat);
      ASSERT_NE(def, nullptr);
      KernelConfig bf16;
      bf16.bf16_fast_math = true;
      for (int i = 0; i < kConvs; ++i) {
        auto k = def->factory(KernelInit{g.nodes[i], g, nullptr, bf16});
        ASSERT_TRUE(k.ok()) << k.status().ToString();
        const bool plain = kConvs - 1 - i <= kBf16ConvMaxConvsAfter;
        EXPECT_EQ(plain, i >= 4) << i;  // the bound the comment above describes
        const bool split = !plain && !split_off && bf16_internal::AmxAvailable();
        const std::string what = std::to_string(hw) + "x" + std::to_string(hw) + " conv " + std::to_string(i) +
                                 (split_off ? " STRATA_BF16_SPLIT=0" : "");
        EXPECT_EQ(IsBf16Kernel(**k), plain || split) << what;
        EXPECT_EQ(std::string((*k)->ImplName()) == "amx_bf16x3", split) << what << ": " << (*k)->ImplName();
      }
    }
  unsetenv("STRATA_BF16_SPLIT");
}

// The early 1x1 convs of a deep net (more than 23 convs after them) on split rows keep
// fp32's accuracy: their own outputs (graph outputs here, with a 24-conv chain after them)
// are compared with an fp32 session's, within 1e-4 of the largest (split rows ~2e-5: three
// terms of at most 2^-18 |aw| per product left out or rounded; one bf16 rounding, which the
// check would catch, ~4e-3). Cases: stride 1 with Relu, stride 2 (an unpadded strided 1x1
// reads every other pixel), a fused residual; odd channel counts and a partial last column
// panel (M = 40). Results do not depend on the thread count.
TEST_F(Bf16NhwcConv, EarlyPointwiseConvsOnSplitRowsKeepFp32Accuracy) {
  struct SplitCase {
    int64_t c, hw, stride;
    bool residual;
  };
  for (const SplitCase& sc : {SplitCase{24, 18, 1, false}, SplitCase{23, 34, 2, false}, SplitCase{24, 17, 1, true}}) {
    const int64_t oh = (sc.hw - 1) / sc.stride + 1, m = 40;
    auto model = MakeModel(13);
    auto* g = model.mutable_graph();
    AddInput(g, "x", {2, sc.c, sc.hw, sc.hw});
    AddConv(g, "x", "early", sc.c, m, 1, sc.stride, 0, 1, 41, false);
    std::string cur = "early";
    if (sc.residual) {
      AddInput(g, "r", {2, m, oh, oh});
      AddConv(g, "r", "skip", m, m, 1, 1, 0, 1, 42, false);
      AddNode(g, "Add", {cur, "skip"}, {"sum"});
      cur = "sum";
    }
    AddNode(g, "Relu", {cur}, {"ya"});
    AddOutput(g, "ya", {2, m, oh, oh});
    cur = "ya";
    for (int i = 0; i <= kBf16ConvMaxConvsAfter; ++i) {
      const std::string out = "chain" + std::to_string(i);
      AddConv(g, cur, out, m, m, 1, 1, 0, 1, 50 + i, false);
      cur = out;
    }
    AddNode(g, "Identity", {cur}, {"yb"});
    AddOutput(g, "yb", {2, m, oh, oh});
    Feeds feeds = {
        {"x", Value(Tensor::FromVector<float>(Pseudo(2 * sc.c * sc.hw * sc.hw, 43), {2, sc.c, sc.hw, sc.hw}))}};
    if (sc.residual)
      feeds.push_back({"r", Value(Tensor::FromVector<float>(Pseudo(2 * m * oh * oh, 44), {2, m, oh, oh}))});
    const std::string what = "C=" + std::to_string(sc.c) + " " + std::to_string(sc.hw) + "^2 stride " +
                             std::to_string(sc.stride) + (sc.residual ? " residual" : "");
    std::vector<NodeAssignment> as;
    auto one = RunModel(model, feeds, 1, true, false, &as);
    auto two = RunModel(model, feeds, 2, true, false);
    auto fp32 = RunModel(model, feeds, 1, false, false);
    ASSERT_TRUE(one.ok() && two.ok() && fp32.ok()) << what << ": " << one.status().ToString();
    int split = 0;
    for (const auto& a : as) split += a.impl == "amx_bf16x3";
    // early, and with the residual also skip (a 1x1 conv with 25 convs after it).
    EXPECT_EQ(split, bf16_internal::AmxAvailable() ? (sc.residual ? 2 : 1) : 0) << what;
    const Tensor& ya = (*one)[0].tensor();
    EXPECT_LT(MaxRelError(ya, (*fp32)[0].tensor()), 1e-4) << what;
    EXPECT_TRUE(SameBits(ya, (*two)[0].tensor())) << what << ": 2 threads differ from 1";
  }
}

// A conv that STRATA_BF16_NODES leaves out of bf16 takes the kernel an fp32 session gives it:
// a 3x3 stride-1 conv on a 14x14 map runs the fp32 Winograd F(2x2, 3x3), not the plain
// SGEMM conv (bf16_stages.py measures error splits this way; they must keep fp32's kernels),
// and its output has the fp32 session's bits. Without the variable it runs on bf16.
TEST_F(Bf16NhwcConv, ConvsLeftOutByStrataBf16NodesTakeTheFp32Kernels) {
  const Case c{1, 32, 14, 14, 32, 3, 1, 1, 1, false, true};
  const auto model = ConvModel(c, false);
  Feeds feeds = {{"x", Value(Tensor::FromVector<float>(Pseudo(32 * 14 * 14, 5), {1, 32, 14, 14}))}};
  std::vector<NodeAssignment> as_fp32, as_bf16, as_left_out;
  auto fp32 = RunModel(model, feeds, 1, false, false, &as_fp32);
  auto bf16 = RunModel(model, feeds, 1, true, false, &as_bf16);
  setenv("STRATA_BF16_NODES", "some_other_node", 1);
  auto left_out = RunModel(model, feeds, 1, true, false, &as_left_out);
  unsetenv("STRATA_BF16_NODES");
  ASSERT_TRUE(fp32.ok() && bf16.ok() && left_out.ok()) << left_out.status().ToString();
  auto impl = [](const std::vector<NodeAssignment>& as) {
    for (const auto& a : as)
      if (a.node_name == "conv") return a.impl;
    return std::string("(no node conv)");
  };
  EXPECT_EQ(impl(as_fp32), "winograd-f2x2");
  EXPECT_EQ(impl(as_bf16), "avx512_bf16");
  EXPECT_EQ(impl(as_left_out), "winograd-f2x2");
  EXPECT_TRUE(SameBits((*left_out)[0].tensor(), (*fp32)[0].tensor()));
}

// Small ResNet-like net, batch 2: stem 7x7/2 + Relu, MaxPool, a basic block with identity
// skip, a strided block with a 1x1/2 projection, GlobalAveragePool, Flatten, Gemm.
onnx::ModelProto SmallCnn() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 3, 32, 32});
  AddOutput(g, "y", {2, 10});
  AddConv(g, "x", "stem", 3, 16, 7, 2, 3, 1, 1, false);
  AddNode(g, "Relu", {"stem"}, {"stem_r"});
  auto* mp = AddNode(g, "MaxPool", {"stem_r"}, {"mp"});
  SetInts(mp, "kernel_shape", {3, 3});
  SetInts(mp, "strides", {2, 2});
  SetInts(mp, "pads", {1, 1, 1, 1});
  AddConv(g, "mp", "b1c1", 16, 16, 3, 1, 1, 1, 2, false);
  AddNode(g, "Relu", {"b1c1"}, {"b1r1"});
  AddConv(g, "b1r1", "b1c2", 16, 16, 3, 1, 1, 1, 3, false);
  AddNode(g, "Add", {"b1c2", "mp"}, {"b1s"});
  AddNode(g, "Relu", {"b1s"}, {"b1"});
  AddConv(g, "b1", "b2c1", 16, 24, 3, 2, 1, 1, 4, false);
  AddNode(g, "Relu", {"b2c1"}, {"b2r1"});
  AddConv(g, "b2r1", "b2c2", 24, 24, 3, 1, 1, 1, 5, false);
  AddConv(g, "b1", "b2d", 16, 24, 1, 2, 0, 1, 6, false);
  AddNode(g, "Add", {"b2c2", "b2d"}, {"b2s"});
  AddNode(g, "Relu", {"b2s"}, {"b2"});
  AddNode(g, "GlobalAveragePool", {"b2"}, {"gap"});
  AddNode(g, "Flatten", {"gap"}, {"flat"});
  AddValues(g, "fc_w", {10, 24}, Pseudo(240, 7, 0.2f));
  AddValues(g, "fc_b", {10}, Pseudo(10, 8, 0.1f));
  auto* fc = AddNode(g, "Gemm", {"flat", "fc_w", "fc_b"}, {"y"});
  auto* tb = fc->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  return m;
}

TEST_F(Bf16NhwcConv, SmallCnnMatchesFp32) {
  const onnx::ModelProto m = SmallCnn();
  Feeds feeds = {{"x", Value(Tensor::FromVector<float>(Pseudo(2 * 3 * 32 * 32, 9), {2, 3, 32, 32}))}};
  auto fp32 = RunModel(m, feeds, 1, false, false);
  auto ref = RunModel(m, feeds, 1, false, true);
  ASSERT_TRUE(fp32.ok() && ref.ok());
  for (int threads : {1, 2}) {
    std::vector<NodeAssignment> as;
    auto bf16 = RunModel(m, feeds, threads, true, false, &as);
    ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
    int nhwc = 0;
    for (const auto& a : as) nhwc += a.op_type == "NhwcConv";
    EXPECT_EQ(nhwc, 6);
    const Tensor& y = (*bf16)[0].tensor();
    EXPECT_LT(MaxRelError(y, (*ref)[0].tensor()), 1e-2) << "threads=" << threads;
    EXPECT_LT(MaxRelError(y, (*fp32)[0].tensor()), 1e-2) << "threads=" << threads;
    EXPECT_FALSE(SameBits(y, (*fp32)[0].tensor()));
  }
}

// HardSwish and SiLU (x * Sigmoid(x)) after bf16 convs join the bf16 GEMM's store
// (FuseNhwcConvActivation): both convs stay on the bf16 kernel with no activation node left,
// and the output is within bf16's error of fp32 (which runs them fused on the SGEMM).
TEST_F(Bf16NhwcConv, FusedSiluAndHardSwishStayOnBf16) {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 32, 14, 14});
  AddOutput(g, "y", {2, 40, 7, 7});
  AddConv(g, "x", "c1", 32, 48, 1, 1, 0, 1, 21, false);
  AddNode(g, "HardSwish", {"c1"}, {"h"});
  AddConv(g, "h", "c2", 48, 40, 3, 2, 1, 1, 22, false);
  AddNode(g, "Sigmoid", {"c2"}, {"s"});
  AddNode(g, "Mul", {"c2", "s"}, {"y"});
  Feeds feeds = {{"x", Value(Tensor::FromVector<float>(Pseudo(2 * 32 * 14 * 14, 23, 3.0f), {2, 32, 14, 14}))}};
  auto ref = RunModel(m, feeds, 1, false, true);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (int threads : {1, 2}) {
    std::vector<NodeAssignment> as;
    auto bf16 = RunModel(m, feeds, threads, true, false, &as);
    ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
    int bf16_convs = 0, acts = 0;
    for (const auto& a : as) {
      bf16_convs += a.op_type == "NhwcConv" && a.impl == "avx512_bf16";
      acts += a.op_type == "HardSwish" || a.op_type == "QuickGelu" || a.op_type == "Sigmoid";
    }
    EXPECT_EQ(bf16_convs, 2) << "threads=" << threads;
    EXPECT_EQ(acts, 0) << "threads=" << threads;
    EXPECT_LT(MaxRelError((*bf16)[0].tensor(), (*ref)[0].tensor()), 1e-2) << "threads=" << threads;
  }
}

// A hand-built NhwcConv node (the layout pass's output) with bad run-time inputs: errors
// name the node, nothing crashes.
TEST_F(Bf16NhwcConv, BadInputsAreErrorsNamingTheNode) {
  testing::OpSpec conv("NhwcConv", 1, "strata.internal");
  conv.Attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  testing::RunOptions o;
  o.constant_inputs = {1, 2};
  o.config.bf16_fast_math = true;
  Tensor x = Tensor::FromVector<float>(Pseudo(1 * 5 * 5 * 8, 1), {1, 5, 5, 8});
  Tensor w = Tensor::FromVector<float>(Pseudo(4 * 8 * 3 * 3, 2), {4, 8, 3, 3});
  Tensor b = Tensor::FromVector<float>(Pseudo(4, 3), {4});
  auto ok = testing::RunKernel(conv, {x, w, b}, o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].shape(), (Shape{1, 5, 5, 4}));
  Tensor bad_r = Tensor::FromVector<float>(Pseudo(1 * 5 * 5 * 3, 4), {1, 5, 5, 3});
  auto r = testing::RunKernel(conv, {x, w, b, bad_r}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NhwcConv"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("residual"), std::string::npos) << r.status().ToString();
  Tensor bad_x = Tensor::FromVector<float>(Pseudo(5 * 5 * 6, 5), {1, 5, 5, 6});  // C = 6, W wants 8
  auto e = testing::RunKernel(conv, {bad_x, w, b}, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("NhwcConv"), std::string::npos) << e.status().ToString();
}

// FusedMatMul in a bf16 session: bias, GELU (erf and tanh forms) and the residual in the
// bf16 GEMM's epilogue, vs the reference FusedMatMul on the fp32 and the rounded operands.
TEST_F(Bf16NhwcConv, FusedMatMulEpiloguesMatchFp32) {
  const int64_t batch = 2, M = 37, K = 70, N = 45;
  std::vector<float> av = Pseudo(batch * M * K, 21), wv = Pseudo(K * N, 22, 0.2f);
  Tensor a = Tensor::FromVector<float>(av, {batch, M, K});
  Tensor w = Tensor::FromVector<float>(wv, {K, N});
  Tensor ar = Tensor::FromVector<float>(Rounded(av, true), {batch, M, K});
  Tensor wr = Tensor::FromVector<float>(Rounded(wv, true), {K, N});
  Tensor bias = Tensor::FromVector<float>(Pseudo(N, 23, 0.5f), {N});
  Tensor res = Tensor::FromVector<float>(Pseudo(batch * M * N, 24), {batch, M, N});
  for (const char* act : {"", "Gelu", "FastGelu", "residual"}) {
    testing::OpSpec fm("FusedMatMul", 1, "strata.internal");
    const bool residual = std::string(act) == "residual";
    if (!residual && *act) fm.Attr("activation", act);
    std::vector<Tensor> in = {a, w, bias}, in_r = {ar, wr, bias};
    if (residual) {
      in.push_back(res);
      in_r.push_back(res);
    }
    testing::RunOptions ref_o;
    ref_o.want_reference = true;
    ref_o.constant_inputs = {1, 2};
    for (int threads : {1, 2}) {
      testing::RunOptions o;
      o.constant_inputs = {1, 2};
      o.config.bf16_fast_math = true;
      o.threads = threads;
      auto got = testing::RunKernel(fm, in, o);
      auto ref = testing::RunKernel(fm, in, ref_o);
      auto ref16 = testing::RunKernel(fm, in_r, ref_o);
      o.config.bf16_fast_math = false;
      auto fp32 = testing::RunKernel(fm, in, o);
      for (const auto* r : {&got, &ref, &ref16, &fp32}) ASSERT_TRUE(r->ok()) << act << ": " << r->status().ToString();
      EXPECT_LT(MaxRelError((*got)[0], (*ref)[0]), 1e-2) << act;
      // |a| <= 1, |w| <= 0.2: sum |a w| <= 14; GELU's slope is at most ~1.13.
      EXPECT_LT(MaxAbsError((*got)[0], (*ref16)[0]), 1e-5) << act << " threads=" << threads;
      EXPECT_FALSE(SameBits((*got)[0], (*fp32)[0])) << act << ": bf16 rounding should be visible";
    }
  }
  // A residual of the wrong shape is an error naming the node.
  testing::OpSpec fm("FusedMatMul", 1, "strata.internal");
  testing::RunOptions o;
  o.constant_inputs = {1, 2};
  o.config.bf16_fast_math = true;
  auto bad = testing::RunKernel(fm, {a, w, bias, bias}, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FusedMatMul"), std::string::npos) << bad.status().ToString();
}

// The transformer fusion keeps MatMul + bias (+ GELU) as one FusedMatMul in bf16 sessions,
// on the bf16 kernel.
TEST_F(Bf16NhwcConv, Bf16SessionsKeepFusedMatMul) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 64});
  AddOutput(g, "y", {4, 48});
  AddValues(g, "w", {64, 48}, Pseudo(64 * 48, 31, 0.2f));
  AddValues(g, "b", {48}, Pseudo(48, 32, 0.5f));
  AddNode(g, "MatMul", {"x", "w"}, {"h"});
  AddNode(g, "Add", {"h", "b"}, {"y"});
  Feeds feeds = {{"x", Value(Tensor::FromVector<float>(Pseudo(4 * 64, 33), {4, 64}))}};
  std::vector<NodeAssignment> as;
  auto got = RunModel(m, feeds, 1, true, false, &as);
  auto ref = RunModel(m, feeds, 1, false, true);
  ASSERT_TRUE(got.ok() && ref.ok()) << got.status().ToString();
  bool fused = false;
  for (const auto& a : as) {
    EXPECT_NE(a.op_type, "Add");
    if (a.op_type == "FusedMatMul") {
      fused = true;
      EXPECT_EQ(a.impl, bf16_internal::AmxAvailable() ? "amx_bf16" : "avx512_bf16");
    }
  }
  EXPECT_TRUE(fused);
  EXPECT_LT(MaxRelError((*got)[0].tensor(), (*ref)[0].tensor()), 1e-2);
}

}  // namespace
}  // namespace strata
