// Heavy CPU kernels: optimized (XNNPACK/OpenBLAS) vs reference on random shapes, known
// ONNX values for the reference semantics, and clear errors for bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/kernel.h"
#include "core/threadpool.h"

// OpCase literals name only the fields each case needs; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata {
namespace {


Tensor Random(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(shape)).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<float>()[i] = dist(rng);
  return t;
}

// One node with its inputs; inputs flagged constant become initializers (so factories
// can prepack them). An absent Tensor means an omitted optional input.
struct OpCase {
  std::string op;
  int opset = 13;
  std::map<std::string, Attribute> attrs;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;
  int num_outputs = 1;
};

struct RunResult {
  Status status;
  std::vector<Value> outputs;
  std::string impl;
};

RunResult RunOp(const OpCase& c, bool reference, ThreadPool* pool = nullptr) {
  RunResult res;
  Graph graph;
  Node node;
  node.name = "n0";
  node.op_type = c.op;
  node.opset = c.opset;
  node.attrs = c.attrs;
  std::vector<Value> in_values(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].valid()) {
      node.inputs.push_back(-1);
      continue;
    }
    int v = graph.AddValue("in" + std::to_string(i));
    node.inputs.push_back(v);
    in_values[i] = Value(c.inputs[i]);
    if (i < c.constant.size() && c.constant[i]) graph.initializers[v] = c.inputs[i];
  }
  for (int i = 0; i < c.num_outputs; ++i) node.outputs.push_back(graph.AddValue("out" + std::to_string(i)));
  DataType dt = c.inputs[0].valid() ? c.inputs[0].dtype() : DataType::kFloat;
  const KernelDef* def = CpuKernels().Find("", c.op, c.opset, dt, reference);
  if (!def) {
    res.status = NotFound("no kernel for ", c.op);
    return res;
  }
  res.impl = def->impl;
  KernelInit init{node, graph, pool, {}};
  auto k = def->factory(init);
  if (!k.ok()) {
    res.status = k.status();
    return res;
  }
  std::vector<const Value*> ptrs;
  for (size_t i = 0; i < in_values.size(); ++i) ptrs.push_back(in_values[i].empty() ? nullptr : &in_values[i]);
  res.outputs.resize(c.num_outputs);
  KernelContext ctx(node, ptrs, &res.outputs, pool, DefaultAllocator(), nullptr);
  res.status = (*k)->Compute(ctx);
  return res;
}

void ExpectClose(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(ShapeToString(got.shape()), ShapeToString(want.shape())) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t i = 0; i < got.num_elements(); ++i)
    ASSERT_NEAR(g[i], w[i], tol * (1.0 + std::abs(w[i]))) << what << " at element " << i;
}

// Runs the optimized and the reference kernels and compares every requested output.
void ExpectOptMatchesRef(const OpCase& c, const std::string& what, ThreadPool* pool = nullptr, double tol = 1e-4) {
  RunResult ref = RunOp(c, true, pool);
  ASSERT_TRUE(ref.status.ok()) << what << ": " << ref.status.ToString();
  RunResult opt = RunOp(c, false, pool);
  ASSERT_TRUE(opt.status.ok()) << what << ": " << opt.status.ToString();
  EXPECT_NE(opt.impl, "ref") << what;
  for (int i = 0; i < c.num_outputs; ++i) ExpectClose(opt.outputs[i].tensor(), ref.outputs[i].tensor(), tol, what);
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

// ---------------------------------------------------------------- MatMul / Gemm

TEST(HeavyMatMul, ConstantAndDynamicBMatchReference) {
  ThreadPool pool2(2);
  uint32_t seed = 1;
  for (int64_t m : {1, 17, 65})
    for (int64_t k : {1, 33, 64})
      for (int64_t n : {1, 16, 65})
        for (bool constant : {true, false}) {
          OpCase c{.op = "MatMul", .inputs = {Random({m, k}, seed++), Random({k, n}, seed++)},
                   .constant = {false, constant}};
          std::string what = "MatMul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
                             (constant ? " const" : " dyn");
          ExpectOptMatchesRef(c, what);
          ExpectOptMatchesRef(c, what + " 2 threads", &pool2);
        }
}

TEST(HeavyMatMul, BroadcastBatchesAndVectors) {
  ThreadPool pool2(2);
  struct S {
    Shape a, b, out;
  };
  std::vector<S> cases = {{{2, 1, 5, 7}, {3, 7, 4}, {2, 3, 5, 4}}, {{7}, {7, 4}, {4}},       {{5, 7}, {7}, {5}},
                          {{7}, {7}, {}},                          {{3, 5, 7}, {7, 4}, {3, 5, 4}},
                          {{0, 5, 7}, {7, 3}, {0, 5, 3}},          {{4, 1, 33}, {1, 33, 17}, {4, 1, 17}}};
  uint32_t seed = 100;
  for (const S& s : cases)
    for (bool constant : {true, false}) {
      OpCase c{.op = "MatMul", .inputs = {Random(s.a, seed++), Random(s.b, seed++)}, .constant = {false, constant}};
      std::string what = "MatMul " + ShapeToString(s.a) + "x" + ShapeToString(s.b);
      RunResult ref = RunOp(c, true);
      ASSERT_TRUE(ref.status.ok()) << what << ref.status.ToString();
      EXPECT_EQ(ShapeToString(ref.outputs[0].tensor().shape()), ShapeToString(s.out)) << what;
      ExpectOptMatchesRef(c, what, &pool2);
    }
}

TEST(HeavyMatMul, ReferenceKnownValuesAndFusedRelu) {
  OpCase c{.op = "MatMul",
           .attrs = {{"activation", Attribute::String("Relu")}},
           .inputs = {Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}), Tensor::FromVector<float>({1, -1, 1, -2}, {2, 2})},
           .constant = {false, true}};
  for (bool ref : {true, false}) {
    RunResult r = RunOp(c, ref);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    // [[1*1+2*1, 1*-1+2*-2], [3+4, -3-8]] then Relu.
    EXPECT_EQ(Values(r.outputs[0].tensor()), (std::vector<float>{3, 0, 7, 0}));
  }
}

TEST(HeavyMatMul, BadShapesGiveClearErrors) {
  for (bool constant : {true, false}) {
    OpCase c{.op = "MatMul", .inputs = {Random({3, 5}, 1), Random({4, 2}, 2)}, .constant = {false, constant}};
    for (bool ref : {true, false}) {
      RunResult r = RunOp(c, ref);
      EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status.message().find("MatMul node 'n0'"), std::string::npos) << r.status.message();
      EXPECT_NE(r.status.message().find("inner dimensions"), std::string::npos) << r.status.message();
    }
  }
  OpCase bc{.op = "MatMul", .inputs = {Random({2, 3, 5}, 1), Random({4, 5, 2}, 2)}};
  EXPECT_NE(RunOp(bc, false).status.message().find("cannot be broadcast"), std::string::npos);
}

TEST(HeavyGemm, TransposesAlphaBetaAndCBroadcast) {
  ThreadPool pool2(2);
  const int64_t M = 17, K = 33, N = 65;
  uint32_t seed = 7;
  std::vector<Shape> c_shapes = {{}, {N}, {1, N}, {M, 1}, {M, N}, {1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= c_shapes.size(); ++ci)
        for (int consts = 0; consts < 3; ++consts) {
          bool c_const = consts == 0, b_const = consts < 2;
          Tensor a = Random(ta ? Shape{K, M} : Shape{M, K}, seed++);
          Tensor b = Random(tb ? Shape{N, K} : Shape{K, N}, seed++);
          Tensor c = ci < c_shapes.size() ? Random(c_shapes[ci], seed++) : Tensor();
          OpCase oc{.op = "Gemm",
                    .attrs = {{"transA", Attribute::Int(ta)}, {"transB", Attribute::Int(tb)}, {"alpha", Attribute::Float(0.5f)},
                              {"beta", Attribute::Float(-2.0f)}},
                    .inputs = {a, b, c},
                    .constant = {false, b_const, c_const}};
          std::string what = "Gemm tA=" + std::to_string(ta) + " tB=" + std::to_string(tb) +
                             " C=" + (c.valid() ? ShapeToString(c.shape()) : "none") + (c_const ? " constC" : "") +
                             (b_const ? " constB" : "");
          ExpectOptMatchesRef(oc, what, &pool2);
          oc.attrs["activation"] = Attribute::String("Clip");
          oc.attrs["activation_min"] = Attribute::Float(-0.5f);
          oc.attrs["activation_max"] = Attribute::Float(0.25f);
          ExpectOptMatchesRef(oc, what + " clip", &pool2);
        }
}

TEST(HeavyGemm, ReferenceKnownValues) {
  // Y = 2 * A^T B + 1 * C with C broadcast along rows.
  OpCase c{.op = "Gemm",
           .attrs = {{"transA", Attribute::Int(1)}, {"alpha", Attribute::Float(2.0f)}},
           .inputs = {Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}), Tensor::FromVector<float>({1, 0, 0, 1}, {2, 2}),
                      Tensor::FromVector<float>({10, 20}, {2})},
           .constant = {false, true, true}};
  for (bool ref : {true, false}) {
    RunResult r = RunOp(c, ref);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(Values(r.outputs[0].tensor()), (std::vector<float>{12, 26, 14, 28}));
  }
}

TEST(HeavyGemm, BadShapesGiveClearErrors) {
  OpCase k{.op = "Gemm", .inputs = {Random({3, 5}, 1), Random({4, 2}, 2), Random({2}, 3)}, .constant = {false, true, true}};
  OpCase kdyn = k;
  kdyn.constant = {false, false, false};
  EXPECT_NE(RunOp(kdyn, false).status.message().find("inner dimensions"), std::string::npos);
  for (bool ref : {true, false}) {
    RunResult r = RunOp(k, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << r.status.ToString();
    EXPECT_NE(r.status.message().find("Gemm node 'n0'"), std::string::npos) << r.status.message();
  }
  OpCase cbad{.op = "Gemm", .inputs = {Random({3, 5}, 1), Random({5, 4}, 2), Random({3}, 3)},
              .constant = {false, true, true}};
  for (bool ref : {true, false}) {
    RunResult r = RunOp(cbad, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("cannot be broadcast"), std::string::npos) << r.status.message();
  }
  // Opset 6 without broadcast=1 needs C of exactly [M, N].
  OpCase legacy{.op = "Gemm", .opset = 6, .inputs = {Random({3, 5}, 1), Random({5, 4}, 2), Random({4}, 3)}};
  EXPECT_EQ(RunOp(legacy, true).status.code(), StatusCode::kInvalidArgument);
  legacy.attrs["broadcast"] = Attribute::Int(1);
  EXPECT_TRUE(RunOp(legacy, true).status.ok());
}

// ---------------------------------------------------------------- Conv

struct ConvSpec {
  Shape x, w;
  std::map<std::string, Attribute> attrs;
  bool bias = true;
};

TEST(HeavyConv, XnnpackMatchesReference) {
  ThreadPool pool2(2);
  std::vector<ConvSpec> specs = {
      {{1, 3, 17, 17}, {8, 3, 3, 3}, {{"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {{2, 16, 9, 11}, {17, 16, 1, 1}, {}},
      {{1, 8, 15, 13}, {8, 1, 3, 3}, {{"group", Attribute::Int(8)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},           // depthwise
      {{1, 8, 15, 13}, {16, 1, 5, 5}, {{"group", Attribute::Int(8)}, {"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({2, 1, 2, 0})}}},
      {{1, 12, 10, 10}, {6, 4, 3, 3}, {{"group", Attribute::Int(3)}, {"dilations", Attribute::Ints({2, 2})}}},
      {{1, 4, 16, 16}, {5, 4, 3, 2}, {{"strides", Attribute::Ints({2, 3})}, {"pads", Attribute::Ints({0, 1, 2, 1})}}, false},
      {{1, 5, 14, 14}, {7, 5, 3, 3}, {{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Attribute::Ints({2, 2})}}},
      {{1, 5, 13, 12}, {7, 5, 4, 4}, {{"auto_pad", Attribute::String("SAME_LOWER")}}},
      {{1, 5, 13, 12}, {7, 5, 3, 3}, {{"auto_pad", Attribute::String("VALID")}, {"kernel_shape", Attribute::Ints({3, 3})}}},
      {{0, 3, 8, 8}, {4, 3, 3, 3}, {}},                                                       // empty batch
      {{3, 6, 33}, {8, 3, 5}, {{"group", Attribute::Int(2)}, {"pads", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2})}}},  // 1-D
      {{1, 65, 7, 7}, {33, 65, 3, 3}, {{"pads", Attribute::Ints({1, 1, 1, 1})}}},
      // Depthwise (multiplier 1) on the NCHW kernel: strides, dilations, asymmetric pads, SAME, 1-D, odd widths.
      {{2, 17, 33, 31}, {17, 1, 3, 3}, {{"group", Attribute::Int(17)}, {"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {{1, 5, 12, 65}, {5, 1, 5, 3}, {{"group", Attribute::Int(5)}, {"dilations", Attribute::Ints({2, 3})}, {"pads", Attribute::Ints({0, 2, 3, 1})}}, false},
      {{1, 6, 9, 10}, {6, 1, 4, 4}, {{"group", Attribute::Int(6)}, {"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Attribute::Ints({1, 3})}}},
      {{2, 4, 40}, {4, 1, 7}, {{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({3, 3})}}},
      {{1, 3, 2, 2}, {3, 1, 3, 3}, {{"group", Attribute::Int(3)}, {"pads", Attribute::Ints({2, 2, 2, 2})}, {"strides", Attribute::Ints({2, 2})}}},
  };
  uint32_t seed = 11;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ConvSpec& s = specs[i];
    OpCase c{.op = "Conv",
             .attrs = s.attrs,
             .inputs = {Random(s.x, seed++), Random(s.w, seed++), s.bias ? Random({s.w[0]}, seed++) : Tensor()},
             .constant = {false, true, true}};
    std::string what = "Conv case " + std::to_string(i) + " X" + ShapeToString(s.x) + " W" + ShapeToString(s.w);
    ExpectOptMatchesRef(c, what);
    ExpectOptMatchesRef(c, what + " 2 threads", &pool2);
    c.attrs["activation"] = Attribute::String("Relu");
    ExpectOptMatchesRef(c, what + " relu", &pool2);
  }
}

TEST(HeavyConv, ReferenceKnownValues3dAndFallbacks) {
  // ONNX conv test: 5x5 ramp, 3x3 ones kernel, pads 1.
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i);
  OpCase c{.op = "Conv",
           .attrs = {{"pads", Attribute::Ints({1, 1, 1, 1})}},
           .inputs = {Tensor::FromVector<float>(x, {1, 1, 5, 5}), Tensor::FromVector<float>(std::vector<float>(9, 1), {1, 1, 3, 3})},
           .constant = {false, true}};
  std::vector<float> want = {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                             93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
  for (bool ref : {true, false}) {
    RunResult r = RunOp(c, ref);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(Values(r.outputs[0].tensor()), want);
  }
  // 3-D conv and a run-time weight use the reference path inside the optimized factory.
  OpCase c3{.op = "Conv",
            .attrs = {{"pads", Attribute::Ints({1, 0, 1, 1, 0, 1})}, {"strides", Attribute::Ints({1, 2, 1})}},
            .inputs = {Random({1, 2, 5, 6, 4}, 1), Random({3, 2, 3, 2, 3}, 2), Random({3}, 3)},
            .constant = {false, true, true}};
  RunResult r3 = RunOp(c3, false);
  ASSERT_TRUE(r3.status.ok()) << r3.status.ToString();
  EXPECT_EQ(ShapeToString(r3.outputs[0].tensor().shape()), "[1,3,5,3,4]");
  // A 1x1x1 kernel over a 1-channel volume is a plain scale: checks the 3-D indexing.
  OpCase s3{.op = "Conv",
            .inputs = {Random({1, 1, 2, 3, 4}, 5), Tensor::FromVector<float>({2.0f}, {1, 1, 1, 1, 1})}};
  RunResult rs = RunOp(s3, true);
  ASSERT_TRUE(rs.status.ok());
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_FLOAT_EQ(rs.outputs[0].tensor().data<float>()[i], 2.0f * s3.inputs[0].data<float>()[i]);
  OpCase dyn{.op = "Conv", .inputs = {Random({1, 3, 8, 8}, 6), Random({4, 3, 3, 3}, 7)}, .constant = {false, false}};
  ExpectClose(RunOp(dyn, false).outputs[0].tensor(), RunOp(dyn, true).outputs[0].tensor(), 1e-5, "dynamic W");
}

TEST(HeavyConv, BadInputsGiveClearErrors) {
  for (bool ref : {true, false}) {
    OpCase mismatch{.op = "Conv", .inputs = {Random({1, 4, 8, 8}, 1), Random({2, 3, 3, 3}, 2)}, .constant = {false, true}};
    RunResult r = RunOp(mismatch, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("Conv node 'n0'"), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find("channel mismatch"), std::string::npos) << r.status.message();

    OpCase rank{.op = "Conv", .inputs = {Random({1, 3, 8, 8}, 1), Random({2, 3, 3}, 2)}, .constant = {false, true}};
    r = RunOp(rank, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("same rank"), std::string::npos) << r.status.message();

    OpCase ks{.op = "Conv", .attrs = {{"kernel_shape", Attribute::Ints({5, 5})}},
              .inputs = {Random({1, 3, 8, 8}, 1), Random({2, 3, 3, 3}, 2)}, .constant = {false, true}};
    r = RunOp(ks, ref);
    EXPECT_NE(r.status.message().find("kernel_shape"), std::string::npos) << r.status.message();

    OpCase big{.op = "Conv", .inputs = {Random({1, 3, 2, 2}, 1), Random({2, 3, 3, 3}, 2)}, .constant = {false, true}};
    r = RunOp(big, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("exceeds the padded input"), std::string::npos) << r.status.message();

    OpCase bias{.op = "Conv", .inputs = {Random({1, 3, 8, 8}, 1), Random({2, 3, 3, 3}, 2), Random({3}, 3)},
                .constant = {false, true, true}};
    r = RunOp(bias, ref);
    EXPECT_NE(r.status.message().find("bias"), std::string::npos) << r.status.message();

    OpCase pad{.op = "Conv", .attrs = {{"auto_pad", Attribute::String("BOGUS")}},
               .inputs = {Random({1, 3, 8, 8}, 1), Random({2, 3, 3, 3}, 2)}, .constant = {false, true}};
    r = RunOp(pad, ref);
    EXPECT_NE(r.status.message().find("auto_pad"), std::string::npos) << r.status.message();
  }
}

TEST(HeavyConvTranspose, KnownValuesAndPadding) {
  std::vector<float> x(9);
  for (int i = 0; i < 9; ++i) x[i] = static_cast<float>(i);
  Tensor xt = Tensor::FromVector<float>(x, {1, 1, 3, 3});
  Tensor w = Tensor::FromVector<float>(std::vector<float>(18, 1.0f), {1, 2, 3, 3});
  OpCase c{.op = "ConvTranspose", .inputs = {xt, w}};
  RunResult r = RunOp(c, true);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  std::vector<float> plane = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  EXPECT_EQ(ShapeToString(r.outputs[0].tensor().shape()), "[1,2,5,5]");
  EXPECT_EQ(Values(r.outputs[0].tensor()), want);

  // Strides 3x2 with output_padding and output_shape variants (ONNX convtranspose tests).
  OpCase op{.op = "ConvTranspose",
            .attrs = {{"strides", Attribute::Ints({3, 2})}, {"output_padding", Attribute::Ints({1, 1})}},
            .inputs = {xt, w}};
  r = RunOp(op, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(ShapeToString(r.outputs[0].tensor().shape()), "[1,2,10,8]");
  OpCase os{.op = "ConvTranspose",
            .attrs = {{"strides", Attribute::Ints({3, 2})}, {"output_shape", Attribute::Ints({10, 8})}},
            .inputs = {xt, w}};
  RunResult r2 = RunOp(os, true);
  ASSERT_TRUE(r2.status.ok());
  EXPECT_EQ(Values(r2.outputs[0].tensor()), Values(r.outputs[0].tensor()));
  OpCase same{.op = "ConvTranspose",
              .attrs = {{"strides", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_UPPER")}},
              .inputs = {xt, w}};
  r = RunOp(same, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(ShapeToString(r.outputs[0].tensor().shape()), "[1,2,6,6]");
  // ONNX test_convtranspose_autopad_same, first row of channel 0.
  std::vector<float> row0 = {0, 0, 1, 1, 3, 2};
  EXPECT_EQ(std::vector<float>(r.outputs[0].tensor().data<float>(), r.outputs[0].tensor().data<float>() + 6), row0);

  // Group, dilation, pads and bias on a 1-D case checked against a direct scatter.
  OpCase g{.op = "ConvTranspose",
           .attrs = {{"group", Attribute::Int(2)}, {"dilations", Attribute::Ints({2})}, {"pads", Attribute::Ints({1, 2})}},
           .inputs = {Random({1, 4, 5}, 1), Random({4, 3, 3}, 2), Random({6}, 3)}};
  r = RunOp(g, true);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const Tensor& y = r.outputs[0].tensor();
  ASSERT_EQ(ShapeToString(y.shape()), "[1,6,6]");  // (5-1) + (3-1)*2 + 1 - 3
  std::vector<double> expect(36, 0.0);
  const float* xi = g.inputs[0].data<float>();
  const float* wi = g.inputs[1].data<float>();
  const float* bi = g.inputs[2].data<float>();
  for (int oc = 0; oc < 6; ++oc)
    for (int p = 0; p < 6; ++p) expect[oc * 6 + p] = bi[oc];
  for (int ic = 0; ic < 4; ++ic)
    for (int i = 0; i < 5; ++i)
      for (int oc = 0; oc < 3; ++oc)
        for (int k = 0; k < 3; ++k) {
          int pos = i + 2 * k - 1;
          if (pos >= 0 && pos < 6) expect[((ic / 2) * 3 + oc) * 6 + pos] += xi[ic * 5 + i] * wi[(ic * 3 + oc) * 3 + k];
        }
  for (int i = 0; i < 36; ++i) EXPECT_NEAR(y.data<float>()[i], expect[i], 1e-5) << i;

  OpCase bad{.op = "ConvTranspose", .inputs = {Random({1, 3, 4, 4}, 1), Random({2, 2, 3, 3}, 2)}};
  r = RunOp(bad, true);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("channel mismatch"), std::string::npos) << r.status.message();
}

TEST(HeavyConvTranspose, XnnpackMatchesReference) {
  ThreadPool pool2(2);
  std::vector<ConvSpec> specs = {
      {{1, 3, 5, 5}, {3, 2, 3, 3}, {}},
      {{2, 8, 7, 6}, {8, 3, 4, 4}, {{"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {{1, 6, 5, 4}, {6, 2, 3, 3}, {{"group", Attribute::Int(3)}, {"strides", Attribute::Ints({3, 2})}, {"output_padding", Attribute::Ints({1, 1})}}},
      {{1, 4, 6, 6}, {4, 5, 3, 2}, {{"dilations", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({0, 1, 2, 0})}}, false},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {{"strides", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_UPPER")}}},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {{"strides", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_LOWER")}}},
      {{1, 4, 3, 3}, {4, 2, 3, 3}, {{"strides", Attribute::Ints({3, 2})}, {"output_shape", Attribute::Ints({10, 8})}}},  // negative pad
      {{1, 4, 3, 3}, {4, 2, 3, 3}, {{"strides", Attribute::Ints({3, 2})}, {"output_shape", Attribute::Ints({8, 6})}}},
      {{0, 4, 3, 3}, {4, 2, 3, 3}, {}},
      {{1, 16, 8, 8}, {16, 1, 3, 3}, {{"group", Attribute::Int(16)}, {"strides", Attribute::Ints({2, 2})}}},
  };
  uint32_t seed = 51;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ConvSpec& s = specs[i];
    int64_t group = s.attrs.count("group") ? s.attrs.at("group").i : 1;
    OpCase c{.op = "ConvTranspose",
             .attrs = s.attrs,
             .inputs = {Random(s.x, seed++), Random(s.w, seed++), s.bias ? Random({s.w[1] * group}, seed++) : Tensor()},
             .constant = {false, true, true}};
    std::string what = "ConvTranspose case " + std::to_string(i);
    ExpectOptMatchesRef(c, what);
    ExpectOptMatchesRef(c, what + " 2 threads", &pool2);
  }
}

// ---------------------------------------------------------------- Pooling

TEST(HeavyPool, XnnpackMaxAndAverageMatchReference) {
  ThreadPool pool2(2);
  std::vector<std::map<std::string, Attribute>> attrs = {
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}},
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}},
      {{"kernel_shape", Attribute::Ints({2, 3})}, {"strides", Attribute::Ints({2, 1})}, {"ceil_mode", Attribute::Int(1)}},
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 0, 1, 0})}, {"ceil_mode", Attribute::Int(1)}},
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}, {"count_include_pad", Attribute::Int(1)}},
      {{"kernel_shape", Attribute::Ints({2, 2})}, {"dilations", Attribute::Ints({2, 2})}},
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Attribute::Ints({2, 2})}},
      {{"kernel_shape", Attribute::Ints({4, 4})}, {"auto_pad", Attribute::String("SAME_LOWER")}},
      {{"kernel_shape", Attribute::Ints({1, 1})}},
  };
  std::vector<Shape> shapes = {{1, 1, 9, 9}, {2, 17, 16, 15}, {1, 65, 7, 8}, {0, 3, 8, 8}};
  uint32_t seed = 21;
  for (const char* op : {"MaxPool", "AveragePool"})
    for (size_t i = 0; i < attrs.size(); ++i)
      for (const Shape& s : shapes) {
        OpCase c{.op = op, .opset = 19, .attrs = attrs[i], .inputs = {Random(s, seed++)}};
        std::string what = std::string(op) + " case " + std::to_string(i) + " X" + ShapeToString(s);
        ExpectOptMatchesRef(c, what);
        ExpectOptMatchesRef(c, what + " 2 threads", &pool2);
      }
}

TEST(HeavyPool, MaxPoolIndicesAndStorageOrder) {
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i + 1);
  // ONNX test_maxpool_with_argmax_2d_precomputed_pads.
  OpCase c{.op = "MaxPool",
           .opset = 12,
           .attrs = {{"kernel_shape", Attribute::Ints({5, 5})}, {"pads", Attribute::Ints({2, 2, 2, 2})}},
           .inputs = {Tensor::FromVector<float>(x, {1, 1, 5, 5})},
           .num_outputs = 2};
  for (bool ref : {true, false}) {
    RunResult r = RunOp(c, ref);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    std::vector<float> want = {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25, 25, 25,
                               23, 24, 25, 25, 25, 23, 24, 25, 25, 25};
    EXPECT_EQ(Values(r.outputs[0].tensor()), want);
    const Tensor& idx = r.outputs[1].tensor();
    ASSERT_EQ(idx.dtype(), DataType::kInt64);
    std::vector<int64_t> wi = {12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24, 24, 24,
                               22, 23, 24, 24, 24, 22, 23, 24, 24, 24};
    EXPECT_EQ(std::vector<int64_t>(idx.data<int64_t>(), idx.data<int64_t>() + 25), wi);
  }
  // ONNX test_maxpool_with_argmax_2d_precomputed_strides (storage_order=1).
  OpCase so{.op = "MaxPool",
            .opset = 12,
            .attrs = {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}, {"storage_order", Attribute::Int(1)}},
            .inputs = {Tensor::FromVector<float>(x, {1, 1, 5, 5})},
            .num_outputs = 2};
  RunResult r = RunOp(so, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Values(r.outputs[0].tensor()), (std::vector<float>{7, 9, 17, 19}));
  const int64_t* ip = r.outputs[1].tensor().data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(ip, ip + 4), (std::vector<int64_t>{6, 16, 8, 18}));
}

TEST(HeavyPool, AverageCountIncludePadAndCeilKnownValues) {
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i + 1);
  Tensor xt = Tensor::FromVector<float>(x, {1, 1, 5, 5});
  // ONNX test_averagepool_2d_precomputed_pads_count_include_pad, first row.
  OpCase inc{.op = "AveragePool",
             .attrs = {{"kernel_shape", Attribute::Ints({5, 5})}, {"pads", Attribute::Ints({2, 2, 2, 2})}, {"count_include_pad", Attribute::Int(1)}},
             .inputs = {xt}};
  RunResult r = RunOp(inc, false);
  ASSERT_TRUE(r.status.ok());
  const float* y = r.outputs[0].tensor().data<float>();
  std::vector<float> row0 = {2.5200f, 3.6000f, 4.8000f, 4.0800f, 3.2400f};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], row0[i], 1e-4);
  // Excluding pads: top-left window covers rows/cols 0..2 -> mean of 1,2,3,6,7,8,11,12,13 = 7.
  inc.attrs["count_include_pad"] = Attribute::Int(0);
  r = RunOp(inc, false);
  EXPECT_NEAR(r.outputs[0].tensor().data<float>()[0], 7.0f, 1e-5);
  // ONNX test_averagepool_2d_ceil: 4x4 input, kernel 3, stride 2 -> 2x2.
  std::vector<float> x16(16);
  for (int i = 0; i < 16; ++i) x16[i] = static_cast<float>(i + 1);
  OpCase ceil{.op = "AveragePool",
              .attrs = {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}, {"ceil_mode", Attribute::Int(1)}},
              .inputs = {Tensor::FromVector<float>(x16, {1, 1, 4, 4})}};
  r = RunOp(ceil, false);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Values(r.outputs[0].tensor()), (std::vector<float>{6, 7.5, 12, 13.5}));
}

TEST(HeavyPool, GlobalAndLpPools) {
  ThreadPool pool2(2);
  for (Shape s : {Shape{2, 17, 7, 7}, Shape{1, 3, 1, 1}, Shape{1, 2, 300, 301}, Shape{0, 4, 3, 3}, Shape{2, 3, 5}}) {
    OpCase c{.op = "GlobalAveragePool", .inputs = {Random(s, 3)}};
    ExpectOptMatchesRef(c, "GlobalAveragePool " + ShapeToString(s), &pool2, 1e-5);
  }
  Tensor x = Tensor::FromVector<float>({3, -4, 1, 2}, {1, 1, 2, 2});
  RunResult r = RunOp({.op = "GlobalMaxPool", .inputs = {x}}, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Values(r.outputs[0].tensor()), std::vector<float>{3});
  r = RunOp({.op = "GlobalLpPool", .attrs = {{"p", Attribute::Int(2)}}, .inputs = {x}}, true);
  EXPECT_NEAR(r.outputs[0].tensor().data<float>()[0], std::sqrt(30.0f), 1e-5);
  r = RunOp({.op = "LpPool", .opset = 18, .attrs = {{"kernel_shape", Attribute::Ints({1, 2})}, {"p", Attribute::Int(1)}}, .inputs = {x}}, true);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values(r.outputs[0].tensor()), (std::vector<float>{7, 3}));
}

TEST(HeavyPool, MaxUnpoolAndMaxRoiPool) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  OpCase mp{.op = "MaxPool", .opset = 12, .attrs = {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}},
            .inputs = {x}, .num_outputs = 2};
  RunResult p = RunOp(mp, true);
  ASSERT_TRUE(p.status.ok());
  OpCase un{.op = "MaxUnpool", .opset = 11, .attrs = {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}},
            .inputs = {p.outputs[0].tensor(), p.outputs[1].tensor()}};
  RunResult u = RunOp(un, true);
  ASSERT_TRUE(u.status.ok()) << u.status.ToString();
  EXPECT_EQ(Values(u.outputs[0].tensor()), (std::vector<float>{0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 0, 16}));
  un.inputs.push_back(Tensor::FromVector<int64_t>({1, 1, 5, 5}, {4}));
  u = RunOp(un, true);
  ASSERT_TRUE(u.status.ok()) << u.status.ToString();
  EXPECT_EQ(ShapeToString(u.outputs[0].tensor().shape()), "[1,1,5,5]");
  // Indices address the default 4x4 output; output_shape only enlarges the canvas, so
  // index 5 = (1,1) lands on element 1*5+1 of the 5x5 output (the ONNX test's semantics).
  EXPECT_EQ(u.outputs[0].tensor().data<float>()[6], 6.0f);
  EXPECT_EQ(u.outputs[0].tensor().data<float>()[5], 0.0f);
  un.inputs[2] = Tensor::FromVector<int64_t>({1, 1, 2, 2}, {4});
  u = RunOp(un, true);
  EXPECT_EQ(u.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(u.status.message().find("outside the output"), std::string::npos) << u.status.message();

  Tensor rois = Tensor::FromVector<float>({0, 0, 0, 3, 3, 0, 1, 1, 2, 2}, {2, 5});
  RunResult rp = RunOp({.op = "MaxRoiPool", .attrs = {{"pooled_shape", Attribute::Ints({2, 2})}}, .inputs = {x, rois}}, true);
  ASSERT_TRUE(rp.status.ok()) << rp.status.ToString();
  EXPECT_EQ(Values(rp.outputs[0].tensor()), (std::vector<float>{6, 8, 14, 16, 6, 7, 10, 11}));
  Tensor bad_rois = Tensor::FromVector<float>({3, 0, 0, 3, 3}, {1, 5});
  rp = RunOp({.op = "MaxRoiPool", .attrs = {{"pooled_shape", Attribute::Ints({2, 2})}}, .inputs = {x, bad_rois}}, true);
  EXPECT_EQ(rp.status.code(), StatusCode::kInvalidArgument);
  // NaN, infinite or huge values: converting them to integers was undefined behaviour (and
  // lround's unspecified result overflowed the region arithmetic); each is an error naming the roi.
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const auto& [roi, what] : std::vector<std::pair<std::vector<float>, std::string>>{
           {{kNaN, 0, 0, 3, 3}, "batch index nan"},
           {{1e30f, 0, 0, 3, 3}, "batch index 1e+30"},
           {{0, kNaN, 0, 3, 3}, "coordinate 0 is nan"},
           {{0, 0, 0, 3, kInf}, "coordinate 3 is inf"},
           {{0, 0, -1e30f, 3, 3}, "coordinate 1 is -1e+30"}}) {
    SCOPED_TRACE(what);
    rp = RunOp({.op = "MaxRoiPool",
                .attrs = {{"pooled_shape", Attribute::Ints({2, 2})}},
                .inputs = {x, Tensor::FromVector<float>(roi, {1, 5})}},
               true);
    EXPECT_EQ(rp.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(rp.status.message().find("roi 0"), std::string::npos) << rp.status.message();
    EXPECT_NE(rp.status.message().find(what), std::string::npos) << rp.status.message();
  }
  // A scale that makes in-range coordinates huge is refused the same way.
  rp = RunOp({.op = "MaxRoiPool",
              .attrs = {{"pooled_shape", Attribute::Ints({2, 2})}, {"spatial_scale", Attribute::Float(1e30f)}},
              .inputs = {x, rois}},
             true);
  EXPECT_NE(rp.status.message().find("spatial_scale"), std::string::npos) << rp.status.message();
}

TEST(HeavyPool, BadInputsGiveClearErrors) {
  for (bool ref : {true, false}) {
    RunResult r = RunOp({.op = "MaxPool", .inputs = {Random({1, 3, 8, 8}, 1)}}, ref);
    EXPECT_NE(r.status.message().find("kernel_shape"), std::string::npos) << r.status.message();
    r = RunOp({.op = "AveragePool", .attrs = {{"kernel_shape", Attribute::Ints({3})}}, .inputs = {Random({1, 3, 8, 8}, 1)}}, ref);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status.message().find("AveragePool node 'n0'"), std::string::npos) << r.status.message();
    r = RunOp({.op = "MaxPool", .attrs = {{"kernel_shape", Attribute::Ints({9, 9})}}, .inputs = {Random({1, 3, 8, 8}, 1)}}, ref);
    EXPECT_NE(r.status.message().find("exceeds the padded input"), std::string::npos) << r.status.message();
    r = RunOp({.op = "MaxPool", .attrs = {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({0, 1})}},
             .inputs = {Random({1, 3, 8, 8}, 1)}}, ref);
    EXPECT_NE(r.status.message().find("stride"), std::string::npos) << r.status.message();
    r = RunOp({.op = "MaxPool", .attrs = {{"kernel_shape", Attribute::Ints({2, 2})}}, .inputs = {Random({8, 8}, 1)}}, ref);
    EXPECT_NE(r.status.message().find("rank >= 3"), std::string::npos) << r.status.message();
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// One kernel object serves concurrent Compute calls (several runs of one session): the
// XNNPACK operator's setup+run is guarded, so every thread must get its own correct result.
TEST(HeavyConcurrency, OneKernelManyThreads) {
  for (const char* op : {"Conv", "MatMul", "MaxPool"}) {
    Graph graph;
    Node node;
    node.name = "n0";
    node.op_type = op;
    node.opset = 13;
    Tensor w = std::string(op) == "Conv" ? Random({8, 4, 3, 3}, 1) : Random({12, 8}, 1);
    if (std::string(op) == "MaxPool") node.attrs["kernel_shape"] = Attribute::Ints({3, 3});
    int xv = graph.AddValue("x");
    node.inputs.push_back(xv);
    if (std::string(op) != "MaxPool") {
      int wv = graph.AddValue("w");
      node.inputs.push_back(wv);
      graph.initializers[wv] = w;
    }
    node.outputs.push_back(graph.AddValue("y"));
    const KernelDef* def = CpuKernels().Find("", op, 13, DataType::kFloat);
    ASSERT_NE(def->impl, "ref");
    KernelInit init{node, graph, nullptr, {}};
    auto kernel = def->factory(init);
    ASSERT_TRUE(kernel.ok());
    constexpr int kThreads = 4, kIters = 20;
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int it = 0; it < kIters && failures[t].empty(); ++it) {
          Shape xs = std::string(op) == "MatMul" ? Shape{5 + t, 12} : Shape{1, 4, 9 + t, 7 + it % 3};
          Tensor x = Random(xs, 100 * t + it);
          OpCase c{.op = op, .attrs = node.attrs, .inputs = {x}, .constant = {false, true}};
          if (std::string(op) != "MaxPool") c.inputs.push_back(w);
          RunResult want = RunOp(c, true);
          Value xval(x);
          std::vector<const Value*> ptrs = {&xval};
          Value wval(w);
          if (std::string(op) != "MaxPool") ptrs.push_back(&wval);
          std::vector<Value> outs(1);
          KernelContext ctx(node, ptrs, &outs, nullptr, DefaultAllocator(), nullptr);
          Status st = (*kernel)->Compute(ctx);
          if (!st.ok() || !want.status.ok()) {
            failures[t] = st.ToString() + want.status.ToString();
            continue;
          }
          const Tensor& g = outs[0].tensor();
          const Tensor& r = want.outputs[0].tensor();
          if (g.shape() != r.shape()) failures[t] = "shape " + ShapeToString(g.shape());
          for (int64_t i = 0; failures[t].empty() && i < g.num_elements(); ++i)
            if (std::abs(g.data<float>()[i] - r.data<float>()[i]) > 1e-4f) failures[t] = "value at " + std::to_string(i);
        }
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << op << " thread " << t;
  }
}

}  // namespace
}  // namespace strata
