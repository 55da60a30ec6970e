// Tests for the benchmark helpers (statistics, --shape parsing) and the executor's
// profiling hook.
#include <gtest/gtest.h>

#include <memory>

#include "core/executor.h"
#include "core/profiler.h"
#include "core/threadpool.h"

namespace strata {
namespace {

TEST(BenchStats, PercentilesOnKnownData) {
  // 1..100 shuffled: numpy.percentile(range(1, 101), q) gives 1 + 0.99 q.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  LatencyStats s = Summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_DOUBLE_EQ(s.p10, 10.9);
  EXPECT_DOUBLE_EQ(s.p90, 90.1);
  EXPECT_DOUBLE_EQ(s.p99, 99.01);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
}

TEST(BenchStats, OddCountMedianAndEdgeCases) {
  LatencyStats s = Summarize({3, 1, 2});
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.stddev, 1);
  LatencyStats one = Summarize({7});
  EXPECT_DOUBLE_EQ(one.median, 7);
  EXPECT_DOUBLE_EQ(one.p99, 7);
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  LatencyStats none = Summarize({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_DOUBLE_EQ(none.median, 0);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 150), 2);  // clamped
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 25), 1.25);
}

std::vector<ValueInfo> Inputs() {
  ValueInfo image{"image", {}};
  image.type.kind = TypeInfo::Kind::kTensor;
  image.type.elem_type = DataType::kFloat;
  image.type.has_shape = true;
  image.type.dims = {Dim{-1, "batch"}, Dim{3, ""}, Dim{-1, "h"}, Dim{-1, "w"}};
  ValueInfo ids{"ids", {}};
  ids.type.kind = TypeInfo::Kind::kTensor;
  ids.type.elem_type = DataType::kInt64;
  ids.type.has_shape = true;
  ids.type.dims = {Dim{1, ""}, Dim{-1, "seq"}};
  return {image, ids};
}

TEST(BenchShape, ParsesSpecs) {
  auto r = ParseShapeSpec("image=2x3x224x224");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first, "image");
  EXPECT_EQ(r->second, (Shape{2, 3, 224, 224}));
  auto scalar = ParseShapeSpec("s=");
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->second.empty());
}

TEST(BenchShape, MalformedSpecsAreClearErrors) {
  for (const char* bad : {"image", "=1x2", "image=1xx2", "image=1x-2", "image=0x3", "image=ax3", "image=1x2x",
                          "image=99999999999999999999"}) {
    auto r = ParseShapeSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--shape"), std::string::npos) << r.status().message();
  }
  // Commas for x: the error says how dims are written.
  auto commas = ParseShapeSpec("image=1,3,224,224");
  ASSERT_FALSE(commas.ok());
  EXPECT_NE(commas.status().message().find("dims are separated by 'x'"), std::string::npos)
      << commas.status().message();
}

TEST(BenchShape, ResolvesDefaultsAndOverrides) {
  auto r = ResolveInputShapes(Inputs(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0], (Shape{1, 3, 1, 1}));
  EXPECT_EQ((*r)[1], (Shape{1, 1}));
  auto o = ResolveInputShapes(Inputs(), {"ids=1x128", "image=4x3x32x48"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ((*o)[0], (Shape{4, 3, 32, 48}));
  EXPECT_EQ((*o)[1], (Shape{1, 128}));
}

TEST(BenchShape, RejectsUnknownNameWrongRankAndStaticConflicts) {
  auto unknown = ResolveInputShapes(Inputs(), {"imgae=1x3x2x2"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'imgae' is not an input"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("image, ids"), std::string::npos);

  auto rank = ResolveInputShapes(Inputs(), {"image=1x3x224"});
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("rank 4"), std::string::npos) << rank.status().message();

  auto fixed = ResolveInputShapes(Inputs(), {"image=1x4x8x8"});
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("dim 1 of input 'image' is fixed to 3"), std::string::npos)
      << fixed.status().message();

  auto twice = ResolveInputShapes(Inputs(), {"ids=1x2", "ids=1x3"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

TEST(BenchRandom, SeededAndTyped) {
  auto a = Tensor::Zeros(DataType::kFloat, {64});
  auto b = Tensor::Zeros(DataType::kFloat, {64});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(FillRandom(&*a, 42).ok());
  ASSERT_TRUE(FillRandom(&*b, 42).ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(a->data<float>()[i], b->data<float>()[i]);
  auto ids = Tensor::Zeros(DataType::kInt64, {256});
  ASSERT_TRUE(FillRandom(&*ids, 1, 10).ok());
  for (int i = 0; i < 256; ++i) {
    EXPECT_GE(ids->data<int64_t>()[i], 0);
    EXPECT_LT(ids->data<int64_t>()[i], 10);
  }
  auto s = Tensor::Zeros(DataType::kString, {2});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(FillRandom(&*s, 1).code(), StatusCode::kUnsupported);
}

// Graph: y = Transpose(MatMul(x, w)) with w [8, 16] constant; x [4, 8].
std::shared_ptr<Graph> MatMulTransposeGraph() {
  auto g = std::make_shared<Graph>();
  g->name = "g";
  int x = g->AddValue("x"), w = g->AddValue("w"), m = g->AddValue("m"), y = g->AddValue("y");
  g->values[x].type.kind = TypeInfo::Kind::kTensor;
  g->values[x].type.elem_type = DataType::kFloat;
  for (int v : {w, m, y}) {
    g->values[v].type.kind = TypeInfo::Kind::kTensor;
    g->values[v].type.elem_type = DataType::kFloat;
  }
  g->initializers[w] = Tensor::FromVector<float>(std::vector<float>(8 * 16, 0.5f), {8, 16});
  g->inputs = {x};
  g->outputs = {y};
  Node mm;
  mm.name = "mm";
  mm.op_type = "MatMul";
  mm.opset = 17;
  mm.inputs = {x, w};
  mm.outputs = {m};
  Node tr;
  tr.name = "tr";
  tr.op_type = "Transpose";
  tr.opset = 17;
  tr.attrs["perm"].type = Attribute::Type::kInts;
  tr.attrs["perm"].ints = {1, 0};
  tr.inputs = {m};
  tr.outputs = {y};
  g->nodes = {mm, tr};
  return g;
}

TEST(BenchProfiler, HookTotalsMatchRuns) {
  auto g = MatMulTransposeGraph();
  ThreadPool pool(1);
  auto ex = Executor::Create(g, &pool, ExecOptions{});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  Tensor x = Tensor::FromVector<float>(std::vector<float>(32, 1.0f), {4, 8});

  // Off: nothing is recorded anywhere.
  Profiler prof;
  ASSERT_TRUE((*ex)->Run({Value(x)}).ok());
  EXPECT_EQ(prof.runs(), 0);
  EXPECT_EQ(ActiveProfiler(), nullptr);

  {
    ScopedProfiling scope(&prof);
    EXPECT_EQ(ActiveProfiler(), &prof);
    for (int i = 0; i < 3; ++i) {
      auto out = (*ex)->Run({Value(x)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ((*out)[0].tensor().shape(), (Shape{16, 4}));
      EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[0], 4.0f);
    }
  }
  EXPECT_EQ(ActiveProfiler(), nullptr);
  ASSERT_TRUE((*ex)->Run({Value(x)}).ok());  // after the scope: not recorded

  EXPECT_EQ(prof.runs(), 3);
  auto nodes = prof.Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "mm");
  EXPECT_EQ(nodes[0].op_type, "MatMul");
  EXPECT_EQ(nodes[1].name, "tr");
  EXPECT_EQ(nodes[1].op_type, "Transpose");
  double node_ns = 0;
  for (const auto& n : nodes) {
    EXPECT_EQ(n.calls, 3);
    EXPECT_GT(n.total_ns, 0);
    node_ns += n.total_ns;
  }
  // Node times are nested inside the run times.
  EXPECT_LE(node_ns, prof.run_ns());
  EXPECT_DOUBLE_EQ(nodes[0].flops, 2.0 * 4 * 16 * 8);
  EXPECT_EQ(nodes[1].flops, -1);

  auto types = prof.ByOpType();
  ASSERT_EQ(types.size(), 2u);
  double type_ns = 0;
  for (const auto& t : types) {
    type_ns += t.total_ns;
    EXPECT_EQ(t.calls, 3);
    if (t.op_type == "MatMul") {
      EXPECT_DOUBLE_EQ(t.flops, 3 * 2.0 * 4 * 16 * 8);
      EXPECT_GT(t.GflopsPerSecond(), 0);
    } else {
      EXPECT_EQ(t.flops, -1);
      EXPECT_EQ(t.GflopsPerSecond(), -1);
    }
  }
  EXPECT_DOUBLE_EQ(type_ns, node_ns);
  EXPECT_GE(types[0].total_ns, types[1].total_ns);

  prof.Reset();
  EXPECT_EQ(prof.runs(), 0);
  EXPECT_TRUE(prof.Nodes().empty());
}

TEST(BenchProfiler, FlopsFromShapes) {
  Node conv;
  conv.op_type = "Conv";
  Value x(Tensor::Zeros(DataType::kFloat, {1, 4, 8, 8}).value());
  Value w(Tensor::Zeros(DataType::kFloat, {6, 2, 3, 3}).value());  // group 2
  std::vector<Value> y{Value(Tensor::Zeros(DataType::kFloat, {1, 6, 6, 6}).value())};
  EXPECT_DOUBLE_EQ(NodeFlops(conv, {&x, &w}, y), 2.0 * 6 * 6 * 6 * 2 * 3 * 3);

  Node gemm;
  gemm.op_type = "Gemm";
  gemm.attrs["transA"].type = Attribute::Type::kInt;
  gemm.attrs["transA"].i = 1;
  Value a(Tensor::Zeros(DataType::kFloat, {5, 3}).value());  // A^T is [3, 5]: K = 5
  Value b(Tensor::Zeros(DataType::kFloat, {5, 7}).value());
  std::vector<Value> c{Value(Tensor::Zeros(DataType::kFloat, {3, 7}).value())};
  EXPECT_DOUBLE_EQ(NodeFlops(gemm, {&a, &b}, c), 2.0 * 3 * 7 * 5);

  Node relu;
  relu.op_type = "Relu";
  EXPECT_EQ(NodeFlops(relu, {&x}, y), -1);

  // ONNX Runtime's contrib ops: FusedMatMul with transB (B [N, K]), Attention's projection
  // plus its two products over past + new keys, MultiHeadAttention's two products.
  auto zeros = [](const Shape& s) { return Value(Tensor::Zeros(DataType::kFloat, s).value()); };
  Node fm;
  fm.domain = "com.microsoft";
  fm.op_type = "FusedMatMul";
  fm.attrs["transB"] = Attribute::Int(1);
  const Value fa = zeros({2, 3, 5}), fb = zeros({7, 5});
  EXPECT_DOUBLE_EQ(NodeFlops(fm, {&fa, &fb}, {zeros({2, 3, 7})}), 2.0 * 2 * 3 * 7 * 5);
  Node att;
  att.domain = "com.microsoft";
  att.op_type = "Attention";
  const Value ax = zeros({2, 4, 8}), aw = zeros({8, 24}), ab = zeros({24}), past = zeros({2, 2, 2, 6, 4});
  const Value none;
  EXPECT_DOUBLE_EQ(NodeFlops(att, {&ax, &aw, &ab, &none, &past}, {zeros({2, 4, 8})}),
                   2.0 * 2 * 4 * 8 * 24 + 2.0 * 2 * 4 * (6 + 4) * (8 + 8));
  Node mha;
  mha.domain = "com.microsoft";
  mha.op_type = "MultiHeadAttention";
  const Value q = zeros({2, 4, 8}), k = zeros({2, 9, 8}), v = zeros({2, 9, 12});
  EXPECT_DOUBLE_EQ(NodeFlops(mha, {&q, &k, &v}, {zeros({2, 4, 12})}), 2.0 * 2 * 4 * 9 * (8 + 12));
  Node other;
  other.domain = "com.microsoft";
  other.op_type = "BiasGelu";
  EXPECT_EQ(NodeFlops(other, {&q, &k}, {zeros({2, 4, 8})}), -1);
}

}  // namespace
}  // namespace strata
