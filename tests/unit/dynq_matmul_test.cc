// ONNX Runtime's dynamic int8 MatMul pattern (DynamicQuantizeLinear -> MatMulInteger -> Cast ->
// Mul(., Mul(X_scale, W_scale)) [-> Add(bias)]) fused into strata.internal DynQuantMatMul
// (core/transformer_fusion.cc, cpu/dynq_matmul.cc): the optimized session must give the same
// bits as the unfused graph on the reference kernels, with the pattern fused where it is
// exactly that and left alone where it is not; bad inputs of the fused node give errors that
// name it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/session.h"
#include "cpu/int8_gemm.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddOutput, AddNode, Serialize
using Feeds = std::vector<std::pair<std::string, Value>>;

void AddBytesInit(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, bool is_signed,
                  uint32_t seed) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  size_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= static_cast<size_t>(d);
  }
  std::string raw(n, '\0');
  uint32_t s = seed * 2654435761u + 3;
  for (auto& c : raw) {
    s = s * 1664525u + 1013904223u;
    c = static_cast<char>(s >> 24);
  }
  t->set_raw_data(raw);
}

struct Pattern {
  int64_t k = 40, n = 37;
  bool w_signed = true;
  bool w_zp = true;
  bool per_column_scale = false;
  bool bias = true;
  bool swapped_muls = false;
  int consumers = 1;             // MatMulIntegers sharing the one DynamicQuantizeLinear
  bool extra_xq_reader = false;  // X_q also a graph output: the DynamicQuantizeLinear stays
  bool scale_rank2 = false;      // W_scale [1, 1]: broadcast rank differs, not fused
  bool dynamic_k = false;        // x declared [2, 5, n]: a run may feed any inner dimension
};

// x [2, 5, K] -> the pattern `consumers` times (outputs y0, y1, ...).
onnx::ModelProto Build(const Pattern& p) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 5, p.dynamic_k ? -1 : p.k});
  AddNode(g, "DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  for (int c = 0; c < p.consumers; ++c) {
    const std::string s = std::to_string(c);
    AddBytesInit(g, "w" + s, {p.k, p.n}, p.w_signed, 10 + c);
    if (p.w_zp) AddBytesInit(g, "wz" + s, {}, p.w_signed, 20 + c);
    const std::vector<int64_t> sdims = p.scale_rank2        ? std::vector<int64_t>{1, 1}
                                       : p.per_column_scale ? std::vector<int64_t>{p.n}
                                                            : std::vector<int64_t>{};
    AddFloatInit(g, "ws" + s, sdims, [&](size_t n) {
      std::vector<float> v = test::Pseudo(n, 30 + c, 0.01f);
      for (auto& x : v) x = std::fabs(x) + 0.001f;
      return v;
    });
    if (p.w_zp) {
      AddNode(g, "MatMulInteger", {"xq", "w" + s, "xz", "wz" + s}, {"acc" + s});
    } else {
      AddNode(g, "MatMulInteger", {"xq", "w" + s, "xz"}, {"acc" + s});
    }
    auto* cast = AddNode(g, "Cast", {"acc" + s}, {"accf" + s});
    SetInt(cast, "to", onnx::TensorProto::FLOAT);
    AddNode(g, "Mul", {p.swapped_muls ? "ws" + s : "xs", p.swapped_muls ? "xs" : "ws" + s}, {"sc" + s});
    const std::string mm = p.bias ? "mm" + s : "y" + s;
    AddNode(g, "Mul", {p.swapped_muls ? "sc" + s : "accf" + s, p.swapped_muls ? "accf" + s : "sc" + s}, {mm});
    if (p.bias) {
      test::AddInit(g, "b" + s, {p.n}, 40 + c);
      AddNode(g, "Add", {"b" + s, mm}, {"y" + s});
    }
    AddOutput(g, "y" + s, {2, 5, p.n});
  }
  if (p.extra_xq_reader) AddOutput(g, "xq", {2, 5, p.k}, onnx::TensorProto::UINT8);
  return m;
}

Feeds Inputs(const Pattern& p, uint32_t seed = 5) {
  return {
      {"x", Value(Tensor::FromVector<float>(test::Pseudo(static_cast<size_t>(10 * p.k), seed, 3.0f), {2, 5, p.k}))}};
}

void ExpectSameBits(const test::OptRefRuns& r) {
  ASSERT_EQ(r.opt.size(), r.ref.size());
  ASSERT_FALSE(r.ref.empty());
  for (size_t i = 0; i < r.opt.size(); ++i) {
    const Tensor& a = r.opt[i].tensor();
    const Tensor& b = r.ref[i].tensor();
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(a.dtype(), b.dtype());
    ASSERT_EQ(a.byte_size(), b.byte_size());
    EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size())) << "output " << i;
  }
}

TEST(DynQuantMatMul, FusedPatternGivesTheUnfusedBits) {
  const bool fuses = int8gemm::Available();
  for (bool w_signed : {true, false})
    for (bool w_zp : {true, false})
      for (bool per_col : {false, true})
        for (bool bias : {true, false})
          for (int threads : {1, 2}) {
            Pattern p;
            p.w_signed = w_signed;
            p.w_zp = w_zp;
            p.per_column_scale = per_col;
            p.bias = bias;
            p.swapped_muls = per_col;  // both operand orders
            auto r = test::RunOptimizedAndReference(Build(p), Inputs(p), threads);
            ExpectSameBits(r);
            const std::string what = "w_signed " + std::to_string(w_signed) + " zp " + std::to_string(w_zp) +
                                     " per_col " + std::to_string(per_col) + " bias " + std::to_string(bias);
            EXPECT_EQ(r.ops["DynQuantMatMul"], fuses ? 1 : 0) << what;
            EXPECT_EQ(r.ops["DynamicQuantizeLinear"], fuses ? 0 : 1) << what;
            EXPECT_EQ(r.ops["Cast"] + r.ops["Mul"] + r.ops["Add"], fuses ? 0 : 3 + bias) << what;
          }
}

TEST(DynQuantMatMul, SharedQuantizationAndOutputsThatMustStay) {
  const bool fuses = int8gemm::Available();
  Pattern shared;
  shared.consumers = 3;  // Q, K, V projections of one input
  auto r = test::RunOptimizedAndReference(Build(shared), Inputs(shared), 2);
  ExpectSameBits(r);
  EXPECT_EQ(r.ops["DynQuantMatMul"], fuses ? 3 : 0);
  EXPECT_EQ(r.ops["DynamicQuantizeLinear"], fuses ? 0 : 1);

  Pattern kept = shared;
  kept.extra_xq_reader = true;  // X_q is a graph output: fused, but the quantization stays
  r = test::RunOptimizedAndReference(Build(kept), Inputs(kept), 1);
  ExpectSameBits(r);
  EXPECT_EQ(r.ops["DynQuantMatMul"], fuses ? 3 : 0);
  EXPECT_EQ(r.ops["DynamicQuantizeLinear"], 1);

  Pattern rank2;
  rank2.scale_rank2 = true;  // not the pattern: left as written
  r = test::RunOptimizedAndReference(Build(rank2), Inputs(rank2), 1);
  ExpectSameBits(r);
  EXPECT_EQ(r.ops["DynQuantMatMul"], 0);
  EXPECT_EQ(r.ops["MatMulInteger"], 1);
}

// Edge sizes through the fused node: one row, K not a multiple of 4, N across a panel.
TEST(DynQuantMatMul, EdgeSizes) {
  for (int64_t k : {1, 3, 17, 64})
    for (int64_t n : {1, 16, 33}) {
      Pattern p;
      p.k = k;
      p.n = n;
      auto r = test::RunOptimizedAndReference(Build(p), Inputs(p, static_cast<uint32_t>(k * 100 + n)), 2);
      ExpectSameBits(r);
      if (HasFailure()) return;
    }
}

TEST(DynQuantMatMul, BadInputsNameTheNode) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the fused node exists only with AVX512-VNNI";
  Pattern p;
  p.dynamic_k = true;
  const std::string bytes = Serialize(Build(p));
  SessionOptions o;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // NaN in X: DynamicQuantizeLinear's error, from the fused node.
  std::vector<float> v = test::Pseudo(static_cast<size_t>(10 * p.k), 1, 1.0f);
  v[7] = std::nanf("");
  auto bad = (*s)->Run({{"x", Value(Tensor::FromVector<float>(v, {2, 5, p.k}))}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("contains NaN"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("DynQuantMatMul"), std::string::npos) << bad.status().ToString();
  // A wrong inner dimension reaches the kernel (the model declares it symbolic).
  auto wrong = (*s)->Run({{"x", Value(Tensor::FromVector<float>(std::vector<float>(2 * 5 * 7, 1.0f), {2, 5, 7}))}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("X must be float [..., 40], got float32 [2,5,7]"), std::string::npos)
      << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("DynQuantMatMul"), std::string::npos) << wrong.status().ToString();
}

// A DynQuantMatMul written into a model by hand (not by the fusion) with a run-time W, or a
// W_scale of the wrong length, is refused at session creation with the node named.
TEST(DynQuantMatMul, HandWrittenNodeWithBadWeightsIsRefused) {
  if (!int8gemm::Available()) GTEST_SKIP() << "the kernel exists only with AVX512-VNNI";
  for (int variant : {0, 1}) {
    onnx::ModelProto m = MakeModel(17);
    AddOpsetImport(&m, "strata.internal", 1);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {2, 4});
    if (variant == 0) {
      AddInput(g, "w", {4, 3}, onnx::TensorProto::INT8);
      AddFloatInit(g, "ws", {}, [](size_t n) { return std::vector<float>(n, 0.5f); });
    } else {
      AddBytesInit(g, "w", {4, 3}, true, 1);
      AddFloatInit(g, "ws", {5}, [](size_t n) { return std::vector<float>(n, 0.5f); });
    }
    auto* n = AddNode(g, "DynQuantMatMul", {"x", "w", "ws"}, {"y"});
    n->set_domain("strata.internal");
    n->set_name("fused");
    AddOutput(g, "y", {2, 3});
    const std::string bytes = Serialize(m);
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
    ASSERT_FALSE(s.ok()) << "variant " << variant;
    const std::string msg = s.status().message();
    EXPECT_NE(msg.find("node 'fused'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(variant == 0 ? "W must be a constant 2-D uint8/int8 tensor"
                                    : "W_scale must be a constant float scalar or [3]"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace strata
