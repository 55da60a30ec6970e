// The SGEMM-based NhwcConv (cpu/conv_nhwc_gemm.cc), its gathered-A and residual GEMM
// entry points, and the Conv -> Add -> Relu fusion (cpu/conv_nhwc_fuse.cc):
//  * the kernel against a naive NHWC convolution at edge shapes (1x1 direct and strided,
//    3x3 stride 1/2, 7x7 stem, dilation, asymmetric pads, one pixel, batch 2, K > 256,
//    C/M not multiples of 12/32, more rows than one M block), 1 and 2 threads, on both the
//    gathered and the indirect (pointer) A;
//  * sessions with the layout pass against the reference kernels (grouped -> XNNPACK);
//  * the fusion rewrite and the fused residual epilogue; clear errors for bad inputs.
#include "cpu/conv_nhwc_gemm.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "core/kernel.h"
#include "core/layout_pass.h"
#include "core/onnx_import.h"
#include "core/optimizer.h"
#include "core/session.h"
#include "core/threadpool.h"
#include "cpu/conv_kernels.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "deferred_tensor.h"
#include "nhwc_conv_harness.h"
#include "onnx_builder.h"

// ConvCase literals name only the fields each case needs.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata {
namespace {

using namespace nhwc_test;  // NOLINT(google-build-using-namespace): the shared harness

std::vector<ConvCase> EdgeCases() {
  std::vector<ConvCase> v;
  auto add = [&](ConvCase c) { v.push_back(c); };
  add({.n = 2, .h = 5, .w = 7, .c = 37, .m = 45, .kh = 1, .kw = 1});                                   // 1x1 direct
  add({.h = 9, .w = 9, .c = 16, .m = 33, .kh = 1, .kw = 1, .sh = 2, .sw = 2});                         // 1x1 strided
  add({.h = 7, .w = 6, .c = 13, .m = 70, .pads = {1, 1, 1, 1}, .relu = true});                         // 3x3 s1 p1
  add({.h = 14, .w = 14, .c = 64, .m = 64, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}});                   // K = 576 > 256
  add({.h = 23, .w = 19, .c = 3, .m = 64, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pads = {3, 3, 3, 3}});  // stem
  add({.h = 9, .w = 8, .c = 5, .m = 7, .dh = 2, .dw = 2, .pads = {2, 2, 2, 2}});                       // dilation 2
  add({.h = 8, .w = 9, .c = 6, .m = 9, .dh = 1, .dw = 3, .pads = {0, 3, 1, 2}});                       // mixed dilation
  add({.h = 1, .w = 1, .c = 11, .m = 5, .pads = {1, 1, 1, 1}});                                        // one pixel
  add({.h = 1, .w = 1, .c = 300, .m = 1, .kh = 1, .kw = 1, .bias = false});                            // M = 1, K > 256
  add({.h = 6, .w = 5, .c = 4, .m = 3, .kh = 2, .kw = 3, .sh = 1, .sw = 2, .pads = {0, 1, 2, 0}});     // asymmetric
  add({.n = 2, .h = 20, .w = 21, .c = 24, .m = 40, .pads = {1, 1, 1, 1}, .relu = true});               // > 1 M block
  add({.h = 4, .w = 4, .c = 2, .m = 3, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}});                       // kernel > input
  // C >= 16 and M <= 64: the indirect (pointer) A path.
  add({.h = 12, .w = 11, .c = 64, .m = 64, .pads = {1, 1, 1, 1}, .relu = true});                  // ResNet 3x3 s1
  add({.n = 2, .h = 9, .w = 10, .c = 17, .m = 33, .sh = 2, .sw = 1, .pads = {0, 1, 2, 1}});       // odd C/M, 2 rows
  add({.h = 7, .w = 7, .c = 20, .m = 1, .kh = 7, .kw = 7, .pads = {3, 3, 3, 3}, .bias = false});  // one column
  add({.h = 1, .w = 1, .c = 32, .m = 20, .pads = {1, 1, 1, 1}});                              // one pixel: 8 pad taps
  add({.h = 10, .w = 9, .c = 24, .m = 40, .dh = 2, .dw = 3, .pads = {2, 3, 2, 3}});           // dilation
  add({.h = 6, .w = 6, .c = 200, .m = 64, .pads = {1, 1, 1, 1}});                             // K = 1800
  add({.n = 2, .h = 31, .w = 29, .c = 16, .m = 48, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}});  // many M blocks
  // C >= 16 but M > 64 (three panels), still the indirect A.
  add({.h = 8, .w = 7, .c = 48, .m = 65, .pads = {1, 1, 1, 1}});
  // 14x14: 17 row tiles, which 2 threads split over N (8 panels) instead.
  add({.h = 14, .w = 14, .c = 32, .m = 256, .pads = {1, 1, 1, 1}, .relu = true});
  // 1x1 stride 1: X as a plain matrix (sgemm::Gemm): K < 16 packed, N <= 128 read in
  // place (also K = 2600), N > 128 packed, K > 4608 packed.
  add({.n = 2, .h = 6, .w = 5, .c = 8, .m = 40, .kh = 1, .kw = 1});
  add({.h = 2, .w = 3, .c = 2600, .m = 35, .kh = 1, .kw = 1});
  add({.h = 5, .w = 6, .c = 40, .m = 130, .kh = 1, .kw = 1});
  add({.h = 1, .w = 3, .c = 4700, .m = 20, .kh = 1, .kw = 1});
  // C >= 16 with 2560 < K <= 4608: still the indirect A (resnet's 3x3 512-channel convs).
  add({.h = 3, .w = 4, .c = 300, .m = 20, .pads = {1, 1, 1, 1}});
  // K > 4608 with padding: gathered A although C >= 16.
  add({.h = 3, .w = 3, .c = 520, .m = 33, .pads = {1, 1, 1, 1}});
  // C < 16 with KW * C >= 16 and dilation 1 along W: kernel-row segments of a padded copy.
  add({.n = 2, .h = 11, .w = 13, .c = 3, .m = 33, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pads = {3, 2, 1, 3}});
  add({.h = 9, .w = 8, .c = 15, .m = 17, .dh = 2, .pads = {2, 1, 2, 1}, .relu = true});  // vertical dilation
  add({.h = 4, .w = 20, .c = 1, .m = 5, .kh = 1, .kw = 16, .pads = {0, 2, 0, 3}});       // one kernel row
  add({.h = 10, .w = 11, .c = 8, .m = 20, .sh = 3, .sw = 3, .pads = {1, 0, 0, 2}});      // windows skip the edge
  add({.h = 2, .w = 2, .c = 4, .m = 3, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}, .bias = false});  // kernel > input
  // Even row tiles (49 rows: 10+10+10+10+9; 196 in blocks of 108 + 88) on the indirect A,
  // with N of half a panel (16), 1.5 panels (48) and a half-width last panel (144).
  add({.h = 7, .w = 7, .c = 32, .m = 48, .pads = {1, 1, 1, 1}, .relu = true});
  add({.h = 14, .w = 14, .c = 16, .m = 16, .pads = {1, 1, 1, 1}});
  add({.h = 5, .w = 5, .c = 24, .m = 144, .pads = {1, 1, 1, 1}});
  // 1x1 with N = 16 (mobilenet_v2's first project) and N = 144 (its 56x56 expand: packed A).
  add({.h = 7, .w = 7, .c = 32, .m = 16, .kh = 1, .kw = 1});
  add({.h = 14, .w = 14, .c = 24, .m = 144, .kh = 1, .kw = 1, .relu = true});
  // N of two panels (33-64: the two-panel tile, rows in halves): one output pixel, 13 rows
  // (a tile + 1), 126 rows over two images.
  add({.h = 1, .w = 1, .c = 16, .m = 64, .pads = {1, 1, 1, 1}});
  add({.h = 13, .w = 1, .c = 20, .m = 33, .kh = 3, .kw = 1, .pads = {1, 0, 1, 0}});
  add({.n = 2, .h = 7, .w = 9, .c = 17, .m = 64, .pads = {1, 1, 1, 1}, .relu = true});
  return v;
}

// Sets STRATA_WINOGRAD for one scope (kernels read it when they are created).
class ScopedWinograd {
 public:
  explicit ScopedWinograd(const char* value) {
    if (const char* old = std::getenv("STRATA_WINOGRAD")) old_ = old, had_ = true;
    if (value) {
      setenv("STRATA_WINOGRAD", value, 1);
    } else {
      unsetenv("STRATA_WINOGRAD");
    }
  }
  ~ScopedWinograd() {
    if (had_) {
      setenv("STRATA_WINOGRAD", old_.c_str(), 1);
    } else {
      unsetenv("STRATA_WINOGRAD");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(NhwcGemmConv, MatchesNaiveConvAtEdgeShapes) {
  if (!sgemm::Available()) GTEST_SKIP() << "no AVX-512F: NhwcConv stays on XNNPACK";
  ThreadPool pool2(2);
  // Twice: as sessions run them (3x3 stride-1 cases with C, M >= 16 on Winograd), and with
  // Winograd off, so that the SGEMM conv's own 3x3 stride-1 paths stay covered.
  for (const char* wino : {static_cast<const char*>(nullptr), "0"}) {
    ScopedWinograd scoped(wino);
    uint32_t seed = 1;
    for (const ConvCase& cc : EdgeCases()) {
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
      const Tensor w = Random({cc.m, cc.c, cc.kh, cc.kw}, seed++, 1.0f / std::sqrt(float(cc.c * cc.kh * cc.kw)));
      const Tensor b = Random({cc.m}, seed++, 0.5f);
      const Tensor want = NaiveConv(cc, x, w, cc.bias ? &b : nullptr, nullptr);
      Tensor first;
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        KernelRun r = RunNhwcConv(cc, x, w, cc.bias ? &b : nullptr, nullptr, pool);
        ASSERT_TRUE(r.create.ok()) << Name(cc) << ": " << r.create.ToString();
        ASSERT_TRUE(r.compute.ok()) << Name(cc) << ": " << r.compute.ToString();
        ExpectNear(r.y, want, Name(cc));
        if (!first.valid()) {
          first = r.y;
        } else {  // the split over threads must not change a single bit
          ASSERT_EQ(0, std::memcmp(first.data<float>(), r.y.data<float>(), first.num_elements() * sizeof(float)))
              << Name(cc);
        }
      }
    }
  }
}

TEST(NhwcGemmConv, AutoPadSameMatchesExplicitPads) {
  if (!sgemm::Available()) GTEST_SKIP();
  // 7x7 input, 3x3 stride 2, SAME_UPPER: out 4x4, total pad 2 -> 1 top/left, 1 bottom/right;
  // SAME_LOWER on 8x8: total pad 1 -> 1 top/left, 0 bottom/right.
  for (auto [ap, in, pads] : {std::tuple<std::string, int64_t, std::vector<int64_t>>{"SAME_UPPER", 7, {1, 1, 1, 1}},
                              {"SAME_LOWER", 8, {1, 1, 0, 0}},
                              {"SAME_UPPER", 8, {0, 0, 1, 1}}}) {
    ConvCase cc{.h = in, .w = in, .c = 5, .m = 6, .sh = 2, .sw = 2, .pads = pads};
    const Tensor x = Random({1, in, in, 5}, 3), w = Random({6, 5, 3, 3}, 4), b = Random({6}, 5);
    const Tensor want = NaiveConv(cc, x, w, &b, nullptr);
    cc.auto_pad = ap;
    KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, nullptr);
    ASSERT_TRUE(r.create.ok() && r.compute.ok()) << ap << ": " << r.create.ToString() << r.compute.ToString();
    ExpectNear(r.y, want, ap + " " + std::to_string(in));
  }
}

TEST(NhwcGemmConv, ResidualAndReluInTheEpilogue) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool2(2);
  for (ConvCase cc :
       {ConvCase{.h = 6, .w = 6, .c = 70, .m = 33, .pads = {1, 1, 1, 1}},  // K = 630: 3 K blocks
        ConvCase{.n = 2, .h = 15, .w = 15, .c = 16, .m = 64, .kh = 1, .kw = 1},
        ConvCase{.h = 9, .w = 9, .c = 8, .m = 12, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
        // RGB-stem-like: the padded kernel-row path.
        ConvCase{
            .n = 2, .h = 17, .w = 15, .c = 3, .m = 40, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pads = {3, 3, 3, 3}}}) {
    cc.relu = cc.residual = true;
    const int64_t oh = OutSize(cc.h, cc.kh, cc.sh, 1, cc.pads[0], cc.pads[2]);
    const int64_t ow = OutSize(cc.w, cc.kw, cc.sw, 1, cc.pads[1], cc.pads[3]);
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, 7);
    const Tensor w = Random({cc.m, cc.c, cc.kh, cc.kw}, 8, 0.2f);
    const Tensor b = Random({cc.m}, 9, 0.5f);
    const Tensor res = Random({cc.n, oh, ow, cc.m}, 10, 2.0f);
    const Tensor want = NaiveConv(cc, x, w, &b, &res);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      KernelRun r = RunNhwcConv(cc, x, w, &b, &res, pool);
      ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
      ExpectNear(r.y, want, Name(cc));
      EXPECT_FALSE(r.in_place);
      // The sum written over the residual (the SGEMM accumulates into it), as the executor
      // arranges when the residual dies at this node.
      KernelRun ip = RunNhwcConv(cc, x, w, &b, &res, pool, nullptr, /*in_place=*/true);
      ASSERT_TRUE(ip.create.ok() && ip.compute.ok()) << Name(cc) << ip.compute.ToString();
      EXPECT_TRUE(ip.in_place) << Name(cc);
      ExpectNear(ip.y, want, Name(cc) + " in place");
      int zeros = 0;
      for (int64_t i = 0; i < r.y.num_elements(); ++i) zeros += r.y.data<float>()[i] == 0.0f;
      EXPECT_GT(zeros, 0) << "Relu after the residual add never clamped: the case proves nothing";
    }
  }
  // Without bias too.
  ConvCase cc{.h = 4, .w = 4, .c = 3, .m = 5, .pads = {1, 1, 1, 1}, .bias = false, .residual = true};
  const Tensor x = Random({1, 4, 4, 3}, 11), w = Random({5, 3, 3, 3}, 12), res = Random({1, 4, 4, 5}, 13);
  KernelRun r = RunNhwcConv(cc, x, w, nullptr, &res, nullptr);
  ASSERT_TRUE(r.create.ok() && r.compute.ok()) << r.create.ToString() << r.compute.ToString();
  ExpectNear(r.y, NaiveConv(cc, x, w, nullptr, &res), "residual without bias");
}

// Winograd F(4x4, 3x3) and F(2x2, 3x3) (cpu/conv_nhwc_winograd.cc, each forced with
// STRATA_WINOGRAD=4 / 2) against the naive conv: maps smaller
// than one tile, exactly one tile, ragged last tiles, asymmetric and wide pads, C and M not
// multiples of 16, M over one 128-column chunk, several tile blocks (C = 160 leaves room for
// 18 tiles per block), C = 512 (the smallest blocks), batch 2, at 1, 2 and 3 threads with
// bit-identical results. Each case must also differ somewhere from the SGEMM conv's bits
// (STRATA_WINOGRAD=0): proof that the Winograd kernel, not the SGEMM, ran.
TEST(NhwcWinogradConv, MatchesNaiveConvAtEdgeShapes) {
  if (!sgemm::Available()) GTEST_SKIP() << "no AVX-512F";
  ThreadPool pool2(2), pool3(3);
  const std::vector<ConvCase> cases = {
      {.h = 1, .w = 1, .c = 16, .m = 16, .pads = {1, 1, 1, 1}},
      {.h = 2, .w = 3, .c = 17, .m = 17, .pads = {1, 1, 1, 1}, .relu = true},
      {.h = 4, .w = 4, .c = 20, .m = 33},                        // 2x2 output, one ragged tile
      {.h = 6, .w = 6, .c = 16, .m = 32, .bias = false},         // exactly one tile
      {.h = 5, .w = 9, .c = 33, .m = 48, .pads = {0, 1, 2, 1}},  // asymmetric pads
      {.h = 13, .w = 11, .c = 24, .m = 40, .pads = {2, 2, 2, 2}, .relu = true},
      {.n = 2, .h = 9, .w = 10, .c = 64, .m = 130, .pads = {1, 1, 1, 1}, .relu = true},  // 128 + 2 columns
      {.h = 20, .w = 20, .c = 160, .m = 144, .pads = {1, 1, 1, 1}},                      // 25 tiles in blocks
      {.h = 8, .w = 8, .c = 512, .m = 16, .pads = {1, 1, 1, 1}},
      {.n = 2, .h = 17, .w = 15, .c = 16, .m = 31, .pads = {1, 1, 1, 1}},
  };
  for (const char* variant : {"4", "2"}) {
    ScopedWinograd forced(variant);
    uint32_t seed = 500;
    for (const ConvCase& cc : cases) {
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
      const Tensor w = Random({cc.m, cc.c, 3, 3}, seed++, 1.0f / std::sqrt(float(cc.c * 9)));
      const Tensor b = Random({cc.m}, seed++, 0.5f);
      const Tensor* bias = cc.bias ? &b : nullptr;
      const Tensor want = NaiveConv(cc, x, w, bias, nullptr);
      Tensor first;
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        KernelRun r = RunNhwcConv(cc, x, w, bias, nullptr, pool);
        ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
        ExpectNear(r.y, want, "winograd " + Name(cc));
        if (!first.valid()) {
          first = r.y;
        } else {
          ASSERT_EQ(0, std::memcmp(first.data<float>(), r.y.data<float>(), first.num_elements() * sizeof(float)))
              << "thread count changed the bits: " << Name(cc);
        }
      }
      ScopedWinograd off("0");
      KernelRun direct = RunNhwcConv(cc, x, w, bias, nullptr, nullptr);
      ASSERT_TRUE(direct.create.ok() && direct.compute.ok()) << Name(cc);
      EXPECT_NE(0, std::memcmp(first.data<float>(), direct.y.data<float>(), first.num_elements() * sizeof(float)))
          << "same bits as the SGEMM conv: Winograd F(" << variant << ") did not run for " << Name(cc);
    }
  }
}

// An infinite weight: Winograd's transforms would mix inf - inf into NaN, so the conv keeps
// the SGEMM conv, whose bits it then matches (inf where the direct sum is inf).
TEST(NhwcWinogradConv, NonFiniteWeightsKeepTheSgemmConv) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool2(2);
  // The check runs inside the transform: the first weight of the first channel block, and
  // the last weight of a partial last block (40 = 2 x 16 + 8 output channels) split over
  // two threads' input-channel ranges.
  struct NonFinite {
    int64_t m;
    int64_t at;  // -1: the last weight
    float value;
    ThreadPool* pool;
  };
  for (const NonFinite& nf : {NonFinite{16, 5, INFINITY, nullptr}, NonFinite{40, -1, -INFINITY, &pool2}}) {
    const ConvCase cc{.h = 8, .w = 8, .c = 16, .m = nf.m, .pads = {1, 1, 1, 1}};
    const Tensor x = Random({1, 8, 8, 16}, 81);
    Tensor w = Random({nf.m, 16, 3, 3}, 82, 0.25f);
    w.mutable_data<float>()[nf.at >= 0 ? nf.at : w.num_elements() - 1] = nf.value;
    KernelRun r = RunNhwcConv(cc, x, w, nullptr, nullptr, nf.pool);
    ASSERT_TRUE(r.create.ok() && r.compute.ok()) << r.create.ToString() << r.compute.ToString();
    ScopedWinograd off("0");
    KernelRun direct = RunNhwcConv(cc, x, w, nullptr, nullptr, nf.pool);
    ASSERT_TRUE(direct.create.ok() && direct.compute.ok());
    EXPECT_EQ(0, std::memcmp(r.y.data<float>(), direct.y.data<float>(), r.y.num_elements() * sizeof(float)))
        << "M=" << nf.m;
    int inf = 0;
    for (int64_t i = 0; i < r.y.num_elements(); ++i) inf += std::isinf(r.y.data<float>()[i]);
    EXPECT_GT(inf, 0) << "no infinite output: the case proves nothing (M=" << nf.m << ")";
  }
}

// A weight still in the model file (a deferred payload, as sessions import large
// initializers) is packed a block at a time, by Winograd F(4x4) and F(2x2) (16 output
// channels per read) and by the SGEMM conv (32 rows per read, stride 2 and 1x1 too): the
// outputs have the same bits as from memory, at 1 and 2 threads, the payload is never read
// whole, and an infinite weight read from the file still sends Winograd back to the SGEMM.
TEST(NhwcWinogradConv, WeightsOnDiskGiveTheSameBits) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool2(2);
  testing::TempDir dir;
  uint32_t seed = 900;
  for (const char* variant : {"4", "2", "0"}) {
    ScopedWinograd forced(variant);
    for (ConvCase cc : {ConvCase{.h = 10, .w = 10, .c = 32, .m = 48, .pads = {1, 1, 1, 1}},
                        ConvCase{.h = 9, .w = 7, .c = 17, .m = 130, .pads = {1, 1, 1, 1}, .relu = true},
                        ConvCase{.h = 9, .w = 9, .c = 24, .m = 40, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
                        ConvCase{.h = 6, .w = 5, .c = 40, .m = 33, .kh = 1, .kw = 1}}) {
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
      Tensor w = Random({cc.m, cc.c, cc.kh, cc.kw}, seed++, 0.2f);
      const Tensor b = Random({cc.m}, seed++, 0.5f);
      for (bool inf : {false, true}) {
        if (inf) w.mutable_data<float>()[w.num_elements() - 1] = INFINITY;
        const std::vector<float> values(w.data<float>(), w.data<float>() + w.num_elements());
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
          KernelRun mem = RunNhwcConv(cc, x, w, &b, nullptr, pool);
          ASSERT_TRUE(mem.create.ok() && mem.compute.ok()) << Name(cc);
          testing::OnDiskTensor disk = testing::WriteOnDisk(dir, "w.bin", values, w.shape());
          ASSERT_FALSE(disk.path.empty());
          KernelRun file = RunNhwcConv(cc, x, disk.tensor, &b, nullptr, pool);
          ASSERT_TRUE(file.create.ok() && file.compute.ok())
              << Name(cc) << file.create.ToString() << file.compute.ToString();
          EXPECT_EQ(0, std::memcmp(mem.y.data<float>(), file.y.data<float>(), mem.y.num_elements() * sizeof(float)))
              << "F(" << variant << ") " << Name(cc) << (inf ? " with an infinite weight" : "");
          EXPECT_EQ(disk.source->loaded(), 0u) << "the payload was read whole: " << Name(cc);
        }
      }
    }
  }
}

TEST(NhwcWinogradConv, ResidualReluAndInPlace) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool2(2);
  for (const char* variant : {"4", "2"}) {
    ScopedWinograd forced(variant);
    for (ConvCase cc : {ConvCase{.h = 10, .w = 10, .c = 32, .m = 48, .pads = {1, 1, 1, 1}},
                        ConvCase{.n = 2, .h = 7, .w = 9, .c = 16, .m = 136, .pads = {1, 1, 1, 1}, .bias = false}}) {
      cc.relu = cc.residual = true;
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, 71);
      const Tensor w = Random({cc.m, cc.c, 3, 3}, 72, 0.2f);
      const Tensor b = Random({cc.m}, 73, 0.5f);
      const Tensor* bias = cc.bias ? &b : nullptr;
      const Tensor res = Random({cc.n, cc.h, cc.w, cc.m}, 74, 2.0f);
      const Tensor want = NaiveConv(cc, x, w, bias, &res);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        KernelRun r = RunNhwcConv(cc, x, w, bias, &res, pool);
        ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
        ExpectNear(r.y, want, "winograd " + Name(cc));
        KernelRun ip = RunNhwcConv(cc, x, w, bias, &res, pool, nullptr, /*in_place=*/true);
        ASSERT_TRUE(ip.create.ok() && ip.compute.ok()) << Name(cc) << ip.compute.ToString();
        EXPECT_TRUE(ip.in_place) << Name(cc);
        ExpectNear(ip.y, want, "winograd in place " + Name(cc));
        int zeros = 0;
        for (int64_t i = 0; i < r.y.num_elements(); ++i) zeros += r.y.data<float>()[i] == 0.0f;
        EXPECT_GT(zeros, 0) << "Relu never clamped: the case proves nothing";
      }
    }
  }
}

TEST(NhwcGemmConv, BadInputsGiveClearErrors) {
  if (!sgemm::Available()) GTEST_SKIP();
  ConvCase cc{.h = 4, .w = 4, .c = 3, .m = 5, .pads = {1, 1, 1, 1}};
  const Tensor x = Random({1, 4, 4, 3}, 1), w = Random({5, 3, 3, 3}, 2), b = Random({5}, 3);
  // Residual of the wrong shape: named, never read out of bounds.
  const Tensor small = Random({1, 4, 4, 4}, 4);
  KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, nullptr, &small);
  ASSERT_TRUE(r.create.ok()) << r.create.ToString();
  EXPECT_EQ(r.compute.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.compute.message().find("conv0"), std::string::npos) << r.compute.message();
  EXPECT_NE(r.compute.message().find("residual"), std::string::npos) << r.compute.message();
  // X with the wrong channel count.
  const Tensor x4 = Random({1, 4, 4, 4}, 5);
  r = RunNhwcConv(cc, x4, w, &b, nullptr, nullptr);
  ASSERT_TRUE(r.create.ok());
  EXPECT_FALSE(r.compute.ok());
  EXPECT_NE(r.compute.message().find("conv0"), std::string::npos) << r.compute.message();
  // Rank 3 X.
  const Tensor x3 = Random({4, 4, 3}, 6);
  r = RunNhwcConv(cc, x3, w, &b, nullptr, nullptr);
  EXPECT_EQ(r.compute.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.compute.message().find("rank 4"), std::string::npos) << r.compute.message();
  // A residual on a grouped conv (which XNNPACK runs) is a malformed graph, not a crash.
  ConvCase gc{.h = 4, .w = 4, .c = 4, .m = 4, .pads = {1, 1, 1, 1}, .group = 2};
  const Tensor gx = Random({1, 4, 4, 4}, 7), gw = Random({4, 2, 3, 3}, 8), gr = Random({1, 4, 4, 4}, 9);
  r = RunNhwcConv(gc, gx, gw, nullptr, &gr, nullptr);
  EXPECT_EQ(r.create.code(), StatusCode::kInvalidModel) << r.create.ToString();
  EXPECT_NE(r.create.message().find("residual"), std::string::npos) << r.create.message();
}

// The per-group SGEMM conv (groups of 32): X of the wrong channel count or rank is a clear
// error naming the node, never a read past X; an empty batch gives an empty Y.
TEST(NhwcGroupedConv, WideGroupsBadInputsGiveClearErrors) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool2(2);
  ConvCase cc{.h = 5, .w = 5, .c = 64, .m = 64, .pads = {1, 1, 1, 1}, .group = 2};
  const Tensor w = Random({64, 32, 3, 3}, 2), b = Random({64}, 3);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
    const Tensor x48 = Random({1, 5, 5, 48}, 5);
    KernelRun r = RunNhwcConv(cc, x48, w, &b, nullptr, pool);
    ASSERT_TRUE(r.create.ok()) << r.create.ToString();
    EXPECT_EQ(r.impl, "nhwc-grouped-gemm");
    EXPECT_FALSE(r.compute.ok());
    EXPECT_NE(r.compute.message().find("conv0"), std::string::npos) << r.compute.message();
    const Tensor x3 = Random({5, 5, 64}, 6);
    r = RunNhwcConv(cc, x3, w, &b, nullptr, pool);
    EXPECT_EQ(r.compute.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.compute.message().find("rank 4"), std::string::npos) << r.compute.message();
    ConvCase empty = cc;
    empty.n = 0;
    const Tensor x0 = Random({0, 5, 5, 64}, 7);
    r = RunNhwcConv(empty, x0, w, &b, nullptr, pool);
    ASSERT_TRUE(r.compute.ok()) << r.compute.ToString();
    EXPECT_EQ(r.y.num_elements(), 0);
  }
}

TEST(NhwcGemmConv, GroupedConvStaysOnXnnpackAndMatches) {
  ConvCase cc{.n = 2, .h = 6, .w = 7, .c = 8, .m = 12, .pads = {1, 1, 1, 1}, .group = 2};
  const Tensor x = Random({2, 6, 7, 8}, 1), w = Random({12, 4, 3, 3}, 2), b = Random({12}, 3);
  KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, nullptr);
  ASSERT_TRUE(r.create.ok() && r.compute.ok()) << r.create.ToString() << r.compute.ToString();
  const Tensor want = NaiveConv(cc, x, w, &b, nullptr);
  ExpectNear(r.y, want, "grouped");
}

TEST(NhwcDepthwiseConv, MatchesNaiveConvAtEdgeShapes) {
  {
    ThreadPool pool2(2);
    std::vector<ConvCase> cases = {
        {.n = 2, .h = 9, .w = 8, .c = 37, .m = 37, .pads = {1, 1, 1, 1}, .relu = true},  // C not a multiple of 16
        {.h = 11, .w = 10, .c = 32, .m = 32, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
        {.h = 12, .w = 13, .c = 16, .m = 16, .kh = 5, .kw = 5, .sh = 2, .sw = 1, .pads = {2, 1, 2, 2}},
        {.h = 9, .w = 9, .c = 5, .m = 5, .dh = 2, .dw = 3, .pads = {2, 3, 2, 3}, .bias = false},
        {.h = 1, .w = 1, .c = 48, .m = 48, .pads = {1, 1, 1, 1}},  // one pixel: only the centre tap
        {.h = 3, .w = 2, .c = 3, .m = 3, .kh = 5, .kw = 5, .pads = {0, 0, 0, 0}, .auto_pad = "SAME_UPPER"},
        // Wide rows: several 4-pixel interior blocks, a remainder and both borders.
        {.h = 5, .w = 23, .c = 40, .m = 40, .pads = {1, 1, 1, 1}, .relu = true},
        {.h = 6, .w = 30, .c = 20, .m = 20, .sh = 1, .sw = 2, .dh = 1, .dw = 2, .pads = {1, 2, 1, 0}},
        // The 3x3 register kernel: stride 2 on odd sizes, TF-style asymmetric pads, rows with
        // only 1 or 2 kernel rows in bounds, no pads, pads wider than the kernel reach.
        {.h = 7, .w = 19, .c = 21, .m = 21, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}, .relu = true},
        {.h = 8, .w = 18, .c = 96, .m = 96, .sh = 2, .sw = 2, .pads = {0, 0, 1, 1}},
        {.h = 2, .w = 17, .c = 16, .m = 16, .pads = {1, 1, 1, 1}},
        {.h = 1, .w = 12, .c = 33, .m = 33, .pads = {1, 1, 1, 1}},
        {.h = 4, .w = 9, .c = 8, .m = 8, .pads = {0, 0, 0, 0}},
        {.h = 3, .w = 6, .c = 17, .m = 17, .sh = 2, .sw = 2, .pads = {2, 3, 2, 3}},
        {.h = 5, .w = 2, .c = 16, .m = 16, .pads = {1, 1, 1, 1}},  // no interior column
        // The 5x5 register kernel (RowKxK): MobileNetV3 / EfficientNet rows at stride 1 and 2,
        // TF-style asymmetric pads, C not a multiple of 16, rows with 1-4 kernel rows in
        // bounds, no pads, and a row with no interior column.
        {.h = 9, .w = 29, .c = 40, .m = 40, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}, .relu = true},
        {.n = 2, .h = 11, .w = 27, .c = 24, .m = 24, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pads = {2, 2, 2, 2}},
        {.h = 14, .w = 14, .c = 72, .m = 72, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pads = {1, 1, 2, 2}},
        {.h = 3, .w = 21, .c = 17, .m = 17, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}},
        {.h = 1, .w = 13, .c = 16, .m = 16, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}},
        {.h = 6, .w = 9, .c = 16, .m = 16, .kh = 5, .kw = 5, .pads = {0, 0, 0, 0}},
        {.h = 4, .w = 4, .c = 16, .m = 16, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}},
        // 7x7 (ConvNeXt): wide rows, stride 2, C not a multiple of 16, rows with 1-6 kernel
        // rows in bounds.
        {.h = 9, .w = 31, .c = 40, .m = 40, .kh = 7, .kw = 7, .pads = {3, 3, 3, 3}},
        {.h = 12, .w = 19, .c = 24, .m = 24, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pads = {3, 3, 3, 3}},
        {.h = 2, .w = 17, .c = 17, .m = 17, .kh = 7, .kw = 7, .pads = {3, 3, 3, 3}, .relu = true},
    };
    uint32_t seed = 100;
    for (ConvCase cc : cases) {
      cc.group = cc.c;
      if (!cc.auto_pad.empty()) cc.pads = {2, 2, 2, 2};  // SAME_UPPER, stride 1, 5x5: 2 each side
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
      const Tensor w = Random({cc.m, 1, cc.kh, cc.kw}, seed++, 0.5f);
      const Tensor b = Random({cc.m}, seed++, 0.5f);
      const Tensor want = NaiveConv(cc, x, w, cc.bias ? &b : nullptr, nullptr);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        KernelRun r = RunNhwcConv(cc, x, w, cc.bias ? &b : nullptr, nullptr, pool);
        ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
        ExpectNear(r.y, want, "depthwise " + Name(cc));
      }
    }
  }
}

// Groups of 4 and 8 channels run on the spread-group kernel (conv_nhwc_grouped.cc), groups
// of 32 (and of 16 on 2 threads) on one SGEMM per group (conv_nhwc_grouped_gemm.cc), 16 on
// 1 thread on XNNPACK: rows wide enough for 8- and 4-pixel
// blocks and single pixels, the last 16-channel tile partial (M = 24, 20, 12, 4), stride 2
// on odd sizes, asymmetric and SAME pads, dilation, a 5x5 and a 1x1 kernel, one pixel,
// rows with no interior column, batch 2, 1 and 2 threads (a 7x7 map splits its tiles over
// the threads). ResNeXt-50's layer3 and layer4 convs (16 and 32 channels per group) too.
TEST(NhwcGroupedConv, MatchesNaiveConvAtEdgeShapes) {
  ThreadPool pool2(2);
  const std::vector<ConvCase> cases = {
      {.h = 12, .w = 12, .c = 48, .m = 48, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}, .relu = true, .group = 6},
      {.n = 2, .h = 9, .w = 23, .c = 24, .m = 24, .pads = {1, 1, 1, 1}, .group = 3},
      {.h = 7, .w = 7, .c = 440, .m = 440, .pads = {1, 1, 1, 1}, .relu = true, .group = 55},
      {.h = 11, .w = 21, .c = 128, .m = 128, .pads = {1, 1, 1, 1}, .group = 32},
      {.h = 7, .w = 19, .c = 20, .m = 20, .sh = 2, .sw = 2, .pads = {0, 0, 1, 1}, .bias = false, .group = 5},
      {.h = 9, .w = 30, .c = 12, .m = 12, .dh = 2, .dw = 3, .pads = {2, 3, 2, 3}, .group = 3},
      {.h = 8, .w = 17, .c = 16, .m = 16, .kh = 5, .kw = 5, .sh = 1, .sw = 2, .pads = {2, 1, 2, 2}, .group = 2},
      {.h = 6, .w = 13, .c = 32, .m = 32, .kh = 1, .kw = 1, .pads = {0, 0, 0, 0}, .group = 4},
      {.h = 1, .w = 1, .c = 16, .m = 16, .pads = {1, 1, 1, 1}, .group = 2},  // only the centre tap
      {.h = 5, .w = 2, .c = 8, .m = 8, .pads = {1, 1, 1, 1}, .group = 2},    // no interior column
      {.h = 3, .w = 10, .c = 16, .m = 16, .pads = {0, 0, 0, 0}, .auto_pad = "SAME_UPPER", .group = 2},
      // Wide groups.
      {.h = 14, .w = 14, .c = 512, .m = 512, .pads = {1, 1, 1, 1}, .relu = true, .group = 32},
      {.h = 7, .w = 7, .c = 1024, .m = 1024, .pads = {1, 1, 1, 1}, .group = 32},
      {.n = 2, .h = 13, .w = 11, .c = 64, .m = 64, .sh = 2, .sw = 2, .pads = {1, 0, 1, 2}, .group = 2},
      {.h = 9, .w = 30, .c = 48, .m = 48, .dh = 2, .dw = 3, .pads = {2, 3, 2, 3}, .bias = false, .group = 3},
      {.h = 8, .w = 17, .c = 32, .m = 32, .kh = 5, .kw = 5, .sh = 1, .sw = 2, .pads = {2, 1, 2, 2}, .group = 2},
      {.h = 6, .w = 13, .c = 64, .m = 64, .kh = 1, .kw = 1, .pads = {0, 0, 0, 0}, .group = 2},
      {.h = 1, .w = 1, .c = 32, .m = 32, .pads = {1, 1, 1, 1}, .group = 2},  // only the centre tap
      {.h = 5, .w = 2, .c = 96, .m = 96, .pads = {1, 1, 1, 1}, .group = 3},  // no interior column
  };
  uint32_t seed = 200;
  for (ConvCase cc : cases) {
    if (!cc.auto_pad.empty()) cc.pads = {1, 1, 1, 1};  // SAME_UPPER, stride 1, 3x3: 1 each side
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
    const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed++, 0.5f);
    const Tensor b = Random({cc.m}, seed++, 0.5f);
    const Tensor want = NaiveConv(cc, x, w, cc.bias ? &b : nullptr, nullptr);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      KernelRun r = RunNhwcConv(cc, x, w, cc.bias ? &b : nullptr, nullptr, pool);
      ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
      const int64_t cg = cc.c / cc.group;
      const char* impl = cg % 16 != 0 ? "nhwc-grouped" : cg == 16 && !pool ? "xnnpack" : "nhwc-grouped-gemm";
      EXPECT_EQ(r.impl, impl) << Name(cc);
      ExpectNear(r.y, want, "grouped " + Name(cc));
    }
  }
}

// SiLU and HardSwish fused into an NhwcConv (FuseNhwcConvActivation) on every kernel that
// can take one: applied in the SGEMM (1x1 direct and gathered 3x3), Winograd, depthwise,
// stem and grouped stores, and over XNNPACK's output (128 channels per group), against the
// naive conv followed by the activation, 1 and 2 threads; maps scaled so that values span
// both flat tails of each function.
TEST(NhwcConv, FusedSiluAndHardSwishOnEveryKernel) {
  ThreadPool pool2(2);
  struct ActCase {
    ConvCase cc;
    const char* impl;
    const char* winograd;
  };
  const ActCase cases[] = {
      {{.h = 6, .w = 7, .c = 40, .m = 45, .kh = 1, .kw = 1}, "nhwc-sgemm", "0"},
      {{.n = 2, .h = 9, .w = 11, .c = 24, .m = 33, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}}, "nhwc-sgemm", "0"},
      {{.h = 14, .w = 13, .c = 16, .m = 32, .pads = {1, 1, 1, 1}}, "winograd-f4x4", "4"},
      {{.n = 2, .h = 9, .w = 21, .c = 37, .m = 37, .pads = {1, 1, 1, 1}, .group = 37}, "nhwc-depthwise", "0"},
      {{.h = 11, .w = 12, .c = 24, .m = 24, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pads = {2, 2, 2, 2}, .group = 24},
       "nhwc-depthwise",
       "0"},
      {{.h = 15, .w = 17, .c = 3, .m = 32, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}}, "nhwc-stem", "0"},
      {{.h = 9, .w = 19, .c = 48, .m = 48, .pads = {1, 1, 1, 1}, .group = 6}, "nhwc-grouped", "0"},
      {{.h = 7, .w = 8, .c = 64, .m = 64, .pads = {1, 1, 1, 1}, .group = 2}, "nhwc-grouped-gemm", "0"},
      {{.h = 7, .w = 8, .c = 256, .m = 256, .pads = {1, 1, 1, 1}, .group = 2}, "xnnpack", "0"},
  };
  uint32_t seed = 700;
  for (const ActCase& ac : cases)
    for (const char* act : {"Silu", "HardSwish"}) {
      ConvCase cc = ac.cc;
      cc.act = act;
      ScopedWinograd wino(ac.winograd);
      const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++, 3.0f);
      const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed++, 1.0f);
      const Tensor b = Random({cc.m}, seed++, 1.0f);
      const Tensor want = NaiveConv(cc, x, w, &b, nullptr);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, pool);
        ASSERT_TRUE(r.create.ok() && r.compute.ok()) << act << " " << Name(cc) << r.create.ToString()
                                                     << r.compute.ToString();
        EXPECT_EQ(r.impl, ac.impl) << act << " " << Name(cc);
        ExpectNear(r.y, want, std::string(act) + " " + ac.impl + " " + Name(cc));
      }
    }
}

TEST(NhwcStemConv, MatchesNaiveConvAtEdgeShapes) {
  // C <= 4 without a residual runs on the direct stem kernel (conv_nhwc_stem.cc): output
  // channels in 1-4 vectors (M = 16, 40, 32, 61, 64) and in several groups (M = 70), pixel
  // blocks with remainders, borders on every side, dilation, batch 2.
  ThreadPool pool2(2);
  std::vector<ConvCase> cases = {
      {.h = 15, .w = 17, .c = 3, .m = 32, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}, .relu = true},  // MobileNetV2
      // The 3x3 stride-2 RGB stem: compile-time taps with 1 vector, the loops with 3 and 4.
      {.h = 9, .w = 40, .c = 3, .m = 16, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
      {.h = 7, .w = 31, .c = 3, .m = 45, .sh = 1, .sw = 2, .pads = {1, 0, 1, 1}, .relu = true},
      {.n = 2, .h = 8, .w = 26, .c = 3, .m = 64, .sh = 2, .sw = 2, .pads = {0, 0, 0, 0}},
      // 4 vectors take 6-pixel blocks: 16 interior columns (2 blocks + 4) and, with a
      // masked last vector, 14 between the padded edges (2 blocks + 2).
      {.h = 9, .w = 33, .c = 3, .m = 64, .sh = 2, .sw = 2, .pads = {0, 0, 0, 0}, .relu = true},
      {.h = 9, .w = 31, .c = 3, .m = 61, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
      {.n = 2, .h = 21, .w = 22, .c = 3, .m = 64, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pads = {3, 3, 3, 3}},
      {.h = 9, .w = 30, .c = 1, .m = 16, .pads = {1, 1, 1, 1}},
      {.h = 8, .w = 13, .c = 4, .m = 70, .pads = {0, 2, 1, 0}, .bias = false},
      {.h = 10, .w = 11, .c = 2, .m = 40, .dh = 2, .dw = 2, .pads = {2, 2, 2, 2}},
      {.h = 2, .w = 2, .c = 3, .m = 24, .kh = 5, .kw = 5, .pads = {2, 2, 2, 2}},  // every pixel on a border
      {.h = 12, .w = 12, .c = 3, .m = 5, .kh = 1, .kw = 1},
  };
  uint32_t seed = 300;
  for (const ConvCase& cc : cases) {
    const Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
    const Tensor w = Random({cc.m, cc.c, cc.kh, cc.kw}, seed++, 0.5f);
    const Tensor b = Random({cc.m}, seed++, 0.5f);
    const Tensor want = NaiveConv(cc, x, w, cc.bias ? &b : nullptr, nullptr);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      KernelRun r = RunNhwcConv(cc, x, w, cc.bias ? &b : nullptr, nullptr, pool);
      ASSERT_TRUE(r.create.ok() && r.compute.ok()) << Name(cc) << r.create.ToString() << r.compute.ToString();
      ExpectNear(r.y, want, "stem " + Name(cc));
    }
  }
}

// A NaN input reaching a fused Relu stays NaN in every NHWC conv kernel, as in the unfused
// Conv + Relu: the clamp is max(lo, v), since vmaxps returns its second operand when either
// is NaN. The direct kernels' NaN outputs are exactly the reference's; Winograd's are a
// superset (its transforms mix a whole input tile into every output of the tile, so one NaN
// input makes each output of the tiles that read it NaN).
TEST(NhwcConv, FusedReluKeepsNaN) {
  ThreadPool pool2(2);
  struct NanCase {
    ConvCase cc;
    const char* kernel;
  };
  const NanCase cases[] = {
      {{.h = 9, .w = 9, .c = 32, .m = 32, .pads = {1, 1, 1, 1}, .relu = true, .group = 32}, "depthwise"},
      {{.h = 15, .w = 17, .c = 3, .m = 32, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}, .relu = true}, "stem"},
      {{.h = 6, .w = 5, .c = 40, .m = 130, .kh = 1, .kw = 1, .relu = true}, "sgemm 1x1"},
      {{.h = 12, .w = 11, .c = 64, .m = 64, .pads = {1, 1, 1, 1}, .relu = true}, "sgemm 3x3"},
      {{.h = 30, .w = 30, .c = 16, .m = 16, .pads = {1, 1, 1, 1}, .relu = true}, "winograd"},
      // The NaN's group's outputs only: the grouped kernel spreads channels within a group.
      {{.h = 9, .w = 19, .c = 48, .m = 48, .pads = {1, 1, 1, 1}, .relu = true, .group = 6}, "grouped 8"},
      {{.h = 9, .w = 19, .c = 32, .m = 32, .pads = {1, 1, 1, 1}, .relu = true, .group = 8}, "grouped 4"},
  };
  uint32_t seed = 500;
  for (const NanCase& nc : cases) {
    const ConvCase& cc = nc.cc;
    // Kernels read STRATA_WINOGRAD when created: the direct ones with it off (RunNhwcConv's
    // node has no static map size, so Winograd would take every 3x3 stride-1 conv).
    const bool superset = std::string(nc.kernel) == "winograd";
    ScopedWinograd wino(superset ? "4" : "0");
    Tensor x = Random({cc.n, cc.h, cc.w, cc.c}, seed++);
    x.mutable_data<float>()[((cc.h / 2) * cc.w + cc.w / 2) * cc.c + 1] = std::numeric_limits<float>::quiet_NaN();
    const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed++, 0.5f);
    const Tensor b = Random({cc.m}, seed++, 0.5f);
    const Tensor want = NaiveConv(cc, x, w, &b, nullptr);
    int64_t want_nan = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) want_nan += std::isnan(want.data<float>()[i]);
    ASSERT_GT(want_nan, 0) << nc.kernel;
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      KernelRun r = RunNhwcConv(cc, x, w, &b, nullptr, pool);
      ASSERT_TRUE(r.create.ok() && r.compute.ok()) << nc.kernel << r.create.ToString() << r.compute.ToString();
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        const bool got = std::isnan(r.y.data<float>()[i]), ref = std::isnan(want.data<float>()[i]);
        if (superset) {
          ASSERT_TRUE(got || !ref) << nc.kernel << ": the reference's NaN at element " << i << " was lost";
        } else {
          ASSERT_EQ(got, ref) << nc.kernel << " at element " << i;
        }
      }
    }
  }
}

// --- the SGEMM entry points -------------------------------------------------------------

TEST(SgemmGathered, MatchesGemmOnTheSameMatrixAndChecksArguments) {
  if (!sgemm::Available()) GTEST_SKIP();
  // Two M blocks, two K blocks, a partial panel; N > 128, so Gemm packs A as well (it
  // reads A in place for N <= 128, which rounds differently).
  const int64_t m = 203, k = 300, n = 150;
  const Tensor a = Random({m, k}, 1), bm = Random({k, n}, 2), bias = Random({n}, 3), res = Random({m, n}, 4);
  auto packed = sgemm::PackB(bm.data<float>(), k, n, false);
  ASSERT_TRUE(packed.ok());
  struct Ctx {
    const float* a;
    int64_t lda;
  } ctx{a.data<float>(), k};
  sgemm::ASource src;
  src.ctx = &ctx;
  src.fill = [](const void* c, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
    const Ctx& x = *static_cast<const Ctx*>(c);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ld, x.a + (row0 + r) * x.lda + k0, kc * sizeof(float));
  };
  sgemm::Epilogue ep;
  ep.bias = bias.data<float>();
  ep.residual = res.data<float>();
  ep.ldr = n;
  ep.min = 0.0f;
  ThreadPool pool2(2);
  std::vector<float> direct(m * n), gathered(m * n, -1.0f);
  ASSERT_TRUE(sgemm::Gemm(m, a.data<float>(), k, *packed, direct.data(), n, ep, &pool2).ok());
  ASSERT_TRUE(sgemm::GemmGathered(m, src, *packed, gathered.data(), n, ep, &pool2).ok());
  EXPECT_EQ(0, std::memcmp(direct.data(), gathered.data(), direct.size() * sizeof(float)));
  // Spot-check against a plain sum: the residual and bias are added before the clamp.
  for (int64_t i : {int64_t{0}, int64_t{101}, m - 1})
    for (int64_t j : {int64_t{0}, int64_t{33}, int64_t{140}, n - 1}) {
      double s = bias.data<float>()[j] + res.data<float>()[i * n + j];
      for (int64_t kk = 0; kk < k; ++kk) s += double(a.data<float>()[i * k + kk]) * bm.data<float>()[kk * n + j];
      EXPECT_NEAR(direct[i * n + j], std::max(s, 0.0), 1e-3) << i << "," << j;
    }
  // Argument errors.
  sgemm::ASource none;
  Status st = sgemm::GemmGathered(m, none, *packed, gathered.data(), n, ep, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("fill"), std::string::npos) << st.message();
  sgemm::Epilogue bad = ep;
  bad.ldr = n - 1;
  st = sgemm::GemmGathered(m, src, *packed, gathered.data(), n, bad, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("residual"), std::string::npos) << st.message();
  bad = ep;
  bad.residual = gathered.data();
  st = sgemm::Gemm(m, a.data<float>(), k, *packed, gathered.data(), n, bad, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("alias"), std::string::npos) << st.message();
}

// B of at most 4 panels and K <= 1024: GemmGathered gathers each row tile over the whole K
// and reads it in place, as Gemm reads such a matrix, so the two give the same bits; the
// fill is still asked for at most 256 columns at a time. Also past the bounds (5 panels,
// K = 1025), where the tiles are packed.
TEST(SgemmGathered, FewPanelsReadTheGatheredRowsInPlace) {
  if (!sgemm::Available()) GTEST_SKIP();
  struct Ctx {
    const float* a;
    int64_t lda;
    mutable std::atomic<int64_t> widest{0};
  };
  ThreadPool pool2(2);
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {203, 600, 128}, {37, 16, 1}, {13, 1024, 100}, {1, 257, 64}, {250, 1025, 128}, {90, 300, 160}}) {
    SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n));
    const Tensor a = Random({m, k}, 5), bm = Random({k, n}, 6), bias = Random({n}, 7);
    auto packed = sgemm::PackB(bm.data<float>(), k, n, false);
    ASSERT_TRUE(packed.ok());
    Ctx ctx{a.data<float>(), k};
    sgemm::ASource src;
    src.ctx = &ctx;
    src.fill = [](const void* c, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
      const Ctx& x = *static_cast<const Ctx*>(c);
      int64_t w = x.widest.load();
      while (kc > w && !x.widest.compare_exchange_weak(w, kc)) {
      }
      for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ld, x.a + (row0 + r) * x.lda + k0, kc * sizeof(float));
    };
    sgemm::Epilogue ep;
    ep.bias = bias.data<float>();
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      std::vector<float> direct(m * n), gathered(m * n, -1.0f);
      ASSERT_TRUE(sgemm::Gemm(m, a.data<float>(), k, *packed, direct.data(), n, ep, pool).ok());
      ASSERT_TRUE(sgemm::GemmGathered(m, src, *packed, gathered.data(), n, ep, pool).ok());
      if (n <= 128 && k <= 1024) {
        EXPECT_EQ(0, std::memcmp(direct.data(), gathered.data(), direct.size() * sizeof(float)));
      } else {
        for (size_t i = 0; i < direct.size(); ++i) ASSERT_NEAR(direct[i], gathered[i], 1e-3) << i;
      }
      EXPECT_LE(ctx.widest.load(), 256);
      EXPECT_GT(ctx.widest.load(), 0);
    }
  }
}

TEST(SgemmIndirect, MatchesGemmOnTheSameMatrixAndChecksArguments) {
  if (!sgemm::Available()) GTEST_SKIP();
  // A[m, taps * seg] where some segments are shared rows of zeros (a conv's padding).
  for (auto [m, taps, seg, n] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{203, 15, 16, 45},  // K = 240
                                 {29, 9, 67, 64},                                                  // K = 603
                                 {1, 1, 5, 1}}) {
    const int64_t k = taps * seg;
    Tensor a = Random({m, k}, 1);
    const std::vector<float> zeros(static_cast<size_t>(seg), 0.0f);
    auto padded = [&](int64_t i, int64_t t) { return (i * 7 + t * 3) % 5 == 0; };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t t = 0; t < taps; ++t)
        if (padded(i, t)) std::fill_n(a.mutable_data<float>() + i * k + t * seg, seg, 0.0f);
    const Tensor bm = Random({k, n}, 2), bias = Random({n}, 3), res = Random({m, n}, 4);
    auto packed = sgemm::PackB(bm.data<float>(), k, n, false);
    ASSERT_TRUE(packed.ok());
    struct Ctx {
      const float* a;
      int64_t k, taps, seg;
      const float* zeros;
      bool (*padded)(int64_t, int64_t);
    };
    const Ctx ctx{
        a.data<float>(), k, taps, seg, zeros.data(), [](int64_t i, int64_t t) { return (i * 7 + t * 3) % 5 == 0; }};
    sgemm::IndirectA src;
    src.ctx = &ctx;
    src.taps = taps;
    src.seg = seg;
    src.rows = [](const void* c, int64_t row0, int64_t rows, const float** dst) {
      const Ctx& x = *static_cast<const Ctx*>(c);
      ASSERT_LE(rows, sgemm::kIndirectRows);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < x.taps; ++t)
          dst[t * sgemm::kIndirectRows + r] = x.padded(row0 + r, t) ? x.zeros : x.a + (row0 + r) * x.k + t * x.seg;
    };
    sgemm::Epilogue ep;
    ep.bias = bias.data<float>();
    ep.residual = res.data<float>();
    ep.ldr = n;
    ep.min = 0.0f;
    ThreadPool pool2(2);
    std::vector<float> direct(m * n), ind1(m * n, -1.0f), ind2(m * n, -2.0f);
    ASSERT_TRUE(sgemm::Gemm(m, a.data<float>(), k, *packed, direct.data(), n, ep, &pool2).ok());
    ASSERT_TRUE(sgemm::GemmIndirect(m, src, *packed, ind1.data(), n, ep, nullptr).ok());
    ASSERT_TRUE(sgemm::GemmIndirect(m, src, *packed, ind2.data(), n, ep, &pool2).ok());
    EXPECT_EQ(0, std::memcmp(ind1.data(), ind2.data(), ind1.size() * sizeof(float))) << "thread count changed bits";
    if (k <= 256) {  // one K block: the same FMA sequence as the packed path
      EXPECT_EQ(0, std::memcmp(direct.data(), ind1.data(), direct.size() * sizeof(float)));
    } else {
      for (size_t i = 0; i < direct.size(); ++i) ASSERT_NEAR(direct[i], ind1[i], 1e-4f * (1 + std::fabs(direct[i])));
    }
    // accumulate + alpha: C = C + 0.5 * A x B + bias.
    sgemm::Epilogue acc;
    acc.accumulate = true;
    acc.alpha = 0.5f;
    acc.bias = bias.data<float>();
    std::vector<float> c1(m * n, 1.0f), c2(m * n, 1.0f);
    ASSERT_TRUE(sgemm::Gemm(m, a.data<float>(), k, *packed, c1.data(), n, acc, nullptr).ok());
    ASSERT_TRUE(sgemm::GemmIndirect(m, src, *packed, c2.data(), n, acc, &pool2).ok());
    for (size_t i = 0; i < c1.size(); ++i) ASSERT_NEAR(c1[i], c2[i], 1e-4f * (1 + std::fabs(c1[i]))) << i;
  }
  // Argument errors.
  const Tensor bm = Random({12, 8}, 5);
  auto packed = sgemm::PackB(bm.data<float>(), 12, 8, false);
  ASSERT_TRUE(packed.ok());
  std::vector<float> c(4 * 8);
  sgemm::IndirectA none;
  none.taps = 3;
  none.seg = 4;
  Status st = sgemm::GemmIndirect(4, none, *packed, c.data(), 8, {}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("callback"), std::string::npos) << st.message();
  sgemm::IndirectA wrong;
  wrong.rows = [](const void*, int64_t, int64_t, const float**) {};
  wrong.taps = 5;
  wrong.seg = 2;
  st = sgemm::GemmIndirect(4, wrong, *packed, c.data(), 8, {}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("K=12"), std::string::npos) << st.message();
}

// --- sessions through the layout pass -----------------------------------------------------

using namespace onnx_builder;

void AddInit(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, uint32_t seed, float scale) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  Tensor v = Random(Shape(dims.begin(), dims.end()), seed, scale);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t i = 0; i < v.num_elements(); ++i) t->add_float_data(v.data<float>()[i]);
}

void Conv(onnx::GraphProto* g, const std::string& in, const std::string& out, int64_t c, int64_t m, int64_t k,
          int64_t stride, int64_t pad, uint32_t seed, int64_t group = 1, int64_t dil = 1) {
  AddInit(g, out + "_w", {m, c / group, k, k}, seed, 1.0f / std::sqrt(float(c / group * k * k)));
  AddInit(g, out + "_b", {m}, seed + 1000, 0.1f);
  auto* n = AddNode(g, "Conv", {in, out + "_w", out + "_b"}, {out});
  n->set_name(out);
  SetInts(n, "kernel_shape", {k, k});
  SetInts(n, "strides", {stride, stride});
  SetInts(n, "pads", {pad, pad, pad, pad});
  SetInts(n, "dilations", {dil, dil});
  if (group != 1) {
    auto* a = n->add_attribute();
    a->set_name("group");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(group);
  }
}

// Two ResNet basic blocks (identity and 1x1/s2 downsample shortcut) on a 7x7/s2 stem,
// a dilated conv, a grouped conv and a depthwise conv, batch 2.
onnx::ModelProto ResNetish() {
  onnx::ModelProto m = MakeModel(13, "conv_nhwc_gemm_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 3, 30, 30});
  Conv(g, "x", "stem", 3, 20, 7, 2, 3, 1);  // 15x15
  AddNode(g, "Relu", {"stem"}, {"s"});
  Conv(g, "s", "a1", 20, 20, 3, 1, 1, 2);
  AddNode(g, "Relu", {"a1"}, {"a1r"});
  Conv(g, "a1r", "a2", 20, 20, 3, 1, 1, 3);
  AddNode(g, "Add", {"a2", "s"}, {"a_sum"});
  AddNode(g, "Relu", {"a_sum"}, {"a"});
  Conv(g, "a", "b1", 20, 36, 3, 2, 1, 4);  // 8x8
  AddNode(g, "Relu", {"b1"}, {"b1r"});
  Conv(g, "b1r", "b2", 36, 36, 3, 1, 1, 5);
  Conv(g, "a", "down", 20, 36, 1, 2, 0, 6);  // produced after b2: the fused node must move
  AddNode(g, "Add", {"b2", "down"}, {"b_sum"});
  AddNode(g, "Relu", {"b_sum"}, {"b"});
  Conv(g, "b", "dil", 36, 16, 3, 1, 2, 7, 1, 2);
  Conv(g, "dil", "grp", 16, 16, 3, 1, 1, 8, 4);
  Conv(g, "grp", "dwc", 16, 16, 3, 1, 1, 9, 16);  // depthwise: strata's kernel at 2 threads
  AddOutput(g, "dwc", {2, 16, 8, 8});
  AddOutput(g, "a", {2, 20, 15, 15});
  return m;
}

TEST(NhwcGemmConvSession, ResNetBlocksMatchReference) {
  std::string bytes = Serialize(ResNetish());
  Tensor x = Random({2, 3, 30, 30}, 42);
  SessionOptions ref;
  ref.threads = 1;
  ref.optimization_level = 0;
  ref.kernel.prefer_reference = true;
  auto sr = Session::CreateFromBytes(bytes.data(), bytes.size(), ref);
  ASSERT_TRUE(sr.ok()) << sr.status().ToString();
  auto want = (*sr)->Run({{"x", Value(x)}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (int threads : {1, 2}) {
    SessionOptions fast;
    fast.threads = threads;
    auto sf = Session::CreateFromBytes(bytes.data(), bytes.size(), fast);
    ASSERT_TRUE(sf.ok()) << sf.status().ToString();
    std::map<std::string, int> ops;
    for (const auto& a : (*sf)->assignments()) ++ops[a.op_type];
    EXPECT_EQ(ops["Conv"], 0);
    EXPECT_GE(ops["NhwcConv"], 7);
    // Both skip connections fused into their conv's epilogue, at any thread count.
    EXPECT_EQ(ops["Add"], 0) << threads << " threads";
    for (int rep = 0; rep < 2; ++rep) {  // the second run reuses prepacked state
      auto got = (*sf)->Run({{"x", Value(x)}});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < got->size(); ++i)
        ExpectNear((*got)[i].tensor(), (*want)[i].tensor(), "threads " + std::to_string(threads));
    }
  }
}

// The Winograd variant is chosen from the input's static size: a 28x28 map takes F(4x4, 3x3),
// a 14x14 map F(2x2, 3x3), a 7x7 map stays on the SGEMM conv. Told apart by comparing bits
// with sessions made with STRATA_WINOGRAD=4, 2 and 0; all match the reference kernels.
TEST(NhwcWinogradConvSession, ChosenByTheStaticMapSize) {
  if (!sgemm::Available()) GTEST_SKIP();
  for (auto [hw, expect] : {std::pair<int64_t, const char*>{7, "0"}, {14, "2"}, {28, "4"}}) {
    onnx::ModelProto m = MakeModel(13, "winograd_choice");
    auto* g = m.mutable_graph();
    AddInput(g, "x", {1, 32, hw, hw});
    Conv(g, "x", "y", 32, 32, 3, 1, 1, 11);
    AddOutput(g, "y", {1, 32, hw, hw});
    const std::string bytes = Serialize(m);
    const Tensor x = Random({1, 32, hw, hw}, 12);
    auto run = [&](bool reference) -> Tensor {
      SessionOptions o;
      o.threads = 1;
      if (reference) {
        o.optimization_level = 0;
        o.kernel.prefer_reference = true;
      }
      auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) return Tensor();
      auto y = (*s)->Run({{"x", Value(x)}});
      EXPECT_TRUE(y.ok()) << y.status().ToString();
      return y.ok() ? (*y)[0].tensor() : Tensor();
    };
    const std::string what = std::to_string(hw) + "x" + std::to_string(hw);
    {  // The session reports the kernel it chose (strata run -v, assignments()).
      SessionOptions o;
      o.threads = 1;
      auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::string impl;
      for (const auto& a : (*s)->assignments())
        if (a.op_type == "NhwcConv") impl = a.impl;
      const std::string want_impl = std::string(expect) == "0"   ? "nhwc-sgemm"
                                    : std::string(expect) == "2" ? "winograd-f2x2"
                                                                 : "winograd-f4x4";
      EXPECT_EQ(impl, want_impl) << what;
    }
    const Tensor want = run(true), chosen = run(false);
    ASSERT_TRUE(want.valid() && chosen.valid());
    ExpectNear(chosen, want, what);
    for (const char* variant : {"0", "2", "4"}) {
      ScopedWinograd forced(variant);
      const Tensor y = run(false);
      ASSERT_TRUE(y.valid());
      ExpectNear(y, want, what + " STRATA_WINOGRAD=" + variant);
      const bool same = std::memcmp(chosen.data<float>(), y.data<float>(), y.num_elements() * sizeof(float)) == 0;
      EXPECT_EQ(same, std::string(variant) == expect)
          << what << ": the chosen kernel " << (same ? "matches" : "differs from") << " STRATA_WINOGRAD=" << variant;
    }
  }
}

TEST(NhwcConvResidualFusion, RewritesResNetTailsAndKeepsOrder) {
  std::string bytes = Serialize(ResNetish());
  auto model = ImportOnnxBytes(bytes.data(), bytes.size(), ImportOptions{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Graph& g = *model->graph;
  OptimizerOptions opts;
  // OptimizeGraph runs the fusion right after the layout pass; the checks below see its result.
  ASSERT_TRUE(OptimizeGraph(g, opts).ok());
  if (!sgemm::Available()) {
    EXPECT_EQ(FuseNhwcConvResidual(g), 0);  // grouped/XNNPACK convs never take a residual
    return;
  }
  int adds = 0, relus = 0, with_residual = 0;
  std::vector<bool> produced(g.values.size(), false);
  for (int v : g.inputs) produced[v] = true;
  for (const auto& [v, t] : g.initializers) produced[v] = true;
  for (const Node& n : g.nodes) {
    for (int v : n.inputs) EXPECT_TRUE(v < 0 || produced[v]) << n.name << " reads " << g.ValueName(v) << " too early";
    for (int v : n.outputs)
      if (v >= 0) produced[v] = true;
    adds += n.op_type == "Add";
    relus += n.op_type == "Relu";
    if (n.op_type == "NhwcConv" && n.inputs.size() == 4) {
      ++with_residual;
      EXPECT_EQ(n.GetString("activation", ""), "Relu") << n.name;
    }
  }
  EXPECT_EQ(adds, 0);
  EXPECT_EQ(relus, 0);
  EXPECT_EQ(with_residual, 2);
  // A second run finds nothing left to fuse.
  EXPECT_EQ(FuseNhwcConvResidual(g), 0);
}

TEST(NhwcConvResidualFusion, LeavesBroadcastsAndSharedOutputsAlone) {
  onnx::ModelProto m = MakeModel(13, "conv_nhwc_gemm_test");
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 4, 6, 6});
  Conv(g, "x", "c1", 4, 4, 3, 1, 1, 1);
  AddInit(g, "bias", {4, 1, 1}, 2, 1.0f);
  AddNode(g, "Add", {"c1", "bias"}, {"bsum"});  // broadcast constant: not a residual
  Conv(g, "bsum", "c2", 4, 4, 3, 1, 1, 3);
  AddNode(g, "Add", {"c2", "bsum"}, {"sum2"});
  AddNode(g, "Relu", {"c2"}, {"c2r"});  // c2 has a second reader: no fusion
  AddOutput(g, "sum2", {1, 4, 6, 6});
  AddOutput(g, "c2r", {1, 4, 6, 6});
  std::string bytes = Serialize(m);
  auto model = ImportOnnxBytes(bytes.data(), bytes.size(), ImportOptions{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(OptimizeGraph(*model->graph, OptimizerOptions{}).ok());
  EXPECT_EQ(FuseNhwcConvResidual(*model->graph), 0);
}

// The geometry an NHWC conv kernel checks once at creation for X's static shape (so that a
// run skips the attribute lookups) is the one the per-run check computes; an X of another
// shape is checked afresh, and a bad one is still rejected with the node's name. A graph
// that leaves a dim of X unknown gets no static geometry.
TEST(NhwcConvGeometry, StaticInputGeometryIsThePerRunOne) {
  for (const bool symbolic : {false, true}) {
    Graph g;
    const int x = g.AddValue("x");
    g.values[x].type.kind = TypeInfo::Kind::kTensor;
    g.values[x].type.elem_type = DataType::kFloat;
    g.values[x].type.has_shape = true;
    for (int64_t d : {int64_t{1}, int64_t{9}, int64_t{11}, int64_t{16}}) g.values[x].type.dims.push_back(Dim{d, ""});
    if (symbolic) g.values[x].type.dims[0] = Dim{-1, "batch"};
    ConvCase cc;
    cc.sh = cc.sw = 2;
    cc.pads = {1, 1, 1, 1};
    Node n = NhwcConvNode(cc, "geo_conv");
    n.inputs = {x};
    n.outputs = {g.AddValue("y")};
    g.nodes.push_back(n);
    const Node nchw = OriginalNode(g.nodes[0], "Conv");
    const Shape w_shape = {8, 16, 3, 3};
    const StaticConvShapes known(KernelInit{g.nodes[0], g, nullptr, {}}, nchw, w_shape);
    const ConvShapes* static_shapes = known.For(1, 16, 9, 11);
    ASSERT_EQ(static_shapes != nullptr, !symbolic);
    if (symbolic) continue;
    EXPECT_EQ(static_shapes->geo.out, (Shape{5, 6}));
    for (const Shape& xs : {Shape{1, 9, 11, 16}, Shape{2, 7, 4, 16}}) {
      const Tensor xt = Tensor::Zeros(DataType::kFloat, xs).value();
      auto with = CheckNhwcConvInput(g.nodes[0], &xt, nchw, w_shape, &known);
      auto without = CheckNhwcConvInput(g.nodes[0], &xt, nchw, w_shape);
      ASSERT_TRUE(with.ok() && without.ok()) << with.status().ToString();
      EXPECT_EQ(with->n, without->n);
      EXPECT_EQ(with->h, without->h);
      EXPECT_EQ(with->w, without->w);
      EXPECT_EQ(with->shapes.geo.out, without->shapes.geo.out) << ShapeToString(xs);
      EXPECT_EQ(with->shapes.geo.pad_begin, without->shapes.geo.pad_begin);
      EXPECT_EQ(with->shapes.geo.pad_end, without->shapes.geo.pad_end);
      EXPECT_EQ(with->shapes.out_channels, 8);
    }
    const Tensor bad = Tensor::Zeros(DataType::kFloat, {1, 9, 11, 15}).value();
    auto st = CheckNhwcConvInput(g.nodes[0], &bad, nchw, w_shape, &known);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.status().message().find("geo_conv"), std::string::npos) << st.status().ToString();
  }
}

}  // namespace
}  // namespace strata
