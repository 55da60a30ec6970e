// ConvInteger and QLinearConv on the VNNI GEMM (cpu/int_conv.cc's "avx512_vnni" entry, with
// cpu/int_conv_vnni.cc's NHWC/im2col/requantization stages) against the reference int16
// kernel, byte for byte: 1x1 (read in place), strided 1x1, 3x3 padded, 7x7/2 stems of 3
// channels, dilation, 1-D and 3-D; channel counts 1, odd, a panel (16) +/- 1; output sizes 1
// and odd (partial blocks of 16 positions); every signedness of x, w and y; zero points per
// tensor and per channel; bias or none; batches; 1 and 2 threads; stride-1 convs on the padded
// image read in place. Skipped without VNNI.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/int8_gemm.h"
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
  std::vector<int64_t> in, kernel, strides, dilations, pads;  // pads: begins then ends
};

OpSpec Spec(const char* op, const Geo& g) {
  OpSpec spec(op, 10);
  spec.Attr("strides", g.strides).Attr("dilations", g.dilations).Attr("pads", g.pads);
  return spec;
}

Shape Dims(int64_t n, int64_t c, const std::vector<int64_t>& sp) {
  Shape s{n, c};
  s.insert(s.end(), sp.begin(), sp.end());
  return s;
}

std::vector<Geo> Geometries() {
  return {
      {{5, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                    // 1x1, read in place
      {{9, 8}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}},                    // strided 1x1 (ResNet's downsample)
      {{6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},                    // 3x3 padded
      {{9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 2}},                    // 3x3/2, uneven pads
      {{13, 11}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}},                  // 7x7/2 stem
      {{8, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 1, 2, 1}},                    // dilation 2
      {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},                    // one position
      {{2, 3}, {3, 3}, {1, 1}, {1, 1}, {2, 2, 2, 2}},                    // more padding than image
      {{17}, {5}, {2}, {1}, {2, 1}},                                     // 1-D
      {{3, 4, 5}, {2, 3, 3}, {1, 2, 1}, {1, 1, 1}, {0, 1, 1, 1, 1, 1}},  // 3-D
      // Enough positions (34-35 tiles of 12) for the GEMM's row split at 2 threads, with the
      // im2col made inside it (AMatrix::produce) for the 3x3.
      {{20, 21}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{19, 21}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
  };
}

// QLinearConv's reference on NCHW inputs {x, xs, xzp, w, ws, wzp, ys, yzp, bias} against the
// layout pass's NhwcQLinearConv on x permuted to NHWC, at 1 and 2 threads: the same bytes.
void ExpectNhwcSameAsReference(const Geo& g, const std::vector<Tensor>& in, const std::string& what) {
  RunOptions ro;
  ro.want_reference = true;
  ro.constant_inputs = {3, 4, 5, 8};
  auto want = RunKernel(Spec("QLinearConv", g), in, ro);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
  OpSpec nhwc("NhwcQLinearConv", 1, "strata.internal");
  nhwc.attrs = Spec("QLinearConv", g).attrs;
  std::vector<Tensor> nin = in;
  nin[0] = Permute(in[0], true);
  for (int threads : {1, 2}) {
    RunOptions fo;
    fo.threads = threads;
    fo.constant_inputs = {3, 4, 5, 8};
    auto got = RunKernel(nhwc, nin, fo);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    EXPECT_TRUE(TensorsEqual((*want)[0], Permute((*got)[0], false))) << what << " threads " << threads;
  }
}

TEST(IntConvVnni, MatchesReferenceAcrossGeometriesChannelsAndTypes) {
  if (!int8gemm::Available()) GTEST_SKIP() << "CPU without AVX512-VNNI (or STRATA_INT8_GEMM=0)";
  uint64_t seed = 1000;
  const std::vector<std::pair<int64_t, int64_t>> channels = {{3, 17}, {1, 1}, {16, 15}, {17, 16}, {33, 40}};
  int geo_i = 0;
  for (const Geo& g : Geometries()) {
    ++geo_i;
    for (const auto& [C, M] : channels) {
      const DataType xt = (seed & 1) ? DataType::kInt8 : DataType::kUInt8;
      const DataType wt = (seed & 2) ? DataType::kUInt8 : DataType::kInt8;
      const bool per_channel = (seed & 4) != 0;
      const std::string what = "geometry " + std::to_string(geo_i) + " C=" + std::to_string(C) +
                               " M=" + std::to_string(M) + " x " + DataTypeName(xt) + " w " + DataTypeName(wt) +
                               (per_channel ? " per-channel" : "");
      SCOPED_TRACE(what);
      const Tensor x = Q8(xt, Dims(2, C, g.in), ++seed);
      const Tensor w = Q8(wt, Dims(M, C, g.kernel), ++seed);
      const Tensor xzp = Q8(xt, {}, ++seed);
      const Tensor wzp = per_channel ? Q8(wt, {M}, ++seed) : Q8(wt, {}, ++seed);
      ExpectSameAsReference(Spec("ConvInteger", g), {x, w, xzp, wzp}, {1, 3}, what);

      const DataType yt = (seed & 8) ? DataType::kInt8 : DataType::kUInt8;
      const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02});
      const Tensor ws = per_channel ? RandomTensor(DataType::kFloat, {M}, ++seed, 0.0005, 0.004)
                                    : MakeTensor(DataType::kFloat, {}, {0.002});
      const Tensor ys = MakeTensor(DataType::kFloat, {}, {0.3});
      const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -7.0});
      const Tensor bias = RandomTensor(DataType::kInt32, {M}, ++seed, -20000, 20000);
      const bool with_bias = (seed & 16) != 0;
      ExpectSameAsReference(Spec("QLinearConv", g), {x, xs, xzp, w, ws, wzp, ys, yzp, with_bias ? bias : Tensor()},
                            {3, 4, 5, 8}, what + " y " + DataTypeName(yt) + (with_bias ? " bias" : ""));
    }
  }
}

// The layout pass's NhwcQLinearConv (x and y NHWC, requantized in the GEMM's store) gives the
// reference QLinearConv's bytes, permuted, saturation and non-finite multipliers included.
TEST(IntConvVnni, NhwcQLinearConvMatchesReference) {
  if (!int8gemm::Available()) GTEST_SKIP() << "CPU without AVX512-VNNI (or STRATA_INT8_GEMM=0)";
  uint64_t seed = 5000;
  for (const Geo& g : Geometries()) {
    if (g.in.size() != 2) continue;
    for (const auto& [C, M] : std::vector<std::pair<int64_t, int64_t>>{{3, 17}, {16, 15}, {33, 40}})
      for (double y_scale : {0.3, 1e-4, 0.0}) {  // 1e-4 saturates both ways, 0 makes inf / NaN multipliers
        const DataType xt = (seed & 1) ? DataType::kInt8 : DataType::kUInt8;
        const DataType yt = y_scale == 0.0 || (seed & 2) ? DataType::kInt8 : DataType::kUInt8;
        const bool per_channel = y_scale == 0.0 || (seed & 4) != 0, with_bias = (seed & 8) != 0;
        const std::string what = "C=" + std::to_string(C) + " M=" + std::to_string(M) + " in " +
                                 std::to_string(g.in[0]) + "x" + std::to_string(g.in[1]) + " k " +
                                 std::to_string(g.kernel[0]) + " x " + DataTypeName(xt) + " y " + DataTypeName(yt);
        SCOPED_TRACE(what);
        const Tensor x = Q8(xt, Dims(2, C, g.in), ++seed), w = Q8(DataType::kInt8, Dims(M, C, g.kernel), ++seed);
        const Tensor xzp = Q8(xt, {}, ++seed);
        const Tensor wzp = per_channel ? Q8(DataType::kInt8, {M}, ++seed) : MakeTensor(DataType::kInt8, {}, {0});
        const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02});
        // Channel 0's w_scale is 0: with y_scale 0 its multiplier is NaN (0 / 0).
        std::vector<double> wsv(static_cast<size_t>(M), 0.002);
        if (per_channel)
          for (int64_t m = 0; m < M; ++m) wsv[static_cast<size_t>(m)] = m == 0 ? 0.0 : 0.0005 + 0.0001 * (m % 30);
        const Tensor ws =
            per_channel ? MakeTensor(DataType::kFloat, {M}, wsv) : MakeTensor(DataType::kFloat, {}, {0.002});
        const Tensor ys = MakeTensor(DataType::kFloat, {}, {y_scale});
        const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -7.0});
        const Tensor bias = with_bias ? RandomTensor(DataType::kInt32, {M}, ++seed, -20000, 20000) : Tensor();
        ExpectNhwcSameAsReference(g, {x, xs, xzp, w, ws, wzp, ys, yzp, bias},
                                  what + " y_scale " + std::to_string(y_scale));
        if (HasFatalFailure()) return;
      }
  }
}

// 2-D NhwcQLinearConvs of uint8 or int8 x against a W with zero zero points (C a multiple of
// 4) run as an implicit GEMM over x padded with its zero point and split by stride phase, read
// in place (int_conv.cc RunVnni's `padded`): the reference's bytes for kernels 3x3, 5x5, 2x2,
// 1x3, 3x1; strides 1, 2, 3 and mixed; symmetric, uneven, zero and larger-than-image pads; one
// output row; channel counts of
// one panel, panel + 1 and odd column counts; both output types, saturation, bias, zero points
// per tensor and per channel (all 0), batches of 2, 1 and 2 threads (the row split by CPU).
TEST(IntConvVnni, ConvsOnThePaddedPhasePlanesMatchReference) {
  if (!int8gemm::Available()) GTEST_SKIP() << "CPU without AVX512-VNNI (or STRATA_INT8_GEMM=0)";
  const std::vector<Geo> geos = {
      {{20, 21}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},  // ResNet's 3x3, 34 tiles of 12 rows
      {{16, 16}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // no padding
      {{17, 18}, {3, 3}, {1, 1}, {1, 1}, {0, 2, 1, 0}},  // uneven pads
      {{12, 30}, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}},  // 5x5
      {{10, 9}, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}},   // 2x2, even kernel
      {{5, 17}, {1, 3}, {1, 1}, {1, 1}, {0, 1, 0, 1}},   // 1x3
      {{9, 7}, {3, 1}, {1, 1}, {1, 1}, {1, 0, 1, 0}},    // 3x1: no column dropped
      {{2, 14}, {3, 3}, {1, 1}, {1, 1}, {2, 2, 2, 2}},   // pads larger than the image
      {{3, 16}, {3, 3}, {1, 1}, {1, 1}, {0, 1, 0, 1}},   // one output row
      // Strided: the image split into stride-phase planes.
      {{20, 21}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},  // ResNet's stride-2 3x3
      {{17, 18}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}},  // odd size, uneven pads
      {{13, 16}, {3, 3}, {1, 2}, {1, 1}, {1, 1, 1, 1}},  // mixed strides
      {{11, 19}, {2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}},  // kernel smaller than the stride: 4 of 9 planes
      {{9, 29}, {5, 5}, {2, 2}, {1, 1}, {2, 2, 2, 2}},   // 5x5 stride 2
  };
  uint64_t seed = 9000;
  int geo_i = 0;
  for (const Geo& g : geos) {
    ++geo_i;
    for (const auto& [C, M] : std::vector<std::pair<int64_t, int64_t>>{{4, 1}, {4, 17}, {64, 64}, {20, 33}, {8, 16}})
      for (double y_scale : {0.3, 1e-4}) {                                    // 1e-4 saturates both ways
        const DataType xt = (seed & 1) ? DataType::kInt8 : DataType::kUInt8;  // int8: padded as x ^ 0x80
        const DataType yt = (seed & 2) ? DataType::kInt8 : DataType::kUInt8;
        const bool per_channel = (seed & 4) != 0, with_bias = (seed & 8) != 0;
        const std::string what = "geometry " + std::to_string(geo_i) + " C=" + std::to_string(C) +
                                 " M=" + std::to_string(M) + " x " + DataTypeName(xt) + " y " + DataTypeName(yt) +
                                 " y_scale " + std::to_string(y_scale) + (per_channel ? " per-channel" : "") +
                                 (with_bias ? " bias" : "");
        SCOPED_TRACE(what);
        const Tensor x = Q8(xt, Dims(2, C, g.in), ++seed);
        const Tensor w = Q8(DataType::kInt8, Dims(M, C, g.kernel), ++seed);
        const Tensor xzp = Q8(xt, {}, ++seed);  // the padding's byte
        const Tensor wzp = per_channel ? MakeTensor(DataType::kInt8, {M}, std::vector<double>(static_cast<size_t>(M)))
                                       : MakeTensor(DataType::kInt8, {}, {0});
        const Tensor xs = MakeTensor(DataType::kFloat, {}, {0.02});
        const Tensor ws = per_channel ? RandomTensor(DataType::kFloat, {M}, ++seed, 0.0005, 0.004)
                                      : MakeTensor(DataType::kFloat, {}, {0.002});
        const Tensor ys = MakeTensor(DataType::kFloat, {}, {y_scale});
        const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 120.0 : -7.0});
        const Tensor bias = with_bias ? RandomTensor(DataType::kInt32, {M}, ++seed, -20000, 20000) : Tensor();
        ExpectNhwcSameAsReference(g, {x, xs, xzp, w, ws, wzp, ys, yzp, bias}, what);
        if (HasFatalFailure()) return;
        ++seed;
      }
  }
}

// The layout pass's 8-bit NchwToNhwc / NhwcToNchw (16x16 byte blocks and the edges) against a
// plain permutation, channel and pixel counts on and off the block size.
TEST(IntConvVnni, ByteLayoutChangesPermute) {
  uint64_t seed = 900;
  // 2-4 channels take the byte-permute path (past a 4096-position chunk, with a tail of under 16).
  for (const Shape& s : {Shape{2, 37, 5, 7}, Shape{1, 16, 4, 4}, Shape{1, 3, 9, 11}, Shape{1, 70, 1, 33},
                         Shape{1, 2, 3, 7}, Shape{2, 3, 64, 70}, Shape{1, 4, 65, 67}})
    for (DataType dt : {DataType::kUInt8, DataType::kInt8})
      for (int threads : {1, 2}) {
        const Tensor x = Q8(dt, s, ++seed);
        RunOptions o;
        o.threads = threads;
        auto to = RunKernel(OpSpec("NchwToNhwc", 1, "strata.internal"), {x}, o);
        ASSERT_TRUE(to.ok()) << to.status().ToString();
        EXPECT_TRUE(TensorsEqual(Permute(x, true), (*to)[0])) << ShapeToString(s) << " threads " << threads;
        auto back = RunKernel(OpSpec("NhwcToNchw", 1, "strata.internal"), {(*to)[0]}, o);
        ASSERT_TRUE(back.ok()) << back.status().ToString();
        EXPECT_TRUE(TensorsEqual(x, (*back)[0])) << ShapeToString(s) << " threads " << threads;
      }
}

// Saturation at both ends and NaN multipliers: a y_scale of 0 makes every multiplier +-inf or
// NaN (0 / 0), which the reference saturates or maps to 0.
TEST(IntConvVnni, SaturationAndNonFiniteMultipliersMatchReference) {
  if (!int8gemm::Available()) GTEST_SKIP() << "CPU without AVX512-VNNI (or STRATA_INT8_GEMM=0)";
  const Geo g{{7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = Q8(DataType::kUInt8, {1, 20, 7, 6}, 5), w = Q8(DataType::kInt8, {18, 20, 3, 3}, 6);
  const Tensor xzp = MakeTensor(DataType::kUInt8, {}, {128}), wzp = MakeTensor(DataType::kInt8, {}, {0});
  // Channel 0's scale is 0 (0 * anything / y_scale): a zero multiplier.
  std::vector<double> wsv(18, 0.01);
  wsv[0] = 0;
  const Tensor ws = MakeTensor(DataType::kFloat, {18}, wsv);
  for (double y_scale : {0.001, 0.0})
    for (DataType yt : {DataType::kUInt8, DataType::kInt8}) {
      const Tensor ys = MakeTensor(DataType::kFloat, {}, {y_scale});
      const Tensor yzp = MakeTensor(yt, {}, {yt == DataType::kUInt8 ? 3.0 : 2.0});
      ExpectSameAsReference(Spec("QLinearConv", g),
                            {x, MakeTensor(DataType::kFloat, {}, {0.5}), xzp, w, ws, wzp, ys, yzp}, {3, 4, 5},
                            std::string("y_scale ") + std::to_string(y_scale) + " " + DataTypeName(yt));
    }
}

// Grouped convs and a W known only at run time stay on the int16 loops, still exact.
TEST(IntConvVnni, GroupedAndRunTimeWeightsFallBackToTheInt16Loops) {
  if (!int8gemm::Available()) GTEST_SKIP() << "CPU without AVX512-VNNI (or STRATA_INT8_GEMM=0)";
  OpSpec spec("ConvInteger", 10);
  spec.Attr("group", int64_t{2}).Attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  const Tensor x = Q8(DataType::kUInt8, {1, 4, 5, 5}, 9), w = Q8(DataType::kInt8, {6, 2, 3, 3}, 10);
  const Tensor xzp = MakeTensor(DataType::kUInt8, {}, {9}), wzp = MakeTensor(DataType::kInt8, {}, {-3});
  for (bool constant : {false, true}) {
    RunOptions ro, fo;
    ro.want_reference = true;
    if (constant) ro.constant_inputs = fo.constant_inputs = {1, 3};
    auto want = RunKernel(spec, {x, w, xzp, wzp}, ro);
    auto got = RunKernel(spec, {x, w, xzp, wzp}, fo);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_TRUE(TensorsEqual((*want)[0], (*got)[0])) << "constant " << constant;
  }
}

}  // namespace
}  // namespace strata
