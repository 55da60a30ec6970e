// MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv (cpu/int_matmul.cc, cpu/int_conv.cc):
// against naive references, constant (packed at creation) against run-time weights, per-tensor
// and per-row/column/channel zero points, batches, 1 and 2 threads, empty tensors, a session
// (whose packed constants are released) and errors that name the node and the bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/session.h"
#include "kernel_harness.h"
#include "onnx_builder.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsEqual;
using testing::ToDoubles;

// Random 8-bit values over the type's whole range.
Tensor Q8(DataType dt, const Shape& shape, uint64_t seed) {
  return dt == DataType::kUInt8 ? RandomTensor(dt, shape, seed, 0, 255) : RandomTensor(dt, shape, seed, -128, 127);
}

// As the kernels and ONNX Runtime: round half to even, saturate to the output type.
int32_t Requant(int64_t acc, float mult, int32_t z, DataType dt) {
  float r = std::nearbyint(std::nearbyint(static_cast<float>(acc) * mult) + static_cast<float>(z));
  const float lo = dt == DataType::kUInt8 ? 0.f : -128.f, hi = dt == DataType::kUInt8 ? 255.f : 127.f;
  return static_cast<int32_t>(std::min(hi, std::max(lo, r)));
}

double At(const std::vector<double>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }

// Naive sums of A [batch, M, K] x B [1 or batch, K, N] with zero points per tensor or per row/column.
std::vector<int64_t> RefMatMulSums(const Tensor& a, const Tensor& b, const Tensor& azp, const Tensor& bzp, int64_t M,
                                   int64_t K, int64_t N) {
  const auto av = ToDoubles(a), bv = ToDoubles(b), za = ToDoubles(azp), zb = ToDoubles(bzp);
  const int64_t batch = a.num_elements() / (M * K), bbatch = b.num_elements() / (K * N);
  std::vector<int64_t> out;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<int64_t>(av[(t * M + i) * K + k] - At(za, i)) *
               static_cast<int64_t>(bv[((bbatch == 1 ? 0 : t) * K + k) * N + j] - At(zb, j));
        out.push_back(s);
      }
  return out;
}

Tensor Ints(const std::vector<int64_t>& v, const Shape& shape, DataType dt) {
  return MakeTensor(dt, shape, std::vector<double>(v.begin(), v.end()));
}

// Runs with the weight inputs `consts` constant (packed at creation) and run-time, at 1 and
// 2 threads; every run must give `want` exactly.
void ExpectAllWays(const OpSpec& spec, const std::vector<Tensor>& in, const std::vector<size_t>& consts,
                   const Tensor& want) {
  for (bool constant : {false, true})
    for (int threads : {1, 2}) {
      RunOptions o;
      o.threads = threads;
      if (constant) o.constant_inputs = consts;
      auto r = RunKernel(spec, in, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(TensorsEqual(want, (*r)[0])) << spec.op_type << " constant=" << constant << " threads=" << threads;
    }
}

TEST(IntMatMul, MatMulIntegerMatchesNaiveForEveryTypeAndZeroPointForm) {
  const int64_t M = 5, K = 37, N = 11;
  uint64_t seed = 1;
  for (DataType at : {DataType::kUInt8, DataType::kInt8})
    for (DataType bt : {DataType::kUInt8, DataType::kInt8})
      for (bool per_axis : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeName(at)) + " x " + DataTypeName(bt) + (per_axis ? " per axis" : ""));
        const Tensor a = Q8(at, {2, 3, M, K}, ++seed), b = Q8(bt, {K, N}, ++seed);
        const Tensor azp = per_axis ? Q8(at, {M}, ++seed) : Q8(at, {}, ++seed);
        const Tensor bzp = per_axis ? Q8(bt, {N}, ++seed) : Q8(bt, {}, ++seed);
        const Tensor want = Ints(RefMatMulSums(a, b, azp, bzp, M, K, N), {2, 3, M, N}, DataType::kInt32);
        ExpectAllWays(OpSpec("MatMulInteger", 10), {a, b, azp, bzp}, {1, 3}, want);
      }
}

TEST(IntMatMul, BatchedBAndMissingZeroPoints) {
  const int64_t M = 3, K = 9, N = 4;
  const Tensor a = Q8(DataType::kUInt8, {2, M, K}, 11), b = Q8(DataType::kInt8, {2, K, N}, 12);
  const Tensor want =
      Ints(RefMatMulSums(a, b, MakeTensor(DataType::kUInt8, {}, {0}), MakeTensor(DataType::kInt8, {}, {0}), M, K, N),
           {2, M, N}, DataType::kInt32);
  ExpectAllWays(OpSpec("MatMulInteger", 10), {a, b}, {1}, want);
  // 1-D A: [K] x [K, N] -> [N].
  const Tensor a1 = Q8(DataType::kInt8, {K}, 13), b2 = Q8(DataType::kInt8, {K, N}, 14);
  const Tensor zero = MakeTensor(DataType::kInt8, {}, {0});
  ExpectAllWays(OpSpec("MatMulInteger", 10), {a1, b2}, {1},
                Ints(RefMatMulSums(a1, b2, zero, zero, 1, K, N), {N}, DataType::kInt32));
}

TEST(IntMatMul, EmptyTensors) {
  // M = 0: an empty output; K = 0: sums of nothing are 0.
  ExpectAllWays(OpSpec("MatMulInteger", 10), {Q8(DataType::kUInt8, {0, 4}, 1), Q8(DataType::kUInt8, {4, 3}, 2)}, {1},
                MakeTensor(DataType::kInt32, {0, 3}, {}));
  ExpectAllWays(OpSpec("MatMulInteger", 10), {Q8(DataType::kUInt8, {2, 0}, 1), Q8(DataType::kUInt8, {0, 3}, 2)}, {1},
                MakeTensor(DataType::kInt32, {2, 3}, std::vector<double>(6, 0)));
}

// Shapes that fill the VNNI GEMM's 12-row tiles and 32-column panel pairs (where the CPU has it,
// a constant B runs there), with a batched A over one B and per-column zero points.
TEST(IntMatMul, LargerProductsMatchNaiveWithConstantAndRunTimeB) {
  const int64_t M = 30, K = 70, N = 40;
  uint64_t seed = 50;
  for (DataType at : {DataType::kUInt8, DataType::kInt8})
    for (DataType bt : {DataType::kUInt8, DataType::kInt8}) {
      const Tensor a = Q8(at, {2, M, K}, seed++), b = Q8(bt, {K, N}, seed++);
      const Tensor azp = Q8(at, {}, seed++), bzp = Q8(bt, {N}, seed++);
      std::vector<int64_t> sums;
      for (int64_t t = 0; t < 2; ++t) {
        const auto av = ToDoubles(a);
        const Tensor at_t =
            MakeTensor(at, {M, K}, std::vector<double>(av.begin() + t * M * K, av.begin() + (t + 1) * M * K));
        const auto part = RefMatMulSums(at_t, b, azp, bzp, M, K, N);
        sums.insert(sums.end(), part.begin(), part.end());
      }
      ExpectAllWays(OpSpec("MatMulInteger", 10), {a, b, azp, bzp}, {1, 3}, Ints(sums, {2, M, N}, DataType::kInt32));
    }
}

// DynamicQuantizeLinear against its formula (scale over [min(0, x), max(0, x)], zero point and
// values rounded half to even and saturated), at lengths around the 16-float vector.
TEST(DynamicQuantize, MatchesTheFormulaAtEveryLength) {
  uint64_t seed = 900;
  for (int64_t n : {1, 7, 15, 16, 17, 33, 1000, 70001}) {  // 70001: split over 2 threads below
    for (int range : {0, 1, 2, 3}) {                       // mixed signs, positive only, negative only, all zero
      const double lo = range == 1 ? 0.5 : range == 3 ? 0.0 : -3.0, hi = range == 2 ? -0.25 : range == 3 ? 0.0 : 5.0;
      const Tensor x = RandomTensor(DataType::kFloat, {n}, seed++, lo, hi);
      const auto xv = ToDoubles(x);
      float mn = 0, mx = 0;
      for (double v : xv) {
        mn = std::min(mn, static_cast<float>(v));
        mx = std::max(mx, static_cast<float>(v));
      }
      const float scale = (mx - mn) / 255.0f;
      const float zpf = scale == 0 ? 0.0f : std::min(255.0f, std::max(0.0f, std::nearbyint(0.0f - mn / scale)));
      std::vector<double> want;
      for (double v : xv) {
        const float q = scale == 0 ? zpf : std::nearbyint(static_cast<float>(v) / scale) + zpf;
        want.push_back(std::min(255.0f, std::max(0.0f, q)));
      }
      OpSpec spec("DynamicQuantizeLinear", 11);
      spec.num_outputs = 3;
      for (int threads : {1, 2}) {
        RunOptions o;
        o.threads = threads;
        auto r = RunKernel(spec, {x}, o);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        const std::string what =
            "n=" + std::to_string(n) + " range=" + std::to_string(range) + " threads=" + std::to_string(threads);
        EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kUInt8, {n}, want), (*r)[0])) << what;
        EXPECT_EQ(ToDoubles((*r)[1])[0], static_cast<double>(scale)) << what;
        EXPECT_EQ(ToDoubles((*r)[2])[0], static_cast<double>(zpf)) << what;
      }
    }
  }
  // Values on exact half steps round to even: x = k * 0.5 * scale.
  std::vector<double> halves;
  for (int k = -20; k <= 20; ++k) halves.push_back(k * 0.5);
  OpSpec spec("DynamicQuantizeLinear", 11);
  spec.num_outputs = 3;
  auto r = RunKernel(spec, {MakeTensor(DataType::kFloat, {41}, halves)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const float scale = 20.0f / 255.0f;
  const float zpf = std::nearbyint(0.0f - (-10.0f) / scale);
  const auto q = ToDoubles((*r)[0]);
  for (size_t i = 0; i < halves.size(); ++i)
    EXPECT_EQ(q[i], std::min(255.0f, std::max(0.0f, std::nearbyint(static_cast<float>(halves[i]) / scale) + zpf)))
        << "x=" << halves[i];
}

TEST(DynamicQuantize, NaNIsAnErrorNamingTheNode) {
  for (int64_t at : {0, 5, 16, 20, 69999}) {  // the last in the second thread's part
    const int64_t n = at < 21 ? 21 : 70000;
    std::vector<double> v(static_cast<size_t>(n), 1.0);
    v[static_cast<size_t>(at)] = std::nan("");
    OpSpec spec("DynamicQuantizeLinear", 11);
    spec.num_outputs = 3;
    RunOptions o;
    o.threads = 2;
    auto r = RunKernel(spec, {MakeTensor(DataType::kFloat, {n}, v)}, o);
    ASSERT_FALSE(r.ok()) << "NaN at " << at;
    EXPECT_NE(r.status().message().find("contains NaN"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("DynamicQuantizeLinear"), std::string::npos) << r.status().ToString();
  }
}

TEST(IntMatMul, QLinearMatMulMatchesNaive) {
  const int64_t M = 4, K = 29, N = 7;
  uint64_t seed = 100;
  for (DataType at : {DataType::kUInt8, DataType::kInt8})
    for (DataType yt : {DataType::kUInt8, DataType::kInt8})
      // Forms: 0 per tensor; 1 per axis (a_scale [M]: an int32 pass); 2 per tensor with B [3, K, N];
      // 3 b_scale and b_zero_point per column only (requantized in the GEMM's store).
      for (int form : {0, 1, 2, 3}) {
        const bool per_axis = form == 1, per_col = form == 1 || form == 3;
        SCOPED_TRACE(std::string(DataTypeName(at)) + " -> " + DataTypeName(yt) + " form " + std::to_string(form));
        const DataType bt = at == DataType::kUInt8 ? DataType::kInt8 : DataType::kUInt8;
        const Tensor a = Q8(at, {3, M, K}, ++seed);
        const Tensor b = form == 2 ? Q8(bt, {3, K, N}, ++seed) : Q8(bt, {K, N}, ++seed);
        const Tensor azp = per_axis ? Q8(at, {M}, ++seed) : Q8(at, {}, ++seed);
        const Tensor bzp = per_col ? Q8(bt, {N}, ++seed) : Q8(bt, {}, ++seed);
        const Tensor as = per_axis ? RandomTensor(DataType::kFloat, {M}, ++seed, 0.01, 0.02)
                                   : MakeTensor(DataType::kFloat, {}, {0.015});
        const Tensor bs = per_col ? RandomTensor(DataType::kFloat, {N}, ++seed, 0.01, 0.03)
                                  : MakeTensor(DataType::kFloat, {}, {0.02});
        const Tensor ys = MakeTensor(DataType::kFloat, {}, {per_axis ? 1.5 : 2.0});
        const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -3.0});
        const auto sums = RefMatMulSums(a, b, azp, bzp, M, K, N);
        const auto asv = ToDoubles(as), bsv = ToDoubles(bs);
        std::vector<int64_t> q;
        for (size_t o = 0; o < sums.size(); ++o) {
          const int64_t i = static_cast<int64_t>(o) / N % M, j = static_cast<int64_t>(o) % N;
          const float mult = static_cast<float>(At(asv, i)) * static_cast<float>(At(bsv, j)) / (per_axis ? 1.5f : 2.0f);
          q.push_back(Requant(sums[o], mult, yt == DataType::kUInt8 ? 120 : -3, yt));
        }
        ExpectAllWays(OpSpec("QLinearMatMul", 10), {a, as, azp, b, bs, bzp, ys, yzp}, {3, 4, 5},
                      Ints(q, {3, M, N}, yt));
      }
}

// Naive 2-D grouped convolution sums: x [N, C, H, W], w [M, C/group, KH, KW].
std::vector<int64_t> RefConvSums(const Tensor& x, const Tensor& w, int32_t xz, const Tensor& wzp, int64_t group,
                                 int64_t stride, int64_t dil, int64_t pad, Shape* out_shape) {
  const auto xv = ToDoubles(x), wv = ToDoubles(w), zw = ToDoubles(wzp);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0), KH = w.dim(2), KW = w.dim(3);
  const int64_t cg = C / group, mg = M / group;
  const int64_t OH = (H + 2 * pad - (KH - 1) * dil - 1) / stride + 1,
                OW = (W + 2 * pad - (KW - 1) * dil - 1) / stride + 1;
  *out_shape = {N, M, OH, OW};
  std::vector<int64_t> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          int64_t s = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                const int64_t xi = ((n * C + m / mg * cg + c) * H + iy) * W + ix;
                s += static_cast<int64_t>(xv[xi] - xz) *
                     static_cast<int64_t>(wv[((m * cg + c) * KH + ky) * KW + kx] - At(zw, m));
              }
          out.push_back(s);
        }
  return out;
}

OpSpec ConvSpec(const char* op, int64_t group, int64_t stride, int64_t dil, int64_t pad, size_t sp = 2) {
  OpSpec spec(op, 10);
  spec.Attr("group", group);
  spec.Attr("strides", std::vector<int64_t>(sp, stride));
  spec.Attr("dilations", std::vector<int64_t>(sp, dil));
  spec.Attr("pads", std::vector<int64_t>(2 * sp, pad));
  return spec;
}

TEST(IntConv, ConvIntegerMatchesNaive) {
  uint64_t seed = 200;
  struct Geo {
    int64_t group, stride, dil, pad, k;
  };
  for (const Geo& geo : {Geo{1, 1, 1, 1, 3}, Geo{2, 2, 1, 0, 3}, Geo{2, 1, 2, 2, 3}, Geo{1, 1, 1, 0, 1}})
    for (DataType xt : {DataType::kUInt8, DataType::kInt8})
      for (bool per_channel : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeName(xt)) + " group " + std::to_string(geo.group) + " stride " +
                     std::to_string(geo.stride) + (per_channel ? " per channel" : ""));
        const DataType wt = DataType::kInt8;
        const int64_t C = 4, M = 6;
        const Tensor x = Q8(xt, {3, C, 7, 6}, ++seed), w = Q8(wt, {M, C / geo.group, geo.k, geo.k}, ++seed);
        const Tensor xzp = Q8(xt, {}, ++seed);
        const Tensor wzp = per_channel ? Q8(wt, {M}, ++seed) : Q8(wt, {}, ++seed);
        Shape os;
        const auto sums = RefConvSums(x, w, static_cast<int32_t>(ToDoubles(xzp)[0]), wzp, geo.group, geo.stride,
                                      geo.dil, geo.pad, &os);
        ExpectAllWays(ConvSpec("ConvInteger", geo.group, geo.stride, geo.dil, geo.pad), {x, w, xzp, wzp}, {1, 3},
                      Ints(sums, os, DataType::kInt32));
      }
}

TEST(IntConv, QLinearConvMatchesNaive) {
  uint64_t seed = 300;
  for (DataType yt : {DataType::kUInt8, DataType::kInt8})
    for (bool per_channel : {false, true}) {
      SCOPED_TRACE(std::string(DataTypeName(yt)) + (per_channel ? " per channel" : ""));
      const int64_t C = 6, M = 4, group = 2;
      const Tensor x = Q8(DataType::kUInt8, {2, C, 9, 8}, ++seed),
                   w = Q8(DataType::kInt8, {M, C / group, 3, 3}, ++seed);
      const Tensor xzp = MakeTensor(DataType::kUInt8, {}, {131});
      const Tensor wzp = per_channel ? Q8(DataType::kInt8, {M}, ++seed) : MakeTensor(DataType::kInt8, {}, {0});
      const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02});
      const Tensor ws = per_channel ? RandomTensor(DataType::kFloat, {M}, ++seed, 0.002, 0.004)
                                    : MakeTensor(DataType::kFloat, {}, {0.003});
      const Tensor ys = MakeTensor(DataType::kFloat, {}, {0.5});
      const int32_t z = yt == DataType::kUInt8 ? 128 : 5;
      const Tensor yzp = MakeTensor(yt, {}, {static_cast<double>(z)});
      const Tensor bias = RandomTensor(DataType::kInt32, {M}, ++seed, -5000, 5000);
      Shape os;
      const auto sums = RefConvSums(x, w, 131, wzp, group, 2, 1, 1, &os);
      const auto wsv = ToDoubles(ws), bv = ToDoubles(bias);
      std::vector<int64_t> q;
      const int64_t per_m = os[2] * os[3];
      for (size_t o = 0; o < sums.size(); ++o) {
        const int64_t m = static_cast<int64_t>(o) / per_m % M;
        const float mult = 0.02f * static_cast<float>(At(wsv, m)) / 0.5f;
        q.push_back(Requant(sums[o] + static_cast<int64_t>(bv[m]), mult, z, yt));
      }
      ExpectAllWays(ConvSpec("QLinearConv", group, 2, 1, 1), {x, xs, xzp, w, ws, wzp, ys, yzp, bias}, {3, 4, 5, 8},
                    Ints(q, os, yt));
    }
}

TEST(IntConv, OneAndThreeDimensionalAgreeWithTwoDimensional) {
  // A 1-D conv over [N, C, W] is the 2-D conv over [N, C, 1, W] with a 1-row kernel and no
  // vertical padding; a 3-D conv over [N, C, 1, H, W] likewise.
  const Tensor x = Q8(DataType::kUInt8, {2, 3, 1, 10}, 7), w = Q8(DataType::kInt8, {5, 3, 1, 3}, 8);
  const Tensor xzp = MakeTensor(DataType::kUInt8, {}, {17}), wzp = Q8(DataType::kInt8, {5}, 9);
  OpSpec spec2("ConvInteger", 10);
  spec2.Attr("pads", std::vector<int64_t>{0, 2, 0, 1}).Attr("strides", std::vector<int64_t>{1, 2});
  auto want = RunKernel(spec2, {x, w, xzp, wzp});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const Tensor& y2 = (*want)[0];

  OpSpec spec1("ConvInteger", 10);
  spec1.Attr("pads", std::vector<int64_t>{2, 1}).Attr("strides", std::vector<int64_t>{2});
  const Tensor y1 = y2.Reshaped({2, 5, y2.dim(3)});
  ExpectAllWays(spec1, {x.Reshaped({2, 3, 10}), w.Reshaped({5, 3, 3}), xzp, wzp}, {1, 3}, y1);

  OpSpec spec3("ConvInteger", 10);
  spec3.Attr("pads", std::vector<int64_t>{0, 0, 2, 0, 0, 1}).Attr("strides", std::vector<int64_t>{1, 1, 2});
  const Tensor y3 = y2.Reshaped({2, 5, 1, 1, y2.dim(3)});
  ExpectAllWays(spec3, {x.Reshaped({2, 3, 1, 1, 10}), w.Reshaped({5, 3, 1, 1, 3}), xzp, wzp}, {1, 3}, y3);
}

TEST(IntConv, EmptyBatch) {
  ExpectAllWays(ConvSpec("ConvInteger", 1, 1, 1, 1),
                {Q8(DataType::kUInt8, {0, 2, 4, 4}, 1), Q8(DataType::kUInt8, {3, 2, 3, 3}, 2)}, {1},
                MakeTensor(DataType::kInt32, {0, 3, 4, 4}, {}));
}

// The error must come back (not a crash), name the node and contain `what`, whether the
// weights are constant or not.
void ExpectError(const OpSpec& spec, const std::vector<Tensor>& in, const std::vector<size_t>& consts,
                 const std::string& what) {
  for (bool constant : {false, true}) {
    RunOptions o;
    if (constant) o.constant_inputs = consts;
    auto r = RunKernel(spec, in, o);
    ASSERT_FALSE(r.ok()) << spec.op_type << " accepted bad input (" << what << ")";
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find(spec.op_type + " node 'test_" + spec.op_type + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(IntQuantErrors, BadZeroPointsDtypesAndScalesNameTheNode) {
  const Tensor a = Q8(DataType::kUInt8, {2, 4}, 1), b = Q8(DataType::kUInt8, {4, 3}, 2);
  const Tensor u0 = MakeTensor(DataType::kUInt8, {}, {0});
  const OpSpec mmi("MatMulInteger", 10);
  ExpectError(mmi, {a, b, u0, Q8(DataType::kUInt8, {2}, 3)}, {1, 3}, "b_zero_point must be a scalar or have 3 values");
  ExpectError(mmi, {a, b, Q8(DataType::kUInt8, {3}, 3), u0}, {1, 3}, "a_zero_point must be a scalar or have 2 values");
  ExpectError(mmi, {a, b, u0, MakeTensor(DataType::kInt8, {}, {0})}, {1, 3}, "b_zero_point dtype int8");
  ExpectError(mmi, {MakeTensor(DataType::kFloat, {2, 4}, std::vector<double>(8, 1)), b}, {1}, "uint8 or int8");
  ExpectError(mmi, {a, Q8(DataType::kUInt8, {5, 3}, 4)}, {1}, "inner dimensions differ");

  const OpSpec qmm("QLinearMatMul", 10);
  const Tensor f1 = MakeTensor(DataType::kFloat, {}, {0.1});
  ExpectError(qmm, {a, f1, u0, b, MakeTensor(DataType::kFloat, {2}, {1, 1}), u0, f1, u0}, {3, 4, 5}, "b_scale");
  ExpectError(qmm, {a, f1, u0, b, f1, u0, f1, MakeTensor(DataType::kInt32, {}, {0})}, {3, 4, 5}, "y_zero_point");
  ExpectError(qmm, {a, MakeTensor(DataType::kInt32, {}, {1}), u0, b, f1, u0, f1, u0}, {3, 4, 5},
              "'a_scale' must be float");

  const Tensor x = Q8(DataType::kUInt8, {1, 2, 5, 5}, 5), w = Q8(DataType::kInt8, {3, 2, 3, 3}, 6);
  const Tensor s0 = MakeTensor(DataType::kInt8, {}, {0});
  const OpSpec ci("ConvInteger", 10);
  ExpectError(ci, {x, w, MakeTensor(DataType::kUInt8, {2}, {1, 2}), s0}, {1, 3}, "x_zero_point must be a scalar");
  ExpectError(ci, {x, w, u0, Q8(DataType::kInt8, {2}, 7)}, {1, 3}, "w_zero_point must be a scalar or have 3 values");
  ExpectError(ci, {x, w, u0, u0}, {1, 3}, "w_zero_point dtype uint8");
  ExpectError(ci, {x, Q8(DataType::kInt8, {3, 1, 3, 3}, 8)}, {1}, "channels do not match");
  ExpectError(ci, {x, Q8(DataType::kInt8, {3, 2, 7, 7}, 8)}, {1}, "exceeds the padded input");

  const OpSpec qc("QLinearConv", 10);
  ExpectError(qc, {x, f1, u0, w, f1, s0, f1, u0, MakeTensor(DataType::kInt8, {3}, {1, 2, 3})}, {3, 4, 5, 8},
              "B must be int32 with 3 values");
  ExpectError(qc, {x, f1, u0, w, MakeTensor(DataType::kFloat, {2}, {1, 1}), s0, f1, u0}, {3, 4, 5},
              "w_scale must be a scalar or have 3 values");
  ExpectError(qc, {x, MakeTensor(DataType::kFloat, {2}, {1, 1}), u0, w, f1, s0, f1, u0}, {3, 4, 5},
              "x_scale and y_scale must be scalars");
}

// Through a session: constant B / W are packed at creation and their initializers released
// (the kernels list them in PackedConstantInputs); results equal the harness's run-time path.
TEST(IntQuantSession, PackedConstantsMatchRunTimeWeights) {
  namespace ob = onnx_builder;
  const Tensor b = Q8(DataType::kInt8, {16, 6}, 41), bzp = Q8(DataType::kInt8, {6}, 42);
  const Tensor w = Q8(DataType::kInt8, {4, 3, 3, 3}, 43), wzp = Q8(DataType::kInt8, {4}, 44);
  auto add_init = [](onnx::GraphProto* g, const std::string& name, const Tensor& t) {
    auto* p = g->add_initializer();
    p->set_name(name);
    p->set_data_type(onnx::TensorProto::INT8);
    for (int64_t d : t.shape()) p->add_dims(d);
    p->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.num_elements())));
  };
  onnx::ModelProto m = ob::MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "a", {3, 16}, onnx::TensorProto::INT8);
  ob::AddInput(g, "x", {2, 3, 6, 6}, onnx::TensorProto::UINT8);
  ob::AddOutput(g, "y", {3, 6}, onnx::TensorProto::INT32);
  ob::AddOutput(g, "c", {2, 4, 6, 6}, onnx::TensorProto::INT32);
  add_init(g, "b", b);
  add_init(g, "bzp", bzp);
  add_init(g, "w", w);
  add_init(g, "wzp", wzp);
  ob::AddNode(g, "MatMulInteger", {"a", "b", "", "bzp"}, {"y"}, "mm");
  ob::SetInts(ob::AddNode(g, "ConvInteger", {"x", "w", "", "wzp"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  const std::string bytes = ob::Serialize(m);
  const Tensor a = Q8(DataType::kInt8, {3, 16}, 45), x = Q8(DataType::kUInt8, {2, 3, 6, 6}, 46);
  for (int threads : {1, 2}) {
    SessionOptions o;
    o.threads = threads;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (int run = 0; run < 2; ++run) {
      auto r = (*s)->Run({{"a", Value(a)}, {"x", Value(x)}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      auto want_y = RunKernel(OpSpec("MatMulInteger", 10), {a, b, Tensor(), bzp});
      OpSpec conv("ConvInteger", 10);
      conv.Attr("pads", std::vector<int64_t>{1, 1, 1, 1});
      auto want_c = RunKernel(conv, {x, w, Tensor(), wzp});
      ASSERT_TRUE(want_y.ok() && want_c.ok());
      EXPECT_TRUE(TensorsEqual((*want_y)[0], (*r)[0].tensor())) << "threads " << threads;
      EXPECT_TRUE(TensorsEqual((*want_c)[0], (*r)[1].tensor())) << "threads " << threads;
    }
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// QuantizeLinear / DequantizeLinear per tensor (the AVX-512 path where the CPU has it, split
// over the pool from 64K values) against the formula: q = saturate(round_half_even(x / s) + z),
// NaN -> 0; x = (q - z) * s. Ties, NaN, infinities, huge values, both 8-bit types, lengths
// around the vector width and the 64-value block, and past the split, 1 and 2 threads.
TEST(QuantizeLinearOps, PerTensorMatchesTheFormulaAtEveryLength) {
  const float s = 0.25f;
  for (DataType qt : {DataType::kUInt8, DataType::kInt8})
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{63}, int64_t{64}, int64_t{65},
                      int64_t{100}, int64_t{129}, int64_t{70001}})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(DataTypeName(qt)) + " n " + std::to_string(n) + " threads " + std::to_string(threads));
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t k = i % 97;
          x[static_cast<size_t>(i)] = k == 0   ? std::numeric_limits<float>::quiet_NaN()
                                      : k == 1 ? std::numeric_limits<float>::infinity()
                                      : k == 2 ? -std::numeric_limits<float>::infinity()
                                      : k == 3 ? 3e38f
                                      : k < 40 ? (static_cast<float>(k) - 20.5f) * s  // exact half steps
                                               : (static_cast<float>(i % 1013) - 506.0f) * 0.0137f;
        }
        const int32_t z = qt == DataType::kUInt8 ? 131 : -7;
        const Tensor xt = Tensor::FromVector<float>(x, {n});
        const Tensor st = MakeTensor(DataType::kFloat, {}, {s});
        const Tensor zt = MakeTensor(qt, {}, {static_cast<double>(z)});
        RunOptions o;
        o.threads = threads;
        auto q = RunKernel(OpSpec("QuantizeLinear", 13), {xt, st, zt}, o);
        ASSERT_TRUE(q.ok()) << q.status().ToString();
        const std::vector<double> got = ToDoubles((*q)[0]);
        for (int64_t i = 0; i < n; ++i) {
          float r = std::nearbyint(std::nearbyint(x[static_cast<size_t>(i)] / s) + static_cast<float>(z));
          if (std::isnan(r)) r = 0;
          const float lo = qt == DataType::kUInt8 ? 0.f : -128.f, hi = qt == DataType::kUInt8 ? 255.f : 127.f;
          ASSERT_EQ(got[static_cast<size_t>(i)], std::min(hi, std::max(lo, r))) << "at " << i << " x " << x[i];
        }
        auto d = RunKernel(OpSpec("DequantizeLinear", 13), {(*q)[0], st, zt}, o);
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[0].data<float>()[i],
                    static_cast<float>(static_cast<int32_t>(got[static_cast<size_t>(i)]) - z) * s)
              << "at " << i;
      }
}

}  // namespace
}  // namespace strata
