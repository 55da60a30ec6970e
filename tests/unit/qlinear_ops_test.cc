// The QOperator-format contrib ops beyond Add/Mul/GlobalAveragePool (cpu/qlinear_lookup.cc,
// cpu/qlinear_contrib.cc's QLinearAveragePool, cpu/qgemm.cc) against their formulas computed
// here element by element: QLinearSigmoid, QLinearLeakyRelu, QLinearConcat (copied and
// requantized inputs), QLinearWhere (broadcasting), QLinearAveragePool (pads, strides,
// count_include_pad, ceil_mode, both layouts, the whole-image case) and QGemm (transposes,
// per-column B, every C shape, quantized and float outputs); bad inputs name the node and the
// problem. (bench/compare-ort/qoperator_parity.py checks the same ops against ONNX Runtime's
// bytes.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "int_conv_test_util.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::Q8;
using testing::RunKernel;
using testing::ToDoubles;

constexpr const char* kMs = "com.microsoft";

Tensor F(double v) { return MakeTensor(DataType::kFloat, {}, {v}); }
Tensor Z(DataType t, double v) { return MakeTensor(t, {}, {v}); }
double Lo(DataType t) { return t == DataType::kUInt8 ? 0 : -128; }
double Hi(DataType t) { return t == DataType::kUInt8 ? 255 : 127; }
// QuantizeLinear of v: round half to even of v / s, plus z, saturated.
double Q(float v, float s, float z, DataType t) {
  return std::clamp(static_cast<double>(std::nearbyint(v / s) + z), Lo(t), Hi(t));
}
std::string Error(const Result<std::vector<Tensor>>& r) { return r.ok() ? "ok" : r.status().ToString(); }

TEST(QLinearOps, SigmoidAndLeakyReluMatchTheirFormulas) {
  uint64_t seed = 300;
  for (DataType t : {DataType::kUInt8, DataType::kInt8})
    for (bool leaky : {false, true})
      for (bool with_zp : {true, false}) {
        SCOPED_TRACE(std::string(DataTypeName(t)) + (leaky ? " leaky" : " sigmoid") + (with_zp ? " zp" : " no zp"));
        const Tensor x = Q8(t, {3, 41}, ++seed);
        const float xs = 0.06f, ys = leaky ? 0.05f : 1.0f / 256;
        const float xz = with_zp ? (t == DataType::kUInt8 ? 120 : -3) : 0;
        const float yz = with_zp ? (t == DataType::kUInt8 ? (leaky ? 40 : 0) : (leaky ? -50 : -128)) : 0;
        OpSpec spec(leaky ? "QLinearLeakyRelu" : "QLinearSigmoid", 1, kMs);
        if (leaky) spec.Attr("alpha", 0.1f);
        auto got = RunKernel(spec, {x, F(xs), with_zp ? Z(t, xz) : Tensor(), F(ys), with_zp ? Z(t, yz) : Tensor()});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ((*got)[0].shape(), x.shape());
        const std::vector<double> xv = ToDoubles(x), yv = ToDoubles((*got)[0]);
        for (size_t i = 0; i < xv.size(); ++i) {
          const float v = xs * (static_cast<float>(xv[i]) - xz);
          const float f = leaky ? (v >= 0 ? v : 0.1f * v) : 1.0f / (1.0f + std::exp(-v));
          ASSERT_EQ(yv[i], Q(f, ys, yz, t)) << "at " << i;
        }
      }
}

TEST(QLinearOps, ConcatCopiesOrRequantizesEachInput) {
  for (DataType t : {DataType::kUInt8, DataType::kInt8})
    for (int64_t axis : {1, -1, 0}) {
      SCOPED_TRACE(std::string(DataTypeName(t)) + " axis " + std::to_string(axis));
      const size_t ax = static_cast<size_t>(axis < 0 ? 2 : axis);
      Shape s1{2, 3, 4}, s2{2, 3, 4}, s3{2, 3, 4};
      s2[ax] = 5;
      s3[ax] = 1;
      const Tensor x1 = Q8(t, s1, 11), x2 = Q8(t, s2, 12), x3 = Q8(t, s3, 13);
      const float ys = 0.05f, yz = t == DataType::kUInt8 ? 128 : 2;
      const float sc[3] = {0.05f, 0.031f, 0.2f}, zp[3] = {yz, t == DataType::kUInt8 ? 100.f : -20.f, 7};
      OpSpec spec("QLinearConcat", 1, kMs);
      spec.Attr("axis", axis);
      auto got = RunKernel(
          spec, {F(ys), Z(t, yz), x1, F(sc[0]), Z(t, zp[0]), x2, F(sc[1]), Z(t, zp[1]), x3, F(sc[2]), Z(t, zp[2])});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const Tensor& y = (*got)[0];
      Shape want = s1;
      const int64_t total = s1[ax] + s2[ax] + s3[ax];
      want[ax] = total;
      ASSERT_EQ(y.shape(), want);
      const std::vector<double> yv = ToDoubles(y);
      const std::vector<double> xv[3] = {ToDoubles(x1), ToDoubles(x2), ToDoubles(x3)};
      const int64_t widths[3] = {s1[ax], s2[ax], s3[ax]};
      int64_t outer = 1, inner = 1;
      for (size_t d = 0; d < ax; ++d) outer *= s1[d];
      for (size_t d = ax + 1; d < 3; ++d) inner *= s1[d];
      for (int64_t o = 0; o < outer; ++o) {
        int64_t at = o * total * inner;
        for (int k = 0; k < 3; ++k)
          for (int64_t i = 0; i < widths[k] * inner; ++i, ++at) {
            const double x = xv[k][static_cast<size_t>(o * widths[k] * inner + i)];
            // Input 1 has Y's scale and zero point: its bytes are copied.
            const double expect = k == 0 ? x : Q(sc[k] * (static_cast<float>(x) - zp[k]), ys, yz, t);
            ASSERT_EQ(yv[static_cast<size_t>(at)], expect) << "input " << k << " o " << o << " i " << i;
          }
      }
    }
}

TEST(QLinearOps, WhereRequantizesTheChosenInput) {
  const DataType t = DataType::kUInt8;
  const Tensor c = testing::RandomTensor(DataType::kBool, {4, 1, 6}, 21);
  const Tensor x = Q8(t, {3, 6}, 22), yv = Q8(t, {4, 3, 1}, 23);
  auto got =
      RunKernel(OpSpec("QLinearWhere", 1, kMs), {c, x, F(0.04), Z(t, 100), yv, F(0.07), Z(t, 90), F(0.05), Z(t, 128)});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Tensor& z = (*got)[0];
  ASSERT_EQ(z.shape(), (Shape{4, 3, 6}));
  const std::vector<double> cv = ToDoubles(c), xd = ToDoubles(x), yd = ToDoubles(yv), zv = ToDoubles(z);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 6; ++k) {
        const float xq = static_cast<float>(xd[static_cast<size_t>(j * 6 + k)]);
        const float yq = static_cast<float>(yd[static_cast<size_t>(i * 3 + j)]);
        const double want = cv[static_cast<size_t>(i * 6 + k)] != 0 ? Q(0.04f * (xq - 100), 0.05f, 128, t)
                                                                    : Q(0.07f * (yq - 90), 0.05f, 128, t);
        ASSERT_EQ(zv[static_cast<size_t>((i * 3 + j) * 6 + k)], want) << i << " " << j << " " << k;
      }
}

// QLinearAveragePool of NCHW x [1, C, H, W] by the definition: the float mean of the window's
// dequantized values (rows, then columns), the zero point added before rounding.
std::vector<double> AvgPoolRef(const Tensor& x, int64_t k, int64_t s, int64_t pad, bool include_pad, int64_t OH,
                               int64_t OW, float xs, float xz, float ys, float yz) {
  const Shape& sh = x.shape();
  const int64_t C = sh[1], H = sh[2], W = sh[3];
  const std::vector<double> xv = ToDoubles(x);
  std::vector<double> out;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = oh * s - pad, w0 = ow * s - pad, h1 = std::min(h0 + k, H), w1 = std::min(w0 + k, W);
        float sum = 0;
        int64_t n = 0;
        for (int64_t h = std::max<int64_t>(h0, 0); h < h1; ++h)
          for (int64_t w = std::max<int64_t>(w0, 0); w < w1; ++w, ++n)
            sum += xs * (static_cast<float>(xv[static_cast<size_t>((c * H + h) * W + w)]) - xz);
        const float mean = sum / static_cast<float>(include_pad ? k * k : n);
        out.push_back(std::clamp(static_cast<double>(std::nearbyint(mean / ys + yz)), Lo(x.dtype()), Hi(x.dtype())));
      }
  return out;
}

TEST(QLinearOps, AveragePoolMatchesTheWindowMeans) {
  struct Case {
    int64_t H, W, k, s, pad;
    bool include_pad, ceil;
    int64_t OH, OW;
  };
  const Case cases[] = {{9, 9, 3, 2, 1, false, false, 5, 5},
                        {8, 6, 3, 1, 1, true, false, 8, 6},
                        {7, 7, 2, 2, 0, false, true, 4, 4},
                        {5, 11, 4, 1, 0, false, false, 2, 8},
                        // Kernels far larger than the image (pads just under them): most taps
                        // of most windows lie outside it.
                        {5, 5, 41, 3, 40, false, false, 15, 15},
                        {5, 5, 41, 3, 40, true, false, 15, 15},
                        {5, 7, 41, 1, 38, false, false, 41, 43}};
  uint64_t seed = 400;
  for (DataType t : {DataType::kUInt8, DataType::kInt8})
    for (const Case& cs : cases)
      for (int64_t channels_last : {0, 1}) {
        SCOPED_TRACE(std::string(DataTypeName(t)) + " " + std::to_string(cs.H) + "x" + std::to_string(cs.W) + " k" +
                     std::to_string(cs.k) + " s" + std::to_string(cs.s) + " pad " + std::to_string(cs.pad) +
                     " channels_last " + std::to_string(channels_last));
        const Tensor x = Q8(t, {1, 3, cs.H, cs.W}, ++seed);
        const float xz = t == DataType::kUInt8 ? 77 : -7, yz = t == DataType::kUInt8 ? 61 : 5;
        OpSpec spec("QLinearAveragePool", 1, kMs);
        spec.Attr("kernel_shape", std::vector<int64_t>{cs.k, cs.k})
            .Attr("strides", std::vector<int64_t>{cs.s, cs.s})
            .Attr("pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad})
            .Attr("count_include_pad", static_cast<int64_t>(cs.include_pad))
            .Attr("ceil_mode", static_cast<int64_t>(cs.ceil))
            .Attr("channels_last", channels_last);
        auto got =
            RunKernel(spec, {channels_last ? testing::Permute(x, true) : x, F(0.04), Z(t, xz), F(0.03), Z(t, yz)});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        Tensor y = (*got)[0];
        if (channels_last) {
          ASSERT_EQ(y.shape(), (Shape{1, cs.OH, cs.OW, 3}));
          y = testing::Permute(y, false);
        }
        ASSERT_EQ(y.shape(), (Shape{1, 3, cs.OH, cs.OW}));
        EXPECT_EQ(ToDoubles(y), AvgPoolRef(x, cs.k, cs.s, cs.pad, cs.include_pad, cs.OH, cs.OW, 0.04f, xz, 0.03f, yz));
      }
  // Large enough to split over the pool: the same bytes at 2 threads, in both layouts.
  for (int64_t channels_last : {0, 1}) {
    const Tensor big = Q8(DataType::kUInt8, {1, 64, 56, 56}, 8);
    OpSpec spec("QLinearAveragePool", 1, kMs);
    spec.Attr("kernel_shape", std::vector<int64_t>{3, 3})
        .Attr("strides", std::vector<int64_t>{2, 2})
        .Attr("pads", std::vector<int64_t>{1, 1, 1, 1})
        .Attr("channels_last", channels_last);
    const std::vector<Tensor> in = {channels_last ? testing::Permute(big, true) : big, F(0.04), Z(DataType::kUInt8, 77),
                                    F(0.03), Z(DataType::kUInt8, 61)};
    testing::RunOptions two;
    two.threads = 2;
    auto one = RunKernel(spec, in), par = RunKernel(spec, in, two);
    ASSERT_TRUE(one.ok() && par.ok());
    Tensor y = (*one)[0];
    if (channels_last) y = testing::Permute(y, false);
    EXPECT_EQ(ToDoubles(y), AvgPoolRef(big, 3, 2, 1, false, 28, 28, 0.04f, 77, 0.03f, 61));
    EXPECT_TRUE(testing::TensorsEqual((*one)[0], (*par)[0]));
  }
  // A window over the whole image without padding: the global mean's integer path.
  const Tensor x = Q8(DataType::kUInt8, {2, 5, 7, 7}, 9);
  OpSpec spec("QLinearAveragePool", 1, kMs);
  spec.Attr("kernel_shape", std::vector<int64_t>{7, 7});
  auto pooled = RunKernel(spec, {x, F(0.02), Z(DataType::kUInt8, 120), F(0.011), Z(DataType::kUInt8, 127)});
  auto global = RunKernel(OpSpec("QLinearGlobalAveragePool", 1, kMs),
                          {x, F(0.02), Z(DataType::kUInt8, 120), F(0.011), Z(DataType::kUInt8, 127)});
  ASSERT_TRUE(pooled.ok() && global.ok());
  EXPECT_TRUE(testing::TensorsEqual((*global)[0], (*pooled)[0]));
}

TEST(QLinearOps, QGemmMatchesTheIntegerProduct) {
  struct Case {
    DataType ta, tb;
    int64_t M, K, N;
    bool trans_a, trans_b, per_column, quantized, y_scale_only;
    Shape c;  // empty: no C; {0}: C absent
    float alpha;
  };
  const Case cases[] = {{DataType::kUInt8, DataType::kInt8, 5, 67, 7, false, true, false, true, false, {7}, 1.0f},
                        {DataType::kUInt8, DataType::kUInt8, 4, 33, 9, false, false, true, true, false, {4, 1}, 1.0f},
                        {DataType::kInt8, DataType::kInt8, 6, 40, 5, true, false, false, false, false, {6, 5}, 0.5f},
                        {DataType::kInt8, DataType::kInt8, 3, 8, 4, true, true, true, true, false, {}, 2.0f},
                        {DataType::kUInt8, DataType::kInt8, 2, 16, 3, false, false, false, false, true, {1, 3}, 1.0f},
                        {DataType::kUInt8, DataType::kInt8, 1, 5, 1, false, false, false, true, false, {1}, 1.0f},
                        // Several row tiles and column panels of the VNNI GEMM: its requantizing
                        // store with C as a bias, its float store, and int32 sums with an [M, N] C.
                        {DataType::kUInt8, DataType::kInt8, 37, 300, 70, false, true, true, true, false, {70}, 1.0f},
                        {DataType::kInt8, DataType::kUInt8, 29, 130, 33, false, false, false, false, false, {}, 1.0f},
                        {DataType::kUInt8, DataType::kUInt8, 40, 64, 48, true, false, true, false, false, {40, 48}, 1.5f}};
  uint64_t seed = 500;
  // A constant B (with its scale and zero point, and the other scales and C) takes the VNNI
  // GEMM where the CPU has it; a run-time B the int16 kernel. Both must give these exact
  // values, at 1 and 2 threads.
  for (const bool constant_b : {false, true})
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::to_string(cs.M) + "x" + std::to_string(cs.K) + "x" + std::to_string(cs.N) + " C " +
                 ShapeToString(cs.c) + (constant_b ? " constant B" : ""));
    const Tensor a = Q8(cs.ta, cs.trans_a ? Shape{cs.K, cs.M} : Shape{cs.M, cs.K}, ++seed);
    const Tensor b = Q8(cs.tb, cs.trans_b ? Shape{cs.N, cs.K} : Shape{cs.K, cs.N}, ++seed);
    const float as = 0.03f, az = cs.ta == DataType::kUInt8 ? 110 : -5;
    std::vector<double> bs(static_cast<size_t>(cs.per_column ? cs.N : 1)), bz(bs.size());
    for (size_t j = 0; j < bs.size(); ++j) {
      bs[j] = 0.005 + 0.003 * static_cast<double>(j);
      bz[j] = (cs.tb == DataType::kUInt8 ? 120 : -4) + static_cast<double>(j);
    }
    const Shape ps = cs.per_column ? Shape{cs.N} : Shape{};
    Tensor c;
    std::vector<double> cv;
    if (!cs.c.empty()) {
      c = testing::RandomTensor(DataType::kInt32, cs.c, ++seed, -3000, 3000);
      cv = ToDoubles(c);
    }
    const DataType yt = cs.ta;  // the CPU forms: u8 A -> u8 Y, s8 A -> s8 Y
    const float ys = 0.05f, yz = yt == DataType::kUInt8 ? 128 : 0;
    OpSpec spec("QGemm", 1, kMs);
    spec.Attr("transA", static_cast<int64_t>(cs.trans_a))
        .Attr("transB", static_cast<int64_t>(cs.trans_b))
        .Attr("alpha", cs.alpha);
    std::vector<Tensor> in = {
        a, F(as), Z(cs.ta, az), b, MakeTensor(DataType::kFloat, ps, bs), MakeTensor(cs.tb, ps, bz), c};
    if (cs.quantized || cs.y_scale_only) in.push_back(F(ys));
    if (cs.quantized) in.push_back(Z(yt, yz));
    testing::RunOptions opts;
    if (constant_b) {  // with the scales and C constant too: the store's scales and bias are made once
      opts.constant_inputs = {1, 3, 4, 5};
      if (!cs.c.empty()) opts.constant_inputs.push_back(6);
      if (cs.quantized || cs.y_scale_only) opts.constant_inputs.push_back(7);
      opts.threads = cs.M > 8 ? 2 : 1;
    }
    auto got = RunKernel(spec, in, opts);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Tensor& y = (*got)[0];
    ASSERT_EQ(y.shape(), (Shape{cs.M, cs.N}));
    ASSERT_EQ(y.dtype(), cs.quantized ? yt : DataType::kFloat);
    const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b), yv = ToDoubles(y);
    for (int64_t m = 0; m < cs.M; ++m)
      for (int64_t n = 0; n < cs.N; ++n) {
        const size_t j = cs.per_column ? static_cast<size_t>(n) : 0;
        int64_t acc = 0;
        for (int64_t k = 0; k < cs.K; ++k) {
          const double ae = av[static_cast<size_t>(cs.trans_a ? k * cs.M + m : m * cs.K + k)];
          const double be = bv[static_cast<size_t>(cs.trans_b ? n * cs.K + k : k * cs.N + n)];
          acc += static_cast<int64_t>(ae - az) * static_cast<int64_t>(be - bz[j]);
        }
        if (!cv.empty()) {
          const Shape& s = cs.c;
          const int64_t ci = c.num_elements() == 1 ? 0 : s.size() == 1 || s[0] == 1 ? n : s[1] == 1 ? m : m * cs.N + n;
          acc += static_cast<int64_t>(cv[static_cast<size_t>(ci)]);
        }
        float scale = cs.alpha * as * static_cast<float>(bs[j]);
        if (cs.quantized || cs.y_scale_only) scale /= ys;
        const float v = static_cast<float>(acc) * scale;
        const double want = cs.quantized ? std::clamp(static_cast<double>(std::nearbyint(v) + yz), Lo(yt), Hi(yt)) : v;
        ASSERT_EQ(yv[static_cast<size_t>(m * cs.N + n)], want) << "m " << m << " n " << n;
      }
  }
}

TEST(QLinearOps, BadInputsNameTheProblem) {
  const DataType u = DataType::kUInt8;
  const Tensor x = Q8(u, {2, 3}, 1);
  // Concat: triples, matching shapes and types, an axis.
  OpSpec concat("QLinearConcat", 1, kMs);
  concat.Attr("axis", int64_t{1});
  std::string e = Error(RunKernel(concat, {F(0.1), Z(u, 1), x, F(0.1)}));
  EXPECT_NE(e.find("(X, X_scale, X_zero_point) triples, got 4 inputs"), std::string::npos) << e;
  e = Error(RunKernel(concat, {F(0.1), Z(u, 1), x, F(0.1), Z(u, 1), Q8(u, {3, 3}, 2), F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("input 2 has shape [3,3], which does not match input 1's [2,3] off axis 1"), std::string::npos) << e;
  e = Error(RunKernel(
      concat, {F(0.1), Z(u, 1), x, F(0.1), Z(u, 1), Q8(DataType::kInt8, {2, 3}, 2), F(0.1), Z(DataType::kInt8, 1)}));
  EXPECT_NE(e.find("input 2 is int8, Y_zero_point's type is uint8"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QLinearConcat", 1, kMs), {F(0.1), Z(u, 1), x, F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("attribute axis is required"), std::string::npos) << e;
  concat.Attr("axis", int64_t{2});
  e = Error(RunKernel(concat, {F(0.1), Z(u, 1), x, F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  // Lookup ops: 8-bit X, scalar parameters.
  e = Error(RunKernel(OpSpec("QLinearSigmoid", 1, kMs),
                      {MakeTensor(DataType::kFloat, {2}, {1, 2}), F(0.1), Tensor(), F(0.1), Tensor()}));
  EXPECT_NE(e.find("X must be uint8 or int8, got float32"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QLinearLeakyRelu", 1, kMs),
                      {x, MakeTensor(DataType::kFloat, {2}, {0.1, 0.2}), Tensor(), F(0.1), Tensor()}));
  EXPECT_NE(e.find("X_scale must be a scalar"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QLinearWhere", 1, kMs), {x, x, F(0.1), Z(u, 1), x, F(0.1), Z(u, 1), F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("condition must be a bool tensor"), std::string::npos) << e;
  // AveragePool: kernel_shape, pads below the kernel, 1-3 spatial dims.
  const Tensor x4 = Q8(u, {1, 2, 5, 5}, 3);
  e = Error(RunKernel(OpSpec("QLinearAveragePool", 1, kMs), {x4, F(0.1), Z(u, 1), F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("attribute kernel_shape is required"), std::string::npos) << e;
  OpSpec pool("QLinearAveragePool", 1, kMs);
  pool.Attr("kernel_shape", std::vector<int64_t>{2, 2}).Attr("pads", std::vector<int64_t>{2, 0, 0, 0});
  e = Error(RunKernel(pool, {x4, F(0.1), Z(u, 1), F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("pads must be smaller than the kernel"), std::string::npos) << e;
  e = Error(RunKernel(pool, {x, F(0.1), Z(u, 1), F(0.1), Z(u, 1)}));
  EXPECT_NE(e.find("with 1 to 3 spatial dims"), std::string::npos) << e;
  // QGemm: inner dimensions, C's shape, y_zero_point without y_scale.
  const Tensor w = Q8(DataType::kInt8, {3, 4}, 4);
  const Tensor wz = Z(DataType::kInt8, 0);
  e = Error(RunKernel(OpSpec("QGemm", 1, kMs), {x, F(0.1), Z(u, 1), Q8(DataType::kInt8, {5, 4}, 5), F(0.1), wz}));
  EXPECT_NE(e.find("do not share an inner dimension"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QGemm", 1, kMs),
                      {x, F(0.1), Z(u, 1), w, F(0.1), wz, MakeTensor(DataType::kInt32, {3}, {1, 2, 3})}));
  EXPECT_NE(e.find("C of shape [3] does not broadcast to [2, 4]"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QGemm", 1, kMs), {x, F(0.1), Z(u, 1), w, F(0.1), wz, Tensor(), Tensor(), Z(u, 1)}));
  EXPECT_NE(e.find("y_zero_point needs y_scale"), std::string::npos) << e;
  e = Error(RunKernel(OpSpec("QGemm", 1, kMs), {x, F(0.1), Z(u, 1), w, MakeTensor(DataType::kFloat, {2}, {1, 1}), wz}));
  EXPECT_NE(e.find("b_scale must be a scalar or have 4 values"), std::string::npos) << e;
}

}  // namespace
}  // namespace strata
