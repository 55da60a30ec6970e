// Elementwise kernels: optimized vs reference on many shapes, plus hand-checked values
// for tricky semantics and a few ONNX conformance cases (values copied from the
// node tests' numpy generators, computed by hand here: no importer involved).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/kernel.h"
#include "cpu/broadcast.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::OptimizedMatchesReference;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsEqual;
using testing::TensorsNear;
using testing::ToDoubles;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Runs a single-output op and returns the output (fails the test on error).
Tensor Run1(const OpSpec& spec, const std::vector<Tensor>& inputs, bool reference = false) {
  RunOptions o;
  o.want_reference = reference;
  auto r = RunKernel(spec, inputs, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || r->empty()) return Tensor();
  return (*r)[0];
}

Status RunStatus(const OpSpec& spec, const std::vector<Tensor>& inputs, bool reference = false) {
  RunOptions o;
  o.want_reference = reference;
  auto r = RunKernel(spec, inputs, o);
  return r.ok() ? Status::Ok() : r.status();
}

Tensor F32(const Shape& s, const std::vector<double>& v) { return MakeTensor(DataType::kFloat, s, v); }

// ---------------------------------------------------------------- optimized vs reference

struct ShapePair {
  Shape a, b;
};

const std::vector<ShapePair>& BinaryShapes() {
  static const std::vector<ShapePair> v = {
      {{1}, {1}},
      {{7}, {7}},
      {{17}, {17}},
      {{16 + 1, 3}, {17, 3}},
      {{0}, {0}},
      {{0, 3}, {3}},
      {{}, {}},
      {{}, {33}},
      {{33}, {}},
      {{4, 17}, {17}},
      {{4, 17}, {4, 1}},
      {{4, 1}, {1, 5}},
      {{2, 3, 4}, {3, 1}},
      {{2, 1, 4}, {1, 3, 1}},
      {{1, 1, 65}, {65}},
      {{5, 1, 1, 3}, {2, 1, 3}},
      {{300, 257}, {257}},
      {{257, 300}, {257, 1}},
      {{70001}, {70001}},
      {{3, 40000}, {1}},
  };
  return v;
}

TEST(ElementwiseOptimized, BinaryArithmeticMatchesReference) {
  uint64_t seed = 1;
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (int threads : {1, 2}) {
      for (const ShapePair& sp : BinaryShapes()) {
        Tensor a = RandomTensor(DataType::kFloat, sp.a, seed++, -3, 3);
        // Keep divisors away from 0 so the comparison is meaningful.
        Tensor b = RandomTensor(DataType::kFloat, sp.b, seed++, 0.5, 2);
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {a, b}, 1e-6, 0, threads))
            << op << " " << ShapeToString(sp.a) << " x " << ShapeToString(sp.b) << " threads=" << threads;
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {b, a}, 1e-6, 0, threads))
            << op << " " << ShapeToString(sp.b) << " x " << ShapeToString(sp.a) << " threads=" << threads;
      }
    }
  }
}

TEST(ElementwiseOptimized, BinaryLegacyBroadcastMatchesReference) {
  Tensor a = RandomTensor(DataType::kFloat, {2, 3, 4, 5}, 7);
  Tensor b = RandomTensor(DataType::kFloat, {3, 4}, 8);
  OpSpec spec("Mul", 6);
  spec.Attr("broadcast", 1).Attr("axis", 1);
  EXPECT_TRUE(OptimizedMatchesReference(spec, {a, b}));
}

struct UnaryCase {
  OpSpec spec;
  double lo, hi, rtol, atol;
};

TEST(ElementwiseOptimized, UnaryMatchesReference) {
  std::vector<UnaryCase> cases = {
      {OpSpec("Relu", 14), -5, 5, 0, 0},
      {OpSpec("LeakyRelu", 16).Attr("alpha", 0.2f), -5, 5, 0, 0},
      {OpSpec("Sigmoid", 13), -30, 30, 2e-6, 1e-7},
      {OpSpec("Tanh", 13), -10, 10, 2e-6, 2e-7},
      {OpSpec("Tanh", 13), -0.01, 0.01, 2e-6, 1e-9},
      // Subnormal results (x < -87.3) lose relative precision in either implementation.
      {OpSpec("Exp", 13), -100, 89, 2e-6, 1e-37},
      {OpSpec("Exp", 13), -1, 1, 2e-7, 0},
      {OpSpec("Erf", 13), -5, 5, 2e-6, 2e-7},
      {OpSpec("Clip", 13), -5, 5, 0, 0},
      {OpSpec("Clip", 6).Attr("min", -1.0f).Attr("max", 2.0f), -5, 5, 0, 0},
      // 0.5*x*(1+erf) cancels for negative x: in fp32 the absolute error is ~|x|*1e-7
      // in the reference too, so compare with an absolute tolerance.
      {OpSpec("Gelu", 1, "com.microsoft"), -8, 8, 2e-6, 1.5e-6},
      {OpSpec("FastGelu", 1, "com.microsoft"), -8, 8, 2e-6, 1.5e-6},
      {OpSpec("HardSwish", 14), -8, 8, 0, 0},
      {OpSpec("HardSigmoid", 6), -8, 8, 1e-6, 1e-7},
      {OpSpec("HardSigmoid", 6).Attr("alpha", 0.5f).Attr("beta", 0.25f), -8, 8, 1e-6, 1e-7},
      {OpSpec("QuickGelu", 1, "com.microsoft"), -30, 30, 2e-6, 1e-7},
      {OpSpec("QuickGelu", 1, "com.microsoft").Attr("alpha", 1.0f), -30, 30, 2e-6, 1e-7},
  };
  uint64_t seed = 100;
  for (const UnaryCase& c : cases) {
    for (const Shape& s : std::vector<Shape>{{}, {0}, {1}, {7}, {16 + 1}, {3, 0, 2}, {2, 5, 33}, {70003}}) {
      for (int threads : {1, 2}) {
        Tensor x = RandomTensor(DataType::kFloat, s, seed++, c.lo, c.hi);
        EXPECT_TRUE(OptimizedMatchesReference(c.spec, {x}, c.rtol, c.atol, threads))
            << c.spec.op_type << " " << ShapeToString(s) << " threads=" << threads;
      }
    }
  }
}

// The AVX-512, AVX2 and baseline instantiations all agree with the reference (the
// machine running the tests supports at most some of them; the rest are capped down).
TEST(ElementwiseOptimized, EveryIsaVariantMatchesReference) {
  struct Restore {
    ~Restore() { cpu::SetElementwiseIsaCapForTesting(""); }
  } restore;
  uint64_t seed = 900;
  for (const char* cap : {"avx512", "avx2", "base"}) {
    const std::string isa = cpu::SetElementwiseIsaCapForTesting(cap);
    for (const Shape& s : std::vector<Shape>{{1}, {17}, {1001}}) {
      Tensor x = RandomTensor(DataType::kFloat, s, seed++, -9, 9);
      Tensor b = RandomTensor(DataType::kFloat, {1}, seed++, 0.5, 2);
      for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Clip"})
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 13), {x}, 2e-6, 2e-7)) << op << " isa=" << isa;
      EXPECT_TRUE(OptimizedMatchesReference(OpSpec("LeakyRelu", 16), {x}, 0, 0)) << isa;
      for (const char* op : {"Gelu", "FastGelu"})
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 1, "com.microsoft"), {x}, 2e-6, 1.5e-6)) << op << " " << isa;
      EXPECT_TRUE(OptimizedMatchesReference(OpSpec("HardSwish", 14), {x}, 0, 0)) << isa;
      EXPECT_TRUE(OptimizedMatchesReference(OpSpec("HardSigmoid", 6), {x}, 1e-6, 1e-7)) << isa;
      EXPECT_TRUE(OptimizedMatchesReference(OpSpec("QuickGelu", 1, "com.microsoft"), {x}, 2e-6, 1e-7)) << isa;
      for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {x, b}, 1e-6, 0)) << op << " " << isa;
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {b, x}, 1e-6, 0)) << op << " " << isa;
        EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {x, x}, 1e-6, 0)) << op << " " << isa;
      }
    }
  }
}

TEST(ElementwiseOptimized, SpecialValuesMatchReference) {
  Tensor x = F32({12}, {kNaN, kInf, -kInf, 0.0, -0.0, 1e-30, -1e-30, 88.72, 89.0, -87.5, -103.0, -200.0});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Clip"})
    EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 13), {x}, 3e-6, 1e-44)) << op;
  // NaN stays NaN (the reference clamps by comparison, not fmin/fmax); +-inf as the formula.
  for (const char* op : {"HardSwish", "HardSigmoid"})
    EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 14), {x}, 1e-6, 1e-44)) << op;
  {
    Tensor y = F32({6}, {kNaN, kInf, 0.0, -50.0, 50.0, 1e-20});
    EXPECT_TRUE(OptimizedMatchesReference(OpSpec("QuickGelu", 1, "com.microsoft"), {y}, 2e-6, 1e-30));
    Tensor h = Run1(OpSpec("HardSigmoid", 6), {F32({1}, {kNaN})}, true);
    EXPECT_TRUE(std::isnan(h.data<float>()[0])) << "the reference keeps a NaN too";
  }
  for (const char* op : {"Gelu", "FastGelu"}) {
    Tensor y = F32({5}, {kNaN, 0.0, -50.0, 50.0, 1e-20});
    EXPECT_TRUE(OptimizedMatchesReference(OpSpec(op, 1, "com.microsoft"), {y}, 2e-6, 1e-30)) << op;
  }
}

TEST(ElementwiseOptimized, ClipInputsAndFastGeluBias) {
  Tensor x = RandomTensor(DataType::kFloat, {4, 33}, 5, -3, 3);
  Tensor lo = F32({}, {-0.5}), hi = F32({}, {0.25});
  EXPECT_TRUE(OptimizedMatchesReference(OpSpec("Clip", 13), {x, lo, hi}));
  EXPECT_TRUE(OptimizedMatchesReference(OpSpec("Clip", 13), {x, Tensor(), hi}));
  EXPECT_TRUE(OptimizedMatchesReference(OpSpec("Clip", 13), {x, lo}));
  Tensor bias = RandomTensor(DataType::kFloat, {33}, 6);
  EXPECT_TRUE(OptimizedMatchesReference(OpSpec("FastGelu", 1, "com.microsoft"), {x, bias}, 2e-6, 1.5e-6));
  EXPECT_TRUE(OptimizedMatchesReference(OpSpec("FastGelu", 1, "com.microsoft"), {x, bias}, 2e-6, 1.5e-6, 2));
  Tensor bad_bias = RandomTensor(DataType::kFloat, {5}, 6);
  Status st = RunStatus(OpSpec("FastGelu", 1, "com.microsoft"), {x, bad_bias});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

TEST(ElementwiseOptimized, RegistryPrefersOptimizedForFloatOnly) {
  EXPECT_TRUE(testing::HasOptimizedKernel(OpSpec("Add", 14), DataType::kFloat));
  EXPECT_FALSE(testing::HasOptimizedKernel(OpSpec("Add", 14), DataType::kInt32));
  EXPECT_TRUE(testing::HasOptimizedKernel(OpSpec("Relu", 6), DataType::kFloat));
  const KernelDef* ref = CpuKernels().Find("", "Add", 14, DataType::kFloat, true);
  ASSERT_NE(ref, nullptr);
  EXPECT_TRUE(ref->reference);
}

// ---------------------------------------------------------------- broadcasting and shapes

TEST(ElementwiseBroadcast, NumpyShapesAndValues) {
  Tensor a = F32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({2, 1}, {10, 20});
  Tensor out = Run1(OpSpec("Add", 14), {a, b}, true);
  EXPECT_TRUE(TensorsEqual(F32({2, 2, 3}, {11, 12, 13, 21, 22, 23, 14, 15, 16, 24, 25, 26}), out));
}

TEST(ElementwiseBroadcast, ZeroSizeAndScalar) {
  Tensor out = Run1(OpSpec("Mul", 14), {F32({0, 3}, {}), F32({3}, {1, 2, 3})});
  EXPECT_EQ(out.shape(), (Shape{0, 3}));
  out = Run1(OpSpec("Sub", 14), {F32({}, {5}), F32({}, {2})});
  EXPECT_TRUE(TensorsEqual(F32({}, {3}), out));
  out = Run1(OpSpec("Relu", 14), {F32({2, 0}, {})});
  EXPECT_EQ(out.shape(), (Shape{2, 0}));
}

TEST(ElementwiseBroadcast, IncompatibleShapesNameNode) {
  Status st = RunStatus(OpSpec("Add", 14), {F32({2, 3}, {}), F32({4}, {})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Add node 'test_Add'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2,3]"), std::string::npos) << st.message();
}

TEST(ElementwiseBroadcast, LegacyAxisAndSuffix) {
  // opset 6, broadcast=1, axis=1: B[3,2] lines up with A's dims 1..2.
  Tensor a = MakeTensor(DataType::kInt32, {2, 3, 2}, std::vector<double>(12, 1));
  Tensor b = MakeTensor(DataType::kInt32, {3, 2}, {0, 1, 2, 3, 4, 5});
  OpSpec spec("Add", 6);
  spec.Attr("broadcast", 1).Attr("axis", 1);
  EXPECT_TRUE(
      TensorsEqual(MakeTensor(DataType::kInt32, {2, 3, 2}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}), Run1(spec, {a, b})));
  // axis=0: B[2] matches A's first dim.
  OpSpec spec0("Sub", 1);
  spec0.Attr("broadcast", 1).Attr("axis", 0).Attr("consumed_inputs", std::vector<int64_t>{0, 0});
  Tensor c = MakeTensor(DataType::kFloat, {2}, {1, 2});
  Tensor out = Run1(spec0, {MakeTensor(DataType::kFloat, {2, 3}, std::vector<double>(6, 10)), c});
  EXPECT_TRUE(TensorsEqual(F32({2, 3}, {9, 9, 9, 8, 8, 8}), out));
  // No axis: suffix alignment, like numpy.
  OpSpec spec_s("Mul", 6);
  spec_s.Attr("broadcast", 1);
  out = Run1(spec_s, {F32({2, 2}, {1, 2, 3, 4}), F32({2}, {10, 100})});
  EXPECT_TRUE(TensorsEqual(F32({2, 2}, {10, 200, 30, 400}), out));
  // Without broadcast=1 shapes must be equal.
  Status st = RunStatus(OpSpec("Add", 6), {F32({2, 2}, {}), F32({2}, {})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // Axis that does not fit.
  OpSpec bad("Add", 6);
  bad.Attr("broadcast", 1).Attr("axis", 2);
  st = RunStatus(bad, {F32({2, 3}, {}), F32({3}, {})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

// ---------------------------------------------------------------- arithmetic semantics

TEST(ElementwiseArith, IntegerDivTruncatesAndZeroIsAnError) {
  Tensor a = MakeTensor(DataType::kInt32, {5}, {-7, 7, -7, 7, -2147483648.0});
  Tensor b = MakeTensor(DataType::kInt32, {5}, {2, 2, -2, -2, -1});
  EXPECT_TRUE(
      TensorsEqual(MakeTensor(DataType::kInt32, {5}, {-3, 3, 3, -3, -2147483648.0}), Run1(OpSpec("Div", 14), {a, b})));
  Status st = RunStatus(OpSpec("Div", 14), {a, MakeTensor(DataType::kInt32, {1}, {0})});
  EXPECT_EQ(st.code(), StatusCode::kRuntimeError);
  EXPECT_NE(st.message().find("Div node 'test_Div'"), std::string::npos) << st.message();
  st = RunStatus(OpSpec("Mod", 13), {a, MakeTensor(DataType::kInt32, {1}, {0})});
  EXPECT_EQ(st.code(), StatusCode::kRuntimeError) << st.ToString();
  // Zero-size output: nothing is divided, so no error.
  EXPECT_TRUE(
      RunStatus(OpSpec("Div", 14), {MakeTensor(DataType::kInt32, {0}, {}), MakeTensor(DataType::kInt32, {1}, {0})})
          .ok());
}

TEST(ElementwiseArith, ModSigns) {
  // ONNX test_mod_mixed_sign_int32 (fmod=0: sign of the divisor).
  Tensor x = MakeTensor(DataType::kInt32, {6}, {-4, 7, 5, 4, -7, 8});
  Tensor y = MakeTensor(DataType::kInt32, {6}, {2, -3, 8, -2, 3, 5});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt32, {6}, {0, -2, 5, 0, 2, 3}), Run1(OpSpec("Mod", 13), {x, y})));
  // fmod=1: sign of the dividend (C fmod).
  OpSpec f("Mod", 13);
  f.Attr("fmod", 1);
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt32, {6}, {0, 1, 5, 0, -1, 3}), Run1(f, {x, y})));
  // ONNX test_mod_mixed_sign_float32 (fmod=1).
  Tensor xf = F32({6}, {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0});
  Tensor yf = F32({6}, {2.1, -3.4, 8.0, -2.1, 3.4, 5.0});
  EXPECT_TRUE(TensorsNear(F32({6}, {-0.1, 0.4, 5., 0.1, -0.4, 3.}), Run1(f, {xf, yf}), 1e-5, 1e-5));
  // int64 with fmod=0 and a negative divisor of -1 (no overflow trap).
  Tensor xl = MakeTensor(DataType::kInt64, {2}, {-9.2233720368547758e18, 5});
  Tensor yl = MakeTensor(DataType::kInt64, {2}, {-1, -3});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt64, {2}, {0, -1}), Run1(OpSpec("Mod", 13), {xl, yl})));
  OpSpec bad("Mod", 13);
  bad.Attr("fmod", 2);
  EXPECT_EQ(RunStatus(bad, {x, y}).code(), StatusCode::kInvalidModel);
}

TEST(ElementwiseArith, PowMixedTypes) {
  // ONNX test_pow_example and test_pow_types_float32_int64.
  Tensor x = F32({3}, {1, 2, 3});
  EXPECT_TRUE(TensorsNear(F32({3}, {1, 32, 729}), Run1(OpSpec("Pow", 15), {x, F32({3}, {4, 5, 6})})));
  EXPECT_TRUE(
      TensorsNear(F32({3}, {1, 32, 729}), Run1(OpSpec("Pow", 15), {x, MakeTensor(DataType::kInt64, {3}, {4, 5, 6})})));
  Tensor xi = MakeTensor(DataType::kInt32, {5}, {2, 3, -2, 2, -1});
  Tensor yi = MakeTensor(DataType::kInt32, {5}, {10, 3, 3, -1, -3});
  EXPECT_TRUE(
      TensorsEqual(MakeTensor(DataType::kInt32, {5}, {1024, 27, -8, 0, -1}), Run1(OpSpec("Pow", 15), {xi, yi})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt64, {2}, {8, 2}),
                           Run1(OpSpec("Pow", 15), {MakeTensor(DataType::kInt64, {2}, {2, 4}), F32({2}, {3, 0.5})})));
}

TEST(ElementwiseArith, IntegerTypesAndWrap) {
  for (DataType dt : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32,
                      DataType::kUInt32, DataType::kInt64, DataType::kUInt64}) {
    Tensor a = RandomTensor(dt, {3, 4}, 11, 0, 100);
    Tensor b = RandomTensor(dt, {4}, 12, 1, 9);
    std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
    std::vector<double> add, mul, div, mn;
    for (int i = 0; i < 12; ++i) {
      const double x = av[i], y = bv[i % 4];
      add.push_back(x + y);
      div.push_back(std::trunc(x / y));
      mn.push_back(std::min(x, y));
    }
    EXPECT_TRUE(TensorsEqual(MakeTensor(dt, {3, 4}, add), Run1(OpSpec("Add", 14), {a, b}))) << DataTypeName(dt);
    EXPECT_TRUE(TensorsEqual(MakeTensor(dt, {3, 4}, div), Run1(OpSpec("Div", 14), {a, b}))) << DataTypeName(dt);
    EXPECT_TRUE(TensorsEqual(MakeTensor(dt, {3, 4}, mn), Run1(OpSpec("Min", 13), {a, b}))) << DataTypeName(dt);
  }
  // int8 overflow wraps (two's complement) instead of trapping.
  Tensor a = MakeTensor(DataType::kInt8, {2}, {127, -128});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt8, {2}, {-128, 127}),
                           Run1(OpSpec("Add", 14), {a, MakeTensor(DataType::kInt8, {2}, {1, -1})})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt8, {2}, {-127, -128}), Run1(OpSpec("Neg", 13), {a})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt8, {2}, {127, -128}), Run1(OpSpec("Abs", 13), {a})));
}

TEST(ElementwiseArith, VariadicSumMeanMinMax) {
  Tensor a = F32({2, 1}, {1, 2});
  Tensor b = F32({3}, {10, 20, 30});
  Tensor c = F32({}, {100});
  EXPECT_TRUE(TensorsEqual(F32({2, 3}, {111, 121, 131, 112, 122, 132}), Run1(OpSpec("Sum", 13), {a, b, c})));
  EXPECT_TRUE(TensorsNear(F32({2, 3}, {37, 121.0 / 3, 131.0 / 3, 112.0 / 3, 122.0 / 3, 44}),
                          Run1(OpSpec("Mean", 13), {a, b, c})));
  EXPECT_TRUE(TensorsEqual(F32({2, 3}, {1, 1, 1, 2, 2, 2}), Run1(OpSpec("Min", 13), {a, b, c})));
  EXPECT_TRUE(TensorsEqual(F32({2, 3}, {100, 100, 100, 100, 100, 100}), Run1(OpSpec("Max", 13), {a, b, c})));
  EXPECT_TRUE(TensorsEqual(a, Run1(OpSpec("Sum", 13), {a})));
  // NaN propagates through Max/Min.
  EXPECT_TRUE(TensorsEqual(F32({2}, {kNaN, 3}), Run1(OpSpec("Max", 13), {F32({2}, {kNaN, 1}), F32({2}, {0, 3})})));
  // Mismatched dtypes are rejected.
  Status st = RunStatus(OpSpec("Max", 13), {a, MakeTensor(DataType::kDouble, {1}, {1})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

TEST(ElementwiseArith, Float16AndBFloat16ComputeInFloat) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    Tensor a = RandomTensor(dt, {5, 3}, 21, -4, 4);
    Tensor b = RandomTensor(dt, {3}, 22, 0.5, 2);
    std::vector<double> av = ToDoubles(a), bv = ToDoubles(b), mul, relu, sig;
    for (int i = 0; i < 15; ++i) {
      mul.push_back(static_cast<float>(av[i]) * static_cast<float>(bv[i % 3]));
      relu.push_back(std::max(0.0, av[i]));
      sig.push_back(1.0 / (1.0 + std::exp(-av[i])));
    }
    const double tol = dt == DataType::kFloat16 ? 1e-3 : 8e-3;
    Tensor out = Run1(OpSpec("Mul", 14), {a, b});
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(TensorsNear(MakeTensor(dt, {5, 3}, mul), out, tol, 0));
    EXPECT_TRUE(TensorsEqual(MakeTensor(dt, {5, 3}, relu), Run1(OpSpec("Relu", 14), {a})));
    EXPECT_TRUE(TensorsNear(MakeTensor(dt, {5, 3}, sig), Run1(OpSpec("Sigmoid", 13), {a}), tol, tol));
  }
  // Half-precision rounding: 1 + 2^-11 is not representable and rounds to even (1).
  Tensor h = MakeTensor(DataType::kFloat16, {1}, {1.0});
  Tensor eps = MakeTensor(DataType::kFloat16, {1}, {std::ldexp(1.0, -11)});
  EXPECT_EQ(ToDoubles(Run1(OpSpec("Add", 14), {h, eps}))[0], 1.0);
}

TEST(ElementwiseArith, UnsupportedDtypeNamesNodeAndType) {
  // The registry never routes bool to Add; running the kernel anyway must fail cleanly.
  const KernelDef* def = CpuKernels().Find("", "Add", 14, DataType::kFloat, true);
  ASSERT_NE(def, nullptr);
  RunOptions o;
  o.force_kernel = def;
  Tensor t = MakeTensor(DataType::kBool, {2}, {1, 0});
  auto r = RunKernel(OpSpec("Add", 14), {t, t}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("Add node 'test_Add'"), std::string::npos);
  EXPECT_NE(r.status().message().find("bool"), std::string::npos) << r.status().message();
  // Same for an optimized kernel fed int32.
  const KernelDef* fast = CpuKernels().Find("", "Relu", 14, DataType::kFloat, false);
  ASSERT_NE(fast, nullptr);
  o.force_kernel = fast;
  r = RunKernel(OpSpec("Relu", 14), {MakeTensor(DataType::kInt32, {1}, {1})}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  // And through the registry: no kernel for Relu on uint8.
  EXPECT_EQ(RunStatus(OpSpec("Relu", 14), {MakeTensor(DataType::kUInt8, {1}, {1})}).code(), StatusCode::kUnsupported);
  // Missing required input.
  EXPECT_EQ(RunStatus(OpSpec("Add", 14), {F32({1}, {1}), Tensor()}).code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- compare, logic, bits

TEST(ElementwiseLogic, ComparisonsProduceBool) {
  Tensor a = MakeTensor(DataType::kInt64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor(DataType::kInt64, {3}, {2, 2, 7});
  auto expect = [&](const char* op, int opset, std::vector<double> v) {
    Tensor out = Run1(OpSpec(op, opset), {a, b});
    EXPECT_EQ(out.dtype(), DataType::kBool) << op;
    EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {2, 3}, v), out)) << op;
  };
  expect("Equal", 13, {0, 1, 0, 0, 0, 0});
  expect("Less", 13, {1, 0, 1, 0, 0, 1});
  expect("Greater", 13, {0, 0, 0, 1, 1, 0});
  expect("LessOrEqual", 16, {1, 1, 1, 0, 0, 1});
  expect("GreaterOrEqual", 16, {0, 1, 0, 1, 1, 0});
  // NaN compares unequal/false.
  Tensor n = F32({2}, {kNaN, 1});
  EXPECT_TRUE(
      TensorsEqual(MakeTensor(DataType::kBool, {2}, {0, 1}), Run1(OpSpec("Equal", 13), {n, F32({2}, {kNaN, 1})})));
}

TEST(ElementwiseLogic, BoolOps) {
  Tensor a = MakeTensor(DataType::kBool, {4}, {0, 0, 1, 1});
  Tensor b = MakeTensor(DataType::kBool, {4}, {0, 1, 0, 1});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {4}, {0, 0, 0, 1}), Run1(OpSpec("And", 7), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {4}, {0, 1, 1, 1}), Run1(OpSpec("Or", 7), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {4}, {0, 1, 1, 0}), Run1(OpSpec("Xor", 7), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {4}, {1, 1, 0, 0}), Run1(OpSpec("Not", 1), {a})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {4}, {1, 0, 0, 1}), Run1(OpSpec("Equal", 13), {a, b})));
  // Legacy And with broadcast attribute.
  OpSpec legacy("Or", 1);
  legacy.Attr("broadcast", 1);
  EXPECT_TRUE(TensorsEqual(
      MakeTensor(DataType::kBool, {2, 2}, {1, 0, 1, 0}),
      Run1(legacy, {MakeTensor(DataType::kBool, {2, 2}, {0, 0, 1, 0}), MakeTensor(DataType::kBool, {2}, {1, 0})})));
}

TEST(ElementwiseLogic, BitShiftAndBitwise) {
  // ONNX test_bitshift_right_uint8 / test_bitshift_left_uint8.
  Tensor x = MakeTensor(DataType::kUInt8, {3}, {16, 4, 1});
  Tensor y = MakeTensor(DataType::kUInt8, {3}, {1, 2, 3});
  OpSpec right("BitShift", 11), left("BitShift", 11);
  right.Attr("direction", "RIGHT");
  left.Attr("direction", "LEFT");
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kUInt8, {3}, {8, 1, 0}), Run1(right, {x, y})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kUInt8, {3}, {32, 16, 8}), Run1(left, {x, y})));
  // Shifts of the full width or more give 0 rather than UB.
  Tensor x32 = MakeTensor(DataType::kUInt32, {3}, {0xffffffffu, 1, 1});
  Tensor s32 = MakeTensor(DataType::kUInt32, {3}, {32, 31, 40});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kUInt32, {3}, {0, 2147483648.0, 0}), Run1(left, {x32, s32})));
  OpSpec bad("BitShift", 11);
  bad.Attr("direction", "UP");
  EXPECT_EQ(RunStatus(bad, {x, y}).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(RunStatus(OpSpec("BitShift", 11), {x, y}).code(), StatusCode::kInvalidModel);

  Tensor a = MakeTensor(DataType::kInt16, {3}, {0x0f0f, -1, 6});
  Tensor b = MakeTensor(DataType::kInt16, {3}, {0x00ff, 5, 3});
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt16, {3}, {0x000f, 5, 2}), Run1(OpSpec("BitwiseAnd", 18), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt16, {3}, {0x0fff, -1, 7}), Run1(OpSpec("BitwiseOr", 18), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt16, {3}, {0x0ff0, -6, 5}), Run1(OpSpec("BitwiseXor", 18), {a, b})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt16, {3}, {-0x0f10, 0, -7}), Run1(OpSpec("BitwiseNot", 18), {a})));
}

// ---------------------------------------------------------------- unary math

TEST(ElementwiseUnary, RoundHalfToEven) {
  // ONNX test_round.
  Tensor x = F32({15}, {0.1, 0.5, 0.9, 1.2, 1.5, 1.8, 2.3, 2.5, 2.7, -1.1, -1.5, -1.9, -2.2, -2.5, -2.8});
  EXPECT_TRUE(
      TensorsEqual(F32({15}, {0, 0, 1, 1, 2, 2, 2, 2, 3, -1, -2, -2, -2, -2, -3}), Run1(OpSpec("Round", 11), {x})));
}

TEST(ElementwiseUnary, MathMatchesLibm) {
  struct Case {
    const char* op;
    int opset;
    double lo, hi;
    double (*f)(double);
  };
  const std::vector<Case> cases = {
      {"Abs", 13, -3, 3, [](double v) { return std::fabs(v); }},
      {"Neg", 13, -3, 3, [](double v) { return -v; }},
      {"Exp", 13, -3, 3, [](double v) { return std::exp(v); }},
      {"Log", 13, 0.1, 5, [](double v) { return std::log(v); }},
      {"Sqrt", 13, 0, 9, [](double v) { return std::sqrt(v); }},
      {"Reciprocal", 13, 0.5, 3, [](double v) { return 1 / v; }},
      {"Floor", 13, -3, 3, [](double v) { return std::floor(v); }},
      {"Ceil", 13, -3, 3, [](double v) { return std::ceil(v); }},
      {"Sin", 7, -3, 3, [](double v) { return std::sin(v); }},
      {"Cos", 7, -3, 3, [](double v) { return std::cos(v); }},
      {"Tan", 7, -1, 1, [](double v) { return std::tan(v); }},
      {"Asin", 7, -0.9, 0.9, [](double v) { return std::asin(v); }},
      {"Acos", 7, -0.9, 0.9, [](double v) { return std::acos(v); }},
      {"Atan", 7, -3, 3, [](double v) { return std::atan(v); }},
      {"Sinh", 9, -3, 3, [](double v) { return std::sinh(v); }},
      {"Cosh", 9, -3, 3, [](double v) { return std::cosh(v); }},
      {"Tanh", 13, -3, 3, [](double v) { return std::tanh(v); }},
      {"Asinh", 9, -3, 3, [](double v) { return std::asinh(v); }},
      {"Acosh", 9, 1, 5, [](double v) { return std::acosh(v); }},
      {"Atanh", 9, -0.9, 0.9, [](double v) { return std::atanh(v); }},
      {"Erf", 13, -3, 3, [](double v) { return std::erf(v); }},
      {"Sigmoid", 13, -6, 6, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Softsign", 1, -6, 6, [](double v) { return v / (1 + std::fabs(v)); }},
      {"Softplus", 1, -20, 20, [](double v) { return std::log1p(std::exp(v)); }},
      {"Mish", 18, -6, 6, [](double v) { return v * std::tanh(std::log1p(std::exp(v))); }},
      {"HardSwish", 14, -5, 5, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    for (DataType dt : {DataType::kFloat, DataType::kDouble, DataType::kFloat16}) {
      Tensor x = RandomTensor(dt, {4, 9}, seed++, c.lo, c.hi);
      std::vector<double> expect;
      for (double v : ToDoubles(x)) expect.push_back(c.f(v));
      const double tol = dt == DataType::kDouble ? 1e-12 : dt == DataType::kFloat ? 2e-6 : 2e-3;
      Tensor out = Run1(OpSpec(c.op, c.opset), {x}, true);
      EXPECT_TRUE(TensorsNear(MakeTensor(dt, {4, 9}, expect), out, tol, tol)) << c.op << " " << DataTypeName(dt);
    }
  }
}

TEST(ElementwiseUnary, SignIsNaNIsInf) {
  Tensor x = F32({6}, {-1, kNaN, kInf, 1.2, -kInf, 0});
  EXPECT_TRUE(TensorsEqual(F32({6}, {-1, kNaN, 1, 1, -1, 0}), Run1(OpSpec("Sign", 13), {x})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt32, {3}, {-1, 0, 1}),
                           Run1(OpSpec("Sign", 13), {MakeTensor(DataType::kInt32, {3}, {-5, 0, 9})})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {6}, {0, 1, 0, 0, 0, 0}), Run1(OpSpec("IsNaN", 13), {x})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {6}, {0, 0, 1, 0, 1, 0}), Run1(OpSpec("IsInf", 10), {x})));
  // ONNX test_isinf_negative / test_isinf_positive.
  OpSpec neg("IsInf", 10), pos("IsInf", 10);
  neg.Attr("detect_positive", 0);
  pos.Attr("detect_negative", 0);
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {6}, {0, 0, 0, 0, 1, 0}), Run1(neg, {x})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kBool, {6}, {0, 0, 1, 0, 0, 0}), Run1(pos, {x})));
}

TEST(ElementwiseUnary, IdentityAliases) {
  Tensor x = F32({2}, {1, 2});
  Tensor out = Run1(OpSpec("Identity", 16), {x});
  EXPECT_EQ(out.raw_data(), x.raw_data());
  auto seq = testing::RunKernelValues(OpSpec("Identity", 16), {Value::Sequence({x, x}, DataType::kFloat)});
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  ASSERT_TRUE((*seq)[0].is_sequence());
  EXPECT_EQ((*seq)[0].sequence().size(), 2u);
}

// ---------------------------------------------------------------- activations

TEST(ElementwiseActivation, ConformanceExamples) {
  Tensor x = F32({3}, {-1, 0, 1});
  EXPECT_TRUE(TensorsNear(F32({3}, {0.26894143, 0.5, 0.7310586}), Run1(OpSpec("Sigmoid", 13), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-1.2642411, 0., 1.}), Run1(OpSpec("Elu", 6).Attr("alpha", 2.0f), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-3.79272318, 0., 3.}),
                          Run1(OpSpec("Selu", 6).Attr("alpha", 2.0f).Attr("gamma", 3.0f), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-1.1113307, 0., 1.050701}), Run1(OpSpec("Selu", 6), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-0.1, 0., 1.}), Run1(OpSpec("LeakyRelu", 16).Attr("alpha", 0.1f), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-0.1, 0., 1.}), Run1(OpSpec("LeakyRelu", 16).Attr("alpha", 0.1f), {x}, true)));
  EXPECT_TRUE(TensorsNear(F32({3}, {0.1, 0.6, 1.}),
                          Run1(OpSpec("HardSigmoid", 6).Attr("alpha", 0.5f).Attr("beta", 0.6f), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {0.31326166, 0.69314718, 1.31326163}), Run1(OpSpec("Softplus", 1), {x})));
  EXPECT_TRUE(TensorsNear(F32({3}, {-0.5, 0., 0.5}), Run1(OpSpec("Softsign", 1), {x})));
  EXPECT_TRUE(TensorsNear(F32({5}, {0, 0, 0, 0, 2.2}),
                          Run1(OpSpec("ThresholdedRelu", 10).Attr("alpha", 2.0f), {F32({5}, {-1.5, 0, 1.2, 2, 2.2})})));
  Tensor r = F32({5}, {-2, -1, 0, 1, 2});
  EXPECT_TRUE(TensorsEqual(F32({5}, {-2, 0, 0, 0, 2}), Run1(OpSpec("Shrink", 9).Attr("lambd", 1.5f), {r})));
  EXPECT_TRUE(TensorsEqual(F32({5}, {-0.5, 0, 0, 0, 0.5}),
                           Run1(OpSpec("Shrink", 9).Attr("lambd", 1.5f).Attr("bias", 1.5f), {r})));
  EXPECT_TRUE(TensorsEqual(
      MakeTensor(DataType::kInt8, {5}, {-1, 0, 0, 0, 1}),
      Run1(OpSpec("Shrink", 9).Attr("bias", 1.0f), {MakeTensor(DataType::kInt8, {5}, {-2, -1, 0, 1, 2})})));
  // Celu(x) = max(0,x) + min(0, alpha*(exp(x/alpha)-1)), alpha=2.
  EXPECT_TRUE(
      TensorsNear(F32({3}, {2 * (std::exp(-0.5) - 1), 0, 1}), Run1(OpSpec("Celu", 12).Attr("alpha", 2.0f), {x})));
  EXPECT_EQ(RunStatus(OpSpec("Celu", 12).Attr("alpha", 0.0f), {x}).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(TensorsNear(F32({3}, {-1.0 / 3, 0, 2.0 / 3}), Run1(OpSpec("HardSwish", 14), {x})));
  // com.microsoft Gelu / FastGelu.
  EXPECT_TRUE(TensorsNear(F32({3}, {-0.15865526, 0, 0.8413447}), Run1(OpSpec("Gelu", 1, "com.microsoft"), {x})));
  EXPECT_TRUE(
      TensorsNear(F32({3}, {-0.15880801, 0, 0.841192}), Run1(OpSpec("FastGelu", 1, "com.microsoft"), {x}), 1e-5, 1e-6));
  // Relu passes NaN through; integer Relu (opset 14).
  EXPECT_TRUE(TensorsEqual(F32({3}, {0, kNaN, 2}), Run1(OpSpec("Relu", 14), {F32({3}, {-1, kNaN, 2})})));
  EXPECT_TRUE(TensorsEqual(MakeTensor(DataType::kInt32, {2}, {0, 5}),
                           Run1(OpSpec("Relu", 14), {MakeTensor(DataType::kInt32, {2}, {-5, 5})})));
}

TEST(ElementwiseActivation, PReluBroadcastsSlope) {
  Tensor x = F32({2, 3}, {-1, 2, -3, 4, -5, 6});
  Tensor slope = F32({3}, {0.1, 0.2, 0.3});
  EXPECT_TRUE(TensorsNear(F32({2, 3}, {-0.1, 2, -0.9, 4, -1, 6}), Run1(OpSpec("PRelu", 16), {x, slope})));
  // Slope must broadcast onto X, not the other way round.
  Status st = RunStatus(OpSpec("PRelu", 16), {F32({3}, {1, 2, 3}), F32({2, 3}, {})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

TEST(ElementwiseActivation, ClipForms) {
  Tensor x = F32({3}, {-2, 0, 2});
  // ONNX test_clip_example.
  EXPECT_TRUE(TensorsEqual(F32({3}, {-1, 0, 1}), Run1(OpSpec("Clip", 13), {x, F32({}, {-1}), F32({}, {1})})));
  // Defaults: no bounds at all is the identity; only max.
  EXPECT_TRUE(TensorsEqual(x, Run1(OpSpec("Clip", 13), {x})));
  EXPECT_TRUE(TensorsEqual(x, Run1(OpSpec("Clip", 13), {x}, true)));
  EXPECT_TRUE(TensorsEqual(F32({3}, {-2, 0, 0}), Run1(OpSpec("Clip", 13), {x, Tensor(), F32({}, {0})})));
  // min > max: everything becomes max.
  EXPECT_TRUE(TensorsEqual(F32({3}, {-3, -3, -3}), Run1(OpSpec("Clip", 13), {x, F32({}, {5}), F32({}, {-3})})));
  EXPECT_TRUE(TensorsEqual(F32({3}, {-3, -3, -3}), Run1(OpSpec("Clip", 13), {x, F32({}, {5}), F32({}, {-3})}, true)));
  // Attribute form (opset 6) with defaults on one side.
  EXPECT_TRUE(TensorsEqual(F32({3}, {-1, 0, 2}), Run1(OpSpec("Clip", 6).Attr("min", -1.0f), {x})));
  EXPECT_TRUE(TensorsEqual(F32({3}, {-1, 0, 2}), Run1(OpSpec("Clip", 6).Attr("min", -1.0f), {x}, true)));
  // Integer Clip (opset 12+).
  Tensor xi = MakeTensor(DataType::kInt64, {4}, {-9, 0, 5, 100});
  EXPECT_TRUE(TensorsEqual(
      MakeTensor(DataType::kInt64, {4}, {-1, 0, 5, 7}),
      Run1(OpSpec("Clip", 13), {xi, MakeTensor(DataType::kInt64, {}, {-1}), MakeTensor(DataType::kInt64, {}, {7})})));
  // Non-scalar bound is an error naming the node.
  Status st = RunStatus(OpSpec("Clip", 13), {x, F32({2}, {0, 1})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Clip node"), std::string::npos) << st.message();
  st = RunStatus(OpSpec("Clip", 13), {x, F32({2}, {0, 1})}, true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST(ElementwiseRegistry, VersionRangesAndDtypes) {
  const KernelRegistry& r = CpuKernels();
  for (const char* op :
       {"Add",  "Sub",         "Mul",      "Div",      "Pow",  "Equal", "Less", "Greater", "And",  "Or",        "Xor",
        "Not",  "Abs",         "Neg",      "Exp",      "Log",  "Sqrt",  "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu",
        "Selu", "HardSigmoid", "Softplus", "Softsign", "Clip", "Sum",   "Mean", "Min",     "Max",  "PRelu"})
    for (int opset = 1; opset <= 17; ++opset) EXPECT_TRUE(r.Supports("", op, opset)) << op << " opset " << opset;
  EXPECT_FALSE(r.Supports("", "Mod", 9));
  EXPECT_TRUE(r.Supports("", "Mod", 10));
  EXPECT_FALSE(r.Supports("", "LessOrEqual", 11));
  EXPECT_TRUE(r.Supports("", "BitShift", 11));
  EXPECT_TRUE(r.Supports("", "Round", 11));
  EXPECT_TRUE(r.Supports("", "HardSwish", 14));
  EXPECT_TRUE(r.Supports("com.microsoft", "Gelu", 1));
  EXPECT_TRUE(r.Supports("com.microsoft", "FastGelu", 1));
  EXPECT_EQ(r.Find("", "And", 7, DataType::kFloat), nullptr);
  EXPECT_EQ(r.Find("", "Sqrt", 13, DataType::kInt32), nullptr);
  EXPECT_NE(r.Find("", "Abs", 13, DataType::kUInt16), nullptr);
  // Every op keeps a reference kernel as the oracle. Internal ops that graph passes create
  // (the NHWC layout's NhwcConv, ...) are the exception: their oracle is the graph before
  // the rewrite, which tests/unit/layout_test.cc compares against.
  for (const auto& d : r.all())
    if (!d.reference && d.domain != "strata.internal") {
      EXPECT_NE(r.Find(d.domain, d.op_type, d.since_version, DataType::kFloat, true), nullptr) << d.op_type;
    }
}

}  // namespace
}  // namespace strata
