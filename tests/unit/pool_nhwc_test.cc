// NhwcMaxPool (cpu/pool_nhwc_max.cc) against the NCHW reference MaxPool (pool.cc): bit for
// bit, on the AVX-512 rows and the plain loop, at 1 and 2 threads, over edge geometries
// (1x1 images, odd sizes, asymmetric pads, strides > kernel, dilations, ceil_mode,
// auto_pad, channel counts around the 16/64-lane blocks), with NaNs and signed zeros in X.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/layout_pass.h"
#include "cpu/pool_kernels.h"
#include "cpu/sgemm.h"
#include "kernel_harness.h"

namespace strata {
namespace {

struct PoolCase {
  std::string name;
  int64_t n, h, w, c;
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil_mode = 0;
  std::string auto_pad;
};

void SetAttrs(testing::OpSpec& s, const PoolCase& pc) {
  s.Attr("kernel_shape", pc.kernel);
  if (!pc.strides.empty()) s.Attr("strides", pc.strides);
  if (!pc.pads.empty()) s.Attr("pads", pc.pads);
  if (!pc.dilations.empty()) s.Attr("dilations", pc.dilations);
  if (pc.ceil_mode) s.Attr("ceil_mode", pc.ceil_mode);
  if (!pc.auto_pad.empty()) s.Attr("auto_pad", pc.auto_pad);
}

// X as NHWC with a few NaNs, +0 and -0 sprinkled in (the reference keeps the first tap
// unless a later one is greater: NaN and zero signs show a different order or max).
Tensor MakeInput(const PoolCase& pc, uint64_t seed) {
  Tensor x = testing::RandomTensor(DataType::kFloat, {pc.n, pc.h, pc.w, pc.c}, seed, -4.0, 4.0);
  float* p = x.mutable_data<float>();
  const int64_t count = x.num_elements();
  for (int64_t i = 0; i < count; i += 7) p[i] = (i / 7) % 2 ? 0.0f : -0.0f;
  for (int64_t i = 3; i < count; i += 29) p[i] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

Tensor NhwcToNchw(const Tensor& x) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  std::vector<float> out(static_cast<size_t>(x.num_elements()));
  const float* p = x.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t i = 0; i < w; ++i)
        for (int64_t ch = 0; ch < c; ++ch) out[((b * c + ch) * h + y) * w + i] = p[((b * h + y) * w + i) * c + ch];
  return Tensor::FromVector<float>(out, {n, c, h, w});
}

// Same shape and the same bits (NaN payloads and zero signs included).
::testing::AssertionResult SameBitsNhwcVsNchw(const Tensor& nhwc, const Tensor& nchw) {
  const int64_t n = nchw.dim(0), c = nchw.dim(1), h = nchw.dim(2), w = nchw.dim(3);
  if (nhwc.shape() != Shape{n, h, w, c})
    return ::testing::AssertionFailure() << "shape " << ShapeToString(nhwc.shape()) << " vs NCHW "
                                         << ShapeToString(nchw.shape());
  const float* a = nhwc.data<float>();
  const float* e = nchw.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t i = 0; i < w; ++i)
        for (int64_t ch = 0; ch < c; ++ch) {
          const float av = a[((b * h + y) * w + i) * c + ch], ev = e[((b * c + ch) * h + y) * w + i];
          if (std::memcmp(&av, &ev, sizeof(float)) != 0)
            return ::testing::AssertionFailure()
                   << "at n=" << b << " y=" << y << " x=" << i << " c=" << ch << ": " << av << " vs reference " << ev;
        }
  return ::testing::AssertionSuccess();
}

class NhwcMaxPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { SetNhwcMaxPoolPlainForTesting(false); }
};

TEST_F(NhwcMaxPoolTest, MatchesReferenceBitForBit) {
  const std::vector<PoolCase> cases = {
      {"resnet_stem_pool", 1, 23, 17, 64, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""},
      {"one_pixel", 1, 1, 1, 5, {1, 1}, {}, {}, {}, 0, ""},
      {"one_pixel_padded", 2, 1, 1, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      {"odd_channels", 2, 9, 11, 3, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""},
      {"one_channel", 1, 8, 7, 1, {2, 2}, {2, 2}, {}, {}, 0, ""},
      {"block_edge_17", 1, 6, 5, 17, {2, 3}, {1, 2}, {0, 1, 1, 0}, {}, 0, ""},
      {"block_edge_80", 1, 7, 9, 80, {3, 2}, {2, 1}, {1, 0, 0, 1}, {}, 0, ""},
      {"wide_130", 2, 5, 6, 130, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      {"stride_over_kernel", 1, 13, 12, 20, {2, 2}, {3, 4}, {}, {}, 0, ""},
      {"dilated", 1, 12, 11, 33, {3, 3}, {1, 2}, {2, 1, 2, 2}, {2, 3}, 0, ""},
      {"ceil_mode", 1, 10, 9, 48, {3, 3}, {2, 2}, {0, 0, 0, 0}, {}, 1, ""},
      {"ceil_mode_padded", 2, 7, 8, 24, {2, 2}, {2, 3}, {1, 1, 0, 0}, {}, 1, ""},
      {"same_upper", 1, 9, 10, 40, {3, 3}, {2, 2}, {}, {}, 0, "SAME_UPPER"},
      {"kernel_larger_than_image", 1, 2, 3, 18, {4, 5}, {1, 1}, {2, 2, 2, 2}, {}, 0, ""},
      {"wide_rows_parallel", 3, 40, 33, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      // Windows larger than the image (the reference walks them without a table).
      {"window_over_image", 1, 37, 41, 3, {40, 45}, {1, 1}, {19, 22, 20, 22}, {}, 0, ""},
      {"window_dilated_over_image", 2, 19, 23, 17, {11, 13}, {2, 1}, {20, 12, 21, 13}, {3, 2}, 1, ""},
  };
  for (bool plain : {false, true}) {
    if (!plain && !sgemm::Available()) continue;  // the AVX-512 rows need AVX-512F
    SetNhwcMaxPoolPlainForTesting(plain);
    for (const PoolCase& pc : cases) {
      Tensor x = MakeInput(pc, 7 + pc.c);
      testing::OpSpec ref_spec("MaxPool", 12);
      SetAttrs(ref_spec, pc);
      testing::RunOptions ref_opts;
      ref_opts.want_reference = true;
      auto ref = testing::RunKernel(ref_spec, {NhwcToNchw(x)}, ref_opts);
      ASSERT_TRUE(ref.ok()) << pc.name << ": " << ref.status().ToString();
      for (int threads : {1, 2}) {
        testing::OpSpec spec("NhwcMaxPool", 1, kInternalDomain);
        SetAttrs(spec, pc);
        spec.Attr(kOriginalOpsetAttr, int64_t{12});
        testing::RunOptions opts;
        opts.threads = threads;
        const KernelDef* def = testing::FindKernel(spec, {Value(x)}, /*want_reference=*/false);
        ASSERT_NE(def, nullptr);
        EXPECT_EQ(def->impl, "nhwc");
        auto out = testing::RunKernel(spec, {x}, opts);
        ASSERT_TRUE(out.ok()) << pc.name << ": " << out.status().ToString();
        EXPECT_TRUE(SameBitsNhwcVsNchw((*out)[0], (*ref)[0]))
            << pc.name << " plain=" << plain << " threads=" << threads;
      }
    }
  }
}

// 8-bit NhwcMaxPool (static int8 models): uint8 and int8 X against the NCHW reference
// MaxPool's bytes, AVX-512BW and plain rows, 1 and 2 threads.
Tensor BytesNhwcToNchw(const Tensor& x) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  Tensor out = std::move(Tensor::Allocate(x.dtype(), {n, c, h, w})).value();
  const auto* p = static_cast<const uint8_t*>(x.raw_data());
  auto* q = static_cast<uint8_t*>(out.raw_mutable_data());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t i = 0; i < w; ++i)
        for (int64_t ch = 0; ch < c; ++ch) q[((b * c + ch) * h + y) * w + i] = p[((b * h + y) * w + i) * c + ch];
  return out;
}

TEST_F(NhwcMaxPoolTest, BytesMatchReference) {
  const std::vector<PoolCase> cases = {
      {"resnet_stem_pool", 1, 23, 17, 64, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""},
      {"odd_channels", 2, 9, 11, 3, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""},
      {"block_edge_65", 1, 7, 9, 65, {3, 2}, {2, 1}, {1, 0, 0, 1}, {}, 0, ""},
      {"wide_130", 2, 5, 6, 130, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      {"dilated", 1, 12, 11, 33, {3, 3}, {1, 2}, {2, 1, 2, 2}, {2, 3}, 0, ""},
      {"ceil_mode_padded", 2, 7, 8, 24, {2, 2}, {2, 3}, {1, 1, 0, 0}, {}, 1, ""},
      {"wide_rows_parallel", 3, 40, 33, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      // Windows larger than the image (the reference walks them without a table).
      {"window_over_image", 1, 37, 41, 3, {40, 45}, {1, 1}, {19, 22, 20, 22}, {}, 0, ""},
      {"window_dilated_over_image", 2, 19, 23, 17, {11, 13}, {2, 1}, {20, 12, 21, 13}, {3, 2}, 1, ""},
  };
  for (DataType dt : {DataType::kUInt8, DataType::kInt8})
    for (bool plain : {false, true}) {
      SetNhwcMaxPoolPlainForTesting(plain);
      for (const PoolCase& pc : cases) {
        const Tensor x = dt == DataType::kUInt8
                             ? testing::RandomTensor(dt, {pc.n, pc.h, pc.w, pc.c}, 3 + pc.c, 0, 255)
                             : testing::RandomTensor(dt, {pc.n, pc.h, pc.w, pc.c}, 3 + pc.c, -128, 127);
        testing::OpSpec ref_spec("MaxPool", 12);
        SetAttrs(ref_spec, pc);
        testing::RunOptions ref_opts;
        ref_opts.want_reference = true;
        auto ref = testing::RunKernel(ref_spec, {BytesNhwcToNchw(x)}, ref_opts);
        ASSERT_TRUE(ref.ok()) << pc.name << ": " << ref.status().ToString();
        for (int threads : {1, 2}) {
          testing::OpSpec spec("NhwcMaxPool", 1, kInternalDomain);
          SetAttrs(spec, pc);
          spec.Attr(kOriginalOpsetAttr, int64_t{12});
          testing::RunOptions opts;
          opts.threads = threads;
          auto out = testing::RunKernel(spec, {x}, opts);
          ASSERT_TRUE(out.ok()) << pc.name << ": " << out.status().ToString();
          EXPECT_TRUE(testing::TensorsEqual((*ref)[0], BytesNhwcToNchw((*out)[0])))
              << pc.name << " " << DataTypeName(dt) << " plain=" << plain << " threads=" << threads;
        }
      }
    }
}

// Bad inputs and attributes are errors that name the node; nothing crashes.
TEST_F(NhwcMaxPoolTest, BadInputsAreErrorsNamingTheNode) {
  testing::OpSpec spec("NhwcMaxPool", 1, kInternalDomain);
  spec.Attr("kernel_shape", std::vector<int64_t>{3, 3});
  spec.Attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  const auto expect_error = [](const testing::OpSpec& s, const Tensor& x, const char* what) {
    auto r = testing::RunKernel(s, {x});
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.status().message().find("NhwcMaxPool"), std::string::npos) << r.status().ToString();
  };
  expect_error(spec, testing::RandomTensor(DataType::kFloat, {1, 5, 5}, 1), "rank 3");
  expect_error(spec, testing::RandomTensor(DataType::kDouble, {1, 5, 5, 2}, 1), "double");
  testing::OpSpec pads_too_large = spec;
  pads_too_large.Attr("pads", std::vector<int64_t>{1, 1});
  expect_error(pads_too_large, testing::RandomTensor(DataType::kFloat, {1, 5, 5, 2}, 1), "pads of rank 1");
  testing::OpSpec k3 = spec;
  k3.Attr("kernel_shape", std::vector<int64_t>{3, 3, 3});
  expect_error(k3, testing::RandomTensor(DataType::kFloat, {1, 5, 5, 2}, 1), "3-D kernel");
  testing::OpSpec zero_stride = spec;
  zero_stride.Attr("strides", std::vector<int64_t>{0, 1});
  expect_error(zero_stride, testing::RandomTensor(DataType::kFloat, {1, 5, 5, 2}, 1), "zero stride");
  testing::OpSpec with_indices = spec;
  with_indices.Outputs(2);
  auto r = testing::RunKernel(with_indices, {testing::RandomTensor(DataType::kFloat, {1, 5, 5, 2}, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Indices"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace strata
