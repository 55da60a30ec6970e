// ai.onnx opsets 18-23 (core/opset_schemas.cc and the kernels that gained new versions):
// models stamped as current exporters write them import, and each changed op runs with its
// new meaning, optimized and with reference kernels. Expected values are worked out by hand
// from the ONNX spec (ONNX Runtime 1.30 agrees on all of them: opset_parity.py). Ops new or
// changed in an opset this build has no schema for, and the new attributes strata does not
// implement, are refused with errors that name them.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "onnx_builder.h"
#include "run_both.h"

namespace strata {
namespace {

using namespace onnx_builder;  // NOLINT: MakeModel, AddInput, AddOutput, AddNode, SetInt(s), Serialize
using onnx::TensorProto;

// A model at `opset` with the IR version exporters pair with it.
onnx::ModelProto ModelAt(int opset) {
  onnx::ModelProto m = MakeModel(opset);
  m.set_ir_version(opset >= 21 ? 10 : opset >= 19 ? 9 : 8);
  return m;
}

void AddInts(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& v, bool scalar = false) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

void AddFloats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<float>& v) {
  AddFloatInit(g, name, dims, [&](size_t) { return v; });
}

void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void SetFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// An output of element type `elem` and rank `rank` with unknown dims.
void AddOutputOfRank(onnx::GraphProto* g, const std::string& name, int rank, int elem = TensorProto::FLOAT) {
  auto* v = g->add_output();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int i = 0; i < rank; ++i) shape->add_dim();
}

Value F(const Shape& shape, const std::vector<float>& v) { return Value(Tensor::FromVector<float>(v, shape)); }

template <typename T>
std::vector<T> Data(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Runs `m` optimized and with reference kernels; both must give `want` (float outputs,
// within `tol`) with shape `shape`.
void ExpectOutputs(const onnx::ModelProto& m, const std::vector<std::pair<std::string, Value>>& feeds,
                   const std::vector<std::pair<Shape, std::vector<float>>>& want, float tol = 1e-5f) {
  test::OptRefRuns r = test::RunOptimizedAndReference(m, feeds);
  for (const auto* run : {&r.opt, &r.ref}) {
    ASSERT_EQ(run->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const Tensor& t = (*run)[i].tensor();
      EXPECT_EQ(t.shape(), want[i].first) << "output " << i;
      if (t.shape() != want[i].first) continue;
      std::vector<float> got = Data<float>((*run)[i]);
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_NEAR(got[k], want[i].second[k], tol) << "output " << i << "[" << k << "]";
    }
  }
}

Status Load(const onnx::ModelProto& m) {
  const std::string bytes = Serialize(m);
  return Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{}).status();
}

Status LoadAndRun(const onnx::ModelProto& m, const std::vector<std::pair<std::string, Value>>& feeds) {
  const std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  if (!s.ok()) return s.status();
  return (*s)->Run(feeds).status();
}

void ExpectError(const Status& st, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(st.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
}

// ---- opset 18

TEST(NewerOpsets, ReduceTakesAxesAsAnInput18) {
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2, 3});
  AddInts(g, "axes", {1});
  auto* mean = AddNode(g, "ReduceMean", {"X", "axes"}, {"M"});
  SetInt(mean, "keepdims", 0);
  AddNode(g, "ReduceMax", {"X"}, {"A"});  // no axes: every axis
  AddOutputOfRank(g, "M", 1);
  AddOutputOfRank(g, "A", 2);
  ExpectOutputs(m, {{"X", F({2, 3}, {1, 2, 6, -1, 0, 4})}}, {{{2}, {3, 1}}, {{1, 1}, {6}}});
}

TEST(NewerOpsets, SplitNumOutputsLeavesTheLastChunkShort18) {
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {7});
  SetInt(AddNode(g, "Split", {"X"}, {"A", "B", "C"}), "num_outputs", 3);
  for (const char* o : {"A", "B", "C"}) AddOutputOfRank(g, o, 1);
  ExpectOutputs(m, {{"X", F({7}, {0, 1, 2, 3, 4, 5, 6})}}, {{{3}, {0, 1, 2}}, {{3}, {3, 4, 5}}, {{1}, {6}}});
}

TEST(NewerOpsets, PadOnlyTheGivenAxes18AndWrap19) {
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2, 2});
  AddInts(g, "pads", {1, 2});  // axis 1: one before, two after
  AddInts(g, "axes", {-1});
  AddFloats(g, "cv", {}, {9});
  AddNode(g, "Pad", {"X", "pads", "cv", "axes"}, {"Y"});
  AddOutputOfRank(g, "Y", 2);
  ExpectOutputs(m, {{"X", F({2, 2}, {1, 2, 3, 4})}}, {{{2, 5}, {9, 1, 2, 9, 9, 9, 3, 4, 9, 9}}});

  auto w = ModelAt(19);
  auto* gw = w.mutable_graph();
  AddInput(gw, "X", {1, 3});
  AddInts(gw, "pads", {0, 1, 0, 2});
  SetString(AddNode(gw, "Pad", {"X", "pads"}, {"Y"}), "mode", "wrap");
  AddOutputOfRank(gw, "Y", 2);
  ExpectOutputs(w, {{"X", F({1, 3}, {1, 2, 3})}}, {{{1, 6}, {3, 1, 2, 3, 1, 2}}});
}

TEST(NewerOpsets, ResizeScalesOnlyTheGivenAxes18) {
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 1, 2, 2});
  AddFloats(g, "scales", {1}, {2});
  auto* n = AddNode(g, "Resize", {"X", "", "scales"}, {"Y"});
  SetInts(n, "axes", {3});
  SetString(n, "coordinate_transformation_mode", "asymmetric");
  SetString(n, "nearest_mode", "floor");
  AddOutputOfRank(g, "Y", 4);
  ExpectOutputs(m, {{"X", F({1, 1, 2, 2}, {1, 2, 3, 4})}}, {{{1, 1, 2, 4}, {1, 1, 2, 2, 3, 3, 4, 4}}});
}

TEST(NewerOpsets, ResizeKeepsTheAspectRatio18) {
  // 2x4 to sizes 3x8: not_larger takes min(3/2, 8/4) = 1.5 (3x6), not_smaller max = 2 (4x8).
  for (const auto& [policy, want] :
       std::vector<std::pair<std::string, Shape>>{{"not_larger", {1, 1, 3, 6}}, {"not_smaller", {1, 1, 4, 8}}}) {
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 1, 2, 4});
    AddInts(g, "sizes", {3, 8});
    auto* n = AddNode(g, "Resize", {"X", "", "", "sizes"}, {"Y"});
    SetInts(n, "axes", {2, 3});
    SetString(n, "keep_aspect_ratio_policy", policy);
    AddOutputOfRank(g, "Y", 4);
    test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"X", F({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
    ASSERT_EQ(r.opt.size(), 1u) << policy;
    EXPECT_EQ(r.opt[0].tensor().shape(), want) << policy;
    EXPECT_EQ(r.ref[0].tensor().shape(), want) << policy;
  }
}

TEST(NewerOpsets, ResizeHalfPixelSymmetricCentresTheOutput19) {
  // Length 4 scaled by 0.6: 2 outputs (2.4 rounded down); adjustment 2 / 2.4, offset
  // 2 * (1 - 5/6) = 1/3, x = 1/3 + (o + 0.5) / 0.6 - 0.5 -> 2/3 and 7/3 (linear in 0, 1, 2, 3).
  auto m = ModelAt(19);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 4});
  AddFloats(g, "scales", {2}, {1, 0.6f});
  auto* n = AddNode(g, "Resize", {"X", "", "scales"}, {"Y"});
  SetString(n, "mode", "linear");
  SetString(n, "coordinate_transformation_mode", "half_pixel_symmetric");
  AddOutputOfRank(g, "Y", 2);
  ExpectOutputs(m, {{"X", F({1, 4}, {0, 1, 2, 3})}}, {{{1, 2}, {2.0f / 3, 7.0f / 3}}});
}

TEST(NewerOpsets, ResizeAntialiasWidensTheFilter18) {
  // Length 8 halved, linear, half_pixel: x = 2o + 0.5; the triangle stretched by 2 spans
  // offsets -1..2 around floor(x) with weights 0.25, 0.75, 0.75, 0.25 (normalized: / 2), the
  // left edge padded: [0.625, 2.5, 4.5, 6.375]. Without antialias it would be [0.5, 2.5, ...].
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 8});
  AddFloats(g, "scales", {2}, {1, 0.5f});
  auto* n = AddNode(g, "Resize", {"X", "", "scales"}, {"Y"});
  SetString(n, "mode", "linear");
  SetInt(n, "antialias", 1);
  AddOutputOfRank(g, "Y", 2);
  ExpectOutputs(m, {{"X", F({1, 8}, {0, 1, 2, 3, 4, 5, 6, 7})}}, {{{1, 4}, {0.625f, 2.5f, 4.5f, 6.375f}}});
}

TEST(NewerOpsets, ResizeAntialiasRefusesAFilterTooWide) {
  // 2^24 + 1 bytes to one: the filter would span over 2^24 taps.
  const int64_t len = (int64_t{1} << 24) + 1;
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {len}, TensorProto::UINT8);
  AddInts(g, "sizes", {1});
  auto* n = AddNode(g, "Resize", {"X", "", "", "sizes"}, {"Y"});
  SetString(n, "mode", "linear");
  SetInt(n, "antialias", 1);
  AddOutputOfRank(g, "Y", 1, TensorProto::UINT8);
  auto x = Tensor::Zeros(DataType::kUInt8, {len});
  ASSERT_TRUE(x.ok());
  ExpectError(LoadAndRun(m, {{"X", Value(std::move(*x))}}), StatusCode::kInvalidArgument,
              "would need a filter over 2^24 taps wide");
}

// Group normalization in double: scale and bias per group (18) or per channel (21).
std::vector<float> GroupNormRef(const std::vector<float>& x, int64_t c, int64_t inner, int64_t groups,
                                const std::vector<float>& scale, const std::vector<float>& bias, bool per_channel) {
  std::vector<float> y(x.size());
  const int64_t per = c / groups, len = per * inner;
  for (int64_t ng = 0; ng < static_cast<int64_t>(x.size()) / len; ++ng) {
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < len; ++k) sum += x[ng * len + k];
    const double mean = sum / len;
    for (int64_t k = 0; k < len; ++k) sq += (x[ng * len + k] - mean) * (x[ng * len + k] - mean);
    const double inv = 1 / std::sqrt(sq / len + 1e-5);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t g = ng % groups, p = per_channel ? g * per + k / inner : g;
      y[ng * len + k] = static_cast<float>((x[ng * len + k] - mean) * inv * scale[p] + bias[p]);
    }
  }
  return y;
}

TEST(NewerOpsets, GroupNormalizationPerGroup18AndPerChannel21) {
  const std::vector<float> x = test::Pseudo(2 * 4 * 3, 11, 2.0f);
  for (int opset : {18, 21}) {
    const bool per_channel = opset == 21;
    const std::vector<float> scale = per_channel ? std::vector<float>{0.5f, 2, -1, 1.5f} : std::vector<float>{0.5f, 2};
    const std::vector<float> bias = per_channel ? std::vector<float>{0, 1, -1, 0.25f} : std::vector<float>{0.1f, -0.3f};
    auto m = ModelAt(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2, 4, 3});
    AddFloats(g, "s", {static_cast<int64_t>(scale.size())}, scale);
    AddFloats(g, "b", {static_cast<int64_t>(bias.size())}, bias);
    SetInt(AddNode(g, "GroupNormalization", {"X", "s", "b"}, {"Y"}), "num_groups", 2);
    AddOutputOfRank(g, "Y", 3);
    ExpectOutputs(m, {{"X", F({2, 4, 3}, x)}}, {{{2, 4, 3}, GroupNormRef(x, 4, 3, 2, scale, bias, per_channel)}},
                  1e-4f);
  }
}

// ---- opsets 19-21

TEST(NewerOpsets, BlockedQuantizeLinearRoundTrip21) {
  // x [1, 4], blocks of 2 along axis 1: scales 0.5 and 0.25, int8 by output_dtype.
  auto m = ModelAt(21);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 4});
  AddFloats(g, "s", {1, 2}, {0.5f, 0.25f});
  auto* q = AddNode(g, "QuantizeLinear", {"X", "s"}, {"Q"});
  SetInt(q, "axis", 1);
  SetInt(q, "block_size", 2);
  SetInt(q, "output_dtype", TensorProto::INT8);
  auto* d = AddNode(g, "DequantizeLinear", {"Q", "s"}, {"D"});
  SetInt(d, "axis", 1);
  SetInt(d, "block_size", 2);
  AddOutputOfRank(g, "Q", 2, TensorProto::INT8);
  AddOutputOfRank(g, "D", 2);
  test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"X", F({1, 4}, {1.0f, -2.2f, 1.0f, -40.0f})}});
  for (const auto* run : {&r.opt, &r.ref}) {
    ASSERT_EQ(run->size(), 2u);
    ASSERT_EQ((*run)[0].tensor().dtype(), DataType::kInt8);
    EXPECT_EQ(Data<int8_t>((*run)[0]), (std::vector<int8_t>{2, -4, 4, -128}));
    EXPECT_EQ(Data<float>((*run)[1]), (std::vector<float>{1.0f, -2.0f, 1.0f, -32.0f}));
  }
}

TEST(NewerOpsets, DequantizeLinearTakesTheScalesType19) {
  // float16 scales (allowed from opset 19) give a float16 y: (q - zp) * scale.
  auto m = ModelAt(19);
  auto* g = m.mutable_graph();
  AddInput(g, "Q", {3}, TensorProto::INT8);
  auto* sc = g->add_initializer();
  sc->set_name("s");
  sc->set_data_type(TensorProto::FLOAT16);
  sc->add_int32_data(0x3400);  // 0.25
  AddNode(g, "DequantizeLinear", {"Q", "s"}, {"Y"});
  AddOutputOfRank(g, "Y", 1, TensorProto::FLOAT16);
  test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"Q", Value(Tensor::FromVector<int8_t>({4, -8, 100}, {3}))}});
  for (const auto* run : {&r.opt, &r.ref}) {
    ASSERT_EQ(run->size(), 1u);
    const Tensor& y = (*run)[0].tensor();
    ASSERT_EQ(y.dtype(), DataType::kFloat16);
    EXPECT_EQ(static_cast<float>(y.data<Float16>()[0]), 1.0f);
    EXPECT_EQ(static_cast<float>(y.data<Float16>()[1]), -2.0f);
    EXPECT_EQ(static_cast<float>(y.data<Float16>()[2]), 25.0f);
  }
}

TEST(NewerOpsets, DftAxisInput20MatchesTheAttribute17) {
  const std::vector<float> x = test::Pseudo(2 * 6 * 3, 5);
  std::vector<std::vector<float>> outs;
  for (int opset : {17, 20}) {
    auto m = ModelAt(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2, 6, 3, 1});
    onnx::NodeProto* n = nullptr;
    if (opset == 17) {
      n = AddNode(g, "DFT", {"X"}, {"Y"});
      SetInt(n, "axis", 2);
    } else {
      AddInts(g, "axis", {-2}, /*scalar=*/true);  // the last signal axis: 2 here
      n = AddNode(g, "DFT", {"X", "", "axis"}, {"Y"});
    }
    AddOutputOfRank(g, "Y", 4);
    test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"X", F({2, 6, 3, 1}, x)}});
    ASSERT_EQ(r.opt.size(), 1u);
    EXPECT_EQ(r.opt[0].tensor().shape(), (Shape{2, 6, 3, 2}));
    outs.push_back(Data<float>(r.opt[0]));
  }
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(NewerOpsets, Gelu20ErfAndTanhForms) {
  const std::vector<float> x = {-3, -1, -0.25f, 0, 0.5f, 1, 2.5f};
  for (const std::string approx : {"none", "tanh"}) {
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {7});
    SetString(AddNode(g, "Gelu", {"X"}, {"Y"}), "approximate", approx);
    AddOutputOfRank(g, "Y", 1);
    std::vector<float> want;
    for (float v : x) {
      const double d = v;
      want.push_back(static_cast<float>(
          approx == "none" ? 0.5 * d * (1 + std::erf(d / std::sqrt(2.0)))
                           : 0.5 * d * (1 + std::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d * d * d)))));
    }
    ExpectOutputs(m, {{"X", F({7}, x)}}, {{{7}, want}}, 2e-6f);
  }
}

TEST(NewerOpsets, TypeOnlyVersionsRunAsBefore) {
  // The same graph at opset 17 and at 22: Conv, HardSwish, MaxPool, Flatten, Unsqueeze,
  // Transpose, Squeeze, Reshape, Cast, Shape and Size all have newer versions that only add
  // types; the outputs must not change.
  std::vector<std::vector<float>> outs;
  for (int opset : {17, 22}) {
    auto m = ModelAt(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 2, 6, 6});
    test::AddInit(g, "W", {3, 2, 3, 3}, 3);
    AddInts(g, "a0", {0});
    AddInts(g, "shape", {-1, 3});
    SetInts(AddNode(g, "Conv", {"X", "W"}, {"c"}), "pads", {1, 1, 1, 1});
    AddNode(g, "HardSwish", {"c"}, {"h"});
    auto* mp = AddNode(g, "MaxPool", {"h"}, {"p"});
    SetInts(mp, "kernel_shape", {2, 2});
    SetInts(mp, "strides", {2, 2});
    SetInt(AddNode(g, "Flatten", {"p"}, {"f"}), "axis", 1);
    AddNode(g, "Unsqueeze", {"f", "a0"}, {"u"});
    SetInts(AddNode(g, "Transpose", {"u"}, {"t"}), "perm", {0, 2, 1});
    AddNode(g, "Squeeze", {"t", "a0"}, {"s"});
    AddNode(g, "Reshape", {"s", "shape"}, {"r"});
    SetInt(AddNode(g, "Cast", {"r"}, {"Y"}), "to", TensorProto::DOUBLE);
    AddNode(g, "Shape", {"r"}, {"S"});
    AddNode(g, "Size", {"r"}, {"N"});
    AddOutputOfRank(g, "Y", 2, TensorProto::DOUBLE);
    AddOutputOfRank(g, "S", 1, TensorProto::INT64);
    AddOutputOfRank(g, "N", 0, TensorProto::INT64);
    test::OptRefRuns r = test::RunOptimizedAndReference(m, {{"X", F({1, 2, 6, 6}, test::Pseudo(72, 9))}});
    ASSERT_EQ(r.opt.size(), 3u);
    EXPECT_EQ(Data<int64_t>(r.opt[1]), (std::vector<int64_t>{9, 3}));
    EXPECT_EQ(Data<int64_t>(r.opt[2]), (std::vector<int64_t>{27}));
    std::vector<double> y = Data<double>(r.opt[0]);
    outs.emplace_back(y.begin(), y.end());
  }
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(NewerOpsets, Col2ImSumsOverlappingBlocks18) {
  // Image of 4, block of 2, stride 1: positions 0..2; image[p + k] += input[k][p].
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 2, 3});
  AddInts(g, "img", {4});
  AddInts(g, "blk", {2});
  AddNode(g, "Col2Im", {"X", "img", "blk"}, {"Y"});
  AddOutputOfRank(g, "Y", 3);
  ExpectOutputs(m, {{"X", F({1, 2, 3}, {1, 2, 3, 10, 20, 30})}}, {{{1, 1, 4}, {1, 12, 23, 30}}});
}

TEST(NewerOpsets, CenterCropPadCropsAndPadsAroundTheCentre18) {
  auto m = ModelAt(18);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 5});
  AddInts(g, "crop", {3});
  AddInts(g, "pad", {8});
  SetInts(AddNode(g, "CenterCropPad", {"X", "crop"}, {"A"}), "axes", {1});
  SetInts(AddNode(g, "CenterCropPad", {"X", "pad"}, {"B"}), "axes", {-1});
  AddOutputOfRank(g, "A", 2);
  AddOutputOfRank(g, "B", 2);
  ExpectOutputs(m, {{"X", F({1, 5}, {0, 1, 2, 3, 4})}}, {{{1, 3}, {1, 2, 3}}, {{1, 8}, {0, 0, 1, 2, 3, 4, 0, 0}}});
}

TEST(NewerOpsets, AffineGridOfTheIdentity20) {
  for (int align : {0, 1}) {
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "T", {1, 2, 3});
    AddInts(g, "size", {1, 1, 2, 2});
    SetInt(AddNode(g, "AffineGrid", {"T", "size"}, {"Y"}), "align_corners", align);
    AddOutputOfRank(g, "Y", 4);
    const float e = align ? 1.0f : 0.5f;  // pixel centres at +-0.5, or the corners at +-1
    ExpectOutputs(m, {{"T", F({1, 2, 3}, {1, 0, 0, 0, 1, 0})}}, {{{1, 2, 2, 2}, {-e, -e, e, -e, -e, e, e, e}}});
  }
}

TEST(NewerOpsets, StringOps20) {
  auto m = ModelAt(20);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {3}, TensorProto::STRING);
  AddInput(g, "S", {1}, TensorProto::STRING);
  auto* comma = AddNode(g, "StringSplit", {"X"}, {"P", "N"});
  SetString(comma, "delimiter", ",");
  SetInt(AddNode(g, "StringSplit", {"X"}, {"W", "M"}), "maxsplit", 1);
  AddNode(g, "StringConcat", {"X", "S"}, {"C"});
  SetString(AddNode(g, "RegexFullMatch", {"X"}, {"R"}), "pattern", "[a-z,]+");
  for (const char* o : {"P", "W", "C"}) AddOutputOfRank(g, o, o[0] == 'C' ? 1 : 2, TensorProto::STRING);
  AddOutputOfRank(g, "N", 1, TensorProto::INT64);
  AddOutputOfRank(g, "M", 1, TensorProto::INT64);
  AddOutputOfRank(g, "R", 1, TensorProto::BOOL);
  const std::string bytes = Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto out = (*s)->Run({{"X", Value(Tensor::FromVector<std::string>({"a,,b", "  x  y z ", ""}, {3}))},
                        {"S", Value(Tensor::FromVector<std::string>({"!"}, {1}))}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto& o = *out;  // P, W, C, N, M, R: the graph's output order
  EXPECT_EQ(o[0].tensor().shape(), (Shape{3, 3}));
  EXPECT_EQ(Data<std::string>(o[0]), (std::vector<std::string>{"a", "", "b", "  x  y z ", "", "", "", "", ""}));
  EXPECT_EQ(Data<int64_t>(o[3]), (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(Data<std::string>(o[1]), (std::vector<std::string>{"a,,b", "", "x", "y z", "", ""}));
  EXPECT_EQ(Data<int64_t>(o[4]), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(Data<std::string>(o[2]), (std::vector<std::string>{"a,,b!", "  x  y z !", "!"}));
  const Tensor& r = o[5].tensor();
  EXPECT_EQ(std::vector<bool>(r.data<bool>(), r.data<bool>() + 3), (std::vector<bool>{true, false, false}));
}

TEST(NewerOpsets, DeformConvSamplesAtTheOffsets19) {
  // A 1x1 kernel of weight 1 over [[1, 2], [3, 4]], every tap moved down half a pixel: row 0
  // reads halfway to row 1, row 1 halfway to a zero row below the image; the mask halves the
  // first position: [0.5 * 2, 3, 1.5, 2].
  auto m = ModelAt(19);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 1, 2, 2});
  AddFloats(g, "W", {1, 1, 1, 1}, {1});
  AddFloats(g, "off", {1, 2, 2, 2}, {0.5f, 0.5f, 0.5f, 0.5f, 0, 0, 0, 0});  // dy for 4 positions, then dx
  AddFloats(g, "mask", {1, 1, 2, 2}, {0.5f, 1, 1, 1});
  AddNode(g, "DeformConv", {"X", "W", "off", "", "mask"}, {"Y"});
  AddOutputOfRank(g, "Y", 4);
  ExpectOutputs(m, {{"X", F({1, 1, 2, 2}, {1, 2, 3, 4})}}, {{{1, 1, 2, 2}, {1, 3, 1.5f, 2}}});
}

// ---- refused by name

TEST(NewerOpsets, OpsetAndIrVersionBeyondTheBuildAreRefused) {
  auto m = ModelAt(22);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Relu", {"X"}, {"Y"});
  AddOutput(g, "Y", {2});
  m.mutable_opset_import(0)->set_version(24);
  ExpectError(Load(m), StatusCode::kUnsupported, "at opset 24; this build knows opsets 1 to 23");
  m.mutable_opset_import(0)->set_version(23);
  m.set_ir_version(12);
  ExpectError(Load(m), StatusCode::kInvalidModel, "ir_version 12 is newer than this build reads (up to 11)");
}

TEST(NewerOpsets, Float8AndInt4TensorsAreNamed) {
  // IR 9-10 element types strata has no tensor type for, as a graph input or output.
  for (const auto& [elem, name] : std::vector<std::pair<int, std::string>>{{17, "FLOAT8E4M3FN"}, {22, "INT4"}}) {
    auto m = ModelAt(21);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {4}, elem);
    AddFloats(g, "s", {}, {0.5f});
    AddNode(g, "DequantizeLinear", {"X", "s"}, {"Y"});
    AddOutput(g, "Y", {4});
    ExpectError(Load(m), StatusCode::kUnsupported,
                "graph input 'X' has element type " + name + " (" + std::to_string(elem) +
                    "), which strata has no tensor type for");
  }
  auto m = ModelAt(19);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {4});
  SetInt(AddNode(g, "Cast", {"X"}, {"Y"}), "to", 19);
  AddOutput(g, "Y", {4}, 19);
  ExpectError(Load(m), StatusCode::kUnsupported, "graph output 'Y' has element type FLOAT8E5M2 (19)");
}

TEST(NewerOpsets, RmsNormalizationAndRotaryEmbedding23) {
  // RMSNormalization: [3, 4] / sqrt(mean(9, 16) + eps) * [1, 2] = [0.8485, 2.2627].
  auto m = ModelAt(23);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 2});
  AddFloats(g, "s", {2}, {1, 2});
  SetFloat(AddNode(g, "RMSNormalization", {"X", "s"}, {"Y"}), "epsilon", 0.0f);
  AddOutputOfRank(g, "Y", 2);
  const float r = 1.0f / std::sqrt(12.5f);
  ExpectOutputs(m, {{"X", F({1, 2}, {3, 4})}}, {{{1, 2}, {3 * r, 8 * r}}});

  // RotaryEmbedding without position_ids: caches [B, S, 1], one row per token; a head of
  // 2 rotated by 90 degrees (cos 0, sin 1): (a, b) -> (-b, a).
  auto m2 = ModelAt(23);
  auto* g2 = m2.mutable_graph();
  AddInput(g2, "X", {1, 1, 2, 2});  // [batch, heads, sequence, head_size]
  AddFloats(g2, "cos", {1, 2, 1}, {0, 1});
  AddFloats(g2, "sin", {1, 2, 1}, {1, 0});
  AddNode(g2, "RotaryEmbedding", {"X", "cos", "sin"}, {"Y"});
  AddOutputOfRank(g2, "Y", 4);
  ExpectOutputs(m2, {{"X", F({1, 1, 2, 2}, {1, 2, 3, 4})}}, {{{1, 1, 2, 2}, {-2, 1, 3, 4}}});
}

TEST(NewerOpsets, NewOpsWithoutAnImplementationAreNamed) {
  {
    auto m = ModelAt(23);
    auto* g = m.mutable_graph();
    AddInput(g, "Q", {1, 1, 2, 4});
    AddNode(g, "Attention", {"Q", "Q", "Q"}, {"Y"}, "attn");
    AddOutput(g, "Y", {1, 1, 2, 4});
    ExpectError(Load(m), StatusCode::kUnsupported,
                "node 'attn' (Attention): Attention is new in ai.onnx opset 23 and this build does not implement it");
  }
  for (int opset : {20, 22}) {
    auto m = ModelAt(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2}, TensorProto::UINT8);
    AddNode(g, "ImageDecoder", {"X"}, {"Y"}, "the_node");
    AddOutput(g, "Y", {2}, TensorProto::UINT8);
    ExpectError(Load(m), StatusCode::kUnsupported,
                "node 'the_node' (ImageDecoder): ImageDecoder is new in ai.onnx opset 20 and this build does not "
                "implement it");
  }
}

TEST(NewerOpsets, SubgraphAndFunctionNodesAreCheckedToo) {
  auto m = ModelAt(20);
  auto* g = m.mutable_graph();
  AddInput(g, "C", {}, TensorProto::BOOL);
  AddInput(g, "X", {2});
  auto* iff = AddNode(g, "If", {"C"}, {"Y"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* b = AddGraphAttr(iff, branch);
    AddNode(b, "ImageDecoder", {"X"}, {"o"}, std::string(branch) + "_decoder");
    AddOutput(b, "o", {2});
  }
  AddOutput(g, "Y", {2});
  ExpectError(Load(m), StatusCode::kUnsupported, "node 'then_branch_decoder' (ImageDecoder): ImageDecoder is new");

  auto f = ModelAt(18);
  auto* fg = f.mutable_graph();
  AddInput(fg, "X", {2});
  AddNode(fg, "Wrap", {"X"}, {"Y"})->set_domain("local");
  AddOutput(fg, "Y", {2});
  auto* fn = AddLocalFunction(&f, "local", "Wrap");
  fn->add_input("x");
  fn->add_output("y");
  auto* imp = fn->add_opset_import();
  imp->set_domain("");
  imp->set_version(20);
  auto* inner = fn->add_node();
  inner->set_op_type("ImageDecoder");
  inner->set_name("inside");
  inner->add_input("x");
  inner->add_output("y");
  ExpectError(Load(f), StatusCode::kUnsupported,
              "function 'Wrap' node 'inside' (ImageDecoder): ImageDecoder is new in ai.onnx opset 20");
}

TEST(NewerOpsets, ResizeRefusesAttributesItCannotMean) {
  struct Bad {
    const char* what;
    std::function<void(onnx::NodeProto*)> edit;
    std::vector<int64_t> sizes;
    StatusCode code;
    std::string needle;
  };
  const std::vector<Bad> cases = {
      {"repeated axis",
       [](onnx::NodeProto* n) {
         SetInts(n, "axes", {2, -2});
       },
       {2, 2},
       StatusCode::kInvalidModel,
       "axis -2 appears twice in axes"},
      {"axis out of range",
       [](onnx::NodeProto* n) { SetInts(n, "axes", {4}); },
       {2},
       StatusCode::kInvalidModel,
       "axes value 4 is out of range for X of rank 4"},
      {"unknown policy",
       [](onnx::NodeProto* n) { SetString(n, "keep_aspect_ratio_policy", "fit"); },
       {1, 1, 2, 2},
       StatusCode::kInvalidModel,
       "unknown keep_aspect_ratio_policy 'fit'"},
      {"sizes count vs axes",
       [](onnx::NodeProto* n) { SetInts(n, "axes", {3}); },
       {2, 2},
       StatusCode::kInvalidArgument,
       "'sizes' has 2 values but the number of axes is 1"},
  };
  for (const Bad& b : cases) {
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 1, 4, 4});
    AddInts(g, "sizes", b.sizes);
    auto* n = AddNode(g, "Resize", {"X", "", "", "sizes"}, {"Y"});
    SetString(n, "mode", "linear");
    b.edit(n);
    AddOutputOfRank(g, "Y", 4);
    SCOPED_TRACE(b.what);
    ExpectError(LoadAndRun(m, {{"X", F({1, 1, 4, 4}, std::vector<float>(16, 1.0f))}}), b.code, b.needle);
  }
}

TEST(NewerOpsets, NewAttributesWithBadValuesAreNamed) {
  {  // blocked scale of the wrong shape
    auto m = ModelAt(21);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2, 6});
    AddFloats(g, "s", {2, 2}, {1, 1, 1, 1});
    auto* q = AddNode(g, "QuantizeLinear", {"X", "s"}, {"Y"});
    SetInt(q, "axis", 1);
    SetInt(q, "block_size", 2);
    AddOutputOfRank(g, "Y", 2, TensorProto::UINT8);
    ExpectError(LoadAndRun(m, {{"X", F({2, 6}, std::vector<float>(12, 0.5f))}}), StatusCode::kInvalidArgument,
                "with block_size 2 along axis 1 the scale must have shape [2,3], got [2,2]");
  }
  {  // output_dtype strata has no 8-bit kernel for
    auto m = ModelAt(21);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2});
    AddFloats(g, "s", {}, {1});
    SetInt(AddNode(g, "QuantizeLinear", {"X", "s"}, {"Y"}), "output_dtype", TensorProto::INT16);
    AddOutputOfRank(g, "Y", 1, TensorProto::INT16);
    ExpectError(LoadAndRun(m, {{"X", F({2}, {1, 2})}}), StatusCode::kUnsupported,
                "output_dtype 5 is not supported (uint8 = 2 and int8 = 3 are)");
  }
  {  // groups that do not divide the channels
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 4, 2});
    AddFloats(g, "s", {3}, {1, 1, 1});
    AddFloats(g, "b", {3}, {0, 0, 0});
    SetInt(AddNode(g, "GroupNormalization", {"X", "s", "b"}, {"Y"}), "num_groups", 3);
    AddOutputOfRank(g, "Y", 3);
    ExpectError(LoadAndRun(m, {{"X", F({1, 4, 2}, std::vector<float>(8, 1.0f))}}), StatusCode::kInvalidArgument,
                "num_groups 3 must be positive and divide the 4 channels");
  }
  {  // Gelu's approximate
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2});
    SetString(AddNode(g, "Gelu", {"X"}, {"Y"}), "approximate", "sigmoid");
    AddOutputOfRank(g, "Y", 1);
    ExpectError(LoadAndRun(m, {{"X", F({2}, {1, 2})}}), StatusCode::kInvalidModel,
                "unknown approximate 'sigmoid' (expected none or tanh)");
  }
  {  // Split's num_outputs against the node's outputs
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {6});
    SetInt(AddNode(g, "Split", {"X"}, {"A", "B", "C"}), "num_outputs", 2);
    for (const char* o : {"A", "B", "C"}) AddOutputOfRank(g, o, 1);
    ExpectError(LoadAndRun(m, {{"X", F({6}, std::vector<float>(6, 1.0f))}}), StatusCode::kInvalidModel,
                "num_outputs 2 but the node has 3 outputs");
  }
  {  // DeformConv: offsets of the wrong shape, and 3-D input
    for (bool three_d : {false, true}) {
      auto m = ModelAt(19);
      auto* g = m.mutable_graph();
      AddInput(g, "X", {1, 1, 4, 4});
      AddFloats(g, "W", {1, 1, 2, 2}, {1, 1, 1, 1});
      if (three_d) {
        g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
        g->mutable_initializer(0)->add_dims(1);
      }
      AddFloats(g, "off", {1, 4, 3, 3}, std::vector<float>(36, 0.0f));  // needs 2 * 4 = 8 channels
      AddNode(g, "DeformConv", {"X", "W", "off"}, {"Y"});
      AddOutputOfRank(g, "Y", three_d ? 5 : 4);
      const Shape xs = three_d ? Shape{1, 1, 4, 4, 1} : Shape{1, 1, 4, 4};
      ExpectError(LoadAndRun(m, {{"X", F(xs, std::vector<float>(16, 1.0f))}}),
                  three_d ? StatusCode::kUnsupported : StatusCode::kInvalidArgument,
                  three_d ? "only 2-D DeformConv is implemented" : "offset must be [1,8,3,3], got [1,4,3,3]");
    }
  }
  {  // Col2Im: L is not the number of block positions
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 2, 5});
    AddInts(g, "img", {4});
    AddInts(g, "blk", {2});
    AddNode(g, "Col2Im", {"X", "img", "blk"}, {"Y"});
    AddOutputOfRank(g, "Y", 3);
    ExpectError(LoadAndRun(m, {{"X", F({1, 2, 5}, std::vector<float>(10, 1.0f))}}), StatusCode::kInvalidArgument,
                "input dim 2 (5) must be the number of block positions, 3");
  }
  {  // AffineGrid: theta for 3-D with a 2-D size
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "T", {1, 3, 4});
    AddInts(g, "size", {1, 1, 2, 2});
    AddNode(g, "AffineGrid", {"T", "size"}, {"Y"});
    AddOutputOfRank(g, "Y", 4);
    ExpectError(LoadAndRun(m, {{"T", F({1, 3, 4}, std::vector<float>(12, 0.0f))}}), StatusCode::kInvalidArgument,
                "theta must be [N, 2, 3] with N = size[0] = 1, got [1,3,4]");
  }
  {  // CenterCropPad: a negative length
    auto m = ModelAt(18);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2, 2});
    AddInts(g, "shape", {2, -1});
    AddNode(g, "CenterCropPad", {"X", "shape"}, {"Y"});
    AddOutputOfRank(g, "Y", 2);
    ExpectError(LoadAndRun(m, {{"X", F({2, 2}, {1, 2, 3, 4})}}), StatusCode::kInvalidArgument,
                "shape[1] = -1 is negative");
  }
  {  // RegexFullMatch: not an RE2 pattern
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1}, TensorProto::STRING);
    SetString(AddNode(g, "RegexFullMatch", {"X"}, {"Y"}), "pattern", "(unclosed");
    AddOutputOfRank(g, "Y", 1, TensorProto::BOOL);
    ExpectError(LoadAndRun(m, {{"X", Value(Tensor::FromVector<std::string>({"a"}, {1}))}}), StatusCode::kInvalidModel,
                "pattern '(unclosed' is not a valid RE2 regular expression");
  }
  {  // StringConcat: shapes that do not broadcast
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "A", {2}, TensorProto::STRING);
    AddInput(g, "B", {3}, TensorProto::STRING);
    AddNode(g, "StringConcat", {"A", "B"}, {"Y"});
    AddOutputOfRank(g, "Y", 1, TensorProto::STRING);
    const Status st = LoadAndRun(m, {{"A", Value(Tensor::FromVector<std::string>({"a", "b"}, {2}))},
                                     {"B", Value(Tensor::FromVector<std::string>({"c", "d", "e"}, {3}))}});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("StringConcat"), std::string::npos) << st.ToString();
  }
  {  // DFT's axis input out of range
    auto m = ModelAt(20);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {1, 4, 1});
    AddInts(g, "axis", {2}, /*scalar=*/true);
    AddNode(g, "DFT", {"X", "", "axis"}, {"Y"});
    AddOutputOfRank(g, "Y", 3);
    ExpectError(LoadAndRun(m, {{"X", F({1, 4, 1}, {1, 2, 3, 4})}}), StatusCode::kInvalidArgument,
                "axis 2 is out of range for input shape [1,4,1]");
  }
}

}  // namespace
}  // namespace strata
