// ONNX Runtime's QOperator contrib ops (com.microsoft QLinearAdd, QLinearMul,
// QLinearGlobalAveragePool, cpu/qlinear_contrib.cc) against the plain formula computed here:
// broadcasting shapes, both 8-bit types, zero points given and absent, saturation both ways;
// the pool in NCHW and channels-last order against an exact sum; bad inputs name the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/session.h"
#include "cpu/int8_gemm.h"
#include "int_conv_test_util.h"
#include "kernel_harness.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::Q8;
using testing::RunKernel;
using testing::ToDoubles;

// Element i of `t` broadcast from `shape` to the output `out` (numpy rules).
int64_t BroadcastIndex(const Shape& shape, const Shape& out, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coord = i % out[d];
    i /= out[d];
    const size_t k = d + shape.size() - out.size();
    if (d + shape.size() >= out.size()) {
      if (shape[k] != 1) idx += coord * stride;
      stride *= shape[k];
    }
  }
  return idx;
}

float Quantize(float v, float s, float z, DataType t) {
  float r = std::nearbyint(std::nearbyint(v / s) + z);
  if (std::isnan(r)) r = 0;
  return t == DataType::kUInt8 ? std::fmin(255.f, std::fmax(0.f, r)) : std::fmin(127.f, std::fmax(-128.f, r));
}

TEST(QLinearContrib, AddAndMulMatchTheFormulaWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}},
      {{2, 3, 4}, {3, 1}},
      {{1}, {2, 5}},
      {{4, 1, 3}, {1, 2, 1}},
      {{0, 3}, {3}},
      // Rows of 8+ values: QLinearAdd's AVX2 path where the CPU has it, its scalar tail after.
      {{3, 37}, {3, 37}},
      {{2, 45}, {45}},
      {{3, 37}, {3, 1}},
      {{1}, {70}}};
  uint64_t seed = 70;
  for (const char* op : {"QLinearAdd", "QLinearMul"})
    for (DataType t : {DataType::kUInt8, DataType::kInt8})
      for (bool with_zp : {true, false})
        for (double c_scale : {0.05, 1e-3}) {  // 1e-3 saturates both ways
          for (const auto& [sa_shape, sb_shape] : shapes) {
            const std::string what = std::string(op) + " " + DataTypeName(t) + (with_zp ? " zp" : " no zp") +
                                     " C_scale " + std::to_string(c_scale) + " " + ShapeToString(sa_shape) + " x " +
                                     ShapeToString(sb_shape);
            SCOPED_TRACE(what);
            const Tensor a = Q8(t, sa_shape, ++seed), b = Q8(t, sb_shape, ++seed);
            const double zv = t == DataType::kUInt8 ? 120 : -9;
            const Tensor za = MakeTensor(t, {}, {zv}), zb = MakeTensor(t, {}, {zv + 7}),
                         zc = MakeTensor(t, {}, {zv - 3});
            const Tensor sa = MakeTensor(DataType::kFloat, {}, {0.031}), sb = MakeTensor(DataType::kFloat, {}, {0.017});
            const Tensor sc = MakeTensor(DataType::kFloat, {}, {c_scale});
            auto got = RunKernel(
                OpSpec(op, 1, "com.microsoft"),
                {a, sa, with_zp ? za : Tensor(), b, sb, with_zp ? zb : Tensor(), sc, with_zp ? zc : Tensor()});
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            const Tensor& y = (*got)[0];
            ASSERT_EQ(y.dtype(), t);
            ASSERT_EQ(y.shape(), *BroadcastShapes(sa_shape, sb_shape, Node{}));
            const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b), yv = ToDoubles(y);
            const float fza = with_zp ? static_cast<float>(zv) : 0, fzb = with_zp ? static_cast<float>(zv + 7) : 0;
            const float fzc = with_zp ? static_cast<float>(zv - 3) : 0;
            // ONNX Runtime's arithmetic (MLAS): Mul scales the exact integer product by sa * sb / sc;
            // Add takes ratios ra = sa / sc, rb = sb / sc and a fixed part, with an input constant
            // along the last axis (A first) folded into it.
            const float sc_f = static_cast<float>(c_scale), ra = 0.031f / sc_f, rb = 0.017f / sc_f;
            const float fixed = fzc - std::fma(ra, fza, rb * fzb);
            const bool a_const = sa_shape.empty() || sa_shape.back() == 1;
            const bool b_const = !a_const && (sb_shape.empty() || sb_shape.back() == 1);
            for (int64_t i = 0; i < y.num_elements(); ++i) {
              const float qa = static_cast<float>(av[BroadcastIndex(sa_shape, y.shape(), i)]);
              const float qb = static_cast<float>(bv[BroadcastIndex(sb_shape, y.shape(), i)]);
              float v;
              if (std::string(op) == "QLinearMul") {
                v = (qa - fza) * (qb - fzb) * (0.031f * 0.017f / sc_f) + fzc;
              } else if (a_const) {
                v = std::fma(qb, rb, fixed + qa * ra);
              } else if (b_const) {
                v = std::fma(qa, ra, fixed + qb * rb);
              } else {
                v = std::fma(qa, ra, std::fma(qb, rb, fixed));
              }
              ASSERT_EQ(yv[i], Quantize(v, 1.0f, 0.0f, t)) << "at " << i;
              // ... which is the documented formula up to its float rounding: within one step.
              const float x1 = (qa - fza) * 0.031f, x2 = (qb - fzb) * 0.017f;
              const float doc = std::string(op) == "QLinearMul" ? x1 * x2 : x1 + x2;
              ASSERT_LE(std::fabs(yv[i] - Quantize(doc, sc_f, fzc, t)), 1.0) << "at " << i;
            }
          }
        }
}

TEST(QLinearContrib, GlobalAveragePoolMatchesTheExactMeanInBothLayouts) {
  uint64_t seed = 90;
  for (DataType t : {DataType::kUInt8, DataType::kInt8})
    for (int64_t channels_last : {0, 1})
      for (const Shape& spatial : {Shape{7, 5}, Shape{1, 1}, Shape{3}, Shape{2, 3, 2}}) {
        const int64_t N = 2, C = 5;
        Shape xs{N};
        if (!channels_last) xs.push_back(C);
        xs.insert(xs.end(), spatial.begin(), spatial.end());
        if (channels_last) xs.push_back(C);
        SCOPED_TRACE(std::string(DataTypeName(t)) + " channels_last " + std::to_string(channels_last) + " x " +
                     ShapeToString(xs));
        const Tensor x = Q8(t, xs, ++seed);
        const double zx = t == DataType::kUInt8 ? 100 : -4, zy = t == DataType::kUInt8 ? 130 : 6;
        OpSpec spec("QLinearGlobalAveragePool", 1, "com.microsoft");
        spec.Attr("channels_last", channels_last);
        auto got = RunKernel(spec, {x, MakeTensor(DataType::kFloat, {}, {0.02}), MakeTensor(t, {}, {zx}),
                                    MakeTensor(DataType::kFloat, {}, {0.013}), MakeTensor(t, {}, {zy})});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const Tensor& y = (*got)[0];
        Shape ys = xs;
        for (size_t d = 1; d < ys.size(); ++d)
          if (d != (channels_last ? ys.size() - 1 : 1)) ys[d] = 1;
        ASSERT_EQ(y.shape(), ys);
        const std::vector<double> xv = ToDoubles(x), yv = ToDoubles(y);
        int64_t count = 1;
        for (int64_t d : spatial) count *= d;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < C; ++c) {
            double sum = 0;
            for (int64_t p = 0; p < count; ++p)
              sum += xv[channels_last ? (n * count + p) * C + c : (n * C + c) * count + p] - zx;
            const double want = std::clamp(std::nearbyint(sum * 0.02 / 0.013 / static_cast<double>(count)) + zy,
                                           t == DataType::kUInt8 ? 0.0 : -128.0, t == DataType::kUInt8 ? 255.0 : 127.0);
            // The kernel's scale is (float) 0.02 / (float) 0.013 in double: within a step of it.
            EXPECT_LE(std::fabs(yv[n * C + c] - want), 1.0) << "n " << n << " c " << c;
          }
      }
}

TEST(QLinearContrib, BadInputsNameTheNode) {
  const Tensor u = MakeTensor(DataType::kUInt8, {2}, {1, 2});
  const Tensor i8 = MakeTensor(DataType::kInt8, {2}, {1, 2});
  const Tensor s = MakeTensor(DataType::kFloat, {}, {0.1});
  const Tensor s0 = MakeTensor(DataType::kFloat, {2}, {0.1, 0.2});
  const Tensor zu = MakeTensor(DataType::kUInt8, {}, {3});
  const Tensor zi = MakeTensor(DataType::kInt8, {}, {3});
  const auto add_error = [&](std::vector<Tensor> in) {
    auto r = RunKernel(OpSpec("QLinearAdd", 1, "com.microsoft"), in);
    return r.ok() ? std::string("ok") : r.status().ToString();
  };
  EXPECT_EQ(add_error({u, s, zu, u, s, zu, s, zu}), "ok");
  std::string e = add_error({u, s, zu, i8, s, zi, s, zu});
  EXPECT_NE(e.find("A and B must both be uint8 or both int8"), std::string::npos) << e;
  e = add_error({u, s0, zu, u, s, zu, s, zu});
  EXPECT_NE(e.find("A_scale must be a scalar"), std::string::npos) << e;
  e = add_error({u, s, zi, u, s, zu, s, zu});
  EXPECT_NE(e.find("A_zero_point dtype int8 differs from its input's uint8"), std::string::npos) << e;
  e = add_error({u, s, zu, u, s, zu, Tensor(), zu});
  EXPECT_NE(e.find("C_scale must be a scalar, got nothing"), std::string::npos) << e;
  e = add_error({u, s, zu, MakeTensor(DataType::kUInt8, {3}, {1, 2, 3}), s, zu, s, zu});
  EXPECT_NE(e.find("QLinearAdd"), std::string::npos) << e;  // shapes that do not broadcast
  const auto pool_error = [&](const Tensor& x, const Tensor& zx, int64_t channels_last) {
    OpSpec spec("QLinearGlobalAveragePool", 1, "com.microsoft");
    spec.Attr("channels_last", channels_last);
    auto r = RunKernel(spec, {x, s, zx, s, zx});
    return r.ok() ? std::string("ok") : r.status().ToString();
  };
  const Tensor x4 = MakeTensor(DataType::kUInt8, {1, 2, 1, 1}, {1, 2});
  EXPECT_EQ(pool_error(x4, zu, 0), "ok");
  e = pool_error(u, zu, 0);
  EXPECT_NE(e.find("X must be [N, C, spatial...]"), std::string::npos) << e;
  e = pool_error(x4, zu, 2);
  EXPECT_NE(e.find("channels_last must be 0 or 1"), std::string::npos) << e;
  e = pool_error(x4, zi, 0);
  EXPECT_NE(e.find("x_zero_point dtype int8 differs from its input's uint8"), std::string::npos) << e;
  e = pool_error(MakeTensor(DataType::kUInt8, {1, 2, 0}, {}), zu, 0);
  EXPECT_NE(e.find("no spatial positions"), std::string::npos) << e;
  for (const std::string& msg : {add_error({u, s, zu, i8, s, zi, s, zu}), pool_error(u, zu, 0)})
    EXPECT_NE(msg.find("com.microsoft"), std::string::npos) << msg;
}

// A QOperator-format block as ONNX Runtime's quantizer writes it: QLinearConv -> QLinearAdd
// (the residual) -> QLinearConv -> QLinearGlobalAveragePool. The optimized session (the convs
// on the NHWC VNNI kernel where the CPU has it, the contrib nodes between layout changes) gives
// the reference session's bytes, at 1 and 2 threads.
TEST(QLinearContrib, QOperatorBlockRunsOptimizedWithTheReferenceBytes) {
  using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddNode, AddRawInit, AddOutput
  onnx::ModelProto m = MakeModel(13);
  AddOpsetImport(&m, "com.microsoft", 1);
  auto* g = m.mutable_graph();
  const int64_t C = 16;
  AddInput(g, "x", {1, C, 12, 20});
  AddRawInit(g, "xs", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.02f});
  AddRawInit(g, "xz", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{128});
  std::vector<int8_t> w(static_cast<size_t>(C * C * 9));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 121) - 60);
  AddRawInit(g, "w", onnx::TensorProto::INT8, {C, C, 3, 3}, w);
  AddRawInit(g, "ws", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.003f});
  AddRawInit(g, "wz", onnx::TensorProto::INT8, {}, std::vector<int8_t>{0});
  for (const auto& [name, scale, zp] :
       std::vector<std::tuple<std::string, float, uint8_t>>{{"y", 0.05f, 120}, {"c", 0.06f, 110}, {"p", 0.01f, 100}}) {
    AddRawInit(g, name + "s", onnx::TensorProto::FLOAT, {}, std::vector<float>{scale});
    AddRawInit(g, name + "z", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{zp});
  }
  AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  SetInts(AddNode(g, "QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"yq"}), "pads", {1, 1, 1, 1});
  AddNode(g, "QLinearAdd", {"yq", "ys", "yz", "xq", "xs", "xz", "cs", "cz"}, {"sq"})->set_domain("com.microsoft");
  SetInts(AddNode(g, "QLinearConv", {"sq", "cs", "cz", "w", "ws", "wz", "ys", "yz"}, {"y2"}), "pads", {1, 1, 1, 1});
  AddNode(g, "QLinearGlobalAveragePool", {"y2", "ys", "yz", "ps", "pz"}, {"pq"})->set_domain("com.microsoft");
  AddNode(g, "DequantizeLinear", {"pq", "ps", "pz"}, {"out"});
  AddOutput(g, "out", {1, C, 1, 1});
  std::vector<float> x(static_cast<size_t>(C * 12 * 20));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  const std::vector<std::pair<std::string, Value>> feeds = {{"x", Value(Tensor::FromVector<float>(x, {1, C, 12, 20}))}};
  for (int threads : {1, 2}) {
    auto r = test::RunOptimizedAndReference(m, feeds, threads);
    ASSERT_EQ(r.opt.size(), 1u);
    ASSERT_EQ(r.ref.size(), 1u);
    EXPECT_EQ(r.ops["QLinearAdd"], 1);
    if (int8gemm::Available()) {
      EXPECT_EQ(r.ops["NhwcQLinearConv"], 2);
    }
    const std::vector<double> a = ToDoubles(r.opt[0].tensor()), b = ToDoubles(r.ref[0].tensor());
    EXPECT_EQ(a, b) << "threads " << threads;
    double spread = 0;
    for (double v : a) spread = std::max(spread, std::fabs(v - a[0]));
    EXPECT_GT(spread, 0.0);  // the channels differ: the check is not on a constant output
  }
}

}  // namespace
}  // namespace strata
