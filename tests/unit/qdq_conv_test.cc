// Static int8 convs in the QDQ format (core/qdq_fusion.cc, the layout pass's NhwcQLinearConv,
// cpu/int_conv.cc's VNNI kernel): DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear chains
// become QLinearConv where the VNNI kernel runs them, and the result is the float graph's to
// within one quantization step (the integer kernel rounds once, the float graph at every
// multiply-add). Groups that are not exactly the pattern (a Relu above the zero point, a
// per-channel DequantizeLinear along the wrong axis) stay float or are refused.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/session.h"
#include "cpu/int8_gemm.h"
#include "cpu/int_conv_depthwise.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddOutput, AddNode, Serialize

struct Qdq {
  bool x_signed = false;
  int bias = 1;      // 0 none, 1 int32 DequantizeLinear at xs * ws, 2 float constant
  bool relu = true;  // Conv -> Relu -> QuantizeLinear
  int32_t y_zp = 0;  // with relu: 0 (the lowest uint8) fuses the Relu, else not fused
  int64_t stride = 1;
  bool chain = true;       // a second conv reads the first one's quantized output
  bool w_axis_1 = false;   // per-channel weight scale along axis 1: not the pattern
  bool pool = false;       // DequantizeLinear -> MaxPool 3x3/2 -> QuantizeLinear after the first conv
  bool clip6 = false;      // Clip(0, 6) instead of the Relu
  float y_scale = 0.05f;   // with clip6: 0.02 saturates at 5.1 (fuses), 0.05 quantizes 6 to 120 (does not)
  bool depthwise = false;  // the chained conv is depthwise (group = its 20 channels)
  int8_t w_zp = 0;         // W's zero point (nonzero: the GEMM's column offset, its general store)
};

// One quantized conv `p` (prefix) reading quantized `xq` (scale xs, zero point xz) with C in and
// M out channels; writes quantized `p + "yq"` with scale ys.
void AddConv(onnx::GraphProto* g, const std::string& p, const std::string& xq, const std::string& xs,
             const std::string& xz, float xs_value, int64_t C, int64_t M, const Qdq& q, uint32_t seed,
             int64_t group = 1) {
  const int qt = q.x_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddNode(g, "DequantizeLinear", {xq, xs, xz}, {p + "x"});
  std::vector<int8_t> w(static_cast<size_t>(M * C / group * 9));
  std::vector<float> wp = test::Pseudo(w.size(), seed, 127.0f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(std::lrint(wp[i]));
  std::vector<float> ws(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) ws[m] = 0.002f + 0.0005f * static_cast<float>(m % 5);
  AddRawInit(g, p + "wq", onnx::TensorProto::INT8, {M, C / group, 3, 3}, w);
  AddRawInit(g, p + "ws", onnx::TensorProto::FLOAT, {M}, ws);
  AddRawInit(g, p + "wz", onnx::TensorProto::INT8, {M}, std::vector<int8_t>(static_cast<size_t>(M), q.w_zp));
  SetInt(AddNode(g, "DequantizeLinear", {p + "wq", p + "ws", p + "wz"}, {p + "w"}), "axis", q.w_axis_1 ? 1 : 0);
  std::vector<std::string> conv_in = {p + "x", p + "w"};
  std::vector<float> bf = test::Pseudo(static_cast<size_t>(M), seed + 1, 0.5f);
  if (q.bias == 1) {
    std::vector<int32_t> bq(static_cast<size_t>(M));
    std::vector<float> bs(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      bs[m] = xs_value * ws[m];
      bq[m] = static_cast<int32_t>(std::lrint(bf[m] / bs[m]));
    }
    AddRawInit(g, p + "bq", onnx::TensorProto::INT32, {M}, bq);
    AddRawInit(g, p + "bs", onnx::TensorProto::FLOAT, {M}, bs);
    SetInt(AddNode(g, "DequantizeLinear", {p + "bq", p + "bs"}, {p + "b"}), "axis", 0);
    conv_in.push_back(p + "b");
  } else if (q.bias == 2) {
    AddRawInit(g, p + "b", onnx::TensorProto::FLOAT, {M}, bf);
    conv_in.push_back(p + "b");
  }
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name(p + "conv");
  for (const auto& s : conv_in) conv->add_input(s);
  conv->add_output(p + "y");
  SetInts(conv, "pads", {1, 1, 1, 1});
  SetInts(conv, "strides", {q.stride, q.stride});
  if (group > 1) SetInt(conv, "group", group);
  std::string y = p + "y";
  if (q.clip6) {
    AddRawInit(g, p + "c0", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.0f});
    AddRawInit(g, p + "c6", onnx::TensorProto::FLOAT, {}, std::vector<float>{6.0f});
    AddNode(g, "Clip", {y, p + "c0", p + "c6"}, {p + "r"});
    y = p + "r";
  } else if (q.relu) {
    AddNode(g, "Relu", {y}, {p + "r"});
    y = p + "r";
  }
  AddRawInit(g, p + "ys", onnx::TensorProto::FLOAT, {}, std::vector<float>{q.y_scale});
  if (q.x_signed) {
    AddRawInit(g, p + "yz", qt, {}, std::vector<int8_t>{static_cast<int8_t>(q.relu && q.y_zp == 0 ? -128 : q.y_zp)});
  } else {
    AddRawInit(g, p + "yz", qt, {}, std::vector<uint8_t>{static_cast<uint8_t>(q.y_zp)});
  }
  AddNode(g, "QuantizeLinear", {y, p + "ys", p + "yz"}, {p + "yq"});
}

onnx::ModelProto Build(const Qdq& q) {
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  const int64_t C = 5, M = 20, M2 = q.depthwise ? M : 17;
  AddInput(g, "x", {2, C, 9, 8});
  const int qt = q.x_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddRawInit(g, "xs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.02f});
  if (q.x_signed) {
    AddRawInit(g, "xz", qt, {}, std::vector<int8_t>{3});
  } else {
    AddRawInit(g, "xz", qt, {}, std::vector<uint8_t>{128});
  }
  AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  AddConv(g, "a_", "xq", "xs", "xz", 0.02f, C, M, q, 11);
  if (q.pool) {  // a_yq -> pooled, quantized again with the same parameters, as a_yq
    AddNode(g, "DequantizeLinear", {"a_yq", "a_ys", "a_yz"}, {"p_x"});
    auto* mp = AddNode(g, "MaxPool", {"p_x"}, {"p_y"});
    SetInts(mp, "kernel_shape", {3, 3});
    SetInts(mp, "strides", {2, 2});
    SetInts(mp, "pads", {1, 1, 1, 1});
    AddNode(g, "QuantizeLinear", {"p_y", "a_ys", "a_yz"}, {"p_yq"});
  }
  std::string out = "a_yq";
  if (q.chain) {
    AddConv(g, "b_", q.pool ? "p_yq" : "a_yq", "a_ys", "a_yz", 0.05f, M, M2, q, 23, q.depthwise ? M : 1);
    out = "b_yq";
  }
  AddNode(g, "DequantizeLinear", {out, out == "a_yq" ? "a_ys" : "b_ys", out == "a_yq" ? "a_yz" : "b_yz"}, {"y"});
  AddOutput(g, "y", {2, q.chain ? M2 : M, -1, -1});
  return m;
}

std::vector<std::pair<std::string, Value>> Inputs20(int64_t width = 8) {
  return {{"x", Value(Tensor::FromVector<float>(test::Pseudo(2 * 20 * 9 * width, 5, 2.0f), {2, 20, 9, width}))}};
}

std::vector<std::pair<std::string, Value>> Inputs() {
  return {{"x", Value(Tensor::FromVector<float>(test::Pseudo(2 * 5 * 9 * 8, 3, 2.0f), {2, 5, 9, 8}))}};
}

// Within `steps` quantization steps (of the output's scale `step`) everywhere; returns the share of
// values that differ at all.
double ExpectWithinSteps(const test::OptRefRuns& r, int steps, float step = 0.05f) {
  EXPECT_EQ(r.opt.size(), 1u);
  EXPECT_EQ(r.ref.size(), 1u);
  if (r.opt.size() != 1 || r.ref.size() != 1) return 1;
  const Tensor& a = r.opt[0].tensor();
  const Tensor& b = r.ref[0].tensor();
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1;
  int64_t differ = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const float d = std::fabs(a.data<float>()[i] - b.data<float>()[i]);
    EXPECT_LE(d, step * static_cast<float>(steps) + 1e-6f) << "at " << i;
    if (d > 0) ++differ;
  }
  return static_cast<double>(differ) / static_cast<double>(a.num_elements());
}

std::string Describe(const Qdq& q) {
  return std::string(q.x_signed ? "int8" : "uint8") + " bias " + std::to_string(q.bias) + " relu " +
         std::to_string(q.relu) + " y_zp " + std::to_string(q.y_zp) + " stride " + std::to_string(q.stride) +
         (q.chain ? " chain" : "");
}

TEST(QdqConv, FusedConvsMatchTheFloatGraphWithinOneStep) {
  const bool fuses = int8gemm::Available();
  for (bool x_signed : {false, true})
    for (int bias : {0, 1, 2})
      for (bool relu : {true, false})
        for (int threads : {1, 2}) {
          Qdq q;
          q.x_signed = x_signed;
          q.bias = bias;
          q.relu = relu;
          q.y_zp = relu ? 0 : (x_signed ? -5 : 100);
          q.stride = bias == 2 ? 2 : 1;
          SCOPED_TRACE(Describe(q) + " threads " + std::to_string(threads));
          auto r = test::RunOptimizedAndReference(Build(q), Inputs(), threads);
          const double share = ExpectWithinSteps(r, 1);
          EXPECT_LT(share, 0.05);  // off-by-one only where the float sum lands near a half step
          EXPECT_EQ(r.ops["NhwcQLinearConv"], fuses ? 2 : 0);
          EXPECT_EQ(r.ops["Conv"] + r.ops["NhwcConv"], fuses ? 0 : 2);
        }
}

// A MaxPool between two fused convs reads the bytes (its DequantizeLinear moved below it,
// exactly), in the convs' NHWC region.
TEST(QdqConv, MaxPoolBetweenFusedConvsPoolsBytes) {
  const bool fuses = int8gemm::Available();
  for (bool x_signed : {false, true})
    for (int threads : {1, 2}) {
      Qdq q;
      q.x_signed = x_signed;
      q.pool = true;
      SCOPED_TRACE(Describe(q) + " pool threads " + std::to_string(threads));
      auto r = test::RunOptimizedAndReference(Build(q), Inputs(), threads);
      ExpectWithinSteps(r, 1);
      EXPECT_EQ(r.ops["NhwcQLinearConv"], fuses ? 2 : 0);
      // (Without the fused convs the float pool may join the float convs' NHWC region.)
      if (fuses) {
        EXPECT_EQ(r.ops["NhwcMaxPool"], 1);
      }
      // The pool reads the conv's bytes: it comes right after it, before any DequantizeLinear.
      for (size_t i = 0; fuses && i + 1 < r.assignments.size(); ++i)
        if (r.assignments[i].op_type == "NhwcQLinearConv") {
          EXPECT_EQ(r.assignments[i + 1].op_type, "NhwcMaxPool");
          break;
        }
    }
}

// A ReLU6 (Clip(0, 6)) joins the conv where the saturation is its clamp (6 quantizes past the
// top), not where it is not.
TEST(QdqConv, Relu6JoinsOnlyWhereSaturationIsItsClamp) {
  const bool fuses = int8gemm::Available();
  for (float ys : {0.02f, 0.05f}) {
    Qdq q;
    q.clip6 = true;
    q.y_scale = ys;
    q.chain = false;
    SCOPED_TRACE("y_scale " + std::to_string(ys));
    auto r = test::RunOptimizedAndReference(Build(q), Inputs(), 1);
    const double share = ExpectWithinSteps(r, 1, ys);
    EXPECT_LT(share, 0.05);
    EXPECT_EQ(r.ops["NhwcQLinearConv"] + r.ops["QLinearConv"], fuses && ys == 0.02f ? 1 : 0);
  }
}

// A depthwise conv (mobilenet's) fuses too, on the int8 depthwise kernel: stride 1 and 2,
// ReLU6 or none, both signednesses.
TEST(QdqConv, DepthwiseConvsFuse) {
  const bool fuses = int8gemm::Available() && int8dw::Covers({20, 1, 3, 3}, 20);
  for (bool x_signed : {false, true})
    for (int64_t stride : {1, 2})
      for (int threads : {1, 2}) {
        Qdq q;
        q.x_signed = x_signed;
        q.depthwise = true;
        q.stride = stride;
        q.relu = stride == 1;
        q.clip6 = q.relu;
        q.y_scale = q.clip6 ? 0.02f : 0.05f;
        q.y_zp = 0;
        SCOPED_TRACE(Describe(q) + " depthwise threads " + std::to_string(threads));
        auto r = test::RunOptimizedAndReference(Build(q), Inputs(), threads);
        const double share = ExpectWithinSteps(r, 1, q.y_scale);
        EXPECT_LT(share, 0.05);
        EXPECT_EQ(r.ops["NhwcQLinearConv"], fuses ? 2 : 0);
      }
}

TEST(QdqConv, GroupsThatAreNotThePatternStayFloat) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the fusion needs the VNNI kernel";
  Qdq above;  // Relu with y's zero point above the lowest value: saturation is not the Relu
  above.y_zp = 10;
  above.chain = false;
  Qdq axis;  // per-channel weight scale along axis 1
  axis.w_axis_1 = true;
  axis.chain = false;
  for (const Qdq& q : {above, axis}) {
    SCOPED_TRACE(Describe(q) + (q.w_axis_1 ? " w axis 1" : ""));
    if (q.w_axis_1) {
      // The model itself is invalid then (axis 1 has C = 5 values, the scale 20): an error,
      // not a fused node that would hide it.
      const std::string bytes = Serialize(Build(q));
      auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
      if (s.ok()) {
        auto out = (*s)->Run(Inputs());
        EXPECT_FALSE(out.ok());
      }
      continue;
    }
    auto r = test::RunOptimizedAndReference(Build(q), Inputs(), 1);
    ExpectWithinSteps(r, 1);  // the float convs' own rounding may flip a step too
    EXPECT_EQ(r.ops["NhwcQLinearConv"] + r.ops["QLinearConv"], 0);
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

using namespace onnx_builder;  // NOLINT

// QuantizeLinear([Relu](DequantizeLinear(a) + DequantizeLinear(b))) over x [1, 64, 32, 40]
// (81920 values: split over the pool at 2 threads) quantized two ways.
onnx::ModelProto BuildAdd(bool relu, bool a_signed, bool y_signed) {
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 64, 32, 40});
  const int at = a_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddRawInit(g, "as", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.013f});
  AddRawInit(g, "bs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.021f});
  AddRawInit(g, "ys", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.037f});
  if (a_signed) {
    AddRawInit(g, "az", at, {}, std::vector<int8_t>{-3});
  } else {
    AddRawInit(g, "az", at, {}, std::vector<uint8_t>{120});
  }
  AddRawInit(g, "bz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{131});
  if (y_signed) {
    AddRawInit(g, "yz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{static_cast<int8_t>(relu ? -60 : 4)});
  } else {
    AddRawInit(g, "yz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{static_cast<uint8_t>(relu ? 40 : 90)});
  }
  AddNode(g, "QuantizeLinear", {"x", "as", "az"}, {"aq"});
  AddNode(g, "Neg", {"x"}, {"nx"});
  AddNode(g, "QuantizeLinear", {"nx", "bs", "bz"}, {"bq"});
  AddNode(g, "DequantizeLinear", {"aq", "as", "az"}, {"a"});
  AddNode(g, "DequantizeLinear", {"bq", "bs", "bz"}, {"b"});
  AddNode(g, "Mul", {"a", "a"}, {"a2"});  // a's DequantizeLinear has another reader: it stays
  AddNode(g, "Add", {"a2", "b"}, {"s0"});
  AddNode(g, "Add", {"a", "b"}, {"s"});
  std::string sum = "s";
  if (relu) {
    AddNode(g, "Relu", {"s"}, {"r"});
    sum = "r";
  }
  AddNode(g, "QuantizeLinear", {sum, "ys", "yz"}, {"yq"});
  AddNode(g, "DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  AddOutput(g, "y", {1, 64, 32, 40});
  AddOutput(g, "s0", {1, 64, 32, 40});
  return m;
}

TEST(QdqAdd, FusedSumGivesTheUnfusedBytes) {
  for (bool relu : {true, false})
    for (bool a_signed : {false, true})
      for (bool y_signed : {false, true})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string("relu ") + std::to_string(relu) + " a_signed " + std::to_string(a_signed) +
                       " y_signed " + std::to_string(y_signed) + " threads " + std::to_string(threads));
          std::vector<std::pair<std::string, Value>> in = {
              {"x", Value(Tensor::FromVector<float>(test::Pseudo(64 * 32 * 40, 9, 2.5f), {1, 64, 32, 40}))}};
          auto r = test::RunOptimizedAndReference(BuildAdd(relu, a_signed, y_signed), in, threads);
          ASSERT_EQ(r.opt.size(), 2u);
          ASSERT_EQ(r.ref.size(), 2u);
          for (size_t i = 0; i < 2; ++i) {
            const Tensor& a = r.opt[i].tensor();
            const Tensor& b = r.ref[i].tensor();
            ASSERT_EQ(a.shape(), b.shape());
            EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size())) << "output " << i;
          }
          EXPECT_EQ(r.ops["QdqAdd"], 1);
          EXPECT_EQ(r.ops["Relu"], 0);
        }
}

// Every pair of input bytes (65536 values) under several scales: the fused sum must round like
// the unfused kernels everywhere, also where the float sum lands next to a half step (a fused
// multiply-add in place of the separate multiply and add, one rounding fewer, shows there).
TEST(QdqAdd, EveryPairOfBytesGivesTheUnfusedBytes) {
  std::vector<uint8_t> av(65536), bv(65536);
  for (size_t i = 0; i < av.size(); ++i) {
    av[i] = static_cast<uint8_t>(i >> 8);
    bv[i] = static_cast<uint8_t>(i);
  }
  const std::vector<float> scales = test::Pseudo(3 * 12, 77, 1.0f);
  // k = -1: scales and zero points where (a, b) = (223, 193) rounds differently when a's
  // product is not rounded before the sum (found by searching random scales offline).
  for (int k = -1; k < 12; ++k) {
    const bool relu = k % 3 == 0, signed_b = k % 2 != 0 && k >= 0;
    onnx::ModelProto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "a", {65536}, onnx::TensorProto::UINT8);
    AddInput(g, "b", {65536}, signed_b ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
    // Scales in (0.001, 0.1): a wide spread of float products and quotients.
    auto scale = [&](int i) {
      if (k < 0) return std::vector<float>{0.0417669974f, 0.0537833609f, 0.0411150753f / 2.0f}[static_cast<size_t>(i)];
      return 0.001f + 0.099f * std::fabs(scales[static_cast<size_t>(3 * k + i)]);
    };
    AddRawInit(g, "as", onnx::TensorProto::FLOAT, {}, std::vector<float>{scale(0)});
    AddRawInit(g, "bs", onnx::TensorProto::FLOAT, {}, std::vector<float>{scale(1)});
    AddRawInit(g, "ys", onnx::TensorProto::FLOAT, {}, std::vector<float>{scale(2) * 2.0f});
    AddRawInit(g, "az", onnx::TensorProto::UINT8, {},
               std::vector<uint8_t>{static_cast<uint8_t>(k < 0 ? 196 : 100 + 3 * k)});
    if (signed_b) {
      AddRawInit(g, "bz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{static_cast<int8_t>(k - 6)});
    } else {
      AddRawInit(g, "bz", onnx::TensorProto::UINT8, {},
                 std::vector<uint8_t>{static_cast<uint8_t>(k < 0 ? 24 : 140 - k)});
    }
    AddRawInit(g, "yz", onnx::TensorProto::UINT8, {},
               std::vector<uint8_t>{static_cast<uint8_t>(relu || k < 0 ? 0 : 128)});
    AddNode(g, "DequantizeLinear", {"a", "as", "az"}, {"ad"});
    AddNode(g, "DequantizeLinear", {"b", "bs", "bz"}, {"bd"});
    AddNode(g, "Add", {"ad", "bd"}, {"s"});
    if (relu) AddNode(g, "Relu", {"s"}, {"r"});
    AddNode(g, "QuantizeLinear", {relu ? "r" : "s", "ys", "yz"}, {"y"});
    AddOutput(g, "y", {65536}, onnx::TensorProto::UINT8);
    Tensor a = Tensor::FromVector<uint8_t>(av, {65536});
    Tensor b = signed_b ? Tensor::FromVector<int8_t>(std::vector<int8_t>(bv.begin(), bv.end()), {65536})
                        : Tensor::FromVector<uint8_t>(bv, {65536});
    auto r = test::RunOptimizedAndReference(m, {{"a", Value(a)}, {"b", Value(b)}}, 1 + (k & 1));
    ASSERT_EQ(r.opt.size(), 1u);
    ASSERT_EQ(r.ref.size(), 1u);
    EXPECT_EQ(r.ops["QdqAdd"], 1);
    const auto* o = static_cast<const uint8_t*>(r.opt[0].tensor().raw_data());
    const auto* e = static_cast<const uint8_t*>(r.ref[0].tensor().raw_data());
    int differ = 0, first = -1;
    for (int i = 0; i < 65536; ++i)
      if (o[i] != e[i]) {
        if (first < 0) first = i;
        ++differ;
      }
    EXPECT_EQ(differ, 0) << "scales " << scale(0) << " " << scale(1) << " " << scale(2) * 2.0f << ": first at a "
                         << (first >> 8) << " b " << (first & 255);
  }
}

TEST(QdqAdd, BadInputsNameTheNode) {
  // A hand-written strata.internal QdqAdd (the fusion never makes these): b of another shape,
  // a float a, a vector scale.
  auto run = [](const Tensor& a, const Tensor& b, const Tensor& ys) {
    onnx::ModelProto m = MakeModel(13);
    AddOpsetImport(&m, "strata.internal", 1);
    auto* g = m.mutable_graph();
    AddInput(g, "a", {-1}, a.dtype() == DataType::kFloat ? onnx::TensorProto::FLOAT : onnx::TensorProto::UINT8);
    AddInput(g, "b", {-1}, onnx::TensorProto::UINT8);
    AddRawInit(g, "s", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.1f});
    AddRawInit(g, "ys", onnx::TensorProto::FLOAT, std::vector<int64_t>(ys.shape().begin(), ys.shape().end()),
               std::vector<float>(static_cast<size_t>(ys.num_elements()), 0.2f));
    AddRawInit(g, "z", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{3});
    auto* n = AddNode(g, "QdqAdd", {"a", "s", "z", "b", "s", "z", "ys", "z"}, {"y"}, "my_add");
    n->set_domain("strata.internal");
    AddOutput(g, "y", {-1}, onnx::TensorProto::UINT8);
    const std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    if (!s.ok()) return s.status().ToString();
    auto out = (*s)->Run({{"a", Value(a)}, {"b", Value(b)}});
    return out.ok() ? std::string("ok") : out.status().ToString();
  };
  const Tensor u4 = Tensor::FromVector<uint8_t>({1, 2, 3, 4}, {4}), u3 = Tensor::FromVector<uint8_t>({1, 2, 3}, {3});
  const Tensor one = Tensor::FromVector<float>({0.2f}, {}), two = Tensor::FromVector<float>({0.2f, 0.2f}, {2});
  EXPECT_EQ(run(u4, u4, one), "ok");
  std::string e = run(u4, u3, one);
  EXPECT_NE(e.find("my_add"), std::string::npos) << e;
  EXPECT_NE(e.find("one shape"), std::string::npos) << e;
  e = run(Tensor::FromVector<float>({1, 2, 3, 4}, {4}), u4, one);
  EXPECT_NE(e.find("uint8 or int8"), std::string::npos) << e;
  e = run(u4, u4, two);
  EXPECT_NE(e.find("y_scale must be a scalar"), std::string::npos) << e;
}

// A ResNet block's end: conv (20 -> 20, 3x3) -> QuantizeLinear, then QuantizeLinear([Relu](
// DequantizeLinear(conv) + DequantizeLinear(x_q))). After the QDQ fusions this is
// NhwcQLinearConv + QdqAdd, which FuseNhwcQConvAdd merges into the conv's store. `show_conv`
// makes the conv's bytes a graph output too, which keeps the two nodes apart: the fused and the
// unfused sessions must give the same bytes.
struct Residual {
  bool x_signed = false, out_signed = false, relu = true, conv_first = true, show_conv = false;
  int bias = 1;
  int8_t w_zp = 0;
  int64_t width = 8;  // 18: uint8 x with w_zp 0 runs on the padded image read in place
};

onnx::ModelProto BuildResidual(const Residual& r) {
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  const int64_t C = 20;
  AddInput(g, "x", {2, C, 9, r.width});
  const int qt = r.x_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddRawInit(g, "xs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.02f});
  if (r.x_signed) {
    AddRawInit(g, "xz", qt, {}, std::vector<int8_t>{3});
  } else {
    AddRawInit(g, "xz", qt, {}, std::vector<uint8_t>{128});
  }
  AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  Qdq q;
  q.x_signed = r.x_signed;
  q.relu = false;
  q.y_zp = r.x_signed ? -7 : 120;
  q.bias = r.bias;
  q.w_zp = r.w_zp;
  AddConv(g, "a_", "xq", "xs", "xz", 0.02f, C, C, q, 31);
  AddNode(g, "DequantizeLinear", {"a_yq", "a_ys", "a_yz"}, {"ad"});
  AddNode(g, "DequantizeLinear", {"xq", "xs", "xz"}, {"sd"});
  AddNode(g, "Add", {r.conv_first ? "ad" : "sd", r.conv_first ? "sd" : "ad"}, {"sum"});
  if (r.relu) AddNode(g, "Relu", {"sum"}, {"sum_r"});
  AddRawInit(g, "rs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.031f});
  if (r.out_signed) {
    // With the Relu a zero point above the lowest value, so the Relu's clamp is not the saturation.
    AddRawInit(g, "rz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{static_cast<int8_t>(r.relu ? -100 : -20)});
  } else {
    AddRawInit(g, "rz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{static_cast<uint8_t>(r.relu ? 30 : 100)});
  }
  AddNode(g, "QuantizeLinear", {r.relu ? "sum_r" : "sum", "rs", "rz"}, {"outq"});
  AddNode(g, "DequantizeLinear", {"outq", "rs", "rz"}, {"y"});
  AddOutput(g, "y", {2, C, 9, r.width});
  if (r.show_conv) AddOutput(g, "a_yq", {2, C, 9, r.width}, qt);
  return m;
}

TEST(QdqResidual, SumInTheConvStoreGivesTheUnfusedBytes) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the NHWC int8 conv needs AVX512-VNNI";
  for (bool x_signed : {false, true})
    for (bool out_signed : {false, true})
      for (bool relu : {true, false})
        for (bool conv_first : {true, false})
          for (int threads : {1, 2})
            for (int64_t width : {8, 18}) {
              Residual r;
              r.width = width;
              r.x_signed = x_signed;
              r.out_signed = out_signed;
              r.relu = relu;
              r.conv_first = conv_first;
              r.bias = conv_first ? 1 : 0;
              r.w_zp = static_cast<int8_t>(threads == 2 && width == 8 ? 5 : 0);  // both stores of the GEMM
              SCOPED_TRACE(std::string("x_signed ") + std::to_string(x_signed) + " out_signed " +
                           std::to_string(out_signed) + " relu " + std::to_string(relu) + " conv_first " +
                           std::to_string(conv_first) + " threads " + std::to_string(threads) + " width " +
                           std::to_string(width));
              auto fused = test::RunOptimizedAndReference(BuildResidual(r), Inputs20(width), threads);
              r.show_conv = true;
              auto apart = test::RunOptimizedAndReference(BuildResidual(r), Inputs20(width), threads);
              ASSERT_FALSE(fused.opt.empty());
              ASSERT_EQ(apart.opt.size(), 2u);
              EXPECT_EQ(fused.ops["QdqAdd"], 0);
              EXPECT_EQ(fused.ops["NhwcQLinearConv"], 1);
              EXPECT_EQ(apart.ops["QdqAdd"], 1);
              const Tensor& a = fused.opt[0].tensor();
              const Tensor& b = apart.opt[0].tensor();
              ASSERT_EQ(a.shape(), b.shape());
              EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()));
              // And within a step or two of the float graph (the conv rounds once, as fused before).
              ExpectWithinSteps(fused, 2, 0.031f);
              if (HasFailure()) return;
            }
}

// A hand-written NhwcQLinearConv with residual inputs (the fusion's form) that are wrong.
TEST(QdqResidual, BadResidualInputsNameTheNode) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the NHWC int8 conv needs AVX512-VNNI";
  // variant 0 fine; 1 skip of another shape; 2 a float skip; 3 one residual input missing;
  // 4 a [2] residual scale; 5 a residual zero point of the wrong type; 6 a depthwise conv.
  auto run = [](int variant) {
    onnx::ModelProto m = MakeModel(13);
    AddOpsetImport(&m, "strata.internal", 1);
    auto* g = m.mutable_graph();
    const int64_t C = 4, M = variant == 6 ? 4 : 3;
    AddInput(g, "x", {1, 5, 5, C}, onnx::TensorProto::UINT8);
    AddInput(g, "skip", {-1, -1, -1, -1}, variant == 2 ? onnx::TensorProto::FLOAT : onnx::TensorProto::UINT8);
    AddRawInit(g, "s", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.1f});
    AddRawInit(g, "s2", onnx::TensorProto::FLOAT, {2}, std::vector<float>{0.1f, 0.1f});
    AddRawInit(g, "z", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{3});
    AddRawInit(g, "zi", onnx::TensorProto::INT8, {}, std::vector<int8_t>{3});
    AddRawInit(g, "w", onnx::TensorProto::INT8, {M, variant == 6 ? 1 : C, 3, 3},
               std::vector<int8_t>(static_cast<size_t>(M * (variant == 6 ? 1 : C) * 9), 1));
    AddRawInit(g, "ws", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.01f});
    AddRawInit(g, "wz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{0});
    std::vector<std::string> in = {
        "x", "s", "z", "w", "ws", "wz", "s", "z", "", "skip", variant == 4 ? "s2" : "s", variant == 5 ? "zi" : "z",
        "s", "z", "s", "z"};
    if (variant == 3) in.pop_back();
    auto* n = g->add_node();
    n->set_op_type("NhwcQLinearConv");
    n->set_domain("strata.internal");
    n->set_name("my_conv");
    for (const auto& i : in) n->add_input(i);
    n->add_output("y");
    SetInts(n, "pads", {1, 1, 1, 1});
    if (variant == 6) SetInt(n, "group", 4);
    AddOutput(g, "y", {-1, -1, -1, -1}, onnx::TensorProto::UINT8);
    const std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    if (!s.ok()) return s.status().ToString();
    const Tensor x = Tensor::FromVector<uint8_t>(std::vector<uint8_t>(100, 7), {1, 5, 5, C});
    const int64_t skip_n = 25 * M;  // variant 1: the same bytes as [1, 5, M, 5]
    const Shape skip_shape = variant == 1 ? Shape{1, 5, M, 5} : Shape{1, 5, 5, M};
    Tensor skip = variant == 2
                      ? Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(skip_n), 1.0f), skip_shape)
                      : Tensor::FromVector<uint8_t>(std::vector<uint8_t>(static_cast<size_t>(skip_n), 9), skip_shape);
    auto out = (*s)->Run({{"x", Value(x)}, {"skip", Value(skip)}});
    return out.ok() ? std::string("ok") : out.status().ToString();
  };
  EXPECT_EQ(run(0), "ok");
  for (int v = 1; v <= 6; ++v) {
    const std::string e = run(v);
    EXPECT_NE(e.find("my_conv"), std::string::npos) << "variant " << v << ": " << e;
    const char* want[] = {"",
                          "the residual input must have the output's shape [1,5,5,3], got [1,5,3,5]",
                          "the residual input must be uint8/int8",
                          "a residual sum takes 7 inputs after the bias, got 6",
                          "the residual scale must be a float scalar",
                          "the residual sum's zero points",
                          "a residual input needs an ungrouped conv"};
    EXPECT_NE(e.find(want[v]), std::string::npos) << "variant " << v << ": " << e;
  }
}

}  // namespace
}  // namespace strata
