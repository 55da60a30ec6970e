// The AVX-512 SGEMM (src/cpu/sgemm.h) against a plain double-accumulating loop: edge
// sizes, strides, epilogues, trans_b, thread-count independence, bad arguments; and
// MatMul/Gemm nodes (which use it for M > 4) against the reference kernels.
#include "cpu/sgemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_harness.h"

// Case literals name only the fields each case needs.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata {
namespace {

std::vector<float> Rand(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// C = alpha*A*B (+C) + bias, clamped; B is [K,N] (or [N,K] when trans_b) with stride ldb.
void Reference(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, bool trans_b,
               float* c, int64_t ldc, const sgemm::Epilogue& ep) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * lda + p]) * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      double v = ep.alpha * s + (ep.accumulate ? c[i * ldc + j] : 0.0) + (ep.bias ? ep.bias[j] : 0.0);
      c[i * ldc + j] = std::min(std::max(float(v), ep.min), ep.max);
    }
}

struct Case {
  int64_t m, n, k;
  bool trans_b = false;
  int64_t pad = 0;  // extra row stride of A, B and C
  sgemm::Epilogue ep;
  int threads = 1;
  bool unpacked = false;
};

// Runs one case both ways and compares every element of C, padding included (it must
// be untouched).
void Check(const Case& cs, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k << " trans_b=" << cs.trans_b
                                    << " pad=" << cs.pad << " acc=" << cs.ep.accumulate << " threads=" << cs.threads
                                    << " unpacked=" << cs.unpacked);
  const int64_t lda = cs.k + cs.pad, ldc = cs.n + cs.pad;
  const int64_t ldb = (cs.trans_b ? cs.k : cs.n) + cs.pad;
  std::vector<float> a = Rand(std::max<int64_t>(1, cs.m * lda), seed);
  std::vector<float> b = Rand(std::max<int64_t>(1, (cs.trans_b ? cs.n : cs.k) * ldb), seed + 1);
  std::vector<float> c = Rand(std::max<int64_t>(1, cs.m * ldc), seed + 2);
  std::vector<float> expect = c;
  Reference(cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, cs.trans_b, expect.data(), ldc, cs.ep);
  ThreadPool pool(cs.threads);
  if (cs.unpacked) {
    Status st =
        sgemm::GemmUnpacked(cs.m, cs.n, cs.k, a.data(), lda, b.data(), ldb, cs.trans_b, c.data(), ldc, cs.ep, &pool);
    ASSERT_TRUE(st.ok()) << st.ToString();
  } else {
    auto packed = sgemm::PackB(b.data(), cs.k, cs.n, cs.trans_b, ldb);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    EXPECT_EQ(packed->k(), cs.k);
    EXPECT_EQ(packed->n(), cs.n);
    Status st = sgemm::Gemm(cs.m, a.data(), lda, *packed, c.data(), ldc, cs.ep, &pool);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  const double tol = 1e-5 * (cs.k + 1);
  int bad = 0;
  for (int64_t i = 0; i < cs.m * ldc && bad < 5; ++i)
    if (!(std::fabs(c[i] - expect[i]) <= tol)) {
      ADD_FAILURE() << "C[" << i / ldc << "," << i % ldc << "] = " << c[i] << ", expected " << expect[i];
      ++bad;
    }
}

class SgemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sgemm::Available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  }
};

TEST_F(SgemmTest, EdgeSizesMatchReference) {
  const int64_t sizes[] = {1, 2, 7, 13, 31, 32, 33, 65, 300};
  uint32_t seed = 1;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        // The full cube at 300 is slow for the reference; sample the big corner.
        if (m * n * k > 300 * 300 * 33 && (m + n + k) % 2 == 0) continue;
        Check({.m = m, .n = n, .k = k}, seed++);
        if (HasFatalFailure() || HasFailure()) return;
      }
}

TEST_F(SgemmTest, LongKCrossesBlocks) {
  // K spans several K blocks, M several M blocks.
  Check({.m = 400, .n = 70, .k = 1000}, 3);
  Check({.m = 200, .n = 33, .k = 513, .pad = 3}, 4);
}

TEST_F(SgemmTest, StridesLargerThanWidthLeavePaddingUntouched) {
  Check({.m = 13, .n = 33, .k = 31, .pad = 5}, 5);
  Check({.m = 65, .n = 7, .k = 300, .pad = 17}, 6);
  Check({.m = 13, .n = 33, .k = 31, .trans_b = true, .pad = 9}, 7);
}

TEST_F(SgemmTest, AccumulateBiasClampAlpha) {
  std::vector<float> bias = Rand(300, 99);
  sgemm::Epilogue ep;
  ep.accumulate = true;
  Check({.m = 31, .n = 65, .k = 33, .ep = ep}, 8);
  ep.bias = bias.data();
  ep.min = 0.0f;  // Relu
  Check({.m = 31, .n = 65, .k = 300, .ep = ep}, 9);
  ep.accumulate = false;
  ep.min = -0.25f;
  ep.max = 0.5f;  // Clip
  Check({.m = 300, .n = 300, .k = 7, .ep = ep}, 10);
  ep.alpha = -0.75f;
  ep.accumulate = true;
  Check({.m = 13, .n = 33, .k = 600, .pad = 2, .ep = ep}, 11);
}

TEST_F(SgemmTest, EmptyDimensions) {
  std::vector<float> bias = Rand(40, 12);
  sgemm::Epilogue ep;
  Check({.m = 0, .n = 13, .k = 7}, 13);
  Check({.m = 13, .n = 0, .k = 7}, 14);
  Check({.m = 13, .n = 33, .k = 0}, 15);  // K = 0: C = 0
  ep.bias = bias.data();
  Check({.m = 13, .n = 33, .k = 0, .ep = ep}, 16);  // C = bias
  ep.accumulate = true;
  ep.max = 0.1f;
  Check({.m = 13, .n = 33, .k = 0, .ep = ep, .unpacked = true}, 17);  // C += bias, clamped
}

// A NaN reaching a fused Relu/Clip stays NaN, as the unfused ops keep it (max(NaN, 0) is
// NaN in ONNX): the clamp's operand order decides, since vmaxps/vminps return their second
// operand when either is NaN.
TEST_F(SgemmTest, ClampKeepsNaN) {
  const int64_t m = 3, n = 20, k = 17;
  std::vector<float> a = Rand(m * k, 31), b = Rand(k * n, 32), c(static_cast<size_t>(m * n), 0.0f);
  a[k + 4] = std::numeric_limits<float>::quiet_NaN();  // row 1
  auto packed = sgemm::PackB(b.data(), k, n, false);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  sgemm::Epilogue ep;
  ep.min = 0.0f;
  ep.max = 6.0f;
  ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c.data(), n, ep, nullptr).ok());
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(c[n + j])) << "column " << j;
    EXPECT_FALSE(std::isnan(c[j])) << "column " << j;
  }
}

TEST_F(SgemmTest, TransBAndUnpacked) {
  for (bool tb : {false, true}) {
    Check({.m = 33, .n = 65, .k = 31, .trans_b = tb}, 20);
    Check({.m = 128, .n = 128, .k = 64, .trans_b = tb, .unpacked = true}, 21);
    Check({.m = 7, .n = 300, .k = 65, .trans_b = tb, .pad = 3, .unpacked = true}, 22);
  }
}

TEST_F(SgemmTest, ThreadCountDoesNotChangeResults) {
  const int64_t m = 397, n = 1000, k = 531;
  std::vector<float> a = Rand(m * k, 30), b = Rand(k * n, 31), bias = Rand(n, 32);
  auto packed = sgemm::PackB(b.data(), k, n, false);
  ASSERT_TRUE(packed.ok());
  sgemm::Epilogue ep;
  ep.bias = bias.data();
  ep.min = -1.0f;
  std::vector<float> c1(m * n), c3(m * n);
  ThreadPool one(1), three(3);
  ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c1.data(), n, ep, &one).ok());
  ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c3.data(), n, ep, &three).ok());
  EXPECT_EQ(0, std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)));
  // Small M: the split is over N panels.
  std::vector<float> d1(20 * n), d3(20 * n);
  ASSERT_TRUE(sgemm::Gemm(20, a.data(), k, *packed, d1.data(), n, ep, nullptr).ok());
  ASSERT_TRUE(sgemm::Gemm(20, a.data(), k, *packed, d3.data(), n, ep, &three).ok());
  EXPECT_EQ(0, std::memcmp(d1.data(), d3.data(), d1.size() * sizeof(float)));
  Check({.m = 150, .n = 700, .k = 300, .threads = 2}, 33);
  // A read in place, 17 row tiles on 2 threads: split over N (2 + 2 panels), not 9 + 8 tiles.
  std::vector<float> e1(196 * 128), e2(196 * 128);
  auto packed128 = sgemm::PackB(b.data(), 100, 128, false);
  ASSERT_TRUE(packed128.ok());
  ThreadPool two(2);
  ASSERT_TRUE(sgemm::Gemm(196, a.data(), 100, *packed128, e1.data(), 128, ep, nullptr).ok());
  ASSERT_TRUE(sgemm::Gemm(196, a.data(), 100, *packed128, e2.data(), 128, ep, &two).ok());
  EXPECT_EQ(0, std::memcmp(e1.data(), e2.data(), e1.size() * sizeof(float)));
  Check({.m = 196, .n = 128, .k = 100, .threads = 2}, 34);
}

// Gemm reads A in place (no packing) for N <= 4 panels and 16 <= K <= kMaxIndirectK;
// both sides of each bound, M around the 12-row tile, 1 and 2 threads, strided A and C.
TEST_F(SgemmTest, InPlaceAAndPackedAAgreeAtTheBounds) {
  uint32_t seed = 200;
  for (int threads : {1, 2})
    for (int64_t n : {1, 16, 17, 97, 127, 128, 129})
      for (int64_t k : {15, 16, 17}) {
        Check({.m = 25, .n = n, .k = k, .pad = 3, .threads = threads}, seed++);
        if (HasFailure()) return;
      }
  for (int64_t k : {sgemm::kMaxIndirectK, sgemm::kMaxIndirectK + 1}) Check({.m = 13, .n = 40, .k = k}, seed++);
  for (int64_t m : {1, 11, 12, 13, 23, 24, 25, 191, 192, 193, 397}) Check({.m = m, .n = 64, .k = 256}, seed++);
  // Around the M block (kMc = 204 rows, 17 tiles: a 14x14 map's 196 rows are one block) and
  // two of it, on the packed path (5 panels) as well, at 1 and 2 threads.
  for (int threads : {1, 2})
    for (int64_t m : {196, 203, 204, 205, 408, 409})
      for (int64_t n : {64, 160}) Check({.m = m, .n = n, .k = 300, .threads = threads}, seed++);
  std::vector<float> bias = Rand(128, 250);
  sgemm::Epilogue ep;
  ep.accumulate = true;
  ep.alpha = 0.5f;
  ep.bias = bias.data();
  ep.min = 0.0f;
  ep.max = 0.75f;
  Check({.m = 77, .n = 128, .k = 100, .pad = 5, .ep = ep, .threads = 2}, seed++);
  Check({.m = 77, .n = 31, .k = 17, .ep = ep, .unpacked = true}, seed++);
}

// Row tiles of even height (rows 49 = 10+10+10+10+9, 196 = blocks of 108 + 88) and the
// half-width micro-kernel for a last panel of <= 16 columns, on the in-place A (K = 40)
// and the packed A (K = 8 < 16; N = 144 has 5 panels), 1 and 2 threads: against the
// reference, and bit-identical across thread counts.
TEST_F(SgemmTest, EvenRowTilesAndHalfPanelsAtEdgeSizes) {
  uint32_t seed = 300;
  for (int64_t m : {1, 11, 13, 25, 49, 196})
    for (int64_t n : {1, 16, 24, 31, 33, 144})
      for (int64_t k : {8, 40}) {
        SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k);
        std::vector<float> a = Rand(m * k, seed), b = Rand(k * n, seed + 1), bias = Rand(n, seed + 2);
        seed += 3;
        auto packed = sgemm::PackB(b.data(), k, n, false);
        ASSERT_TRUE(packed.ok());
        sgemm::Epilogue ep;
        ep.bias = bias.data();
        std::vector<float> c1(m * n), c2(m * n), want(m * n);
        Reference(m, n, k, a.data(), k, b.data(), n, false, want.data(), n, ep);
        ThreadPool two(2);
        ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c1.data(), n, ep, nullptr).ok());
        ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c2.data(), n, ep, &two).ok());
        EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)));
        for (int64_t i = 0; i < m * n; ++i)
          ASSERT_NEAR(c1[i], want[i], 1e-5 * (k + 1)) << "C[" << i / n << "," << i % n << "]";
      }
  // Large enough for the pool to split (> 4 MFLOP): 196 and 49 rows over 2 threads.
  for (int64_t m : {49, 196})
    for (int64_t n : {16, 144}) Check({.m = m, .n = n, .k = 600, .pad = 1, .threads = 2}, seed++);
}

// The 2-thread split: M blocks that spread the row tiles evenly (3136 rows: 24 blocks of
// 10-11 tiles; 2305 rows: 193 tiles, the last of one row spread into its block) and N
// chunks of the in-place A, two per thread (49 rows x 16 panels: 4 chunks of 4 panels;
// 13 panels: chunks of 4, 4, 4, 1), on the in-place and the packed A (N > 4 panels):
// against the reference, and bit-identical to 1 thread on 2 and 3 threads.
TEST_F(SgemmTest, EvenMBlocksAndFineNChunksOnSeveralThreads) {
  struct Shape3 {
    int64_t m, n, k;
  };
  uint32_t seed = 400;
  for (const Shape3& s : {Shape3{3136, 64, 72}, Shape3{2305, 96, 40}, Shape3{3136, 256, 24}, Shape3{49, 512, 600},
                          Shape3{50, 416, 300}, Shape3{13, 1000, 531}, Shape3{97, 33, 1200}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    std::vector<float> a = Rand(s.m * s.k, seed), b = Rand(s.k * s.n, seed + 1), bias = Rand(s.n, seed + 2);
    seed += 3;
    auto packed = sgemm::PackB(b.data(), s.k, s.n, false);
    ASSERT_TRUE(packed.ok());
    sgemm::Epilogue ep;
    ep.bias = bias.data();
    ep.min = 0.0f;
    std::vector<float> want(s.m * s.n), c1(s.m * s.n);
    Reference(s.m, s.n, s.k, a.data(), s.k, b.data(), s.n, false, want.data(), s.n, ep);
    ASSERT_TRUE(sgemm::Gemm(s.m, a.data(), s.k, *packed, c1.data(), s.n, ep, nullptr).ok());
    for (int64_t i = 0; i < s.m * s.n; ++i)
      ASSERT_NEAR(c1[i], want[i], 1e-5 * (s.k + 1)) << "C[" << i / s.n << "," << i % s.n << "]";
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> c(s.m * s.n, -7.0f);
      ASSERT_TRUE(sgemm::Gemm(s.m, a.data(), s.k, *packed, c.data(), s.n, ep, &pool).ok());
      EXPECT_EQ(0, std::memcmp(c1.data(), c.data(), c.size() * sizeof(float))) << threads << " threads";
    }
  }
}

// The two-panel tile of the in-place A (N in 33..64: both panels of a row tile at once, in
// halves of <= 6 rows): rows 1, 5-7, 12-13 (halves 7 -> 4 + 3), 25, 397; N 33, 63, 64;
// with bias, residual and a clamp; against the reference and bit-identical to a product
// of N = 96, whose first 64 columns run the one-panel tile, on 1 and 2 threads.
TEST_F(SgemmTest, TwoPanelTileAtEdgeSizes) {
  uint32_t seed = 500;
  for (int64_t m : {1, 5, 6, 7, 12, 13, 25, 397})
    for (int64_t n : {33, 63, 64}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n);
      const int64_t k = 150, wide_n = 96;
      std::vector<float> a = Rand(m * k, seed), b = Rand(k * wide_n, seed + 1), bias = Rand(wide_n, seed + 2);
      std::vector<float> res = Rand(m * wide_n, seed + 3);
      seed += 4;
      // B's first n columns as a [K, n] matrix, and all 96 columns (3 panels: one-panel tiles).
      auto packed = sgemm::PackB(b.data(), k, n, false, wide_n);
      auto packed96 = sgemm::PackB(b.data(), k, wide_n, false);
      ASSERT_TRUE(packed.ok() && packed96.ok());
      sgemm::Epilogue ep;
      ep.bias = bias.data();
      ep.residual = res.data();
      ep.ldr = wide_n;
      ep.min = -0.5f;
      ep.max = 2.0f;
      std::vector<float> want(m * wide_n), narrow(m * wide_n);
      Reference(m, wide_n, k, a.data(), k, b.data(), wide_n, false, want.data(), wide_n, sgemm::Epilogue{});
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < wide_n; ++j) {
          float& v = want[i * wide_n + j];
          v = std::min(std::max(v + bias[j] + res[i * wide_n + j], ep.min), ep.max);
        }
      ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed96, narrow.data(), wide_n, ep, nullptr).ok());
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> c(m * wide_n, -7.0f);
        ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c.data(), wide_n, ep, &pool).ok());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_NEAR(c[i * wide_n + j], want[i * wide_n + j], 1e-4) << "C[" << i << "," << j << "]";
            ASSERT_EQ(c[i * wide_n + j], narrow[i * wide_n + j]) << "C[" << i << "," << j << "]";
          }
          for (int64_t j = n; j < wide_n; ++j) ASSERT_EQ(c[i * wide_n + j], -7.0f) << "wrote past N at row " << i;
        }
      }
    }
}

// N chunks on 2-3 threads, each running every M block (B read once): packed A 196 x 520 x
// 300 (2 M blocks x 9 + 8 panels, the last one 8 columns wide) and A through pointers
// (GemmIndirect: 196 x 1024 x 512, 2 M blocks x 4 chunks, tile-outer); and the next-slice
// B prefetch (the next panel, or the first panel of the next K block): 193 x 288 x 513 (the
// last K block 1 row), 196 x 256 x 1024 and 49 x 512 x 2048; M = 1, 13 (tile + 1) and 0 as
// well: against the reference, and bit-identical to 1 thread.
TEST_F(SgemmTest, NChunksOverAllMBlocksAndNextSlicePrefetch) {
  struct Shape3 {
    int64_t m, n, k;
    bool indirect;
  };
  uint32_t seed = 600;
  for (const Shape3& s : {Shape3{196, 520, 300, false}, Shape3{196, 256, 1024, false}, Shape3{193, 288, 513, false},
                          Shape3{49, 512, 2048, false}, Shape3{13, 288, 257, false}, Shape3{1, 100, 300, false},
                          Shape3{196, 1024, 512, true}, Shape3{196, 65, 300, true}, Shape3{13, 200, 64, true},
                          Shape3{1, 100, 33, true}, Shape3{0, 256, 1024, false}, Shape3{0, 100, 64, true}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " indirect=" << s.indirect);
    std::vector<float> a = Rand(std::max<int64_t>(1, s.m * s.k), seed), b = Rand(s.k * s.n, seed + 1),
                       bias = Rand(s.n, seed + 2);
    seed += 3;
    auto packed = sgemm::PackB(b.data(), s.k, s.n, false);
    ASSERT_TRUE(packed.ok());
    sgemm::Epilogue ep;
    ep.bias = bias.data();
    ep.min = -2.0f;
    struct Rows {
      const float* a;
      int64_t k;
    } rows{a.data(), s.k};
    const sgemm::IndirectA ia{[](const void* ctx, int64_t row0, int64_t n, const float** dst) {
                                const Rows& r = *static_cast<const Rows*>(ctx);
                                for (int64_t i = 0; i < n; ++i) dst[i] = r.a + (row0 + i) * r.k;
                              },
                              &rows, 1, s.k};
    auto run = [&](ThreadPool* pool, std::vector<float>& c) {
      return s.indirect ? sgemm::GemmIndirect(s.m, ia, *packed, c.data(), s.n, ep, pool)
                        : sgemm::Gemm(s.m, a.data(), s.k, *packed, c.data(), s.n, ep, pool);
    };
    std::vector<float> want(s.m * s.n), c1(s.m * s.n);
    Reference(s.m, s.n, s.k, a.data(), s.k, b.data(), s.n, false, want.data(), s.n, ep);
    ASSERT_TRUE(run(nullptr, c1).ok());
    for (int64_t i = 0; i < s.m * s.n; ++i)
      ASSERT_NEAR(c1[i], want[i], 1e-5 * (s.k + 1)) << "C[" << i / s.n << "," << i % s.n << "]";
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> c(s.m * s.n, -7.0f);
      ASSERT_TRUE(run(&pool, c).ok());
      // An empty C has null data(), which memcmp must not get (UBSan).
      EXPECT_TRUE(c.empty() || std::memcmp(c1.data(), c.data(), c.size() * sizeof(float)) == 0)
          << threads << " threads";
    }
  }
}

// The residual epilogue on both A paths: C = A x B + bias + R, clamped, against the
// product computed without it; also bit-identical on 1 and 3 threads.
TEST_F(SgemmTest, ResidualOnInPlaceAndPackedA) {
  for (int64_t n : {40, 200}) {  // 2 panels: A in place; 7 panels: A packed
    SCOPED_TRACE(::testing::Message() << "N=" << n);
    const int64_t m = 150, k = 300, ldr = n + 3;
    std::vector<float> a = Rand(m * k, 260), b = Rand(k * n, 261), bias = Rand(n, 262), r = Rand(m * ldr, 263);
    auto packed = sgemm::PackB(b.data(), k, n, false);
    ASSERT_TRUE(packed.ok());
    std::vector<float> plain(m * n), c1(m * n), c3(m * n);
    ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, plain.data(), n, {}, nullptr).ok());
    sgemm::Epilogue ep;
    ep.bias = bias.data();
    ep.residual = r.data();
    ep.ldr = ldr;
    ep.min = 0.0f;
    ThreadPool one(1), three(3);
    ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c1.data(), n, ep, &one).ok());
    ASSERT_TRUE(sgemm::Gemm(m, a.data(), k, *packed, c3.data(), n, ep, &three).ok());
    EXPECT_EQ(0, std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)));
    int clamped = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float want = std::max(0.0f, plain[i * n + j] + bias[j] + r[i * ldr + j]);
        clamped += want == 0.0f;
        ASSERT_NEAR(c1[i * n + j], want, 1e-4f) << "C[" << i << "," << j << "]";
      }
    EXPECT_GT(clamped, 0) << "the clamp never applied: the case proves nothing";
  }
}

TEST_F(SgemmTest, BadArgumentsGiveClearErrors) {
  std::vector<float> a(64), b(64), c(64);
  auto neg = sgemm::PackB(b.data(), -1, 4, false);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("negative size"), std::string::npos) << neg.status().message();
  auto null_b = sgemm::PackB(nullptr, 4, 4, false);
  ASSERT_FALSE(null_b.ok());
  EXPECT_NE(null_b.status().message().find("B is null"), std::string::npos);
  auto stride = sgemm::PackB(b.data(), 4, 8, false, 5);
  ASSERT_FALSE(stride.ok());
  EXPECT_NE(stride.status().message().find("row stride 5"), std::string::npos) << stride.status().message();
  auto huge = sgemm::PackB(b.data(), int64_t{1} << 40, int64_t{1} << 40, false);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos) << huge.status().message();

  auto packed = sgemm::PackB(b.data(), 8, 8, false);
  ASSERT_TRUE(packed.ok());
  sgemm::Epilogue ep;
  Status st = sgemm::Gemm(-1, a.data(), 8, *packed, c.data(), 8, ep, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("negative M"), std::string::npos) << st.message();
  st = sgemm::Gemm(2, a.data(), 7, *packed, c.data(), 8, ep, nullptr);
  EXPECT_NE(st.message().find("A row stride 7"), std::string::npos) << st.message();
  st = sgemm::Gemm(2, a.data(), 8, *packed, c.data(), 3, ep, nullptr);
  EXPECT_NE(st.message().find("C row stride 3"), std::string::npos) << st.message();
  st = sgemm::Gemm(2, nullptr, 8, *packed, c.data(), 8, ep, nullptr);
  EXPECT_NE(st.message().find("A is null"), std::string::npos) << st.message();
  st = sgemm::Gemm(2, a.data(), 8, *packed, nullptr, 8, ep, nullptr);
  EXPECT_NE(st.message().find("C is null"), std::string::npos) << st.message();
  ep.min = 1.0f;
  ep.max = 0.0f;
  st = sgemm::Gemm(2, a.data(), 8, *packed, c.data(), 8, ep, nullptr);
  EXPECT_NE(st.message().find("clamp range"), std::string::npos) << st.message();
  st = sgemm::GemmUnpacked(2, -3, 8, a.data(), 8, b.data(), 8, false, c.data(), 8, {}, nullptr);
  EXPECT_NE(st.message().find("negative size"), std::string::npos) << st.message();
  sgemm::PackedB* no_scratch = nullptr;
  st = sgemm::GemmUnpacked(2, 8, 8, a.data(), 8, b.data(), 8, false, c.data(), 8, {}, nullptr, no_scratch);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no scratch"), std::string::npos) << st.message();
}

// The caller-scratch overload (Attention keeps one PackedB per task) repacks B into the
// same scratch for every call: a larger B after a smaller one must grow it, a smaller
// one after a larger must not read stale panels, and trans_b must not leak between calls.
TEST_F(SgemmTest, CallerScratchIsReusedAcrossShapes) {
  struct Shape {
    int64_t m, n, k;
    bool trans_b;
  };
  const Shape shapes[] = {{5, 17, 9, false}, {13, 64, 300, true}, {3, 1, 1, false}, {12, 33, 65, false},
                          {1, 129, 7, true}, {0, 4, 4, false},    {4, 0, 4, true},  {7, 31, 13, true}};
  sgemm::PackedB scratch;
  uint32_t seed = 700;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << sh.m << " N=" << sh.n << " K=" << sh.k << " trans_b=" << sh.trans_b);
    const int64_t ldb = sh.trans_b ? sh.k : sh.n;
    std::vector<float> a = Rand(std::max<int64_t>(1, sh.m * sh.k), seed++);
    std::vector<float> b = Rand(std::max<int64_t>(1, sh.n * sh.k), seed++);
    std::vector<float> c(static_cast<size_t>(std::max<int64_t>(1, sh.m * sh.n)), -7.0f);
    std::vector<float> expect = c;
    Reference(sh.m, sh.n, sh.k, a.data(), sh.k, b.data(), ldb, sh.trans_b, expect.data(), sh.n, {});
    Status st = sgemm::GemmUnpacked(sh.m, sh.n, sh.k, a.data(), sh.k, b.data(), ldb, sh.trans_b, c.data(), sh.n, {},
                                    nullptr, &scratch);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], expect[i], 1e-5 * (sh.k + 1)) << "at " << i;
  }
}

// ---------------------------------------------------------------- MatMul / Gemm nodes

using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsNear;

void NodeMatches(const OpSpec& spec, const std::vector<Tensor>& inputs, std::vector<size_t> constants, int threads) {
  RunOptions ref;
  ref.want_reference = true;
  RunOptions fast;
  fast.constant_inputs = std::move(constants);
  fast.threads = threads;
  auto want = RunKernel(spec, inputs, ref);
  auto got = RunKernel(spec, inputs, fast);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(TensorsNear(want->at(0), got->at(0), 1e-4, 1e-4));
}

TEST_F(SgemmTest, MatMulNodesMatchReference) {
  OpSpec mm("MatMul", 13);
  uint64_t seed = 100;
  struct Shapes {
    Shape a, b;
  };
  const Shapes cases[] = {
      {{128, 96}, {96, 200}},        {{2, 65, 33}, {33, 70}}, {{3, 2, 13, 31}, {3, 2, 31, 40}},
      {{2, 1, 13, 31}, {3, 31, 40}}, {{13, 31}, {4, 31, 7}},  {{300, 7}, {7}},
      {{1, 40, 0}, {0, 9}},          {{5, 64}, {64, 64}},
  };
  for (const Shapes& s : cases)
    for (bool constant : {false, true})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(ShapeToString(s.a) + " x " + ShapeToString(s.b) + (constant ? " const" : " runtime"));
        std::vector<size_t> consts;
        if (constant) consts.push_back(1);
        NodeMatches(mm, {RandomTensor(DataType::kFloat, s.a, seed), RandomTensor(DataType::kFloat, s.b, seed + 1)},
                    consts, threads);
        seed += 2;
      }
}

TEST_F(SgemmTest, GemmNodesMatchReference) {
  uint64_t seed = 200;
  for (int ta : {0, 1})
    for (int tb : {0, 1})
      for (bool constant : {false, true})
        for (Shape cshape : {Shape{}, Shape{50}, Shape{1, 50}, Shape{37, 1}, Shape{37, 50}}) {
          OpSpec g("Gemm", 13);
          g.Attr("transA", ta).Attr("transB", tb).Attr("alpha", 0.5f).Attr("beta", cshape.empty() ? 1.0f : -1.5f);
          const int64_t M = 37, N = 50, K = 70;
          std::vector<Tensor> in = {RandomTensor(DataType::kFloat, ta ? Shape{K, M} : Shape{M, K}, seed),
                                    RandomTensor(DataType::kFloat, tb ? Shape{N, K} : Shape{K, N}, seed + 1)};
          if (!cshape.empty()) in.push_back(RandomTensor(DataType::kFloat, cshape, seed + 2));
          seed += 3;
          SCOPED_TRACE(::testing::Message()
                       << "tA=" << ta << " tB=" << tb << " const=" << constant << " C=" << ShapeToString(cshape));
          std::vector<size_t> consts;
          if (constant) consts = {1, 2};
          NodeMatches(g, in, consts, 2);
        }
}

}  // namespace
}  // namespace strata
