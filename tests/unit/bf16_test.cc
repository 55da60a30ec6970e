// bf16 fast-math kernels (precision=bf16): the GEMM library function, MatMul/Gemm/Conv
// through the kernel registry, kernel selection and the CPU fallback.
//
// Tolerance: bf16 keeps 8 significant bits, so rounding one operand costs at most 2^-9
// relative and a product of two rounded operands at most ~2^-8 = 3.9e-3. Summed in fp32,
// |bf16 result - exact| <= 3.9e-3 * sum_k |a_k b_k| (+ fp32 rounding), so every element is
// checked against 1e-2 * sum_k |a_k b_k|: an error bound, not a fudge factor. Since that
// bound is loose enough to hide a dropped term, the GEMM is also checked against an exact
// (double) product of the bf16-rounded operands with 1e-5 of the same scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/session.h"
#include "core/threadpool.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/gemm_bf16.h"
#include "kernel_harness.h"
#include "onnx_builder.h"

namespace strata {
namespace {

using testing::OpSpec;
using testing::RunKernel;
using testing::RunOptions;

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

float RoundBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

Node DummyNode() {
  Node n;
  n.op_type = "MatMul";
  n.name = "bf16_test";
  return n;
}

// Checks C against A x B (+bias, clamp): within 1e-2 of sum|ab| for the fp32 operands and
// within 1e-5 of sum|ab| for the bf16-rounded ones.
void CheckGemm(int64_t M, int64_t N, int64_t K, const std::vector<float>& a, bool trans_a, const std::vector<float>& b,
               bool trans_b, float scale, const Bf16Epilogue& ep, const std::vector<float>& c) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, rounded = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        float av = trans_a ? a[k * M + m] : a[m * K + k];
        float bv = scale * (trans_b ? b[n * K + k] : b[k * N + n]);
        exact += static_cast<double>(av) * bv;
        rounded += static_cast<double>(RoundBf16(av)) * RoundBf16(bv);
        mag += std::fabs(static_cast<double>(av) * bv);
      }
      double bias = ep.bias ? ep.bias[ep.bias_per_row ? m : n] : 0.0;
      auto clamp = [&](double v) { return std::min<double>(std::max<double>(v + bias, ep.min), ep.max); };
      const double got = c[m * N + n];
      ASSERT_NEAR(got, clamp(exact), 1e-2 * mag + 1e-6)
          << "M=" << M << " N=" << N << " K=" << K << " at " << m << "," << n;
      ASSERT_NEAR(got, clamp(rounded), 1e-5 * mag + 1e-6)
          << "M=" << M << " N=" << N << " K=" << K << " at " << m << "," << n;
    }
}

// Every GEMM and kernel test runs once per tile kernel: the AVX512_BF16 micro-kernel and,
// on a CPU with AMX, the AMX tiles (bf16_internal::AmxAvailable), each checked against the
// same references. The "amx" runs skip where the CPU has no AMX.
class Bf16Test : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!Bf16GemmAvailable()) GTEST_SKIP() << "CPU without avx512_bf16 (or disabled): bf16 kernels not usable";
    const bool amx = std::string(GetParam()) == "amx";
    if (amx && !bf16_internal::AmxAvailable()) GTEST_SKIP() << "CPU without AMX (amx_tile, amx_bf16)";
    bf16_internal::SetAmxDisabledForTesting(!amx);
  }
  void TearDown() override { bf16_internal::SetAmxDisabledForTesting(false); }
};

TEST(Bf16ConvertTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest float rounds to infinity, as RNE demands.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);
}

TEST_P(Bf16Test, GemmEdgeSizesMatchReference) {
  ThreadPool pool(2);
  const Node node = DummyNode();
  // 1s, odd K (pair padding), a tile + 1 in every direction, two K chunks (K > 384), row
  // blocks split into uneven tiles (49: 10+10+10+10+9; 200: 96 + 96 + 8), N > 512 (column
  // blocks of 512, or of 128 to give 2 threads enough items); on AMX, row blocks whose A for
  // the whole K is too big for one pass (96 x 3000: K chunks with C in a scratch); one row
  // against several panels at once (1 x 200: a group of 4 panels, then 3; over 3 K chunks).
  const int64_t sizes[][3] = {{1, 1, 1},     {1, 33, 7},    {13, 31, 3},    {12, 32, 2},     {25, 65, 385},
                              {97, 129, 64}, {2, 17, 769},  {128, 96, 768}, {37, 1, 5},      {5, 300, 1},
                              {49, 64, 100}, {200, 40, 33}, {50, 1100, 70}, {192, 40, 3000}, {1, 200, 770}};
  uint32_t seed = 1;
  for (const auto& s : sizes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    for (bool trans_a : {false, true})
      for (bool trans_b : {false, true}) {
        auto a = Random(M * K, seed++), b = Random(K * N, seed++), bias = Random(N, seed++);
        auto packed = PackBf16(b.data(), K, N, trans_b, 0.5f);
        ASSERT_TRUE(packed.ok()) << packed.status().ToString();
        Bf16Epilogue ep;
        ep.bias = bias.data();
        std::vector<float> c(static_cast<size_t>(M * N), -7.0f);
        Status st = GemmBf16(node, M, a.data(), trans_a ? M : K, trans_a, *packed, c.data(), N, ep,
                             (seed & 1) ? &pool : nullptr);
        ASSERT_TRUE(st.ok()) << st.ToString();
        CheckGemm(M, N, K, a, trans_a, b, trans_b, 0.5f, ep, c);
      }
  }
}

// The fused inverted-residual block's GEMM over pair rows it rounded itself
// (block_bf16::PairRowsGemm; on AMX the tiles read the rows in place, AmxRowsGemm). Plain
// rows are checked against the exact product of the bf16-rounded operands; split rows
// (RoundRowsSplit, PackSplitWeights: hi*W + lo*W + hi*(W - bf16(W))) against the fp32
// operands within 2e-5 of sum|aw|: three terms of at most 2^-18 |aw| each are left out or
// rounded, against ~4e-3 for one bf16 rounding. The row buffers start as NaN, so a pad
// word the round functions failed to zero would show. Edge sizes: 1, tile +- 1 in rows
// (16, 32) and columns (32), odd K, K past one chunk, a partial last row group; without
// AMX, rows split into balanced tiles (49: 10 + 10 + 10 + 10 + 9) and more rows than one
// block holds (97: 48 + 49; 196: 66 + 65 + 65).
TEST_P(Bf16Test, BlockPairRowsGemmMatchesReference) {
  const int64_t sizes[][3] = {{1, 1, 1},      {15, 17, 31}, {16, 32, 32}, {17, 33, 33},  {33, 96, 200}, {70, 24, 16},
                              {49, 160, 961}, {32, 1, 5},   {97, 33, 17}, {196, 24, 40}, {1, 150, 500}};
  uint32_t seed = 900;
  for (const auto& s : sizes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    for (bool split : {false, true}) {
      const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                               (split ? " split" : " plain");
      const auto a = Random(M * K, seed++), w = Random(N * K, seed++), bias = Random(N, seed++);
      const auto res = Random(M * N, seed++);
      const int64_t pairs = split ? block_bf16::SplitPairsPerRow(K) : block_bf16::PairsPerRow(K);
      const int64_t ldp = block_bf16::RowWords(pairs);
      ASSERT_GE(ldp, pairs);
      std::vector<uint32_t> rows(static_cast<size_t>(M * ldp), 0x7FC07FC0u);  // two bf16 NaNs per word
      if (split) {
        block_bf16::RoundRowsSplit(a.data(), K, M, K, rows.data(), ldp);
      } else {
        block_bf16::RoundRows(a.data(), K, M, K, rows.data(), ldp);
      }
      auto packed = split ? block_bf16::PackSplitWeights(w.data(), N, K) : PackBf16(w.data(), K, N, /*trans=*/true);
      ASSERT_TRUE(packed.ok()) << packed.status().ToString();
      Bf16Epilogue ep;
      ep.bias = bias.data();
      ep.residual = res.data();
      ep.ldr = N;
      ep.min = -1.5f;
      ep.max = 2.0f;
      std::vector<float> c(static_cast<size_t>(M * N), -7.0f);
      block_bf16::PairRowsGemm(M, rows.data(), ldp, *packed, c.data(), N, ep);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double exact = 0, rounded = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const float av = a[m * K + k], wv = w[n * K + k];
            exact += static_cast<double>(av) * wv;
            rounded += static_cast<double>(RoundBf16(av)) * RoundBf16(wv);
            mag += std::fabs(static_cast<double>(av) * wv);
          }
          auto clamp = [&](double v) {
            return std::min<double>(std::max<double>(v + bias[n] + res[m * N + n], ep.min), ep.max);
          };
          const double got = c[m * N + n];
          ASSERT_NEAR(got, clamp(split ? exact : rounded), (split ? 2e-5 : 1e-5) * mag + 1e-6)
              << what << " at " << m << "," << n;
        }
    }
  }
}

// Every epilogue PairRowsGemm can be given, on plain rows: bias or not, clamp or not, and
// nothing, a residual, or C accumulated (the in-place residual). On AMX whole 32-column
// blocks take their own epilogues (Epilogue32, or the tiles stored straight into C when
// there is nothing to add or clamp), run in pieces between the next block's product steps,
// and partial blocks the generic one: the sizes give one K step (K <= 32), three, and 30
// (pieces of 8 rows), whole and partial column blocks, and a partial last row group.
TEST_P(Bf16Test, PairRowsGemmEveryEpilogue) {
  const int64_t sizes[][3] = {{1, 32, 16}, {70, 64, 96}, {33, 96, 200}, {49, 160, 961}, {40, 33, 64}};
  uint32_t seed = 1700;
  for (const auto& s : sizes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    const auto a = Random(M * K, seed++), w = Random(N * K, seed++), bias = Random(N, seed++);
    const auto res = Random(M * N, seed++), start = Random(M * N, seed++);
    const int64_t ldp = block_bf16::RowWords(block_bf16::PairsPerRow(K));
    std::vector<uint32_t> rows(static_cast<size_t>(M * ldp), 0x7FC07FC0u);
    block_bf16::RoundRows(a.data(), K, M, K, rows.data(), ldp);
    auto packed = PackBf16(w.data(), K, N, /*trans=*/true);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    std::vector<double> product(static_cast<size_t>(M * N)), mag(static_cast<size_t>(M * N));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
          const double p = static_cast<double>(RoundBf16(a[m * K + k])) * RoundBf16(w[n * K + k]);
          product[m * N + n] += p;
          mag[m * N + n] += std::fabs(p);
        }
    for (int kind = 0; kind < 12; ++kind) {
      const bool with_bias = kind & 1, with_clamp = kind & 2;
      const int extra = kind / 4;  // 0 nothing, 1 residual, 2 accumulate
      const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                               " bias=" + std::to_string(with_bias) + " clamp=" + std::to_string(with_clamp) +
                               " extra=" + std::to_string(extra);
      Bf16Epilogue ep;
      if (with_bias) ep.bias = bias.data();
      if (with_clamp) ep.min = -0.75f, ep.max = 1.25f;
      if (extra == 1) ep.residual = res.data(), ep.ldr = N;
      if (extra == 2) ep.accumulate = true;
      std::vector<float> c = extra == 2 ? start : std::vector<float>(static_cast<size_t>(M * N), -7.0f);
      block_bf16::PairRowsGemm(M, rows.data(), ldp, *packed, c.data(), N, ep);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const size_t i = static_cast<size_t>(m * N + n);
          double want =
              product[i] + (with_bias ? bias[n] : 0.0) + (extra == 1 ? res[i] : 0.0) + (extra == 2 ? start[i] : 0.0);
          if (with_clamp) want = std::min(std::max(want, -0.75), 1.25);
          ASSERT_NEAR(c[i], want, 1e-5 * mag[i] + 1e-5) << what << " at " << m << "," << n;
        }
    }
  }
}

// Split rows carry an Inf or NaN as one rounding would: Inf * W stays Inf (the residual
// segment never multiplies it, where 0.3's residual of the other sign would make Inf - Inf),
// NaN stays NaN, and a float that rounds to Inf in bf16 is Inf.
TEST_P(Bf16Test, SplitRowsKeepInfAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t M = 3, N = 2, K = 3;
  const std::vector<float> a = {
      inf,  0.3f, -0.7f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 1.0f, std::numeric_limits<float>::max(),
      0.0f, 0.0f};
  const std::vector<float> w = {0.3f, 0.2f, 0.1f, -0.3f, 0.5f, 0.25f};  // [N, K]
  const int64_t ldp = block_bf16::RowWords(block_bf16::SplitPairsPerRow(K));
  std::vector<uint32_t> rows(static_cast<size_t>(M * ldp), 0x7FC07FC0u);
  block_bf16::RoundRowsSplit(a.data(), K, M, K, rows.data(), ldp);
  auto packed = block_bf16::PackSplitWeights(w.data(), N, K);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  std::vector<float> c(static_cast<size_t>(M * N), -7.0f);
  block_bf16::PairRowsGemm(M, rows.data(), ldp, *packed, c.data(), N, Bf16Epilogue{});
  EXPECT_EQ(c[0], inf);
  EXPECT_EQ(c[1], -inf);
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_TRUE(std::isnan(c[3]));
  EXPECT_EQ(c[4], inf);
  EXPECT_EQ(c[5], -inf);
}

TEST_P(Bf16Test, GemmFusedClampAndRowBias) {
  const Node node = DummyNode();
  // 1 x 150: one row against groups of panels takes the row's bias too.
  for (const int64_t M : {30, 1}) {
    const int64_t N = M == 1 ? 150 : 70, K = 41;
    auto a = Random(M * K, 11), b = Random(K * N, 12), bias = Random(M, 13, -0.5f, 0.5f);
    auto packed = PackBf16(b.data(), K, N, false);
    ASSERT_TRUE(packed.ok());
    Bf16Epilogue ep;
    ep.bias = bias.data();
    ep.bias_per_row = true;
    ep.min = -0.25f;
    ep.max = 0.5f;
    std::vector<float> c(static_cast<size_t>(M * N));
    ASSERT_TRUE(GemmBf16(node, M, a.data(), K, false, *packed, c.data(), N, ep, nullptr).ok());
    CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, c);
    int clamped = 0;
    for (float v : c) clamped += v == -0.25f || v == 0.5f;
    EXPECT_GT(clamped, 0) << "the test data must exercise the clamp (M=" << M << ")";
  }
}

TEST_P(Bf16Test, GemmEmptyAndBadStrides) {
  const Node node = DummyNode();
  std::vector<float> b = {1, 2, 3, 4};
  auto packed = PackBf16(b.data(), 2, 2, false);
  ASSERT_TRUE(packed.ok());
  std::vector<float> c(4, 9.0f);
  EXPECT_TRUE(GemmBf16(node, 0, nullptr, 2, false, *packed, c.data(), 2, {}, nullptr).ok());
  EXPECT_EQ(c[0], 9.0f);
  Status st = GemmBf16(node, 2, b.data(), 1, false, *packed, c.data(), 2, {}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("bf16_test"), std::string::npos) << st.message();
  // K = 0: the empty sum, plus bias, clamped.
  auto empty_k = PackBf16(nullptr, 0, 2, false);
  ASSERT_TRUE(empty_k.ok());
  std::vector<float> bias = {-3.0f, 4.0f};
  Bf16Epilogue ep;
  ep.bias = bias.data();
  ep.min = 0.0f;
  ASSERT_TRUE(GemmBf16(node, 2, nullptr, 0, false, *empty_k, c.data(), 2, ep, nullptr).ok());
  EXPECT_EQ(c, (std::vector<float>{0.0f, 4.0f, 0.0f, 4.0f}));
}

// accumulate: C += A x B + bias, from the first K chunk on, as a conv written over its own
// residual does; bit for bit the residual path's sum only up to addition order, so it is
// compared with the residual path within rounding. A residual aliasing C is refused.
TEST_P(Bf16Test, GemmAccumulatesIntoCLikeAResidual) {
  ThreadPool pool(2);
  const Node node = DummyNode();
  const int64_t sizes[][3] = {{1, 1, 1},    {13, 33, 7}, {25, 65, 385}, {97, 129, 64},
                              {2, 17, 769}, {5, 300, 0}, {1, 200, 770}};
  uint32_t seed = 200;
  for (const auto& s : sizes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    auto a = Random(M * K, seed++), b = Random(K * N, seed++), bias = Random(N, seed++);
    auto r = Random(M * N, seed++, -2.0f, 2.0f);
    auto packed = PackBf16(K ? b.data() : nullptr, K, N, false);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      Bf16Epilogue with_r;
      with_r.bias = bias.data();
      with_r.residual = r.data();
      with_r.ldr = N;
      with_r.min = 0.0f;  // Relu after the sum: the clamp must see the residual too
      std::vector<float> want(static_cast<size_t>(M * N), -7.0f);
      ASSERT_TRUE(GemmBf16(node, M, a.data(), K, false, *packed, want.data(), N, with_r, p).ok());
      Bf16Epilogue acc;
      acc.bias = bias.data();
      acc.accumulate = true;
      acc.min = 0.0f;
      std::vector<float> got = r;
      Status st = GemmBf16(node, M, a.data(), K, false, *packed, got.data(), N, acc, p);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-5 * (std::fabs(want[i]) + std::sqrt(static_cast<double>(K)) + 1.0))
            << "M=" << M << " N=" << N << " K=" << K << " at " << i;
    }
    Bf16Epilogue alias;
    std::vector<float> c = r;
    alias.residual = c.data();
    alias.ldr = N;
    Status st = GemmBf16(node, M, a.data(), K, false, *packed, c.data(), N, alias, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "M=" << M;
    EXPECT_NE(st.message().find("alias"), std::string::npos) << st.message();
  }
}

// GemmBf16Gathered (fp32 rows from a callback) and GemmBf16GatheredPairs (bf16 pairs): the
// callbacks copy from a row-major A; K spans two chunks, rows two blocks with a short tile.
struct RowMajor {
  const float* a;
  int64_t K;
};
void CopyFloatRows(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
  const auto& g = *static_cast<const RowMajor*>(ctx);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < kc; ++k) dst[r * ld + k] = g.a[(row0 + r) * g.K + k0 + k];
}
void CopyPairRows(const void* ctx, int64_t row0, int64_t rows, int64_t kp0, int64_t kpc, uint32_t* dst, int64_t ldp) {
  const auto& g = *static_cast<const RowMajor*>(ctx);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < kpc; ++q) {
      const int64_t k = 2 * (kp0 + q);
      const float lo = g.a[(row0 + r) * g.K + k], hi = k + 1 < g.K ? g.a[(row0 + r) * g.K + k + 1] : 0.0f;
      dst[r * ldp + q] = FloatToBf16(lo) | (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
    }
}

TEST_P(Bf16Test, GatheredGemmsMatchReference) {
  ThreadPool pool(2);
  const Node node = DummyNode();
  const int64_t M = 101, N = 45, K = 401;
  auto a = Random(M * K, 71), b = Random(K * N, 72), bias = Random(N, 73);
  auto packed = PackBf16(b.data(), K, N, false);
  ASSERT_TRUE(packed.ok());
  const RowMajor rm{a.data(), K};
  Bf16Epilogue ep;
  ep.bias = bias.data();
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> c(static_cast<size_t>(M * N), -7.0f);
    ASSERT_TRUE(GemmBf16Gathered(node, M, CopyFloatRows, &rm, *packed, c.data(), N, ep, p).ok());
    CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, c);
    std::vector<float> c2(static_cast<size_t>(M * N), -7.0f);
    ASSERT_TRUE(GemmBf16GatheredPairs(node, M, CopyPairRows, &rm, *packed, c2.data(), N, ep, p).ok());
    CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, c2);
  }
}

// The indirect A (GemmBf16Indirect): rows store their segments in reverse order, so a
// segment read from the wrong pointer shows; segments longer than one K chunk (192 pairs),
// uneven row tiles, one and two threads.
struct ReversedSegments {
  const uint32_t* a;
  int64_t kp, segs, seg_pairs;
};
void ReversedSegmentRows(const void* ctx, int64_t row0, int64_t n, const uint32_t** dst) {
  const auto& g = *static_cast<const ReversedSegments*>(ctx);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t s = 0; s < g.segs; ++s)
      dst[s * kBf16MR + r] = g.a + (row0 + r) * g.kp + (g.segs - 1 - s) * g.seg_pairs;
}

// A's rows (K = 2 * segs * seg_pairs floats each) as bf16 pairs, each row's segments stored
// in reverse order (the layout ReversedSegmentRows reads back).
std::vector<uint32_t> ReversedBf16Pairs(const std::vector<float>& a, int64_t M, int64_t segs, int64_t seg_pairs) {
  const int64_t kp = segs * seg_pairs, K = 2 * kp;
  std::vector<uint32_t> pairs(static_cast<size_t>(M * kp));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t s = 0; s < segs; ++s)
      for (int64_t q = 0; q < seg_pairs; ++q) {
        const int64_t k = 2 * (s * seg_pairs + q);
        pairs[m * kp + (segs - 1 - s) * seg_pairs + q] =
            FloatToBf16(a[m * K + k]) | (static_cast<uint32_t>(FloatToBf16(a[m * K + k + 1])) << 16);
      }
  return pairs;
}

TEST_P(Bf16Test, IndirectGemmMatchesReference) {
  ThreadPool pool(2);
  const Node node = DummyNode();
  const int64_t sizes[][4] = {{29, 40, 3, 200}, {1, 33, 1, 1},   {13, 64, 2, 7}, {200, 70, 2, 96},
                              {50, 70, 9, 16},  {17, 33, 3, 32}, {1, 150, 3, 70}};
  uint32_t seed = 100;
  for (const auto& sz : sizes) {
    const int64_t M = sz[0], N = sz[1], segs = sz[2], seg_pairs = sz[3], kp = segs * seg_pairs, K = 2 * kp;
    auto a = Random(M * K, seed++), b = Random(K * N, seed++), bias = Random(N, seed++);
    const std::vector<uint32_t> pairs = ReversedBf16Pairs(a, M, segs, seg_pairs);
    auto packed = PackBf16(b.data(), K, N, false);
    ASSERT_TRUE(packed.ok());
    const ReversedSegments rs{pairs.data(), kp, segs, seg_pairs};
    const Bf16IndirectA ia{ReversedSegmentRows, &rs, segs, seg_pairs};
    Bf16Epilogue ep;
    ep.bias = bias.data();
    ep.min = -0.5f;
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> c(static_cast<size_t>(M * N), -7.0f);
      Status st = GemmBf16Indirect(node, M, ia, *packed, c.data(), N, ep, p);
      ASSERT_TRUE(st.ok()) << st.ToString();
      CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, c);
    }
  }
  // Bad segment geometry or no A source: errors naming the node.
  auto packed = PackBf16(Random(8 * 4, 1).data(), 8, 4, false);
  ASSERT_TRUE(packed.ok());
  std::vector<uint32_t> pairs(4 * 2);
  std::vector<float> c(4 * 4);
  const ReversedSegments rs{pairs.data(), 2, 1, 2};
  Status k_mismatch = GemmBf16Indirect(node, 4, {ReversedSegmentRows, &rs, 1, 2}, *packed, c.data(), 4, {}, nullptr);
  EXPECT_EQ(k_mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(k_mismatch.message().find("bf16_test"), std::string::npos) << k_mismatch.message();
  EXPECT_NE(k_mismatch.message().find("K=8"), std::string::npos) << k_mismatch.message();
  EXPECT_EQ(GemmBf16Indirect(node, 4, {nullptr, &rs, 2, 2}, *packed, c.data(), 4, {}, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GemmBf16GatheredPairs(node, 4, nullptr, nullptr, *packed, c.data(), 4, {}, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// Row blocks and pool chunks: every output element is written exactly once at any thread
// count. Sums run over K in the same order whatever the blocking, so 2 and 3 threads give
// the same bits as 1. Shapes whose item counts do not divide evenly between the threads
// (resnet's 56x56 and 28x28 convs: 33 and 9 row blocks, the 7x7/2 stem: 131), C starts as NaN.
TEST_P(Bf16Test, ThreadedBlockSplitsWriteEveryElementOnce) {
  const Node node = DummyNode();
  const int64_t sizes[][3] = {{3136, 64, 40}, {784, 128, 40}, {12544, 64, 22}, {196, 256, 40},
                              {49, 512, 40},  {200, 70, 300}, {97, 33, 64}};
  uint32_t seed = 300;
  ThreadPool pool2(2), pool3(3);
  for (const auto& sz : sizes) {
    const int64_t M = sz[0], N = sz[1], K = sz[2];
    auto a = Random(M * K, seed++), b = Random(K * N, seed++), bias = Random(N, seed++);
    auto packed = PackBf16(b.data(), K, N, false);
    ASSERT_TRUE(packed.ok());
    Bf16Epilogue ep;
    ep.bias = bias.data();
    std::vector<std::vector<float>> outs;
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      std::vector<float> c(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
      Status st = GemmBf16(node, M, a.data(), K, false, *packed, c.data(), N, ep, p);
      ASSERT_TRUE(st.ok()) << st.ToString();
      outs.push_back(std::move(c));
    }
    const std::vector<float>& one = outs[0];
    for (int64_t i = 0; i < M * N; ++i) ASSERT_FALSE(std::isnan(one[i])) << "M=" << M << " N=" << N << " at " << i;
    for (size_t t = 1; t < outs.size(); ++t)
      EXPECT_EQ(std::memcmp(one.data(), outs[t].data(), one.size() * sizeof(float)), 0)
          << "M=" << M << " N=" << N << " K=" << K << ": " << (t + 1) << " threads differ from 1";
    if (M <= 200) CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, one);
  }
}

// Products of at most 6 row tiles per block prefetch the next B chunk while multiplying
// the current one (the next panel, or after the last panel the next K chunk): 1 row, the
// 6-tile limit (72 rows) and one past it (73), 49 rows as resnet50's 7x7 convs, partial last
// panels and K chunks (kp 385 = 192 + 192 + 1), a K of one pair, at 1 and 2 threads, plain
// and indirect A. Prefetching changes no value: 1 and 2 threads give the same bits.
TEST_P(Bf16Test, FewTileProductsPrefetchingBMatchReference) {
  ThreadPool pool(2);
  const Node node = DummyNode();
  const int64_t sizes[][3] = {{1, 1000, 770}, {49, 97, 769},  {72, 64, 390}, {73, 64, 390},
                              {13, 33, 2},    {12, 600, 385}, {1, 31, 1}};
  uint32_t seed = 500;
  for (const auto& sz : sizes) {
    const int64_t M = sz[0], N = sz[1], K = sz[2];
    auto a = Random(M * K, seed++), b = Random(K * N, seed++), bias = Random(N, seed++);
    auto packed = PackBf16(b.data(), K, N, false);
    ASSERT_TRUE(packed.ok());
    Bf16Epilogue ep;
    ep.bias = bias.data();
    std::vector<float> one;
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> c(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
      Status st = GemmBf16(node, M, a.data(), K, false, *packed, c.data(), N, ep, p);
      ASSERT_TRUE(st.ok()) << st.ToString();
      CheckGemm(M, N, K, a, false, b, false, 1.0f, ep, c);
      if (one.empty()) {
        one = c;
      } else {
        EXPECT_EQ(std::memcmp(one.data(), c.data(), one.size() * sizeof(float)), 0) << "M=" << M << " N=" << N;
      }
    }
  }
  // Indirect A over few tiles: 49 rows (5 tiles) and 73 (7), segments longer than one K
  // chunk (200 pairs: 192 + 8), the last segment's last chunk the end of B.
  const int64_t isizes[][4] = {{49, 100, 3, 200}, {73, 40, 2, 200}, {1, 65, 9, 32}};
  for (const auto& sz : isizes) {
    const int64_t M = sz[0], N = sz[1], segs = sz[2], seg_pairs = sz[3], kp = segs * seg_pairs, K = 2 * kp;
    auto a = Random(M * K, seed++), b = Random(K * N, seed++);
    const std::vector<uint32_t> pairs = ReversedBf16Pairs(a, M, segs, seg_pairs);
    auto packed = PackBf16(b.data(), K, N, false);
    ASSERT_TRUE(packed.ok());
    const ReversedSegments rs{pairs.data(), kp, segs, seg_pairs};
    const Bf16IndirectA ia{ReversedSegmentRows, &rs, segs, seg_pairs};
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> c(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
      Status st = GemmBf16Indirect(node, M, ia, *packed, c.data(), N, {}, p);
      ASSERT_TRUE(st.ok()) << st.ToString();
      CheckGemm(M, N, K, a, false, b, false, 1.0f, {}, c);
    }
  }
}

// STRATA_BF16_NODES limits bf16 to nodes whose names start with one of its prefixes.
TEST_P(Bf16Test, NodeFilterSelectsByNamePrefix) {
  Node n = DummyNode();
  n.name = "/layer3/layer3.0/conv1/Conv";
  ASSERT_EQ(unsetenv("STRATA_BF16_NODES"), 0);
  EXPECT_TRUE(Bf16NodeSelected(n));
  ASSERT_EQ(setenv("STRATA_BF16_NODES", "/layer4/,/layer3/", 1), 0);
  EXPECT_TRUE(Bf16NodeSelected(n));
  ASSERT_EQ(setenv("STRATA_BF16_NODES", "/layer4/,/conv1/", 1), 0);
  EXPECT_FALSE(Bf16NodeSelected(n));  // "/conv1/" occurs in the name, but not as its prefix
  ASSERT_EQ(setenv("STRATA_BF16_NODES", "", 1), 0);
  EXPECT_TRUE(Bf16NodeSelected(n));
  ASSERT_EQ(unsetenv("STRATA_BF16_NODES"), 0);
}

RunOptions RefOptions() {
  RunOptions o;
  o.want_reference = true;
  return o;
}

RunOptions Bf16Options(bool on, int threads = 1) {
  RunOptions o;
  o.constant_inputs = {1, 2};
  o.config.bf16_fast_math = on;
  o.threads = threads;
  return o;
}

// Elementwise |got - want| <= tol * scale where scale is the largest |want| (used where
// the per-element sum|ab| is not at hand: whole kernels with many terms).
double MaxRelError(const Tensor& got, const Tensor& want) {
  double scale = 0, err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) scale = std::max<double>(scale, std::fabs(want.data<float>()[i]));
  for (int64_t i = 0; i < want.num_elements(); ++i)
    err = std::max<double>(err, std::fabs(got.data<float>()[i] - want.data<float>()[i]));
  return scale > 0 ? err / scale : err;
}

bool SameBits(const Tensor& x, const Tensor& y) {
  return x.shape() == y.shape() && std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}

TEST_P(Bf16Test, MatMulAndGemmKernelsFollowTheOption) {
  Tensor a = Tensor::FromVector(Random(2 * 70 * 100, 21), {2, 70, 100});
  Tensor b = Tensor::FromVector(Random(100 * 90, 22), {100, 90});
  OpSpec mm("MatMul", 13);
  auto fp32 = RunKernel(mm, {a, b}, Bf16Options(false));
  auto bf16 = RunKernel(mm, {a, b}, Bf16Options(true, 2));
  auto ref = RunKernel(mm, {a, b}, RefOptions());
  ASSERT_TRUE(fp32.ok() && bf16.ok() && ref.ok()) << bf16.status().ToString();
  // Option off: the fp32 kernel, bit for bit; on: bf16 rounding shows, within tolerance.
  EXPECT_LT(MaxRelError((*fp32)[0], (*ref)[0]), 1e-5);
  EXPECT_FALSE(SameBits((*bf16)[0], (*fp32)[0]));
  EXPECT_LT(MaxRelError((*bf16)[0], (*ref)[0]), 1e-2);

  // No avx512_bf16 (simulated): the option is on but the fp32 kernel runs.
  SetBf16DisabledForTesting(true);
  auto off_cpu = RunKernel(mm, {a, b}, Bf16Options(true));
  SetBf16DisabledForTesting(false);
  ASSERT_TRUE(off_cpu.ok());
  EXPECT_TRUE(SameBits((*off_cpu)[0], (*fp32)[0]));

  // Gemm: transA, transB, alpha, beta * row C, fused Relu.
  Tensor ga = Tensor::FromVector(Random(45 * 33, 23), {45, 33});  // [K, M] (transA)
  Tensor gb = Tensor::FromVector(Random(50 * 45, 24), {50, 45});  // [N, K] (transB)
  Tensor gc = Tensor::FromVector(Random(50, 25), {1, 50});
  OpSpec gemm("Gemm", 13);
  gemm.Attr("transA", 1).Attr("transB", 1).Attr("alpha", 0.75f).Attr("beta", 2.0f).Attr("activation", "Relu");
  auto g16 = RunKernel(gemm, {ga, gb, gc}, Bf16Options(true));
  auto g32 = RunKernel(gemm, {ga, gb, gc}, Bf16Options(false));
  ASSERT_TRUE(g16.ok() && g32.ok()) << g16.status().ToString();
  EXPECT_FALSE(SameBits((*g16)[0], (*g32)[0]));
  EXPECT_LT(MaxRelError((*g16)[0], (*g32)[0]), 1e-2);
  for (int64_t i = 0; i < (*g16)[0].num_elements(); ++i) ASSERT_GE((*g16)[0].data<float>()[i], 0.0f);
}

TEST_P(Bf16Test, GemmWithFullMatrixCFallsBackToFp32) {
  Tensor a = Tensor::FromVector(Random(8 * 16, 31), {8, 16});
  Tensor b = Tensor::FromVector(Random(16 * 24, 32), {16, 24});
  Tensor c = Tensor::FromVector(Random(8 * 24, 33), {8, 24});
  OpSpec gemm("Gemm", 13);
  auto on = RunKernel(gemm, {a, b, c}, Bf16Options(true));
  auto off = RunKernel(gemm, {a, b, c}, Bf16Options(false));
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_TRUE(SameBits((*on)[0], (*off)[0]));
}

TEST_P(Bf16Test, MatMulRejectsBadInputWithNodeName) {
  Tensor a = Tensor::FromVector(Random(3 * 5, 41), {3, 5});
  Tensor b = Tensor::FromVector(Random(4 * 6, 42), {4, 6});
  OpSpec mm("MatMul", 13);
  auto r = RunKernel(mm, {a, b}, Bf16Options(true));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("MatMul"), std::string::npos) << r.status().message();
}

struct ConvCase {
  int64_t n, cin, h, w, cout, kh, kw, stride, pad, dilation;
  const char* activation;
};

TEST_P(Bf16Test, ConvMatchesReference) {
  const ConvCase cases[] = {
      {1, 16, 9, 11, 13, 1, 1, 1, 0, 1, nullptr},    // pointwise, odd sizes, Cout = tile + 1
      {2, 7, 12, 12, 24, 3, 3, 1, 1, 1, "Relu"},     // 3x3 pad 1, odd Cin*9 = 63 (pair padding)
      {1, 8, 15, 17, 12, 3, 3, 2, 1, 1, nullptr},    // stride 2
      {1, 3, 23, 23, 20, 7, 7, 2, 3, 1, "Relu"},     // the ResNet stem shape, scaled down
      {1, 5, 14, 14, 9, 3, 3, 1, 2, 2, "Clip"},      // dilation 2
      {1, 64, 20, 20, 40, 3, 3, 1, 1, 1, nullptr},   // K = 576: two K chunks, 400 columns
      {1, 4, 6, 6, 8, 1, 1, 2, 0, 1, nullptr},       // strided 1x1 (ResNet downsample)
      {1, 1024, 7, 7, 24, 1, 1, 1, 0, 1, "Relu"},    // ResNet-50 bottleneck 1x1: three K chunks
      {1, 256, 14, 14, 16, 1, 1, 2, 0, 1, nullptr},  // strided 1x1 over two K chunks
      {1, 128, 15, 15, 16, 3, 3, 2, 1, 1, nullptr},  // 3x3 stride 2, K = 1152
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) {
    Tensor x = Tensor::FromVector(Random(c.n * c.cin * c.h * c.w, seed++), {c.n, c.cin, c.h, c.w});
    Tensor w = Tensor::FromVector(Random(c.cout * c.cin * c.kh * c.kw, seed++), {c.cout, c.cin, c.kh, c.kw});
    Tensor b = Tensor::FromVector(Random(c.cout, seed++), {c.cout});
    OpSpec conv("Conv", 11);
    conv.Attr("strides", std::vector<int64_t>{c.stride, c.stride})
        .Attr("pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad})
        .Attr("dilations", std::vector<int64_t>{c.dilation, c.dilation});
    if (c.activation) conv.Attr("activation", c.activation);
    if (c.activation && std::string(c.activation) == "Clip")
      conv.Attr("activation_min", -0.5f).Attr("activation_max", 0.5f);
    auto on = RunKernel(conv, {x, w, b}, Bf16Options(true, 2));
    auto ref = RunKernel(conv, {x, w, b}, RefOptions());
    ASSERT_TRUE(on.ok()) << on.status().ToString();
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    const Tensor& got = (*on)[0];
    const Tensor& want = (*ref)[0];
    ASSERT_EQ(got.shape(), want.shape());
    // Per-element bound: 1e-2 * sum|x w| <= 1e-2 * (Cin*KH*KW) * max|x| * max|w| (both <= 1).
    const double bound = 1e-2 * static_cast<double>(c.cin * c.kh * c.kw) * 0.25 + 1e-5;
    double worst = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i)
      worst = std::max<double>(worst, std::fabs(got.data<float>()[i] - want.data<float>()[i]));
    EXPECT_LT(worst, bound) << "conv case cin=" << c.cin << " k=" << c.kh << " stride=" << c.stride;
    // Clip bounds the output scale but not the sum's, so the scale-relative check skips it.
    if (!c.activation || std::string(c.activation) != "Clip") {
      EXPECT_LT(MaxRelError(got, want), 1e-2) << "conv case cin=" << c.cin << " k=" << c.kh;
    }
    // Tight: the reference on bf16-rounded X and W differs only by fp32 summation order.
    Tensor xr = x.Clone().value(), wr = w.Clone().value();
    for (Tensor* t : {&xr, &wr})
      for (int64_t i = 0; i < t->num_elements(); ++i) t->mutable_data<float>()[i] = RoundBf16(t->data<float>()[i]);
    auto ref16 = RunKernel(conv, {xr, wr, b}, RefOptions());
    ASSERT_TRUE(ref16.ok());
    double tight = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i)
      tight = std::max<double>(tight, std::fabs(got.data<float>()[i] - (*ref16)[0].data<float>()[i]));
    EXPECT_LT(tight, 1e-5 * c.cin * c.kh * c.kw + 1e-6) << "conv case cin=" << c.cin << " k=" << c.kh;
    EXPECT_FALSE(SameBits(got, want)) << "bf16 rounding should be visible";
  }
}

TEST_P(Bf16Test, DepthwiseConvStaysFp32) {
  Tensor x = Tensor::FromVector(Random(1 * 8 * 10 * 10, 51), {1, 8, 10, 10});
  Tensor w = Tensor::FromVector(Random(8 * 1 * 3 * 3, 52), {8, 1, 3, 3});
  OpSpec conv("Conv", 11);
  conv.Attr("group", 8).Attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  RunOptions on = Bf16Options(true), off = Bf16Options(false);
  on.constant_inputs = off.constant_inputs = {1};
  auto a = RunKernel(conv, {x, w}, on);
  auto b = RunKernel(conv, {x, w}, off);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(SameBits((*a)[0], (*b)[0]));
}

// Session level: the precision option reaches the kernels through SessionOptions.
std::string MatMulReluModel() {
  auto m = onnx_builder::MakeModel(13);
  auto* g = m.mutable_graph();
  onnx_builder::AddInput(g, "x", {4, 64});
  onnx_builder::AddOutput(g, "y", {4, 48});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(64);
  w->add_dims(48);
  for (float v : Random(64 * 48, 61)) w->add_float_data(v);
  onnx_builder::AddNode(g, "MatMul", {"x", "w"}, {"h"});
  onnx_builder::AddNode(g, "Relu", {"h"}, {"y"});
  return m.SerializeAsString();
}

TEST_P(Bf16Test, SessionPrecisionOption) {
  const std::string bytes = MatMulReluModel();
  Tensor x = Tensor::FromVector(Random(4 * 64, 62), {4, 64});
  std::vector<Tensor> outs;
  for (bool bf16 : {false, true}) {
    SessionOptions so;
    so.threads = 1;
    so.kernel.bf16_fast_math = bf16;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    bool found = false;
    for (const NodeAssignment& na : (*s)->assignments())
      if (na.op_type == "MatMul" || na.op_type == "Gemm") {
        found = true;
        EXPECT_EQ(na.impl, bf16 ? (bf16_internal::AmxAvailable() ? "amx_bf16" : "avx512_bf16")
                                : "xnnpack");  // the kernel that runs
      }
    EXPECT_TRUE(found);
    auto r = (*s)->Run({{"x", Value(x)}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    outs.push_back((*r)[0].tensor());
  }
  EXPECT_FALSE(SameBits(outs[0], outs[1]));
  EXPECT_LT(MaxRelError(outs[1], outs[0]), 1e-2);
  for (int64_t i = 0; i < outs[1].num_elements(); ++i) ASSERT_GE(outs[1].data<float>()[i], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(TileKernels, Bf16Test, ::testing::Values("avx512_bf16", "amx"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace strata
