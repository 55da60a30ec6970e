// Hand-checked tests of the tensor/shape/index CPU kernels, run through the kernel
// registry exactly as the executor does (KernelInit -> factory -> Compute).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/threadpool.h"

namespace strata {
namespace {

using Attrs = std::map<std::string, Attribute>;


template <typename T>
Tensor T1(std::vector<T> v, Shape s) {
  return Tensor::FromVector<T>(v, std::move(s));
}
Tensor I64(std::vector<int64_t> v, Shape s) { return T1<int64_t>(std::move(v), std::move(s)); }
Tensor I64(std::vector<int64_t> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return T1<int64_t>(std::move(v), s);
}
Tensor F32(std::vector<float> v, Shape s) { return T1<float>(std::move(v), std::move(s)); }
Tensor Str(std::vector<std::string> v, Shape s) { return T1<std::string>(std::move(v), std::move(s)); }

struct RunResult {
  Status status;
  std::vector<Value> outputs;
};

// Builds a one-node graph and runs the registered CPU kernel on `inputs` (empty Values
// are omitted optional inputs).
RunResult RunOp(const std::string& op, int opset, const std::vector<Value>& inputs, const Attrs& attrs = {},
                size_t num_outputs = 1, ThreadPool* pool = nullptr) {
  Graph g;
  Node node;
  node.name = "n0";
  node.op_type = op;
  node.opset = opset;
  node.attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i)
    node.inputs.push_back(inputs[i].empty() ? -1 : g.AddValue("in" + std::to_string(i)));
  for (size_t i = 0; i < num_outputs; ++i) node.outputs.push_back(g.AddValue("out" + std::to_string(i)));
  RunResult rr;
  DataType dt = !inputs.empty() ? inputs[0].elem_type() : DataType::kUndefined;
  const KernelDef* def = CpuKernels().Find("", op, opset, dt);
  if (!def) {
    rr.status = NotFound("no kernel for ", op, " opset ", opset);
    return rr;
  }
  KernelInit init{node, g, pool, KernelConfig{}};
  auto k = def->factory(init);
  if (!k.ok()) {
    rr.status = k.status();
    return rr;
  }
  std::vector<const Value*> in_ptrs;
  for (const Value& v : inputs) in_ptrs.push_back(v.empty() ? nullptr : &v);
  rr.outputs.resize(num_outputs);
  KernelContext ctx(node, in_ptrs, &rr.outputs, pool, DefaultAllocator(), nullptr);
  rr.status = (*k)->Compute(ctx);
  return rr;
}

// Runs and asserts success, returning output `i`'s tensor.
Tensor RunOk(const std::string& op, int opset, const std::vector<Value>& inputs, const Attrs& attrs = {},
             size_t num_outputs = 1, size_t i = 0, ThreadPool* pool = nullptr) {
  RunResult r = RunOp(op, opset, inputs, attrs, num_outputs, pool);
  EXPECT_TRUE(r.status.ok()) << op << ": " << r.status.ToString();
  if (!r.status.ok() || i >= r.outputs.size() || !r.outputs[i].is_tensor()) return Tensor();
  return r.outputs[i].tensor();
}

template <typename T>
std::vector<T> Vec(const Tensor& t) {
  if (!t.valid()) return {};
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Expects an error whose message names the node and contains `needle`.
void ExpectError(const std::string& op, int opset, const std::vector<Value>& inputs, const Attrs& attrs,
                 const std::string& needle, size_t num_outputs = 1) {
  RunResult r = RunOp(op, opset, inputs, attrs, num_outputs);
  ASSERT_FALSE(r.status.ok()) << op << " should fail with '" << needle << "'";
  EXPECT_NE(r.status.message().find(op + " node 'n0'"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find(needle), std::string::npos) << r.status.message();
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

// ---------------------------------------------------------------- shape ops

TEST(TensorOps, ReshapeInfersAndAliases) {
  Tensor x = F32(Iota(24), {2, 3, 4});
  Tensor y = RunOk("Reshape", 14, {x, I64({0, -1, 2})});
  EXPECT_EQ(y.shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(y.data<float>(), x.data<float>());  // no copy
  // Opset 1-4 takes the shape from the attribute.
  EXPECT_EQ(RunOk("Reshape", 1, {x}, {{"shape", Attribute::Ints({4, -1})}}).shape(), (Shape{4, 6}));
  // allowzero keeps a literal 0.
  Tensor e = F32({}, {0, 3});
  EXPECT_EQ(RunOk("Reshape", 14, {e, I64({3, 0})}, {{"allowzero", Attribute::Int(1)}}).shape(), (Shape{3, 0}));
  // Rank 0 <-> rank 1.
  EXPECT_EQ(RunOk("Reshape", 13, {F32({5}, {}), I64({1})}).shape(), (Shape{1}));
  EXPECT_EQ(RunOk("Reshape", 13, {F32({5}, {1}), I64({}, {0})}).shape(), (Shape{}));
}

TEST(TensorOps, ReshapeErrors) {
  Tensor x = F32(Iota(6), {2, 3});
  ExpectError("Reshape", 13, {x, I64({4, -1})}, {}, "cannot reshape input [2,3]");
  ExpectError("Reshape", 13, {x, I64({5})}, {}, "cannot reshape input [2,3]");
  ExpectError("Reshape", 13, {x, I64({-1, -1})}, {}, "more than one -1");
  ExpectError("Reshape", 13, {x, I64({-2, 3})}, {}, "invalid dimension -2");
  ExpectError("Reshape", 14, {x, I64({0, -1})}, {{"allowzero", Attribute::Int(1)}}, "cannot mix 0 and -1");
  ExpectError("Reshape", 13, {x}, {}, "missing required input 1");
}

TEST(TensorOps, FlattenSqueezeUnsqueeze) {
  Tensor x = F32(Iota(24), {2, 3, 4});
  EXPECT_EQ(RunOk("Flatten", 13, {x}, {{"axis", Attribute::Int(-1)}}).shape(), (Shape{6, 4}));
  EXPECT_EQ(RunOk("Flatten", 13, {x}, {{"axis", Attribute::Int(0)}}).shape(), (Shape{1, 24}));
  EXPECT_EQ(RunOk("Flatten", 13, {x}, {{"axis", Attribute::Int(3)}}).shape(), (Shape{24, 1}));
  ExpectError("Flatten", 13, {x}, {{"axis", Attribute::Int(4)}}, "out of range");

  Tensor s = F32(Iota(3), {1, 3, 1});
  EXPECT_EQ(RunOk("Squeeze", 13, {s}).shape(), (Shape{3}));
  EXPECT_EQ(RunOk("Squeeze", 13, {s, I64({-1})}).shape(), (Shape{1, 3}));
  EXPECT_EQ(RunOk("Squeeze", 11, {s}, {{"axes", Attribute::Ints({0})}}).shape(), (Shape{3, 1}));
  EXPECT_EQ(RunOk("Squeeze", 13, {s, I64({}, {0})}).shape(), (Shape{3}));
  ExpectError("Squeeze", 13, {s, I64({1})}, {}, "cannot squeeze axis 1 of size 3");
  ExpectError("Squeeze", 13, {s, I64({0, -3})}, {}, "repeated");

  Tensor u = RunOk("Unsqueeze", 13, {F32(Iota(3), {3}), I64({0, -1})});
  EXPECT_EQ(u.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(RunOk("Unsqueeze", 13, {F32({7}, {}), I64({0})}).shape(), (Shape{1}));
  EXPECT_EQ(RunOk("Unsqueeze", 1, {F32(Iota(3), {3})}, {{"axes", Attribute::Ints({1})}}).shape(), (Shape{3, 1}));
  ExpectError("Unsqueeze", 13, {F32(Iota(3), {3}), I64({3})}, {}, "out of range");
}

TEST(TensorOps, IdentityPassesSequencesAndOptionals) {
  Value seq = Value::Sequence({F32({1}, {1}), F32({2, 3}, {2})}, DataType::kFloat);
  RunResult r = RunOp("Identity", 16, {seq});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(r.outputs[0].is_sequence());
  EXPECT_EQ(r.outputs[0].sequence().size(), 2u);
  r = RunOp("Identity", 16, {Value::OptionalNone(DataType::kFloat)});
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.outputs[0].is_none());
  Tensor s = Str({"a", "b"}, {2});
  EXPECT_EQ(Vec<std::string>(RunOk("Identity", 13, {s})), (std::vector<std::string>{"a", "b"}));
}

TEST(TensorOps, ShapeAndSize) {
  Tensor x = F32({}, {2, 0, 5, 7});
  EXPECT_EQ(Vec<int64_t>(RunOk("Shape", 13, {x})), (std::vector<int64_t>{2, 0, 5, 7}));
  EXPECT_EQ(Vec<int64_t>(RunOk("Shape", 15, {x}, {{"start", Attribute::Int(1)}, {"end", Attribute::Int(-1)}})),
            (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(Vec<int64_t>(RunOk("Shape", 15, {x}, {{"start", Attribute::Int(-10)}, {"end", Attribute::Int(100)}})).size(), 4u);
  EXPECT_EQ(RunOk("Shape", 15, {x}, {{"start", Attribute::Int(3)}, {"end", Attribute::Int(1)}}).shape(), (Shape{0}));
  Tensor sz = RunOk("Size", 13, {F32(Iota(6), {2, 3})});
  EXPECT_EQ(sz.shape(), Shape{});
  EXPECT_EQ(Vec<int64_t>(sz), std::vector<int64_t>{6});
  EXPECT_EQ(Vec<int64_t>(RunOk("Size", 13, {F32({1}, {})})), std::vector<int64_t>{1});
}

TEST(TensorOps, ConstantOfShapeRangeEyeLike) {
  Tensor c = RunOk("ConstantOfShape", 9, {I64({2, 2})}, {{"value", Attribute::OfTensor(I64({7}, {1}))}});
  EXPECT_EQ(c.dtype(), DataType::kInt64);
  EXPECT_EQ(Vec<int64_t>(c), (std::vector<int64_t>{7, 7, 7, 7}));
  Tensor z = RunOk("ConstantOfShape", 9, {I64({3})});
  EXPECT_EQ(Vec<float>(z), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(RunOk("ConstantOfShape", 9, {I64({}, {0})}).shape(), Shape{});
  ExpectError("ConstantOfShape", 9, {I64({2, -1})}, {}, "negative dimension");

  EXPECT_EQ(Vec<int64_t>(RunOk("Range", 11,
                               {Tensor::Scalar<int64_t>(10), Tensor::Scalar<int64_t>(4), Tensor::Scalar<int64_t>(-3)})),
            (std::vector<int64_t>{10, 7}));
  EXPECT_EQ(Vec<float>(RunOk("Range", 11, {Tensor::Scalar(1.0f), Tensor::Scalar(2.0f), Tensor::Scalar(0.25f)})),
            (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(RunOk("Range", 11, {Tensor::Scalar(3.0f), Tensor::Scalar(1.0f), Tensor::Scalar(1.0f)}).shape(), (Shape{0}));
  ExpectError("Range", 11, {Tensor::Scalar(1.0f), Tensor::Scalar(2.0f), Tensor::Scalar(0.0f)}, {}, "non-zero");

  Tensor e = RunOk("EyeLike", 9, {F32({}, {2, 3})}, {{"k", Attribute::Int(1)}, {"dtype", Attribute::Int(7)}});
  EXPECT_EQ(e.dtype(), DataType::kInt64);
  EXPECT_EQ(Vec<int64_t>(e), (std::vector<int64_t>{0, 1, 0, 0, 0, 1}));
  ExpectError("EyeLike", 9, {F32(Iota(3), {3})}, {}, "must be 2-D");
}

// ---------------------------------------------------------------- copies

TEST(TensorOps, TransposeSmall) {
  Tensor x = F32(Iota(6), {2, 3});
  Tensor y = RunOk("Transpose", 13, {x});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(Vec<float>(y), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor x3 = F32(Iota(24), {2, 3, 4});
  Tensor y3 = RunOk("Transpose", 13, {x3}, {{"perm", Attribute::Ints({1, 0, 2})}});
  EXPECT_EQ(y3.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(Vec<float>(y3)[4], 12.0f);  // y[0,1,0] = x[1,0,0]
  Tensor s = RunOk("Transpose", 13, {Str({"a", "b", "c", "d"}, {2, 2})});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"a", "c", "b", "d"}));
  EXPECT_EQ(RunOk("Transpose", 13, {F32({}, {0, 3})}).shape(), (Shape{3, 0}));
  EXPECT_EQ(Vec<float>(RunOk("Transpose", 13, {F32({4}, {})})), std::vector<float>{4});
  ExpectError("Transpose", 13, {x}, {{"perm", Attribute::Ints({0, 0})}}, "not a permutation");
  ExpectError("Transpose", 13, {x}, {{"perm", Attribute::Ints({0, 1, 2})}}, "does not match input rank 2");
}

// Large NCHW->NHWC and 2-D transposes hit the tiled and parallel paths; compare with a naive loop.
TEST(TensorOps, TransposeTiledMatchesNaive) {
  ThreadPool pool(2);
  const int64_t n = 2, c = 37, h = 29, w = 31;
  Tensor x = F32(Iota(n * c * h * w), {n, c, h, w});
  Tensor y = RunOk("Transpose", 13, {x}, {{"perm", Attribute::Ints({0, 2, 3, 1})}}, 1, 0, &pool);
  ASSERT_EQ(y.shape(), (Shape{n, h, w, c}));
  const float* xp = x.data<float>();
  const float* yp = y.data<float>();
  int bad = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < h; ++b)
      for (int64_t d = 0; d < w; ++d)
        for (int64_t e = 0; e < c; ++e) bad += yp[((a * h + b) * w + d) * c + e] != xp[((a * c + e) * h + b) * w + d];
  EXPECT_EQ(bad, 0);
  Tensor back = RunOk("Transpose", 13, {y}, {{"perm", Attribute::Ints({0, 3, 1, 2})}}, 1, 0, &pool);
  EXPECT_EQ(Vec<float>(back), Vec<float>(x));
  Tensor m = F32(Iota(300 * 257), {300, 257});
  Tensor mt = RunOk("Transpose", 13, {m}, {}, 1, 0, &pool);
  bad = 0;
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 257; ++j) bad += mt.data<float>()[j * 300 + i] != m.data<float>()[i * 257 + j];
  EXPECT_EQ(bad, 0);
}

TEST(TensorOps, ConcatAndSplit) {
  Tensor a = F32({1, 2, 3, 4}, {2, 2}), b = F32({5, 6}, {2, 1}), e = F32({}, {2, 0});
  Tensor y = RunOk("Concat", 13, {a, e, b}, {{"axis", Attribute::Int(-1)}});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(Vec<float>(y), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  Tensor s = RunOk("Concat", 13, {Str({"x"}, {1}), Str({"y", "z"}, {2})}, {{"axis", Attribute::Int(0)}});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"x", "y", "z"}));
  ExpectError("Concat", 13, {a, F32({1, 2, 3}, {3, 1})}, {{"axis", Attribute::Int(1)}}, "does not match input 0");
  ExpectError("Concat", 13, {a, I64({1, 2}, {2, 1})}, {{"axis", Attribute::Int(1)}}, "does not match input 0");

  Tensor x = F32(Iota(6), {6});
  RunResult r = RunOp("Split", 13, {x, I64({2, 4})}, {}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{0, 1}));
  EXPECT_EQ(Vec<float>(r.outputs[1].tensor()), (std::vector<float>{2, 3, 4, 5}));
  r = RunOp("Split", 11, {F32(Iota(6), {2, 3})}, {{"axis", Attribute::Int(-1)}, {"split", Attribute::Ints({1, 2})}}, 2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<float>(r.outputs[1].tensor()), (std::vector<float>{1, 2, 4, 5}));
  r = RunOp("Split", 13, {x}, {}, 3);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<float>(r.outputs[2].tensor()), (std::vector<float>{4, 5}));
  ExpectError("Split", 13, {x}, {}, "cannot be split evenly", 4);
  ExpectError("Split", 13, {x, I64({2, 3})}, {}, "sum to 5", 2);
}

// Concats with many rows (an NHWC channel concat: one row per pixel) copy every input's
// segment row by row in one parallel pass; few rows keep one copy per input. Both against
// the element-wise definition: an NHWC-like [2,5,7,C] concat on the last axis (an empty
// input among them), on axis 2 of the same shapes, on axis 0 (two rows: the per-input
// copies), int64, uint8 and float16 (2-byte) elements, 1 and 2 threads.
TEST(TensorOps, ConcatRowsMatchTheDefinition) {
  ThreadPool pool2(2);
  struct Case {
    Shape a, b, c;
    int64_t axis;
  };
  const Case cases[] = {
      {{2, 5, 7, 3}, {2, 5, 7, 0}, {2, 5, 7, 5}, -1},
      {{2, 5, 3, 4}, {2, 5, 1, 4}, {2, 5, 6, 4}, 2},
      {{1, 33, 40}, {2, 33, 40}, {1, 33, 40}, 0},
  };
  for (const Case& cs : cases)
    for (DataType dt : {DataType::kInt64, DataType::kUInt8, DataType::kFloat16})
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        std::vector<Tensor> in;
        int64_t next = 1;
        for (const Shape& s : {cs.a, cs.b, cs.c}) {
          std::vector<int64_t> v(static_cast<size_t>(NumElements(s)));
          for (auto& x : v) x = next++ % 251;  // fits every dtype exactly
          Tensor t64 = I64(v, s);
          Tensor t = Tensor::Allocate(dt, s).value();
          for (int64_t i = 0; i < t.num_elements(); ++i) {
            const int64_t x = t64.data<int64_t>()[i];
            if (dt == DataType::kInt64) t.mutable_data<int64_t>()[i] = x;
            if (dt == DataType::kUInt8) t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(x);
            if (dt == DataType::kFloat16) {
              const uint16_t h = FloatToHalf(static_cast<float>(x));
              std::memcpy(static_cast<uint8_t*>(t.raw_mutable_data()) + i * 2, &h, 2);
            }
          }
          in.push_back(t);
        }
        const int64_t rank = static_cast<int64_t>(cs.a.size()), axis = cs.axis < 0 ? cs.axis + rank : cs.axis;
        Tensor y = RunOk("Concat", 13, {in[0], in[1], in[2]}, {{"axis", Attribute::Int(cs.axis)}}, 1, 0, pool);
        Shape want_shape = cs.a;
        want_shape[axis] = cs.a[axis] + cs.b[axis] + cs.c[axis];
        ASSERT_EQ(y.shape(), want_shape);
        const size_t es = DataTypeSize(dt);
        // Element (outer, k, inner) of Y comes from the input holding index k along axis.
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < axis; ++d) outer *= want_shape[d];
        for (int64_t d = axis + 1; d < rank; ++d) inner *= want_shape[d];
        const auto* yb = static_cast<const uint8_t*>(y.raw_data());
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < want_shape[axis]; ++k) {
            int64_t src = 0, kk = k;
            while (kk >= in[src].dim(axis)) kk -= in[src++].dim(axis);
            const int64_t len = in[src].dim(axis);
            const auto* xb = static_cast<const uint8_t*>(in[src].raw_data()) + ((o * len + kk) * inner) * es;
            const auto* got = yb + ((o * want_shape[axis] + k) * inner) * es;
            ASSERT_EQ(std::memcmp(got, xb, inner * es), 0)
                << DataTypeName(dt) << " axis " << cs.axis << " row " << o << " index " << k
                << (pool ? " 2 threads" : " 1 thread");
          }
      }
}

TEST(TensorOps, Slice) {
  Tensor x = F32(Iota(12), {3, 4});
  // Rows 0..1, columns reversed from the end with step -2.
  Tensor y = RunOk("Slice", 13, {x, I64({0, -1}), I64({2, INT64_MIN}), I64({0, 1}), I64({1, -2})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<float>(y), (std::vector<float>{3, 1, 7, 5}));
  // INT64_MAX end, negative axis, clamped start.
  Tensor z = RunOk("Slice", 13, {x, I64({-100}), I64({INT64_MAX}), I64({-2})});
  EXPECT_EQ(Vec<float>(z), Vec<float>(x));
  // Full reverse of axis 0.
  Tensor r = RunOk("Slice", 13, {x, I64({-1}), I64({INT64_MIN}), I64({0}), I64({-1})});
  EXPECT_EQ(Vec<float>(r)[0], 8.0f);
  // Empty result.
  EXPECT_EQ(RunOk("Slice", 13, {x, I64({2}), I64({1}), I64({1})}).shape(), (Shape{3, 0}));
  // Zero-size axis with a negative step.
  EXPECT_EQ(RunOk("Slice", 13, {F32({}, {0, 2}), I64({-1}), I64({INT64_MIN}), I64({0}), I64({-1})}).shape(),
            (Shape{0, 2}));
  // Opset 1 attributes.
  Tensor a = RunOk("Slice", 1, {x}, {{"starts", Attribute::Ints({1})}, {"ends", Attribute::Ints({1000})}, {"axes", Attribute::Ints({1})}});
  EXPECT_EQ(a.shape(), (Shape{3, 3}));
  Tensor s = RunOk("Slice", 13, {Str({"a", "b", "c"}, {3}), I64({1}), I64({3})});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"b", "c"}));
  ExpectError("Slice", 13, {x, I64({0}), I64({1}), I64({0}), I64({0})}, {}, "step for axis 0 is 0");
  ExpectError("Slice", 13, {x, I64({0}), I64({1}), I64({2})}, {}, "out of range");
  ExpectError("Slice", 13, {x, I64({0, 0}), I64({1})}, {}, "same length");
}

TEST(TensorOps, ExpandTileWhere) {
  Tensor e = RunOk("Expand", 13, {F32({1, 2, 3}, {3, 1}), I64({2, 1, 2})});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(Vec<float>(e), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  ExpectError("Expand", 13, {F32({1, 2, 3}, {3}), I64({2})}, {}, "cannot be broadcast");

  Tensor t = RunOk("Tile", 13, {F32({1, 2, 3, 4}, {2, 2}), I64({1, 2})});
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  EXPECT_EQ(Vec<float>(t), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  Tensor t2 = RunOk("Tile", 13, {Str({"a", "b"}, {2}), I64({2})});
  EXPECT_EQ(Vec<std::string>(t2), (std::vector<std::string>{"a", "b", "a", "b"}));
  EXPECT_EQ(RunOk("Tile", 13, {F32({1, 2}, {2}), I64({0})}).shape(), (Shape{0}));
  ExpectError("Tile", 13, {F32({1, 2}, {2}), I64({1, 2})}, {}, "one entry per input dimension");

  Tensor c = T1<bool>({true, false}, {2});
  Tensor w = RunOk("Where", 16, {c, Str({"x"}, {}), Str({"p", "q", "r", "s"}, {2, 2})});
  EXPECT_EQ(Vec<std::string>(w), (std::vector<std::string>{"x", "q", "x", "s"}));
  Tensor wf = RunOk("Where", 16, {c, F32({1, 2}, {2}), F32({-1}, {1})});
  EXPECT_EQ(Vec<float>(wf), (std::vector<float>{1, -1}));
  ExpectError("Where", 16, {c, F32({1, 2, 3}, {3}), F32({0}, {1})}, {}, "cannot be broadcast");
  ExpectError("Where", 16, {c, F32({1}, {1}), I64({0}, {1})}, {}, "must have the same type");
}

TEST(TensorOps, PadModes) {
  Tensor x = F32({1, 2, 3, 4}, {2, 2});
  Tensor c = RunOk("Pad", 13, {x, I64({0, 1, 1, 0}), F32({9}, {})});
  EXPECT_EQ(c.shape(), (Shape{3, 3}));
  EXPECT_EQ(Vec<float>(c), (std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9}));
  Tensor r = RunOk("Pad", 13, {F32({1, 2, 3}, {3}), I64({2, 2})}, {{"mode", Attribute::String("reflect")}});
  EXPECT_EQ(Vec<float>(r), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  Tensor ed = RunOk("Pad", 13, {F32({1, 2, 3}, {3}), I64({2, 1})}, {{"mode", Attribute::String("edge")}});
  EXPECT_EQ(Vec<float>(ed), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  // Negative pads crop.
  Tensor crop = RunOk("Pad", 13, {F32({1, 2, 3}, {3}), I64({-1, 1})});
  EXPECT_EQ(Vec<float>(crop), (std::vector<float>{2, 3, 0}));
  // Opset 2: pads and value attributes.
  Tensor a = RunOk("Pad", 2, {F32({1}, {1})}, {{"pads", Attribute::Ints({1, 1})}, {"value", Attribute::Float(5)}});
  EXPECT_EQ(Vec<float>(a), (std::vector<float>{5, 1, 5}));
  Tensor s = RunOk("Pad", 13, {Str({"a"}, {1}), I64({1, 0})});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"", "a"}));
  ExpectError("Pad", 13, {x, I64({1, 1})}, {}, "expected 4");
  ExpectError("Pad", 13, {x, I64({0, 0, 0, 0})}, {{"mode", Attribute::String("mirror")}}, "unsupported pad mode");
  ExpectError("Pad", 13, {F32({}, {0}), I64({1, 1})}, {{"mode", Attribute::String("edge")}}, "of size 0");
}

TEST(TensorOps, DepthSpaceTriluReverse) {
  Tensor x = F32(Iota(8), {1, 8, 1, 1});
  Tensor dcr = RunOk("DepthToSpace", 13, {x}, {{"blocksize", Attribute::Int(2)}});
  EXPECT_EQ(dcr.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(Vec<float>(dcr), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  Tensor crd = RunOk("DepthToSpace", 13, {x}, {{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String("CRD")}});
  EXPECT_EQ(Vec<float>(crd), Iota(8));
  Tensor s2d = RunOk("SpaceToDepth", 13, {F32(Iota(8), {1, 2, 2, 2})}, {{"blocksize", Attribute::Int(2)}});
  EXPECT_EQ(s2d.shape(), (Shape{1, 8, 1, 1}));
  EXPECT_EQ(Vec<float>(s2d), (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  // SpaceToDepth inverts DCR DepthToSpace.
  Tensor round = RunOk("SpaceToDepth", 13, {dcr}, {{"blocksize", Attribute::Int(2)}});
  EXPECT_EQ(Vec<float>(round), Iota(8));
  ExpectError("DepthToSpace", 13, {F32(Iota(6), {1, 6, 1, 1})}, {{"blocksize", Attribute::Int(2)}}, "not divisible");
  // Blocksizes whose square, or product with a dim, leaves int64 (UBSan found INT64_MAX^2):
  // an error naming the blocksize; empty tensors keep working with sane ones.
  for (int64_t b : {INT64_MAX, int64_t{1} << 32, int64_t{1} << 62}) {
    ExpectError("DepthToSpace", 13, {x}, {{"blocksize", Attribute::Int(b)}}, "is too large");
    ExpectError("DepthToSpace", 13, {F32({}, {1, 0, 2, 2})}, {{"blocksize", Attribute::Int(b)}}, "is too large");
    ExpectError("SpaceToDepth", 13, {F32({}, {1, 3, 0, 0})}, {{"blocksize", Attribute::Int(b)}}, "is too large");
  }
  EXPECT_EQ(RunOk("DepthToSpace", 13, {F32({}, {1, 0, 2, 2})}, {{"blocksize", Attribute::Int(3)}}).shape(),
            (Shape{1, 0, 6, 6}));
  EXPECT_EQ(RunOk("SpaceToDepth", 13, {F32({}, {1, 3, 0, 0})}, {{"blocksize", Attribute::Int(4)}}).shape(),
            (Shape{1, 48, 0, 0}));

  Tensor m = F32(Iota(9), {3, 3});
  EXPECT_EQ(Vec<float>(RunOk("Trilu", 14, {m})), (std::vector<float>{0, 1, 2, 0, 4, 5, 0, 0, 8}));
  EXPECT_EQ(Vec<float>(RunOk("Trilu", 14, {m, Tensor::Scalar<int64_t>(-1)}, {{"upper", Attribute::Int(0)}})),
            (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 0}));

  Tensor seq = F32(Iota(8), {4, 2});  // time-major [time=4, batch=2]
  Tensor rs = RunOk("ReverseSequence", 10, {seq, I64({3, 1})});
  EXPECT_EQ(Vec<float>(rs), (std::vector<float>{4, 1, 2, 3, 0, 5, 6, 7}));
  ExpectError("ReverseSequence", 10, {seq, I64({5, 1})}, {}, "outside [0, 4]");
}

// ---------------------------------------------------------------- indexing

TEST(TensorOps, Gather) {
  Tensor x = F32(Iota(6), {3, 2});
  Tensor y = RunOk("Gather", 13, {x, I64({2, -3}, {2})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<float>(y), (std::vector<float>{4, 5, 0, 1}));
  Tensor col = RunOk("Gather", 13, {x, T1<int32_t>({1}, {})}, {{"axis", Attribute::Int(-1)}});
  EXPECT_EQ(col.shape(), (Shape{3}));
  EXPECT_EQ(Vec<float>(col), (std::vector<float>{1, 3, 5}));
  Tensor s = RunOk("Gather", 13, {Str({"a", "b", "c"}, {3}), I64({2, 2, 0}, {3})});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"c", "c", "a"}));
  EXPECT_EQ(RunOk("Gather", 13, {x, I64({}, {0})}).shape(), (Shape{0, 2}));
  ExpectError("Gather", 13, {x, I64({3}, {1})}, {}, "index 3 is out of range");
  ExpectError("Gather", 13, {x, I64({-4}, {1})}, {}, "index -4 is out of range");
  ExpectError("Gather", 13, {x, F32({0}, {1})}, {}, "must be int32 or int64");
}

TEST(TensorOps, GatherElementsAndND) {
  Tensor x = F32({1, 2, 3, 4}, {2, 2});
  Tensor ge = RunOk("GatherElements", 13, {x, I64({0, 0, 1, 0}, {2, 2})}, {{"axis", Attribute::Int(1)}});
  EXPECT_EQ(Vec<float>(ge), (std::vector<float>{1, 1, 4, 3}));
  ExpectError("GatherElements", 13, {x, I64({0, 2}, {1, 2})}, {{"axis", Attribute::Int(0)}}, "out of range");
  ExpectError("GatherElements", 13, {x, I64({0, 0, 0}, {1, 3})}, {{"axis", Attribute::Int(0)}}, "exceeds data shape");

  Tensor g = RunOk("GatherND", 13, {x, I64({1, 0, 0, 1}, {2, 2})});
  EXPECT_EQ(Vec<float>(g), (std::vector<float>{3, 2}));
  Tensor rows = RunOk("GatherND", 13, {x, I64({1, 0}, {2, 1})});
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<float>(rows), (std::vector<float>{3, 4, 1, 2}));
  // batch_dims = 1: data [2,2,2], indices [2,1] pick one row per batch.
  Tensor d3 = F32(Iota(8), {2, 2, 2});
  Tensor b = RunOk("GatherND", 13, {d3, I64({1, 0}, {2, 1})}, {{"batch_dims", Attribute::Int(1)}});
  EXPECT_EQ(b.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<float>(b), (std::vector<float>{2, 3, 4, 5}));
  ExpectError("GatherND", 13, {x, I64({2, 0}, {1, 2})}, {}, "index 2 is out of range");
  ExpectError("GatherND", 13, {x, I64({0, 0, 0}, {1, 3})}, {}, "last dimension 3");
}

TEST(TensorOps, ScatterNDAndElements) {
  Tensor x = F32({1, 2, 3, 4}, {4});
  Tensor s = RunOk("ScatterND", 13, {x, I64({1, 3}, {2, 1}), F32({10, 20}, {2})});
  EXPECT_EQ(Vec<float>(s), (std::vector<float>{1, 10, 3, 20}));
  Tensor add = RunOk("ScatterND", 16, {x, I64({1, 1}, {2, 1}), F32({10, 20}, {2})}, {{"reduction", Attribute::String("add")}});
  EXPECT_EQ(Vec<float>(add), (std::vector<float>{1, 32, 3, 4}));
  Tensor mul = RunOk("ScatterND", 16, {x, I64({0}, {1, 1}), F32({5}, {1})}, {{"reduction", Attribute::String("mul")}});
  EXPECT_EQ(Vec<float>(mul), (std::vector<float>{5, 2, 3, 4}));
  Tensor str = RunOk("ScatterND", 13, {Str({"a", "b"}, {2}), I64({1}, {1, 1}), Str({"z"}, {1})});
  EXPECT_EQ(Vec<std::string>(str), (std::vector<std::string>{"a", "z"}));
  ExpectError("ScatterND", 13, {x, I64({4}, {1, 1}), F32({1}, {1})}, {}, "out of range");
  ExpectError("ScatterND", 13, {x, I64({1}, {1, 1}), F32({1, 2}, {2})}, {}, "updates shape");
  ExpectError("ScatterND", 16, {x, I64({1}, {1, 1}), F32({1}, {1})}, {{"reduction", Attribute::String("max")}}, "reduction");

  Tensor d = F32(Iota(6), {2, 3});
  Tensor se = RunOk("ScatterElements", 13, {d, I64({-1, 0}, {1, 2}), F32({10, 20}, {1, 2})}, {{"axis", Attribute::Int(0)}});
  EXPECT_EQ(Vec<float>(se), (std::vector<float>{0, 20, 2, 10, 4, 5}));
  Tensor sea = RunOk("ScatterElements", 18, {d, I64({2, 2}, {1, 2}), F32({10, -1}, {1, 2})},
                     {{"axis", Attribute::Int(1)}, {"reduction", Attribute::String("max")}});
  EXPECT_EQ(Vec<float>(sea), (std::vector<float>{0, 1, 10, 3, 4, 5}));
  Tensor legacy = RunOk("Scatter", 9, {d, I64({1}, {1, 1}), F32({7}, {1, 1})}, {{"axis", Attribute::Int(1)}});
  EXPECT_EQ(Vec<float>(legacy), (std::vector<float>{0, 7, 2, 3, 4, 5}));
  ExpectError("ScatterElements", 13, {d, I64({3}, {1, 1}), F32({1}, {1, 1})}, {{"axis", Attribute::Int(1)}}, "out of range");
}

TEST(TensorOps, OneHotNonZeroCompress) {
  Tensor oh = RunOk("OneHot", 11, {I64({0, 2, -1, 5}), Tensor::Scalar(3.0f), F32({0, 1}, {2})});
  EXPECT_EQ(oh.shape(), (Shape{4, 3}));
  EXPECT_EQ(Vec<float>(oh), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0}));
  Tensor oh0 = RunOk("OneHot", 11, {I64({1, 0}), Tensor::Scalar<int64_t>(2), I64({5, 9})}, {{"axis", Attribute::Int(0)}});
  EXPECT_EQ(oh0.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<int64_t>(oh0), (std::vector<int64_t>{5, 9, 9, 5}));
  ExpectError("OneHot", 11, {I64({0}), Tensor::Scalar(3.0f), F32({0, 1, 2}, {3})}, {}, "two elements");

  Tensor nz = RunOk("NonZero", 13, {F32({0, 1, 2, 0}, {2, 2})});
  EXPECT_EQ(nz.shape(), (Shape{2, 2}));
  EXPECT_EQ(Vec<int64_t>(nz), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(RunOk("NonZero", 13, {T1<bool>({false}, {1})}).shape(), (Shape{1, 0}));
  EXPECT_EQ(RunOk("NonZero", 13, {F32({3}, {})}).shape(), (Shape{1, 1}));

  Tensor x = F32(Iota(6), {3, 2});
  Tensor c0 = RunOk("Compress", 11, {x, T1<bool>({false, true, true}, {3})}, {{"axis", Attribute::Int(0)}});
  EXPECT_EQ(Vec<float>(c0), (std::vector<float>{2, 3, 4, 5}));
  Tensor cf = RunOk("Compress", 11, {x, T1<bool>({false, true, false, true}, {4})});
  EXPECT_EQ(cf.shape(), (Shape{2}));
  EXPECT_EQ(Vec<float>(cf), (std::vector<float>{1, 3}));
  ExpectError("Compress", 11, {x, T1<bool>({false, false, false, true}, {4})}, {{"axis", Attribute::Int(0)}}, "selects index 3");
}

// ---------------------------------------------------------------- ordering

TEST(TensorOps, TopK) {
  Tensor x = F32({1, 3, 3, 2, 5, 5, 4, 0}, {2, 4});
  RunResult r = RunOp("TopK", 11, {x, I64({2})}, {}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{3, 3, 5, 5}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[1].tensor()), (std::vector<int64_t>{1, 2, 0, 1}));  // ties: lower index first
  r = RunOp("TopK", 11, {x, I64({3})}, {{"largest", Attribute::Int(0)}, {"axis", Attribute::Int(1)}}, 2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[1].tensor()), (std::vector<int64_t>{0, 3, 1, 3, 2, 0}));
  r = RunOp("TopK", 1, {I64({4, 9, 1}, {3})}, {{"k", Attribute::Int(1)}}, 2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<int64_t>(r.outputs[0].tensor()), std::vector<int64_t>{9});
  // NaN counts as the largest value and never breaks the sort.
  r = RunOp("TopK", 11, {F32({1, NAN, 2}, {3}), I64({1})}, {}, 2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<int64_t>(r.outputs[1].tensor()), std::vector<int64_t>{1});
  ExpectError("TopK", 11, {x, I64({5})}, {}, "k = 5 is outside [0, 4]", 2);
}

// Both of TopK's orderings (a heap for k <= dim / 64, a selection and a sort above) against a
// stable sort of each line, with many ties and NaNs, along the last axis and a strided one.
TEST(TensorOps, TopKMatchesAStableSort) {
  ThreadPool pool(2);
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int64_t dim : {1, 7, 65, 640, 4097}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, dim / 64, dim / 64 + 1, dim / 2, dim - 1, dim}) {
      if (k < 0 || k > dim) continue;
      for (int largest : {0, 1}) {
        for (int axis : {0, 1}) {
          const int64_t lines = 3;
          const Shape shape = axis == 1 ? Shape{lines, dim} : Shape{dim, lines};
          std::vector<float> v(static_cast<size_t>(lines * dim));
          for (float& f : v) {
            const uint32_t r = next() >> 8;
            f = r % 97 == 0 ? NAN : static_cast<float>(static_cast<int>(r % 41) - 20);  // ties
          }
          RunResult r = RunOp("TopK", 11, {F32(v, shape), I64({k})},
                              {{"axis", Attribute::Int(axis)}, {"largest", Attribute::Int(largest)}}, 2, &pool);
          ASSERT_TRUE(r.status.ok()) << r.status.ToString();
          const std::vector<float> got = Vec<float>(r.outputs[0].tensor());
          const std::vector<int64_t> got_i = Vec<int64_t>(r.outputs[1].tensor());
          ASSERT_EQ(got_i.size(), static_cast<size_t>(lines * k));
          for (int64_t line = 0; line < lines; ++line) {
            auto at = [&](int64_t j) { return axis == 1 ? v[line * dim + j] : v[j * lines + line]; };
            // NaN above every number; stable: the lower index first among equals.
            auto rank = [&](float f) { return std::isnan(f) ? INFINITY : f; };
            std::vector<int64_t> order(static_cast<size_t>(dim));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
              const float fa = at(a), fb = at(b);
              if (std::isnan(fa) && std::isnan(fb)) return false;
              if (std::isnan(fa) != std::isnan(fb)) return largest ? std::isnan(fa) : std::isnan(fb);
              return largest ? rank(fa) > rank(fb) : rank(fa) < rank(fb);
            });
            for (int64_t j = 0; j < k; ++j) {
              const size_t o = static_cast<size_t>(axis == 1 ? line * k + j : j * lines + line);
              ASSERT_EQ(got_i[o], order[j]) << "dim " << dim << " k " << k << " largest " << largest << " axis "
                                            << axis << " line " << line << " rank " << j;
              const float want = at(order[j]);
              EXPECT_TRUE(std::isnan(want) ? std::isnan(got[o]) : got[o] == want);
            }
          }
        }
      }
    }
  }
}

TEST(TensorOps, Unique) {
  Tensor x = F32({2, 1, 1, 3, 4, 3}, {6});
  RunResult r = RunOp("Unique", 11, {x}, {}, 4);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[1].tensor()), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[2].tensor()), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[3].tensor()), (std::vector<int64_t>{2, 1, 2, 1}));
  r = RunOp("Unique", 11, {x}, {{"sorted", Attribute::Int(0)}}, 4);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[1].tensor()), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[2].tensor()), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[3].tensor()), (std::vector<int64_t>{1, 2, 2, 1}));
  Tensor m = F32({1, 0, 0, 1, 0, 0, 2, 3, 4}, {3, 3});
  r = RunOp("Unique", 11, {m}, {{"axis", Attribute::Int(0)}}, 4);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(Vec<float>(r.outputs[0].tensor()), (std::vector<float>{1, 0, 0, 2, 3, 4}));
  EXPECT_EQ(Vec<int64_t>(r.outputs[2].tensor()), (std::vector<int64_t>{0, 0, 1}));
  Tensor s = RunOk("Unique", 11, {Str({"b", "a", "b"}, {3})});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(RunOk("Unique", 11, {F32({}, {0})}).shape(), (Shape{0}));
}

TEST(TensorOps, CumSum) {
  Tensor x = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(Vec<float>(RunOk("CumSum", 14, {x, Tensor::Scalar<int32_t>(1)})), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(
      Vec<float>(RunOk("CumSum", 14, {x, Tensor::Scalar<int64_t>(-1)}, {{"exclusive", Attribute::Int(1)}, {"reverse", Attribute::Int(1)}})),
      (std::vector<float>{5, 3, 0, 11, 6, 0}));
  EXPECT_EQ(Vec<int64_t>(RunOk("CumSum", 14, {I64({1, 2}, {2, 1}), Tensor::Scalar<int64_t>(0)})),
            (std::vector<int64_t>{1, 3}));
  ExpectError("CumSum", 14, {x, Tensor::Scalar<int64_t>(2)}, {}, "out of range");
}

// ---------------------------------------------------------------- cast

Attribute To(DataType t) { return Attribute::Int(static_cast<int64_t>(t)); }

TEST(TensorOps, CastNumeric) {
  Tensor x = F32({1.7f, -1.7f, 0.0f, 300.0f}, {4});
  EXPECT_EQ(Vec<int32_t>(RunOk("Cast", 13, {x}, {{"to", To(DataType::kInt32)}})),
            (std::vector<int32_t>{1, -1, 0, 300}));
  EXPECT_EQ(Vec<bool>(RunOk("Cast", 13, {x}, {{"to", To(DataType::kBool)}})),
            (std::vector<bool>{true, true, false, true}));
  // NaN and out-of-range values convert without undefined behaviour.
  Tensor odd = RunOk("Cast", 13, {F32({NAN, 1e30f}, {2})}, {{"to", To(DataType::kInt32)}});
  EXPECT_EQ(Vec<int32_t>(odd)[0], 0);
  // bfloat16 rounds to nearest even: 1 + 2^-8 ties down to 1, 1 + 3*2^-8 ties up.
  Tensor bf = RunOk("Cast", 13, {F32({1.00390625f, 1.01171875f}, {2})}, {{"to", To(DataType::kBFloat16)}});
  EXPECT_EQ(static_cast<float>(bf.data<BFloat16>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(bf.data<BFloat16>()[1]), 1.015625f);
  Tensor h = RunOk("Cast", 13, {T1<double>({0.1, 65504.0}, {2})}, {{"to", To(DataType::kFloat16)}});
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x2e66);
  EXPECT_EQ(static_cast<float>(h.data<Float16>()[1]), 65504.0f);
  Tensor back = RunOk("Cast", 13, {h}, {{"to", To(DataType::kUInt8)}});
  EXPECT_EQ(Vec<uint8_t>(back)[0], 0);
  EXPECT_EQ(Vec<uint8_t>(RunOk("Cast", 13, {I64({257, -1})}, {{"to", To(DataType::kUInt8)}})),
            (std::vector<uint8_t>{1, 255}));
  // Cast-1 names the target type with a string.
  EXPECT_EQ(RunOk("Cast", 1, {x}, {{"to", Attribute::String("DOUBLE")}}).dtype(), DataType::kDouble);
  Tensor like = RunOk("CastLike", 15, {I64({3}), Tensor::Scalar(0.5f)});
  EXPECT_EQ(like.dtype(), DataType::kFloat);
  EXPECT_EQ(Vec<float>(like), std::vector<float>{3.0f});
  EXPECT_EQ(RunOk("Cast", 13, {F32({}, {0, 2})}, {{"to", To(DataType::kInt8)}}).shape(), (Shape{0, 2}));
  ExpectError("Cast", 13, {x}, {{"to", Attribute::Int(99)}}, "to");
}

TEST(TensorOps, CastStrings) {
  Tensor s = RunOk("Cast", 13, {F32({0.1f, 0.9767611f, -2.5f, 1e-05f, NAN, INFINITY, -INFINITY}, {7})},
                   {{"to", To(DataType::kString)}});
  EXPECT_EQ(Vec<std::string>(s), (std::vector<std::string>{"0.1", "0.9767611", "-2.5", "1e-05", "NaN", "INF", "-INF"}));
  EXPECT_EQ(Vec<std::string>(RunOk("Cast", 13, {I64({-42})}, {{"to", To(DataType::kString)}})),
            std::vector<std::string>{"-42"});
  Tensor f = RunOk("Cast", 13, {Str({"0.47892547", "NaN", "INF", "+INF", "-INF", "1e3"}, {6})},
                   {{"to", To(DataType::kFloat)}});
  auto v = Vec<float>(f);
  EXPECT_EQ(v[0], 0.47892547f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], INFINITY);
  EXPECT_EQ(v[3], INFINITY);
  EXPECT_EQ(v[4], -INFINITY);
  EXPECT_EQ(v[5], 1000.0f);
  EXPECT_EQ(Vec<int64_t>(RunOk("Cast", 13, {Str({"-7", "12"}, {2})}, {{"to", To(DataType::kInt64)}})),
            (std::vector<int64_t>{-7, 12}));
  ExpectError("Cast", 13, {Str({"abc"}, {1})}, {{"to", To(DataType::kFloat)}}, "cannot convert string \"abc\"");
  ExpectError("Cast", 13, {Str({"300"}, {1})}, {{"to", To(DataType::kInt8)}}, "cannot convert string \"300\"");
}

// ---------------------------------------------------------------- upsample

TEST(TensorOps, Upsample) {
  Tensor x = F32({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor n = RunOk("Upsample", 9, {x, F32({1, 1, 2, 2}, {4})});
  EXPECT_EQ(n.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(Vec<float>(n), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  Tensor l = RunOk("Upsample", 7, {F32({1, 3}, {1, 2})}, {{"scales", Attribute::Floats({1, 2})}, {"mode", Attribute::String("linear")}});
  EXPECT_EQ(Vec<float>(l), (std::vector<float>{1, 2, 3, 3}));
  Tensor bl = RunOk("Upsample", 9, {x, F32({1, 1, 2, 2}, {4})}, {{"mode", Attribute::String("linear")}});
  EXPECT_EQ(Vec<float>(bl)[5], 2.5f);  // centre of the four inputs (1+2+3+4)/4
  ExpectError("Upsample", 9, {x, F32({1, 1, 0.5f, 2}, {4})}, {}, "must be finite and >= 1");
  EXPECT_EQ(RunOp("Upsample", 10, {x, F32({1, 1, 2, 2}, {4})}).status.code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata
