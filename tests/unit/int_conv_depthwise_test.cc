// Depthwise QLinearConv / ConvInteger (cpu/int_conv_depthwise.cc, under int_conv.cc's optimized
// entry) against the reference int16 kernel, byte for byte: the in-place 3x3 path (stride 1
// and 2, padded and not, rows of 1-9 pixels: whole 4-pixel blocks, single pixels and edge
// pixels) and the ring path (5x5, 7x7/2, 1x1, dilation 2); channel counts 1, odd, 16 +/- 1, 96;
// every signedness of x, w and y; zero points per tensor and per channel; no bias, small
// biases (added in the float sum) and large ones (added in int32); saturation and non-finite
// multipliers; NCHW QLinearConv and ConvInteger, the NHWC QLinearConv; batches of 2, 1 and 2
// threads, and an empty batch. Skipped where the CPU lacks AVX-512F/BW.
#include "cpu/int_conv_depthwise.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "int_conv_test_util.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::ExpectSameAsReference;
using testing::FindKernel;
using testing::MakeTensor;
using testing::OpSpec;
using testing::Permute;
using testing::Q8;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsEqual;

struct Geo {
  int64_t h, w, kh, kw, stride, dilation;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

OpSpec Spec(const char* op, const Geo& g, int64_t group, const char* domain = "") {
  OpSpec spec(op, *domain ? 1 : 10, domain);
  spec.Attr("strides", std::vector<int64_t>{g.stride, g.stride})
      .Attr("dilations", std::vector<int64_t>{g.dilation, g.dilation})
      .Attr("pads", g.pads)
      .Attr("group", group);
  return spec;
}

std::vector<Geo> Geometries() {
  return {
      {7, 9, 3, 3, 1, 1, {1, 1, 1, 1}},    // 3x3 padded: edge pixels, a 4-block, single pixels
      {1, 1, 3, 3, 1, 1, {1, 1, 1, 1}},    // one pixel, every tap but the centre in the padding
      {5, 4, 3, 3, 1, 1, {0, 0, 0, 0}},    // unpadded: 2x2 outputs, blocks of 1
      {9, 12, 3, 3, 2, 1, {1, 1, 1, 1}},   // 3x3/2 (MobileNet's downsampling)
      {8, 11, 3, 3, 2, 1, {0, 0, 1, 1}},   // 3x3/2, padding only at the end
      {4, 5, 3, 3, 1, 1, {2, 2, 2, 2}},    // more padding than one column: several edge pixels
      {9, 8, 5, 5, 1, 1, {2, 2, 2, 2}},    // 5x5: the ring path
      {11, 13, 7, 7, 2, 1, {3, 3, 3, 3}},  // 7x7/2
      {6, 7, 3, 3, 1, 2, {2, 2, 2, 2}},    // dilation 2
      {3, 5, 1, 1, 1, 1, {0, 0, 0, 0}},    // 1x1
  };
}

bool Skip() { return !int8dw::Covers({16, 1, 3, 3}, 16); }

TEST(IntConvDepthwise, MatchesReferenceAcrossGeometriesChannelsAndTypes) {
  if (Skip()) GTEST_SKIP() << "CPU without AVX-512F/BW (or STRATA_SGEMM=0)";
  uint64_t seed = 7000;
  int geo_i = 0;
  for (const Geo& g : Geometries()) {
    ++geo_i;
    for (int64_t C : {1, 15, 16, 17, 96}) {
      const DataType xt = (seed & 1) ? DataType::kInt8 : DataType::kUInt8;
      const DataType wt = (seed & 2) ? DataType::kUInt8 : DataType::kInt8;
      const bool per_channel = (seed & 4) != 0;
      const std::string what = "geometry " + std::to_string(geo_i) + " C=" + std::to_string(C) + " x " +
                               DataTypeName(xt) + " w " + DataTypeName(wt) + (per_channel ? " per-channel" : "");
      SCOPED_TRACE(what);
      const Tensor x = Q8(xt, {2, C, g.h, g.w}, ++seed);
      const Tensor w = Q8(wt, {C, 1, g.kh, g.kw}, ++seed);
      const Tensor xzp = Q8(xt, {}, ++seed);
      const Tensor wzp = per_channel ? Q8(wt, {C}, ++seed) : Q8(wt, {}, ++seed);
      ExpectSameAsReference(Spec("ConvInteger", g, C), {x, w, xzp, wzp}, {1, 3}, what);

      const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02});
      const Tensor ws = per_channel ? RandomTensor(DataType::kFloat, {C}, ++seed, 0.0005, 0.004)
                                    : MakeTensor(DataType::kFloat, {}, {0.002});
      const Tensor ys = MakeTensor(DataType::kFloat, {}, {0.05});
      // Biases: none, small (started in the float sum), large (added in int32), and next to
      // the int32 ends, where the reference's sum wraps around.
      std::vector<double> edge(static_cast<size_t>(C));
      for (int64_t ch = 0; ch < C; ++ch)
        edge[static_cast<size_t>(ch)] = ch % 2 ? 2147483647.0 - 37.0 * ch : -2147483648.0 + 37.0 * ch;
      for (int bias_kind = 0; bias_kind < 4; ++bias_kind) {
        const DataType yt = (seed & 8) ? DataType::kInt8 : DataType::kUInt8;
        const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -7.0});
        const Tensor bias = bias_kind == 0   ? Tensor()
                            : bias_kind == 1 ? RandomTensor(DataType::kInt32, {C}, ++seed, -20000, 20000)
                            : bias_kind == 2 ? RandomTensor(DataType::kInt32, {C}, ++seed, -2147483000.0, 2147483000.0)
                                             : MakeTensor(DataType::kInt32, {C}, edge);
        const std::string wb = what + " y " + DataTypeName(yt) + " bias kind " + std::to_string(bias_kind);
        ExpectSameAsReference(Spec("QLinearConv", g, C), {x, xs, xzp, w, ws, wzp, ys, yzp, bias}, {3, 4, 5, 8}, wb);
        ++seed;
      }
    }
  }
}

// The layout pass's NhwcQLinearConv: the reference's bytes, permuted; saturation (y_scale
// 1e-4) and non-finite multipliers (y_scale 0: +-inf, and NaN where w_scale is 0) included.
TEST(IntConvDepthwise, NhwcQLinearConvMatchesReference) {
  if (Skip()) GTEST_SKIP() << "CPU without AVX-512F/BW (or STRATA_SGEMM=0)";
  uint64_t seed = 9000;
  for (const Geo& g : Geometries())
    for (int64_t C : {17, 96})
      for (double y_scale : {0.05, 1e-4, 0.0}) {
        const DataType xt = (seed & 1) ? DataType::kInt8 : DataType::kUInt8;
        const DataType yt = (seed & 2) ? DataType::kInt8 : DataType::kUInt8;
        const std::string what = "C=" + std::to_string(C) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) +
                                 " k" + std::to_string(g.kh) + " s" + std::to_string(g.stride) + " x " +
                                 DataTypeName(xt) + " y " + DataTypeName(yt) + " y_scale " + std::to_string(y_scale);
        SCOPED_TRACE(what);
        const Tensor x = Q8(xt, {2, C, g.h, g.w}, ++seed), w = Q8(DataType::kInt8, {C, 1, g.kh, g.kw}, ++seed);
        const Tensor xzp = Q8(xt, {}, ++seed), wzp = Q8(DataType::kInt8, {C}, ++seed);
        std::vector<double> wsv(static_cast<size_t>(C));
        for (int64_t ch = 0; ch < C; ++ch) wsv[static_cast<size_t>(ch)] = ch == 0 ? 0.0 : 0.0005 + 0.0001 * (ch % 30);
        const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02}), ws = MakeTensor(DataType::kFloat, {C}, wsv);
        const Tensor ys = MakeTensor(DataType::kFloat, {}, {y_scale});
        const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -7.0});
        const Tensor bias = (seed & 4) ? RandomTensor(DataType::kInt32, {C}, ++seed, -20000, 20000) : Tensor();
        RunOptions ro;
        ro.want_reference = true;
        ro.constant_inputs = {3, 4, 5, 8};
        auto want = RunKernel(Spec("QLinearConv", g, C), {x, xs, xzp, w, ws, wzp, ys, yzp, bias}, ro);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        for (int threads : {1, 2}) {
          RunOptions fo;
          fo.threads = threads;
          // At 2 threads the scales are constants too: the multipliers are computed once.
          fo.constant_inputs = threads == 1 ? std::vector<size_t>{3, 4, 5, 8} : std::vector<size_t>{1, 3, 4, 5, 6, 8};
          auto got = RunKernel(Spec("NhwcQLinearConv", g, C, "strata.internal"),
                               {Permute(x, true), xs, xzp, w, ws, wzp, ys, yzp, bias}, fo);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          EXPECT_TRUE(TensorsEqual((*want)[0], Permute((*got)[0], false))) << what << " threads " << threads;
        }
      }
}

// An empty batch gives an empty output; a W the kernel cannot take (a channel multiplier of 2)
// stays on the int16 loops, still exact.
TEST(IntConvDepthwise, EmptyBatchAndMultiplierTwo) {
  if (Skip()) GTEST_SKIP() << "CPU without AVX-512F/BW (or STRATA_SGEMM=0)";
  const Geo g{5, 5, 3, 3, 1, 1, {1, 1, 1, 1}};
  const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02}), ws = MakeTensor(DataType::kFloat, {}, {0.003});
  const Tensor ys = MakeTensor(DataType::kFloat, {}, {0.05}), yzp = MakeTensor(DataType::kUInt8, {}, {128});
  const Tensor xzp = MakeTensor(DataType::kUInt8, {}, {7}), wzp = MakeTensor(DataType::kInt8, {}, {0});
  {
    const Tensor x = Q8(DataType::kUInt8, {0, 8, 5, 5}, 1), w = Q8(DataType::kInt8, {8, 1, 3, 3}, 2);
    RunOptions fo;
    fo.constant_inputs = {3, 4, 5};
    auto got = RunKernel(Spec("QLinearConv", g, 8), {x, xs, xzp, w, ws, wzp, ys, yzp}, fo);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)[0].shape(), (Shape{0, 8, 5, 5}));
  }
  const Tensor x = Q8(DataType::kUInt8, {1, 4, 5, 5}, 3), w = Q8(DataType::kInt8, {8, 1, 3, 3}, 4);
  const OpSpec spec = Spec("QLinearConv", g, 4);
  const std::vector<Tensor> in = {x, xs, xzp, w, ws, wzp, ys, yzp};
  RunOptions ro, fo;
  ro.want_reference = true;
  ro.constant_inputs = fo.constant_inputs = {3, 4, 5};
  auto want = RunKernel(spec, in, ro);
  auto got = RunKernel(spec, in, fo);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_TRUE(TensorsEqual((*want)[0], (*got)[0]));
}

}  // namespace
}  // namespace strata
