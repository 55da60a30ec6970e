// Static int8 MatMuls in the QDQ format (core/qdq_fusion.cc's FuseQdqMatMul, the QdqMatMul
// kernel of cpu/dynq_matmul.cc): MatMul(DequantizeLinear(x_q), DequantizeLinear(W_q)) [+ bias]
// becomes one node where the VNNI GEMM runs it. Its output is float, so it matches the float
// graph to within float rounding (the fused node sums the integer products exactly and scales
// once). Groups that are not the pattern stay as written; bad inputs of a QdqMatMul name it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/session.h"
#include "cpu/int8_gemm.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddOutput, AddNode, Serialize

struct Mm {
  int64_t k = 40, n = 37;
  std::vector<int64_t> x_dims = {2, 5};  // leading dims of x (K appended)
  bool x_signed = false;
  bool w_signed = true;
  bool w_zp = true;        // a zero point (of the scale's shape)
  bool per_column = true;  // W scale [N] (axis 1), else a scalar
  int bias = 1;            // 0 none, 1 Add(y, b), 2 Add(b, y)
  // Not the pattern / partly the pattern:
  bool w_axis_0 = false;    // per-column scale declared on axis 0 (a [K] scale): stays float
  bool bias_rank2 = false;  // bias [1, N]: the Add stays, the MatMul fuses
  bool mm_output = false;   // the MatMul's output is also a graph output: the Add stays
  bool dynamic_k = false;   // x declared [2, 5, ?]
  // The quantized-output form: MatMul -> QuantizeLinear -> DequantizeLinear [-> Add(bias)].
  bool q_out = false, q_signed = false;
  bool show_q = false;  // the quantized bytes also a graph output: the pair stays as written
};

onnx::ModelProto Build(const Mm& p) {
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  const int64_t K = p.k, N = p.n;
  onnx::ValueInfoProto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : p.x_dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  if (p.dynamic_k)
    tt->mutable_shape()->add_dim()->set_dim_param("k");
  else
    tt->mutable_shape()->add_dim()->set_dim_value(K);
  const int xt = p.x_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddRawInit(g, "xs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.03f});
  if (p.x_signed)
    AddRawInit(g, "xz", xt, {}, std::vector<int8_t>{-5});
  else
    AddRawInit(g, "xz", xt, {}, std::vector<uint8_t>{121});
  AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  AddNode(g, "DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  // W_q [K, N] and its scale / zero point.
  const int wt = p.w_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  std::vector<float> wp = test::Pseudo(static_cast<size_t>(K * N), 11, 127.0f);
  if (p.w_signed) {
    std::vector<int8_t> w(wp.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(std::lrint(wp[i]));
    AddRawInit(g, "wq", wt, {K, N}, w);
  } else {
    std::vector<uint8_t> w(wp.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(std::lrint(wp[i]) + 128);
    AddRawInit(g, "wq", wt, {K, N}, w);
  }
  const int64_t scales = p.w_axis_0 ? K : p.per_column ? N : 1;
  std::vector<float> ws = test::Pseudo(static_cast<size_t>(scales), 12, 0.004f);
  for (auto& s : ws) s = std::fabs(s) + 0.001f;
  const std::vector<int64_t> sdims = scales == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{scales};
  AddRawInit(g, "ws", onnx::TensorProto::FLOAT, sdims, ws);
  std::vector<std::string> dq_w = {"wq", "ws"};
  if (p.w_zp) {
    const int64_t zn = scales;
    const std::vector<int64_t> zdims = sdims;
    std::vector<float> zv = test::Pseudo(static_cast<size_t>(zn), 13, 20.0f);
    if (p.w_signed) {
      std::vector<int8_t> z(zv.size());
      for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<int8_t>(std::lrint(zv[i]));
      AddRawInit(g, "wz", wt, zdims, z);
    } else {
      std::vector<uint8_t> z(zv.size());
      for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<uint8_t>(std::lrint(zv[i]) + 128);
      AddRawInit(g, "wz", wt, zdims, z);
    }
    dq_w.push_back("wz");
  }
  auto* dqw = g->add_node();
  dqw->set_op_type("DequantizeLinear");
  for (const auto& s : dq_w) dqw->add_input(s);
  dqw->add_output("wd");
  if (p.w_axis_0) SetInt(dqw, "axis", 0);
  const std::string mm_out = p.q_out ? "mf" : p.bias ? "mm" : "y";
  AddNode(g, "MatMul", {"xd", "wd"}, {mm_out}, "the_matmul");
  if (p.q_out) {  // mf -> Q -> DQ -> mm (or y)
    AddRawInit(g, "qs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.07f});
    if (p.q_signed)
      AddRawInit(g, "qz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{-9});
    else
      AddRawInit(g, "qz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{131});
    AddNode(g, "QuantizeLinear", {"mf", "qs", "qz"}, {"mq"});
    AddNode(g, "DequantizeLinear", {"mq", "qs", "qz"}, {p.bias ? "mm" : "y"});
  }
  std::vector<int64_t> y_dims = p.x_dims;
  y_dims.push_back(N);
  auto add_output = [&](const std::string& name) {
    onnx::ValueInfoProto* o = g->add_output();
    o->set_name(name);
    auto* ot = o->mutable_type()->mutable_tensor_type();
    ot->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : y_dims) ot->mutable_shape()->add_dim()->set_dim_value(d);
  };
  if (p.bias) {
    test::AddInit(g, "b", p.bias_rank2 ? std::vector<int64_t>{1, N} : std::vector<int64_t>{N}, 14);
    AddNode(g, "Add", {p.bias == 1 ? "mm" : "b", p.bias == 1 ? "b" : "mm"}, {"y"});
  }
  add_output("y");
  if (p.mm_output && p.bias) add_output("mm");
  if (p.show_q) {
    onnx::ValueInfoProto* o = g->add_output();
    o->set_name("mq");
    auto* ot = o->mutable_type()->mutable_tensor_type();
    ot->set_elem_type(p.q_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
    for (int64_t d : y_dims) ot->mutable_shape()->add_dim()->set_dim_value(d);
  }
  return m;
}

std::vector<std::pair<std::string, Value>> Inputs(const Mm& p, int64_t k, uint32_t seed = 3) {
  Shape s(p.x_dims.begin(), p.x_dims.end());
  s.push_back(k);
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  // +-4: past the uint8 / int8 ends at scale 0.03, so Q saturates some values.
  return {{"x", Value(Tensor::FromVector<float>(test::Pseudo(static_cast<size_t>(n), seed, 4.0f), s))}};
}

// Every output within 1e-4 of the output's largest magnitude of the reference's: far below what
// a wrong zero point, scale or bias gives (the quantized inputs are the same bytes).
void ExpectClose(const test::OptRefRuns& r, const std::string& what) {
  ASSERT_EQ(r.opt.size(), r.ref.size()) << what;
  ASSERT_FALSE(r.ref.empty()) << what;
  for (size_t i = 0; i < r.opt.size(); ++i) {
    const Tensor& a = r.opt[i].tensor();
    const Tensor& b = r.ref[i].tensor();
    ASSERT_EQ(a.shape(), b.shape()) << what;
    float mx = 0;
    for (int64_t j = 0; j < b.num_elements(); ++j) mx = std::max(mx, std::fabs(b.data<float>()[j]));
    for (int64_t j = 0; j < b.num_elements(); ++j)
      ASSERT_NEAR(a.data<float>()[j], b.data<float>()[j], 1e-4f * mx + 1e-6f) << what << " output " << i << " at " << j;
  }
}

std::string Describe(const Mm& p) {
  return "K " + std::to_string(p.k) + " N " + std::to_string(p.n) + " x_signed " + std::to_string(p.x_signed) +
         " w_signed " + std::to_string(p.w_signed) + " w_zp " + std::to_string(p.w_zp) + " per_column " +
         std::to_string(p.per_column) + " bias " + std::to_string(p.bias) + " x rank " +
         std::to_string(p.x_dims.size() + 1);
}

TEST(QdqMatMul, FusedMatMulMatchesTheFloatGraph) {
  const bool fuses = int8gemm::Available();
  for (bool x_signed : {false, true})
    for (bool w_signed : {true, false})
      for (bool w_zp : {false, true})
        for (bool per_column : {true, false})
          for (int bias : {0, 1, 2}) {
            Mm p;
            p.x_signed = x_signed;
            p.w_signed = w_signed;
            p.w_zp = w_zp;
            p.per_column = per_column;
            p.bias = bias;
            const int threads = 1 + (bias & 1);
            auto r = test::RunOptimizedAndReference(Build(p), Inputs(p, p.k), threads);
            ExpectClose(r, Describe(p));
            EXPECT_EQ(r.ops["QdqMatMul"], fuses ? 1 : 0) << Describe(p);
            EXPECT_EQ(r.ops["MatMul"] + r.ops["FusedMatMul"], fuses ? 0 : 1) << Describe(p);
            EXPECT_EQ(r.ops["Add"], 0) << Describe(p);  // fused into one node or the other
            if (HasFailure()) return;
          }
}

// One row (x of rank 1), K not a multiple of 4, N across panels, many rows at 2 threads.
TEST(QdqMatMul, EdgeSizes) {
  const bool fuses = int8gemm::Available();
  for (int64_t k : {1, 3, 17, 64})
    for (int64_t n : {1, 16, 33})
      for (const std::vector<int64_t>& lead :
           {std::vector<int64_t>{}, std::vector<int64_t>{3}, std::vector<int64_t>{7, 9}}) {
        Mm p;
        p.k = k;
        p.n = n;
        p.x_dims = lead;
        auto r = test::RunOptimizedAndReference(Build(p), Inputs(p, k, static_cast<uint32_t>(k * 100 + n)), 2);
        ExpectClose(r, Describe(p));
        EXPECT_EQ(r.ops["QdqMatMul"], fuses ? 1 : 0) << Describe(p);
        if (HasFailure()) return;
      }
}

// The quantized-output form: the QuantizeLinear -> DequantizeLinear pair and the bias after it
// run in the GEMM's store, with the bits of the nodes they replace (the same model with the
// quantized bytes also a graph output keeps them as nodes); within a quantization step of the
// float graph (the fused product is exact, the float one rounds).
TEST(QdqMatMul, QuantizedOutputInTheStoreGivesTheUnfusedBits) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the fused node exists only with AVX512-VNNI";
  for (bool x_signed : {false, true})
    for (bool q_signed : {false, true})
      for (int bias : {1, 0, 2})
        for (int threads : {1, 2}) {
          Mm p;
          p.q_out = true;
          p.x_signed = x_signed;
          p.w_signed = !x_signed;
          p.q_signed = q_signed;
          p.bias = bias;
          p.x_dims = {3, 30};  // 90 rows: several row tiles
          const std::string what =
              Describe(p) + " q_signed " + std::to_string(q_signed) + " threads " + std::to_string(threads);
          auto fused = test::RunOptimizedAndReference(Build(p), Inputs(p, p.k), threads);
          p.show_q = true;
          auto apart = test::RunOptimizedAndReference(Build(p), Inputs(p, p.k), threads);
          ASSERT_FALSE(fused.opt.empty()) << what;
          ASSERT_EQ(apart.opt.size(), 2u) << what;
          EXPECT_EQ(fused.ops["QdqMatMul"], 1) << what;
          EXPECT_EQ(fused.ops["QuantizeLinear"], 1) << what;  // x's only
          EXPECT_EQ(fused.ops["DequantizeLinear"] + fused.ops["Add"], 0) << what;
          EXPECT_EQ(apart.ops["QuantizeLinear"], 2) << what;
          const Tensor& a = fused.opt[0].tensor();
          const Tensor& b = apart.opt[0].tensor();
          ASSERT_EQ(a.shape(), b.shape()) << what;
          EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size())) << what;
          const Tensor& r = fused.ref[0].tensor();
          for (int64_t j = 0; j < r.num_elements(); ++j)
            ASSERT_NEAR(a.data<float>()[j], r.data<float>()[j], 0.0701f) << what << " at " << j;
          if (HasFailure()) return;
        }
}

TEST(QdqMatMul, GroupsThatAreNotThePatternStayAsWritten) {
  const bool fuses = int8gemm::Available();
  Mm axis0;
  axis0.w_axis_0 = true;  // a scale per row of W (K = N, so the lengths alone do not tell)
  axis0.k = axis0.n = 24;
  auto r = test::RunOptimizedAndReference(Build(axis0), Inputs(axis0, axis0.k), 1);
  ExpectClose(r, "axis 0");
  EXPECT_EQ(r.ops["QdqMatMul"], 0);

  Mm rank2;
  rank2.bias_rank2 = true;  // a [1, N] bias adds a dimension to a 1-D x's [N]: the Add stays
  rank2.x_dims = {};
  r = test::RunOptimizedAndReference(Build(rank2), Inputs(rank2, rank2.k), 1);
  ExpectClose(r, "bias [1, N]");
  EXPECT_EQ(r.ops["QdqMatMul"], fuses ? 1 : 0);
  EXPECT_EQ(r.ops["Add"], fuses ? 1 : 0);

  Mm shown;
  shown.mm_output = true;  // the product itself is a graph output: the Add reads it
  r = test::RunOptimizedAndReference(Build(shown), Inputs(shown, shown.k), 2);
  ExpectClose(r, "product also an output");
  EXPECT_EQ(r.ops["QdqMatMul"], fuses ? 1 : 0);
  EXPECT_EQ(r.ops["Add"], fuses ? 1 : 0);
}

TEST(QdqMatMul, WrongInnerDimensionNamesTheNode) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the fused node exists only with AVX512-VNNI";
  Mm p;
  p.dynamic_k = true;
  const std::string bytes = Serialize(Build(p));
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto ok = (*s)->Run(Inputs(p, p.k));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto wrong = (*s)->Run(Inputs(p, 7));
  ASSERT_FALSE(wrong.ok());
  const std::string msg = wrong.status().message();
  EXPECT_NE(msg.find("the_matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("X_q must be uint8/int8 [..., 40], got uint8 [2,5,7]"), std::string::npos) << msg;
}

// A QdqMatMul written by hand (the fusion never makes these): bad weights are refused at
// session creation, bad run-time X_q / X_scale / X_zero_point at the run, the node named.
TEST(QdqMatMul, HandWrittenNodeWithBadInputsIsRefused) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the kernel exists only with AVX512-VNNI";
  // variant 0: fine; 1: W a graph input; 2: W_scale [5] for N = 3; 3: bias [2].
  auto run = [](int variant, const Tensor& x, const Tensor& xs, const Tensor& xz) {
    onnx::ModelProto m = MakeModel(13);
    AddOpsetImport(&m, "strata.internal", 1);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {-1, -1},
             x.dtype() == DataType::kFloat  ? onnx::TensorProto::FLOAT
             : x.dtype() == DataType::kInt8 ? onnx::TensorProto::INT8
                                            : onnx::TensorProto::UINT8);
    AddInput(g, "xs", {-1}, onnx::TensorProto::FLOAT);
    AddInput(g, "xz", {-1}, xz.dtype() == DataType::kInt8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
    if (variant == 1)
      AddInput(g, "w", {4, 3}, onnx::TensorProto::INT8);
    else
      AddRawInit(g, "w", onnx::TensorProto::INT8, {4, 3},
                 std::vector<int8_t>{1, -2, 3, 4, 5, -6, 7, 8, 9, 10, -11, 12});
    AddRawInit(g, "ws", onnx::TensorProto::FLOAT, variant == 2 ? std::vector<int64_t>{5} : std::vector<int64_t>{},
               std::vector<float>(variant == 2 ? 5 : 1, 0.5f));
    AddRawInit(g, "b", onnx::TensorProto::FLOAT, {variant == 3 ? 2 : 3},
               std::vector<float>(variant == 3 ? 2 : 3, 1.0f));
    auto* n = AddNode(g, "QdqMatMul", {"x", "xs", "xz", "w", "ws", "", "b"}, {"y"}, "my_mm");
    n->set_domain("strata.internal");
    // 4-8: the requantized-output inputs after the bias: fine (scale 0.5, zero point 2, a post
    // bias of 0.25); only three of them; a uint8 scale; zero points of two types; a post bias of
    // 2 values.
    if (variant >= 4) {
      AddRawInit(g, "qs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.5f});
      AddRawInit(g, "qz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{2});
      AddRawInit(g, "qzi", onnx::TensorProto::INT8, {}, std::vector<int8_t>{2});
      AddRawInit(g, "pb", onnx::TensorProto::FLOAT, {variant == 8 ? 2 : 3},
                 std::vector<float>(variant == 8 ? 2 : 3, 0.25f));
      for (const char* i : {variant == 6 ? "qz" : "qs", "qz", "qs", variant == 7 ? "qzi" : "qz", "pb"}) n->add_input(i);
      if (variant == 5) n->mutable_input()->RemoveLast();
      if (variant == 5) n->mutable_input()->RemoveLast();
    }
    AddOutput(g, "y", {-1, 3});
    const std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    if (!s.ok()) return s.status().ToString();
    std::vector<std::pair<std::string, Value>> feeds = {{"x", Value(x)}, {"xs", Value(xs)}, {"xz", Value(xz)}};
    if (variant == 1) feeds.push_back({"w", Value(Tensor::FromVector<int8_t>(std::vector<int8_t>(12, 1), {4, 3}))});
    auto out = (*s)->Run(feeds);
    if (!out.ok()) return out.status().ToString();
    // y = (x - xz) . w * xs * 0.5 + 1 for the one row.
    const Tensor& y = (*out)[0].tensor();
    std::string v;
    for (int64_t j = 0; j < y.num_elements(); ++j) v += std::to_string(y.data<float>()[j]) + " ";
    return "ok " + v;
  };
  const Tensor x = Tensor::FromVector<uint8_t>({10, 11, 12, 13}, {1, 4});
  const Tensor xs = Tensor::FromVector<float>({0.25f}, {1});
  const Tensor xz = Tensor::FromVector<uint8_t>({10}, {1});
  // (0, 1, 2, 3) . w = (0 + 4 + 14 + 30, 0 + 5 + 16 - 33, 0 - 6 + 18 + 36) = (48, -12, 48), times
  // 0.25 * 0.5, plus 1.
  EXPECT_EQ(run(0, x, xs, xz), "ok 7.000000 -0.500000 7.000000 ");
  std::string e = run(1, x, xs, xz);
  EXPECT_NE(e.find("my_mm"), std::string::npos) << e;
  EXPECT_NE(e.find("W must be a constant 2-D uint8/int8 tensor"), std::string::npos) << e;
  e = run(2, x, xs, xz);
  EXPECT_NE(e.find("W_scale must be a constant float scalar or [3]"), std::string::npos) << e;
  e = run(3, x, xs, xz);
  EXPECT_NE(e.find("bias must be a constant float [3]"), std::string::npos) << e;
  e = run(0, Tensor::FromVector<float>({1, 2, 3, 4}, {1, 4}), xs, xz);
  EXPECT_NE(e.find("my_mm"), std::string::npos) << e;
  EXPECT_NE(e.find("X_q must be uint8/int8 [..., 4], got float32 [1,4]"), std::string::npos) << e;
  e = run(0, x, Tensor::FromVector<float>({0.25f, 0.5f}, {2}), xz);
  EXPECT_NE(e.find("X_scale must be a float scalar"), std::string::npos) << e;
  e = run(0, x, xs, Tensor::FromVector<int8_t>({10}, {1}));
  EXPECT_NE(e.find("my_mm"), std::string::npos) << e;
  EXPECT_NE(e.find("X_zero_point"), std::string::npos) << e;
  // Requantized: 7 / 0.5 = 14 + 2 = 16 -> (16 - 2) * 0.5 + 0.25 = 7.25; -0.5 / 0.5 = -1 + 2 = 1 ->
  // -0.5 + 0.25 = -0.25.
  EXPECT_EQ(run(4, x, xs, xz), "ok 7.250000 -0.250000 7.250000 ");
  const char* want[] = {"a requantized output takes 4 or 5 inputs after the bias, got 3",
                        "the output quantization scale must be a float scalar",
                        "the output's zero points must have one type",
                        "the bias after the requantization must be float [3]"};
  for (int v = 5; v <= 8; ++v) {
    e = run(v, x, xs, xz);
    EXPECT_NE(e.find("my_mm"), std::string::npos) << "variant " << v << ": " << e;
    EXPECT_NE(e.find(want[v - 5]), std::string::npos) << "variant " << v << ": " << e;
  }
}

}  // namespace
}  // namespace strata
