// NhwcConv's fused per-channel input scale (input 4, cpu/conv_nhwc_scale.h): each kernel the
// registry picks computes conv(X * S) against the naive conv of the scaled X: the SGEMM
// conv's scaled-B and scaled-A-tile paths (pointwise), its scaled copy of X (other shapes),
// and the copy other kernels get (depthwise, grouped, Winograd, XNNPACK); one S for the batch
// or one per image; with the fused residual, in place; bad S gives an error naming it. Also
// the depthwise conv's pooled second output (the SE block's GlobalAveragePool).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/conv_nhwc_scale.h"
#include "cpu/sgemm.h"
#include "nhwc_conv_harness.h"

// ConvCase literals name only the fields each case needs.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata {
namespace {

using namespace nhwc_test;  // NOLINT(google-build-using-namespace): the shared harness

// X * S in NHWC, S of one row (every image) or n rows.
Tensor ScaleX(const Tensor& x, const Tensor& s) {
  Tensor y = *x.Clone();
  const int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k)
        y.mutable_data<float>()[(i * hw + p) * c + k] *= s.data<float>()[(s.dim(0) == 1 ? 0 : i) * c + k];
  return y;
}

struct ScaleCase {
  ConvCase cc;
  bool per_image;  // S [n, 1, 1, c] rather than [1, 1, 1, c]
  const char* impl;
  const char* why;
};

TEST(NhwcConvInputScale, EveryKernelMatchesTheConvOfTheScaledInput) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  ThreadPool pool2(2);
  const ScaleCase cases[] = {
      // Pointwise with B of at most 4 panels, read in place: diag(S) B when the map has at
      // least as many rows as B has columns.
      {{.h = 9, .w = 8, .c = 37, .m = 16, .kh = 1, .kw = 1}, false, "nhwc-sgemm", "scaled B, one panel"},
      {{.n = 2, .h = 6, .w = 7, .c = 40, .m = 45, .kh = 1, .kw = 1}, true, "nhwc-sgemm", "scaled B per image"},
      {{.n = 2, .h = 6, .w = 7, .c = 40, .m = 45, .kh = 1, .kw = 1}, false, "nhwc-sgemm", "scaled B, shared S"},
      {{.h = 13, .w = 11, .c = 96, .m = 128, .kh = 1, .kw = 1}, false, "nhwc-sgemm", "scaled B, 4 panels"},
      // Fewer rows than B's columns, K below the in-place minimum, or more than 4 panels:
      // S is applied to A's tiles as they are gathered.
      {{.h = 3, .w = 3, .c = 48, .m = 100, .kh = 1, .kw = 1}, false, "nhwc-sgemm", "scaled A, few rows"},
      {{.n = 2, .h = 5, .w = 5, .c = 12, .m = 20, .kh = 1, .kw = 1}, true, "nhwc-sgemm", "scaled A, K = 12"},
      {{.n = 2, .h = 7, .w = 7, .c = 33, .m = 130, .kh = 1, .kw = 1}, true, "nhwc-sgemm", "scaled A, 5 panels"},
      {{.h = 1, .w = 1, .c = 17, .m = 1, .kh = 1, .kw = 1}, false, "nhwc-sgemm", "one pixel, one output"},
      // Other shapes: a scaled copy of X.
      {{.n = 2, .h = 7, .w = 6, .c = 24, .m = 33, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
       true,
       "nhwc-sgemm",
       "3x3 stride 2"},
      {{.n = 2, .h = 9, .w = 10, .c = 20, .m = 20, .pads = {1, 1, 1, 1}, .group = 20},
       true,
       "nhwc-depthwise",
       "depthwise"},
      {{.h = 9, .w = 9, .c = 48, .m = 48, .pads = {1, 1, 1, 1}, .group = 6}, false, "nhwc-grouped", "grouped"},
      {{.h = 14, .w = 15, .c = 16, .m = 32, .pads = {1, 1, 1, 1}}, false, "winograd-f4x4", "Winograd"},
      {{.h = 7, .w = 8, .c = 64, .m = 64, .pads = {1, 1, 1, 1}, .group = 2}, true, "nhwc-grouped-gemm", "wide groups"},
      {{.h = 7, .w = 8, .c = 256, .m = 256, .pads = {1, 1, 1, 1}, .group = 2}, true, "xnnpack", "XNNPACK"},
  };
  uint32_t seed = 900;
  for (const ScaleCase& sc : cases) {
    const ConvCase& cc = sc.cc;
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++, 2.0f);
    const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed++, 1.0f);
    const Tensor b = Random({cc.m}, seed++, 1.0f);
    const Tensor s = Random({sc.per_image ? cc.n : 1, 1, 1, cc.c}, seed++, 1.5f);
    const Tensor xs = ScaleX(x, s);
    const Tensor want = NaiveConv(cc, xs, w, &b, nullptr);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      const std::string what = std::string(sc.why) + " " + Name(cc) + (pool ? " 2 threads" : " 1 thread");
      KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, pool, nullptr, false, &s);
      ASSERT_TRUE(r.create.ok() && r.compute.ok()) << what << ": " << r.create.ToString() << r.compute.ToString();
      EXPECT_EQ(r.impl, sc.impl) << what;
      ExpectNear(r.y, want, what);
      // Twice in a row: the scaled B is scratch reused across runs.
      KernelRun again = RunNhwcConv(cc, x, w, &b, nullptr, pool, nullptr, false, &s);
      ASSERT_TRUE(again.compute.ok()) << what;
      ExpectNear(again.y, want, what + " (second run)");
    }
  }
}

// With the fused residual and Relu, on both pointwise paths, the sum written over the
// residual's buffer when it is offered.
TEST(NhwcConvInputScale, WithResidualAndReluInPlace) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  ThreadPool pool2(2);
  const ConvCase cases[] = {
      {.n = 2, .h = 8, .w = 8, .c = 40, .m = 24, .kh = 1, .kw = 1, .relu = true, .residual = true},
      {.n = 2, .h = 3, .w = 2, .c = 40, .m = 150, .kh = 1, .kw = 1, .relu = true, .residual = true},
  };
  uint32_t seed = 950;
  for (const ConvCase& cc : cases) {
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++, 2.0f);
    const Tensor w = Random({cc.m, cc.c, 1, 1}, seed++, 1.0f);
    const Tensor b = Random({cc.m}, seed++, 1.0f);
    const Tensor r = Random({cc.n, cc.h, cc.w, cc.m}, seed++, 1.0f);
    const Tensor s = Random({cc.n, 1, 1, cc.c}, seed++, 1.5f);
    const Tensor want = NaiveConv(cc, ScaleX(x, s), w, &b, &r);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2})
      for (bool in_place : {false, true}) {
        const std::string what = Name(cc) + (in_place ? " in place" : "") + (pool ? " 2 threads" : " 1 thread");
        KernelRun run = RunNhwcConv(cc, x, w, &b, &r, pool, nullptr, in_place, &s);
        ASSERT_TRUE(run.create.ok() && run.compute.ok()) << what << ": " << run.compute.ToString();
        EXPECT_EQ(run.in_place, in_place) << what;
        ExpectNear(run.y, want, what);
      }
  }
}

// An S of the wrong shape or type, or none where the node names one, is an error that names
// the node and the input scale, on the SGEMM conv and on a wrapped kernel alike.
TEST(NhwcConvInputScale, BadScaleGivesAClearError) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  const ConvCase pointwise{.n = 2, .h = 4, .w = 4, .c = 8, .m = 8, .kh = 1, .kw = 1};
  const ConvCase depthwise{.n = 2, .h = 4, .w = 4, .c = 8, .m = 8, .pads = {1, 1, 1, 1}, .group = 8};
  const Tensor bad_shapes[] = {
      Random({1, 1, 1, 9}, 1),  // channels
      Random({3, 1, 1, 8}, 2),  // images: neither 1 nor N
      Random({1, 2, 1, 8}, 3),  // not one value per channel
      Random({1, 8}, 4),        // rank
      Tensor::FromVector<int32_t>(std::vector<int32_t>(8, 1), {1, 1, 1, 8}),
      Tensor(),  // absent
  };
  for (const ConvCase& cc : {pointwise, depthwise}) {
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, 5);
    const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, 6);
    for (const Tensor& s : bad_shapes) {
      KernelRun r = RunNhwcConv(cc, x, w, nullptr, nullptr, nullptr, nullptr, false, &s);
      ASSERT_TRUE(r.create.ok()) << r.create.ToString();
      ASSERT_FALSE(r.compute.ok()) << Name(cc) << " took S " << ShapeToString(s.shape());
      EXPECT_NE(r.compute.message().find("conv0"), std::string::npos) << r.compute.message();
      EXPECT_NE(r.compute.message().find("input scale"), std::string::npos) << r.compute.message();
    }
  }
}

// The depthwise conv's pooled second output (FuseDepthwiseGlobalPool): the channel means of Y
// as a GlobalAveragePool of Y gives them, for either keepdims, at 1 and 2 threads, at edge
// sizes; Y itself is unchanged. A conv whose kernel cannot make it is an error at creation.
TEST(DepthwiseGlobalPool, PooledOutputIsTheMeanOfY) {
  if (!sgemm::Available()) GTEST_SKIP() << "the depthwise kernel needs AVX-512F";
  ThreadPool pool2(2);
  const ConvCase cases[] = {
      {.n = 2, .h = 9, .w = 10, .c = 37, .m = 37, .pads = {1, 1, 1, 1}, .group = 37},
      {.h = 14, .w = 13, .c = 16, .m = 16, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pads = {2, 2, 2, 2}, .group = 16},
      {.h = 1, .w = 1, .c = 33, .m = 33, .pads = {1, 1, 1, 1}, .group = 33},
      {.n = 2, .h = 17, .w = 3, .c = 48, .m = 48, .pads = {1, 1, 1, 1}, .relu = true, .group = 48},
  };
  uint32_t seed = 980;
  for (const ConvCase& cc : cases) {
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++, 2.0f);
    const Tensor w = Random({cc.m, 1, cc.kh, cc.kw}, seed++, 1.0f);
    const Tensor want = NaiveConv(cc, x, w, nullptr, nullptr);
    const int64_t hw = want.dim(1) * want.dim(2);
    for (int64_t keepdims : {0, 1})
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        const std::string what = Name(cc) + " keepdims " + std::to_string(keepdims) + (pool ? " 2 threads" : "");
        KernelRun r = RunNhwcConv(cc, x, w, nullptr, nullptr, pool, nullptr, false, nullptr, keepdims);
        ASSERT_TRUE(r.create.ok() && r.compute.ok()) << what << ": " << r.create.ToString() << r.compute.ToString();
        ExpectNear(r.y, want, what);
        const Shape shape = keepdims ? Shape{cc.n, cc.c, 1, 1} : Shape{cc.n, cc.c};
        ASSERT_EQ(r.pooled.shape(), shape) << what;
        for (int64_t b = 0; b < cc.n; ++b)
          for (int64_t ch = 0; ch < cc.c; ++ch) {
            double mean = 0;
            for (int64_t p = 0; p < hw; ++p) mean += want.data<float>()[(b * hw + p) * cc.c + ch];
            mean /= static_cast<double>(hw);
            ASSERT_NEAR(r.pooled.data<float>()[b * cc.c + ch], mean, 1e-5 * (1.0 + std::fabs(mean))) << what;
          }
      }
  }
  // Only the depthwise kernel makes the pooled output: anything else fails at creation.
  const ConvCase full{.h = 6, .w = 6, .c = 8, .m = 8, .pads = {1, 1, 1, 1}};
  KernelRun bad = RunNhwcConv(full, Random({1, 6, 6, 8}, 1), Random({8, 8, 3, 3}, 2), nullptr, nullptr, nullptr,
                              nullptr, false, nullptr, 1);
  ASSERT_FALSE(bad.create.ok());
  EXPECT_NE(bad.create.message().find("pooled second output"), std::string::npos) << bad.create.message();
}

}  // namespace
}  // namespace strata
