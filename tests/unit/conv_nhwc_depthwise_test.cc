// The NHWC depthwise row kernel (cpu/conv_nhwc_depthwise.cc): dw::ConvRowPair, the two-row
// form the fused inverted-residual block and the depthwise NhwcConv use at vertical stride
// 1, against two dw::ConvRow calls (bit for bit: same FMA order) and a scalar reference,
// at edge widths (1, odd, one past the 4-pixel block), channel counts off 16, padded rows
// (nullptr) above and below, stride 1 and 2 and a 5x5 kernel (both take the fallback).
#include "cpu/conv_nhwc_depthwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "run_both.h"

namespace strata {
namespace {

struct Case {
  int64_t c, in_w, k, stride, pad_left;
  float lo, hi;
  int64_t pad_right = -1;  // -1: pad_left
};

std::string Name(const Case& t, int null_row) {
  return "c" + std::to_string(t.c) + " w" + std::to_string(t.in_w) + " k" + std::to_string(t.k) + " s" +
         std::to_string(t.stride) + " pad" + std::to_string(t.pad_left) + " null row " + std::to_string(null_row);
}

// y[ox * C + c] for kernel rows rows[0, k), as in ConvRow's contract.
std::vector<float> Reference(const Case& t, const float* w, const float* b, const float* const* rows, int64_t ow) {
  std::vector<float> y(static_cast<size_t>(ow * t.c));
  for (int64_t ox = 0; ox < ow; ++ox)
    for (int64_t ch = 0; ch < t.c; ++ch) {
      double acc = b[ch];
      for (int64_t ky = 0; ky < t.k; ++ky) {
        if (!rows[ky]) continue;
        for (int64_t kx = 0; kx < t.k; ++kx) {
          const int64_t ix = ox * t.stride - t.pad_left + kx;
          if (ix >= 0 && ix < t.in_w)
            acc += static_cast<double>(rows[ky][ix * t.c + ch]) * w[(ch * t.k + ky) * t.k + kx];
        }
      }
      y[ox * t.c + ch] = std::min(std::max(static_cast<float>(acc), t.lo), t.hi);
    }
  return y;
}

TEST(NhwcDepthwise, RowPairMatchesTwoRowsAndTheReference) {
  if (!dw::Available()) GTEST_SKIP() << "the depthwise row kernel needs AVX-512F";
  const float inf = INFINITY;
  std::vector<Case> cases;
  // Rows swept in whole 4-pixel blocks from the first pixel, the padded first and last taps
  // left out (WholeBlocks): every tail of 1-3 pixels, and rows of 1-4 pixels whose one block
  // has both padded ends.
  for (int64_t c : {1, 16, 17, 40})
    for (int64_t in_w : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) cases.push_back({c, in_w, 3, 1, 1, 0.0f, 6.0f});
  cases.push_back({32, 112, 3, 1, 1, 0.0f, 6.0f});  // mobilenet_v2 block 1's rows
  cases.push_back({24, 10, 3, 1, 0, -inf, inf});    // no horizontal padding, no clamp
  cases.push_back({19, 11, 3, 2, 1, 0.0f, 6.0f});   // stride 2: two ConvRow calls
  cases.push_back({16, 14, 3, 2, 1, 0.0f, 6.0f});   // stride 2, even width: no padded last tap
  // Stride 2 with blocks between the first and the last one (SweepBlocks' inline loop).
  for (int64_t in_w : {17, 18, 24, 25}) cases.push_back({19, in_w, 3, 2, 1, 0.0f, 6.0f});
  cases.push_back({96, 112, 3, 2, 1, 0.0f, 6.0f});   // mobilenet_v2 block 2's rows
  cases.push_back({21, 10, 3, 2, 0, -inf, inf, 1});  // stride 2, padding only after the row (SAME_UPPER)
  cases.push_back({16, 9, 3, 1, 2, 0.0f, 6.0f});     // two columns of padding: the per-pixel edges
  cases.push_back({20, 8, 5, 1, 2, -inf, inf});      // 5x5: two ConvRow calls
  uint32_t seed = 1;
  for (const Case& t : cases) {
    const int64_t pad_right = t.pad_right < 0 ? t.pad_left : t.pad_right;
    const int64_t ow = (t.in_w + t.pad_left + pad_right - t.k) / t.stride + 1;
    ASSERT_GT(ow, 0);
    const Tensor wt =
        Tensor::FromVector<float>(test::Pseudo(static_cast<size_t>(t.c * t.k * t.k), seed, 0.5f), {t.c, 1, t.k, t.k});
    const Tensor bt = Tensor::FromVector<float>(test::Pseudo(static_cast<size_t>(t.c), seed + 1, 0.5f), {t.c});
    const dw::Weights packed = dw::PackWeights(wt, &bt);
    const dw::RowGeometry g{t.in_w, ow, t.stride, 1, t.pad_left, t.lo, t.hi};
    // k + 1 input rows; null_row -1: all in bounds, 0: the top row is padding, k: the bottom.
    std::vector<std::vector<float>> data;
    for (int64_t r = 0; r <= t.k; ++r)
      data.push_back(test::Pseudo(static_cast<size_t>(t.in_w * t.c), seed + 2 + r, 2.0f));
    for (int null_row : {-1, 0, static_cast<int>(t.k)}) {
      const std::string what = Name(t, null_row);
      std::vector<const float*> rows;
      for (int64_t r = 0; r <= t.k; ++r) rows.push_back(r == null_row ? nullptr : data[r].data());
      const size_t n = static_cast<size_t>(ow * t.c);
      std::vector<float> y0(n, -1.0f), y1(n, -1.0f), r0(n, -2.0f), r1(n, -2.0f);
      dw::ConvRowPair(packed, g, rows.data(), y0.data(), y1.data());
      dw::ConvRow(packed, g, rows.data(), r0.data());
      dw::ConvRow(packed, g, rows.data() + 1, r1.data());
      EXPECT_EQ(std::memcmp(y0.data(), r0.data(), n * sizeof(float)), 0) << what << ": first row";
      EXPECT_EQ(std::memcmp(y1.data(), r1.data(), n * sizeof(float)), 0) << what << ": second row";
      const std::vector<float> ref0 = Reference(t, wt.data<float>(), bt.data<float>(), rows.data(), ow);
      const std::vector<float> ref1 = Reference(t, wt.data<float>(), bt.data<float>(), rows.data() + 1, ow);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(y0[i], ref0[i], 1e-4f * (1.0f + std::fabs(ref0[i]))) << what << " element " << i;
        ASSERT_NEAR(y1[i], ref1[i], 1e-4f * (1.0f + std::fabs(ref1[i]))) << what << " element " << i;
      }
    }
    seed += 10;
  }
}

}  // namespace
}  // namespace strata
