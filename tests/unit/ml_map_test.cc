// The ai.onnx.ml map ops (cpu/ml_map.cc: ZipMap, CastMap, DictVectorizer) and map values
// (MakeMap in core/tensor.cc). Expected values are spelled out by hand; where ONNX Runtime 1.30
// settles what the spec leaves open (a repeated ZipMap label keeps its last column, CastMap's
// "%f" strings and "0.f" pad, DictVectorizer's zero for absent keys) the expectation is its
// behaviour. Every bad attribute and input has a test whose error must name it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RunKernelValues;
using testing::ToVector;

constexpr char kMl[] = "ai.onnx.ml";

OpSpec Ml(const char* op) { return OpSpec(op, 1, kMl); }
Tensor F32(const Shape& s, const std::vector<double>& v) { return MakeTensor(DataType::kFloat, s, v); }
Tensor I64(const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}); }
Tensor Str(const std::vector<std::string>& v) {
  return Tensor::FromVector<std::string>(v, {static_cast<int64_t>(v.size())});
}

Value MapOf(const Tensor& keys, const Tensor& values) {
  auto m = MakeMap(keys, values, "test map");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Value();
}

Value RunOne(const OpSpec& spec, const Value& in) {
  auto out = RunKernelValues(spec, {in});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() && !out->empty() ? (*out)[0] : Value();
}

void ExpectError(const OpSpec& spec, const Value& in, const std::string& needle) {
  auto out = RunKernelValues(spec, {in});
  ASSERT_FALSE(out.ok()) << spec.op_type << ": expected an error naming '" << needle << "'";
  EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().ToString();
}

// ---- map values

TEST(MapValue, MakeMapSortsByKeyAndKeepsPairs) {
  auto m = MakeMap(I64({5, -1, 3}), F32({3}, {0.5, 1.5, 2.5}), "m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->is_map());
  EXPECT_EQ(ToVector<int64_t>(m->map_keys()), (std::vector<int64_t>{-1, 3, 5}));
  EXPECT_EQ(ToVector<float>(m->map_values()), (std::vector<float>{1.5f, 2.5f, 0.5f}));
  EXPECT_EQ(m->key_type(), DataType::kInt64);
  EXPECT_EQ(m->elem_type(), DataType::kFloat);

  auto s = MakeMap(Str({"b", "a", "c"}), Str({"B", "A", "C"}), "m");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ToVector<std::string>(s->map_keys()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ToVector<std::string>(s->map_values()), (std::vector<std::string>{"A", "B", "C"}));

  auto empty = MakeMap(I64({}), F32({0}, {}), "m");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->map_keys().num_elements(), 0);
}

TEST(MapValue, MakeMapRejectsBadKeysAndShapes) {
  auto dup = MakeMap(I64({1, 2, 1}), F32({3}, {0, 0, 0}), "feeds");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("key 1 appears more than once"), std::string::npos) << dup.status().ToString();
  EXPECT_NE(dup.status().message().find("feeds"), std::string::npos);
  auto dup_s = MakeMap(Str({"x", "x"}), F32({2}, {0, 0}), "m");
  ASSERT_FALSE(dup_s.ok());
  EXPECT_NE(dup_s.status().message().find("key 'x'"), std::string::npos);
  auto float_keys = MakeMap(F32({1}, {1}), F32({1}, {1}), "m");
  ASSERT_FALSE(float_keys.ok());
  EXPECT_NE(float_keys.status().message().find("int64 or string"), std::string::npos);
  auto lengths = MakeMap(I64({1, 2}), F32({3}, {0, 0, 0}), "m");
  ASSERT_FALSE(lengths.ok());
  EXPECT_NE(lengths.status().message().find("2 map keys but 3 values"), std::string::npos);
  auto rank2 = MakeMap(I64({1, 2}), F32({1, 2}, {0, 0}), "m");
  ASSERT_FALSE(rank2.ok());
  EXPECT_NE(rank2.status().message().find("1-D"), std::string::npos);
}

// ---- ZipMap

TEST(ZipMap, Int64LabelsOneMapPerRow) {
  Value out = RunOne(Ml("ZipMap").Attr("classlabels_int64s", std::vector<int64_t>{7, 3, 9}),
                     F32({2, 3}, {0.1, 0.2, 0.7, 0.5, 0.25, 0.25}));
  ASSERT_TRUE(out.is_map_sequence()) << out.Describe();
  ASSERT_EQ(out.maps().size(), 2u);
  EXPECT_EQ(out.key_type(), DataType::kInt64);
  EXPECT_EQ(out.elem_type(), DataType::kFloat);
  // Keys ascending; each value stays with its label's column.
  EXPECT_EQ(ToVector<int64_t>(out.maps()[0].map_keys()), (std::vector<int64_t>{3, 7, 9}));
  EXPECT_EQ(ToVector<float>(out.maps()[0].map_values()), (std::vector<float>{0.2f, 0.1f, 0.7f}));
  EXPECT_EQ(ToVector<float>(out.maps()[1].map_values()), (std::vector<float>{0.25f, 0.5f, 0.25f}));
}

TEST(ZipMap, StringLabelsOneDimensionalInputAndEmptyBatch) {
  OpSpec spec = Ml("ZipMap").Attr("classlabels_strings", std::vector<std::string>{"setosa", "virginica", "iris"});
  Value one = RunOne(spec, F32({3}, {0.6, 0.3, 0.1}));
  ASSERT_TRUE(one.is_map_sequence());
  ASSERT_EQ(one.maps().size(), 1u);
  EXPECT_EQ(ToVector<std::string>(one.maps()[0].map_keys()), (std::vector<std::string>{"iris", "setosa", "virginica"}));
  EXPECT_EQ(ToVector<float>(one.maps()[0].map_values()), (std::vector<float>{0.1f, 0.6f, 0.3f}));
  Value none = RunOne(spec, F32({0, 3}, {}));
  ASSERT_TRUE(none.is_map_sequence());
  EXPECT_EQ(none.maps().size(), 0u);
}

TEST(ZipMap, RepeatedLabelKeepsLastColumn) {
  Value out =
      RunOne(Ml("ZipMap").Attr("classlabels_int64s", std::vector<int64_t>{1, 0, 1}), F32({1, 3}, {0.1, 0.2, 0.7}));
  ASSERT_TRUE(out.is_map_sequence());
  EXPECT_EQ(ToVector<int64_t>(out.maps()[0].map_keys()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ToVector<float>(out.maps()[0].map_values()), (std::vector<float>{0.2f, 0.7f}));
}

TEST(ZipMap, Errors) {
  ExpectError(Ml("ZipMap"), Value(F32({1, 2}, {0, 0})), "exactly one of classlabels_strings and classlabels_int64s");
  ExpectError(Ml("ZipMap")
                  .Attr("classlabels_int64s", std::vector<int64_t>{1, 2})
                  .Attr("classlabels_strings", std::vector<std::string>{"a", "b"}),
              Value(F32({1, 2}, {0, 0})), "exactly one of");
  OpSpec spec = Ml("ZipMap").Attr("classlabels_int64s", std::vector<int64_t>{1, 2});
  ExpectError(spec, Value(F32({1, 3}, {0, 0, 0})), "3 columns but there are 2 class labels");
  ExpectError(spec, Value(F32({1, 1, 2}, {0, 0})), "[C] or [N, C]");
  ExpectError(spec, Value(MakeTensor(DataType::kDouble, {1, 2}, {0, 0})), "float64");
}

// ---- CastMap

TEST(CastMap, DenseToFloatFromFloatAndStrings) {
  Value f = RunOne(Ml("CastMap"), MapOf(I64({2, 0, 1}), F32({3}, {2.5, 0.5, 1.5})));
  ASSERT_TRUE(f.is_tensor());
  EXPECT_EQ(ShapeToString(f.tensor().shape()), "[1,3]");
  EXPECT_EQ(ToVector<float>(f.tensor()), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  // std::stof's rules: leading space and the longest numeric prefix.
  Value s = RunOne(Ml("CastMap"), MapOf(I64({0, 1}), Str({" 1.25", "2e1x"})));
  EXPECT_EQ(ToVector<float>(s.tensor()), (std::vector<float>{1.25f, 20.f}));
}

TEST(CastMap, ToStringAndToInt64) {
  Value str = RunOne(Ml("CastMap").Attr("cast_to", "TO_STRING"), MapOf(I64({0, 1}), F32({2}, {1.5, -2})));
  EXPECT_EQ(ToVector<std::string>(str.tensor()), (std::vector<std::string>{"1.500000", "-2.000000"}));
  Value keep = RunOne(Ml("CastMap").Attr("cast_to", "TO_STRING"), MapOf(I64({4}), Str({"abc"})));
  EXPECT_EQ(ToVector<std::string>(keep.tensor()), (std::vector<std::string>{"abc"}));
  Value i = RunOne(Ml("CastMap").Attr("cast_to", "TO_INT64"), MapOf(I64({0, 1}), F32({2}, {2.9, -2.9})));
  EXPECT_EQ(ToVector<int64_t>(i.tensor()), (std::vector<int64_t>{2, -2}));
  Value is = RunOne(Ml("CastMap").Attr("cast_to", "TO_INT64"), MapOf(I64({0}), Str({"-42"})));
  EXPECT_EQ(ToVector<int64_t>(is.tensor()), (std::vector<int64_t>{-42}));
}

TEST(CastMap, SparsePadsMissingKeysAndDropsKeysPastMaxMap) {
  OpSpec spec = Ml("CastMap").Attr("map_form", "SPARSE").Attr("max_map", int64_t{5});
  Value f = RunOne(spec, MapOf(I64({1, 3, 9}), F32({3}, {1, 3, 9})));
  EXPECT_EQ(ShapeToString(f.tensor().shape()), "[1,5]");
  EXPECT_EQ(ToVector<float>(f.tensor()), (std::vector<float>{0, 1, 0, 3, 0}));
  Value s = RunOne(Ml("CastMap").Attr("map_form", "SPARSE").Attr("max_map", int64_t{3}).Attr("cast_to", "TO_STRING"),
                   MapOf(I64({1}), Str({"x"})));
  EXPECT_EQ(ToVector<std::string>(s.tensor()), (std::vector<std::string>{"0.f", "x", "0.f"}));
  Value empty = RunOne(Ml("CastMap"), MapOf(I64({}), F32({0}, {})));
  EXPECT_EQ(ShapeToString(empty.tensor().shape()), "[1,0]");
}

TEST(CastMap, Errors) {
  Value m = MapOf(I64({0}), F32({1}, {1}));
  ExpectError(Ml("CastMap").Attr("cast_to", "TO_DOUBLE"), m, "cast_to 'TO_DOUBLE'");
  ExpectError(Ml("CastMap").Attr("map_form", "CSR"), m, "map_form 'CSR'");
  ExpectError(Ml("CastMap").Attr("map_form", "SPARSE").Attr("max_map", int64_t{0}), m, "max_map must be positive");
  ExpectError(Ml("CastMap").Attr("map_form", "SPARSE").Attr("max_map", int64_t{3}),
              MapOf(I64({-1, 2}), F32({2}, {1, 2})), "keys >= 0, got key -1");
  ExpectError(Ml("CastMap"), MapOf(I64({0, 7}), Str({"1", "seven"})), "value 'seven' at key 7 is not a float32");
  ExpectError(Ml("CastMap").Attr("cast_to", "TO_INT64"), MapOf(I64({3}), Str({"x1"})), "'x1' at key 3");
  ExpectError(Ml("CastMap").Attr("cast_to", "TO_INT64"),
              MapOf(I64({0}), F32({1}, {std::numeric_limits<double>::quiet_NaN()})), "does not fit in int64");
  ExpectError(Ml("CastMap").Attr("cast_to", "TO_INT64"), MapOf(I64({0}), F32({1}, {1e19})), "does not fit in int64");
  ExpectError(Ml("CastMap"), MapOf(Str({"a"}), F32({1}, {1})), "int64->float32 or int64->string");
  ExpectError(Ml("CastMap"), Value(F32({1}, {1})), "input must be a map");
}

// ---- DictVectorizer

TEST(DictVectorizer, StringVocabularyInVocabularyOrder) {
  OpSpec spec = Ml("DictVectorizer").Attr("string_vocabulary", std::vector<std::string>{"c", "a", "z", "a"});
  Value out = RunOne(spec, MapOf(Str({"a", "b", "c"}), F32({3}, {1, 2, 3})));
  ASSERT_TRUE(out.is_tensor());
  EXPECT_EQ(ShapeToString(out.tensor().shape()), "[1,4]");
  // "b" is not in the vocabulary (dropped); "z" is absent (0); "a" is listed twice.
  EXPECT_EQ(ToVector<float>(out.tensor()), (std::vector<float>{3, 1, 0, 1}));
  Value i = RunOne(spec, MapOf(Str({"z"}), I64({7})));
  EXPECT_EQ(ToVector<int64_t>(i.tensor()), (std::vector<int64_t>{0, 0, 7, 0}));
}

TEST(DictVectorizer, Int64VocabularyEveryValueType) {
  OpSpec spec = Ml("DictVectorizer").Attr("int64_vocabulary", std::vector<int64_t>{10, 20, 30});
  Value d = RunOne(spec, MapOf(I64({30, 10}), MakeTensor(DataType::kDouble, {2}, {3.5, 1.5})));
  EXPECT_EQ(d.tensor().dtype(), DataType::kDouble);
  EXPECT_EQ(ToVector<double>(d.tensor()), (std::vector<double>{1.5, 0, 3.5}));
  Value s = RunOne(spec, MapOf(I64({20}), Str({"x"})));
  EXPECT_EQ(ToVector<std::string>(s.tensor()), (std::vector<std::string>{"", "x", ""}));
  Value empty = RunOne(spec, MapOf(I64({}), F32({0}, {})));
  EXPECT_EQ(ToVector<float>(empty.tensor()), (std::vector<float>{0, 0, 0}));
}

TEST(DictVectorizer, Errors) {
  Value m = MapOf(Str({"a"}), F32({1}, {1}));
  ExpectError(Ml("DictVectorizer"), m, "exactly one of string_vocabulary and int64_vocabulary");
  ExpectError(Ml("DictVectorizer").Attr("int64_vocabulary", std::vector<int64_t>{1}), m, "int64 keys");
  ExpectError(Ml("DictVectorizer").Attr("string_vocabulary", std::vector<std::string>{"a"}),
              MapOf(Str({"a"}), MakeTensor(DataType::kInt32, {1}, {1})), "string keys must have int64, float32");
  // Schema pairs only: string -> string and int64 -> int64 are not among them.
  ExpectError(Ml("DictVectorizer").Attr("string_vocabulary", std::vector<std::string>{"a"}),
              MapOf(Str({"a"}), Str({"x"})), "must have int64, float32 or float64 values");
  ExpectError(Ml("DictVectorizer").Attr("int64_vocabulary", std::vector<int64_t>{1}), MapOf(I64({1}), I64({2})),
              "int64 keys must have string, float32 or float64 values");
  ExpectError(Ml("DictVectorizer").Attr("string_vocabulary", std::vector<std::string>{"a"}), Value(F32({1}, {1})),
              "input must be a map");
}

}  // namespace
}  // namespace strata
