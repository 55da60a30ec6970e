// com.microsoft MatMulNBits: optimized kernels vs the reference on edge shapes, forced
// ISAs, every rejected input, and a `strata quantize` round trip on a small MLP.
#include "cpu/matmul_nbits.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel.h"
#include "core/large_pages.h"
#include "core/quantize_model.h"
#include "core/session.h"
#include "cpu/int8_gemm.h"

namespace strata {
namespace {

// ---- direct kernel tests ----

struct Case {
  int64_t M, K, N, bits, block_size;
  int zp;  // 0: none, 1: packed uint8, 2: float
  bool bias;
};

struct CaseData {
  nbits::Params p;
  Tensor b, scales, zp, bias;
  nbits::Inputs in() const {
    nbits::Inputs i;
    i.b = &b;
    i.scales = &scales;
    i.zero_points = zp.valid() ? &zp : nullptr;
    i.bias = bias.valid() ? &bias : nullptr;
    return i;
  }
};

CaseData MakeCase(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  CaseData d;
  d.p.K = c.K;
  d.p.N = c.N;
  d.p.bits = c.bits;
  d.p.block_size = c.block_size;
  d.p.n_blocks = (c.K + c.block_size - 1) / c.block_size;
  d.p.blob = c.block_size * c.bits / 8;
  std::vector<uint8_t> b(c.N * d.p.n_blocks * d.p.blob);
  for (auto& v : b) v = static_cast<uint8_t>(rng());
  d.b = Tensor::FromVector(b, {c.N, d.p.n_blocks, d.p.blob});
  std::uniform_real_distribution<float> u(0.01f, 0.1f);
  std::vector<float> s(c.N * d.p.n_blocks);
  for (auto& v : s) v = u(rng);
  d.scales = Tensor::FromVector(s, {c.N * d.p.n_blocks});
  if (c.zp == 1) {
    std::vector<uint8_t> z(c.N * ((d.p.n_blocks * c.bits + 7) / 8));
    for (auto& v : z) v = static_cast<uint8_t>(rng());
    d.zp = Tensor::FromVector(z, {static_cast<int64_t>(z.size())});
  } else if (c.zp == 2) {
    std::vector<float> z(c.N * d.p.n_blocks);
    for (auto& v : z) v = static_cast<float>(rng() % (1 << c.bits)) + 0.25f;
    d.zp = Tensor::FromVector(z, {static_cast<int64_t>(z.size())});
  }
  if (c.bias) {
    std::vector<float> bv(c.N);
    for (auto& v : bv) v = u(rng) * 10;
    d.bias = Tensor::FromVector(bv, {c.N});
  }
  return d;
}

std::vector<float> RandomA(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> a(n);
  for (auto& v : a) v = dist(rng);
  return a;
}

// The oracle: dequantize, then a double-precision matmul.
std::vector<float> Oracle(const CaseData& d, const std::vector<float>& a, int64_t M) {
  const std::vector<float> w = nbits::Dequantize(d.p, d.in());
  std::vector<float> y(M * d.p.N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < d.p.N; ++n) {
      double acc = d.bias.valid() ? d.bias.data<float>()[n] : 0.0;
      for (int64_t k = 0; k < d.p.K; ++k) acc += static_cast<double>(a[m * d.p.K + k]) * w[n * d.p.K + k];
      y[m * d.p.N + n] = static_cast<float>(acc);
    }
  return y;
}

std::vector<nbits::Isa> AvailableIsas() {
  std::vector<nbits::Isa> v = {nbits::Isa::kScalar};
  if (nbits::ResolveIsa("avx2") == nbits::Isa::kAvx2) v.push_back(nbits::Isa::kAvx2);
  if (nbits::ResolveIsa(nullptr) == nbits::Isa::kAvx512) v.push_back(nbits::Isa::kAvx512);
  return v;
}

void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, int64_t K, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(want[i], got[i], 1e-4 * std::sqrt(static_cast<double>(K)) * (1 + std::fabs(want[i])))
        << what << " at " << i;
}

TEST(MatmulNBitsKernel, OptimizedMatchesReferenceOnEdgeShapes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 128})
      for (int64_t K : {16, 37, 200, 513})
        for (int64_t N : {1, 7, 18})
          for (int zp : {0, 1, 2}) {
            const bool bias = (seed % 2) == 0;
            Case c{0, K, N, bits, bs, zp, bias};
            CaseData d = MakeCase(c, seed++);
            nbits::Packed packed = nbits::Pack(d.p, d.in());
            ASSERT_TRUE(packed.gemv_serial);       // small weights: a GEMV stays on the calling thread
            packed.gemv_serial = (seed % 2) == 0;  // otherwise the pool's split is covered too
            for (int64_t M : {1, 2, 3, 16, 17, 40}) {
              const std::vector<float> a = RandomA(M * K, seed);
              const std::vector<float> want = Oracle(d, a, M);
              for (nbits::Isa isa : AvailableIsas()) {
                std::vector<float> y(M * N, -1.0f);
                nbits::PackedMatMul(isa, packed, a.data(), M, y.data(), (seed % 3) ? &pool : nullptr);
                ExpectClose(want, y, K,
                            std::string(nbits::IsaName(isa)) + " bits=" + std::to_string(bits) +
                                " bs=" + std::to_string(bs) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                                " M=" + std::to_string(M) + " zp=" + std::to_string(zp));
                if (HasFatalFailure()) return;
              }
            }
          }
}

// The AVX-512 level-0 GEMV prefetches the next whole group of 4 columns while it computes
// one (4 bits always; 8 bits when Packed::gemv_streams, set by Pack past kGemvStreamsBytes
// and forced here both ways), so what it prefetches depends on where a call's column range
// starts and ends. Results must not: every column's arithmetic is the same with or without
// the prefetch, in a 4-column group or alone, in one call or several. Checked bit for bit,
// and against the oracle, at K not a multiple of the block or of 128, N around the group
// (no next group, a partial one), blocks 16-256 and all zero-point kinds.
TEST(MatmulNBitsKernel, Avx512GemvPrefetchLeavesResultsUnchanged) {
  if (nbits::ResolveIsa(nullptr) != nbits::Isa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  uint32_t seed = 900;
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128, 256})
      for (int64_t K : {200, 600})
        for (int64_t N : {4, 5, 8, 9, 13, 30}) {
          const Case c{1, K, N, bits, bs, static_cast<int>(seed % 3), false};
          CaseData d = MakeCase(c, seed++);
          nbits::Packed w = nbits::Pack(d.p, d.in());
          ASSERT_FALSE(w.gemv_streams);  // small weights
          const std::vector<float> a = RandomA(K, seed);
          // The GEMV's inputs as PackedMatMul makes them: the row padded to k_pad, per-block sums.
          std::vector<float> row(w.k_pad, 0.0f), asum(w.nb_stride, 0.0f);
          std::copy(a.begin(), a.end(), row.begin());
          for (int64_t k = 0; k < K; ++k) asum[k / bs] += a[k];
          const std::string what = "bits=" + std::to_string(bits) + " bs=" + std::to_string(bs) +
                                   " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                                   " zp=" + std::to_string(c.zp);
          std::vector<float> whole(N, -1.0f);
          nbits::GemvAvx512(w, row.data(), asum.data(), whole.data(), 0, N);
          ExpectClose(Oracle(d, a, 1), whole, K, what);
          if (HasFatalFailure()) return;
          for (bool streams : {false, true}) {
            w.gemv_streams = streams;
            const std::string how = what + (streams ? " streams" : "");
            std::vector<float> y(N, -1.0f);
            nbits::GemvAvx512(w, row.data(), asum.data(), y.data(), 0, N);
            for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y[n], whole[n]) << how << ", column " << n;
            // Two calls split at every group boundary, and one call per column.
            for (int64_t split = 4; split < N; split += 4) {
              std::fill(y.begin(), y.end(), -1.0f);
              nbits::GemvAvx512(w, row.data(), asum.data(), y.data(), 0, split);
              nbits::GemvAvx512(w, row.data(), asum.data(), y.data(), split, N);
              for (int64_t n = 0; n < N; ++n)
                ASSERT_EQ(y[n], whole[n]) << how << ", split at " << split << ", column " << n;
            }
            std::fill(y.begin(), y.end(), -1.0f);
            for (int64_t n = 0; n < N; ++n) nbits::GemvAvx512(w, row.data(), asum.data(), y.data(), n, n + 1);
            for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y[n], whole[n]) << how << ", column " << n << " alone";
          }
        }
}

// A GEMV on weights past kGemvStreamsBytes (int4, 0.75 bytes per weight packed: ~19 MiB
// here), the case the prefetch is for: against the oracle, and the pool's split bit for
// bit the serial result.
TEST(MatmulNBitsKernel, LargeGemvMatchesOracleAndIsSplitIndependent) {
  ThreadPool pool(2);
  const Case c{1, 4160, 6150, 4, 32, 1, true};
  CaseData d = MakeCase(c, 91);
  nbits::Packed w = nbits::Pack(d.p, d.in());
  ASSERT_GT(static_cast<int64_t>(w.bytes()), nbits::kGemvStreamsBytes);
  ASSERT_TRUE(w.gemv_streams);
  ASSERT_FALSE(w.gemv_serial);
  const std::vector<float> a = RandomA(c.K, 92);
  const std::vector<float> want = Oracle(d, a, 1);
  for (nbits::Isa isa : AvailableIsas()) {
    std::vector<float> serial(c.N, -1.0f), split(c.N, -1.0f);
    nbits::PackedMatMul(isa, w, a.data(), 1, serial.data(), nullptr);
    nbits::PackedMatMul(isa, w, a.data(), 1, split.data(), &pool);
    ExpectClose(want, serial, c.K, nbits::IsaName(isa));
    for (int64_t n = 0; n < c.N; ++n) ASSERT_EQ(split[n], serial[n]) << nbits::IsaName(isa) << " column " << n;
  }
}

TEST(MatmulNBitsKernel, ForcedIsaIsHonoured) {
  EXPECT_EQ(nbits::ResolveIsa("scalar"), nbits::Isa::kScalar);
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  // "avx2" caps the choice: never AVX-512, even on an AVX-512 CPU.
  EXPECT_EQ(nbits::ResolveIsa("avx2"), avx2 ? nbits::Isa::kAvx2 : nbits::Isa::kScalar);
  // Without a cap AVX-512 is chosen exactly when the CPU has it.
  EXPECT_EQ(nbits::ResolveIsa(nullptr) == nbits::Isa::kAvx512, avx512);
  EXPECT_EQ(nbits::ResolveIsa("") == nbits::Isa::kAvx512, avx512);
}

// ---- accuracy_level 4: int8 activations (AVX512-VNNI) ----

// The int8 path computes exactly (up to fp32 rounding) sum_k a^_k w_k with a^ the int8
// round trip of A: |a - a^| <= s_b / 2 with s_b = max|a in block| / 127. So each output
// may differ from the fp32 oracle by at most sum_b s_b / 2 * sum_{k in b} |w_k|.
std::vector<double> Int8Bound(const CaseData& d, const std::vector<float>& a, int64_t M) {
  const std::vector<float> w = nbits::Dequantize(d.p, d.in());
  const int64_t K = d.p.K, bs = d.p.block_size;
  std::vector<double> bound(M * d.p.N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b * bs < K; ++b) {
      double amax = 0;
      for (int64_t k = b * bs; k < std::min(K, (b + 1) * bs); ++k)
        amax = std::max(amax, std::fabs(static_cast<double>(a[m * K + k])));
      const double half_step = amax / 127.0 / 2.0;
      for (int64_t n = 0; n < d.p.N; ++n) {
        double wsum = 0;
        for (int64_t k = b * bs; k < std::min(K, (b + 1) * bs); ++k) wsum += std::fabs(w[n * K + k]);
        bound[m * d.p.N + n] += half_step * wsum;
      }
    }
  return bound;
}

void ExpectWithinInt8Bound(const std::vector<float>& want, const std::vector<float>& got,
                           const std::vector<double>& bound, int64_t K, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double err_sum = 0, bound_sum = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(want[i]) - got[i]);
    // 1e-4 sqrt(K) (1 + |y|): fp32 accumulation, as for the fp32 kernels.
    ASSERT_LE(err, bound[i] * 1.001 + 1e-4 * std::sqrt(static_cast<double>(K)) * (1 + std::fabs(want[i])))
        << what << " at " << i << ": want " << want[i] << " got " << got[i];
    err_sum += err;
    bound_sum += bound[i];
  }
  // The bound is a worst case (all rounding errors aligned); over many outputs the typical
  // error is far smaller (a single output may come close to it).
  if (want.size() >= 64) {
    EXPECT_LE(err_sum, 0.5 * bound_sum + 1e-3 * static_cast<double>(want.size())) << what;
  }
}

TEST(MatmulNBitsInt8, VnniPathWithinActivationQuantizationBound) {
  if (!nbits::HasAvx512Vnni()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128})
      for (int64_t K : {16, 37, 96, 200, 513})  // K not a multiple of the block; 64-code spans + 32-code tails
        for (int64_t N : {1, 7, 18})
          for (int zp : {0, 1, 2}) {
            const bool bias = (seed % 2) == 0;
            CaseData d = MakeCase(Case{0, K, N, bits, bs, zp, bias}, seed++);
            d.p.accuracy_level = 4;
            nbits::Packed packed = nbits::Pack(d.p, d.in(), /*int8=*/true);
            ASSERT_TRUE(packed.gemv_serial);
            packed.gemv_serial = (seed % 2) == 0;  // covers the pool's split of a GEMV too
            for (int64_t M : {1, 2, 3, 16, 17}) {
              const std::vector<float> a = RandomA(M * K, seed);
              std::vector<float> y(M * N, -1.0f);
              nbits::PackedMatMulInt8(packed, a.data(), M, y.data(), (seed % 3) ? &pool : nullptr);
              ExpectWithinInt8Bound(Oracle(d, a, M), y, Int8Bound(d, a, M), K,
                                    "bits=" + std::to_string(bits) + " bs=" + std::to_string(bs) +
                                        " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                                        " M=" + std::to_string(M) + " zp=" + std::to_string(zp));
              if (HasFatalFailure()) return;
            }
          }
}

TEST(MatmulNBitsInt8, ZeroAndExactRowsAreExact) {
  if (!nbits::HasAvx512Vnni()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  // A zero row gives exactly the bias; a row of small integers (exact in int8 when the
  // block max is 127) gives exactly the fp32 result up to rounding.
  CaseData d = MakeCase(Case{0, 128, 5, 4, 32, 1, true}, 9);
  const nbits::Packed packed = nbits::Pack(d.p, d.in(), /*int8=*/true);
  std::vector<float> a(2 * 128, 0.0f);
  for (int64_t k = 0; k < 128; ++k) a[128 + k] = static_cast<float>(k % 32 == 0 ? 127 : (k * 7) % 41 - 20);
  std::vector<float> y(2 * 5);
  nbits::PackedMatMulInt8(packed, a.data(), 2, y.data(), nullptr);
  const std::vector<float> want = Oracle(d, a, 2);
  for (int64_t n = 0; n < 5; ++n) {
    EXPECT_EQ(y[n], d.bias.data<float>()[n]);
    EXPECT_NEAR(y[5 + n], want[5 + n], 1e-5 * (1 + std::fabs(want[5 + n])) * 128);
  }
}

// ---- the AVX-512 GEMM (SGEMM micro-kernel on dequantized panels) and the int8 steps ----

std::string Describe(const Case& c, int64_t M) {
  return "bits=" + std::to_string(c.bits) + " bs=" + std::to_string(c.block_size) + " K=" + std::to_string(c.K) +
         " N=" + std::to_string(c.N) + " M=" + std::to_string(M) + " zp=" + std::to_string(c.zp) +
         " bias=" + std::to_string(c.bias);
}

TEST(MatmulNBitsGemm, Avx512PanelGemmMatchesOracleAtTileEdges) {
  if (nbits::ResolveIsa(nullptr) != nbits::Isa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool(2);
  uint32_t seed = 300;
  // N around the 32-column panel and its 16-column halves (4 bits: byte-transposed codes),
  // K across the 256-deep K block (and a last block of 128) and not a multiple of the
  // block, M around the 12-row tile and past the 192-row M block.
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 256})
      for (int64_t K : {16, 300, 529})
        for (int64_t N : {1, 31, 33, 70, 290}) {
          // 290: 10 panels, more than the 2-thread CPU split's 8 parts (uneven parts).
          if (N == 290 && (K != 300 || bs != 32)) continue;
          const Case c{0, K, N, bits, bs, static_cast<int>(seed % 3), (seed % 2) == 0};
          CaseData d = MakeCase(c, seed++);
          const nbits::Packed packed = nbits::Pack(d.p, d.in());
          for (int64_t M : {4, 12, 13, 25, 33, 197}) {
            if (M == 197 && (K != 300 || N != 33)) continue;  // one case past the M block is enough
            const std::vector<float> a = RandomA(M * K, seed);
            // Directly, on rows zero-padded to k_pad as PackedMatMul passes them.
            std::vector<float> a_pad(M * packed.k_pad, 0.0f);
            for (int64_t m = 0; m < M; ++m) std::copy_n(&a[m * K], K, &a_pad[m * packed.k_pad]);
            std::vector<float> y(M * N, -1.0f);
            nbits::PackedGemmAvx512(packed, a_pad.data(), M, y.data(), (seed % 3) ? &pool : nullptr);
            ExpectClose(Oracle(d, a, M), y, K, "direct " + Describe(c, M));
            if (bits == 4) {
              // The few-row 4-bit GEMM (table-lookup register tiles), also at M past its threshold.
              std::vector<float> yt(M * N, -1.0f);
              nbits::PackedGemmTableAvx512(packed, a_pad.data(), M, yt.data(), (seed % 3) ? nullptr : &pool);
              ExpectClose(Oracle(d, a, M), yt, K, "table " + Describe(c, M));
            }
            std::vector<float> y2(M * N, -1.0f);
            nbits::PackedMatMul(nbits::Isa::kAvx512, packed, a.data(), M, y2.data(), (seed % 2) ? &pool : nullptr);
            ExpectClose(Oracle(d, a, M), y2, K, Describe(c, M));
            if (HasFatalFailure()) return;
          }
        }
}

TEST(MatmulNBitsGemm, EmptyBatchWritesNothing) {
  CaseData d = MakeCase(Case{0, 64, 5, 4, 32, 1, true}, 3);
  const nbits::Packed packed = nbits::Pack(d.p, d.in());
  const nbits::Packed packed8 = nbits::Pack(d.p, d.in(), /*int8=*/true);
  std::vector<float> y(5, 7.0f);
  for (nbits::Isa isa : AvailableIsas()) nbits::PackedMatMul(isa, packed, nullptr, 0, y.data(), nullptr);
  if (nbits::ResolveIsa(nullptr) == nbits::Isa::kAvx512) nbits::PackedGemmAvx512(packed, nullptr, 0, y.data(), nullptr);
  if (nbits::HasAvx512Vnni()) nbits::PackedMatMulInt8(packed8, nullptr, 0, y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 7.0f);
}

TEST(MatmulNBitsInt8, StepsBlocksAndTilesAtEdges) {
  if (!nbits::HasAvx512Vnni()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  uint32_t seed = 500;
  // K across 128-code steps (exact, +1, several) and blocks of 16 (two scales per step),
  // 32, 64, 128 and 256 (a block longer than a step); N around the 4-column group, M
  // around the 4-row tile.
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128, 256})
      for (int64_t K : {128, 129, 600})
        for (int64_t N : {4, 5, 33}) {
          const Case c{0, K, N, bits, bs, static_cast<int>(seed % 3), (seed % 2) == 1};
          CaseData d = MakeCase(c, seed++);
          d.p.accuracy_level = 4;
          const nbits::Packed packed = nbits::Pack(d.p, d.in(), /*int8=*/true);
          EXPECT_EQ(packed.k_pad % nbits::kInt8Step, 0);
          for (int64_t M : {1, 4, 5, 13}) {
            const std::vector<float> a = RandomA(M * K, seed);
            std::vector<float> y(M * N, -1.0f);
            nbits::PackedMatMulInt8(packed, a.data(), M, y.data(), (seed % 3) ? &pool : nullptr);
            ExpectWithinInt8Bound(Oracle(d, a, M), y, Int8Bound(d, a, M), K, Describe(c, M));
            if (HasFatalFailure()) return;
          }
        }
}

TEST(MatmulNBitsInt8, GemvGroupsSideBySideAtEdges) {
  if (!nbits::HasAvx512Vnni()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  uint32_t seed = 700;
  // The 4-group GEMV (forced here; Pack sets it for large weights) against the 1-group one:
  // the same operations per column in the same order, so bit for bit the same, and within
  // the int8 bound. N leaves 0-3 groups past a multiple of 4 (and the pool's chunks split
  // the groups unevenly), K is not a multiple of the block or of the 128-code step, blocks
  // of 16, 32, 64 and 128 cover the three scale layouts.
  for (int64_t bits : {4, 8})
    for (int64_t bs : {16, 32, 64, 128})
      for (int64_t K : {128, 600})
        for (int64_t N : {16, 21, 70, 199}) {
          const Case c{0, K, N, bits, bs, static_cast<int>(seed % 3), (seed % 2) == 1};
          CaseData d = MakeCase(c, seed++);
          d.p.accuracy_level = 4;
          nbits::Packed packed = nbits::Pack(d.p, d.in(), /*int8=*/true);
          ASSERT_FALSE(packed.gemv_streams) << Describe(c, 1);
          packed.gemv_serial = false;  // the pool below splits the groups
          const std::vector<float> a = RandomA(K, seed);
          std::vector<float> y1(N, -1.0f);
          nbits::PackedMatMulInt8(packed, a.data(), 1, y1.data(), nullptr);
          packed.gemv_streams = true;
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> y(N, -1.0f);
            nbits::PackedMatMulInt8(packed, a.data(), 1, y.data(), p);
            for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y[n], y1[n]) << Describe(c, 1) << " column " << n;
          }
          // The pool's threads take the 1-group GEMV on these small shares; the 4-group one on
          // uneven column ranges (as a split cuts them, 0-3 groups past a multiple of 4 each).
          std::vector<float> scratch(static_cast<size_t>(nbits::QuantAFloats(packed, 1)));
          nbits::QuantA qa;
          nbits::QuantizeA(packed, a.data(), 1, scratch.data(), &qa);
          std::vector<float> y(N, -1.0f);
          const int64_t c1 = std::min<int64_t>(N, 4 * 5), c2 = std::min<int64_t>(N, c1 + 4 * 7);
          for (auto [n0, n1] : {std::pair{int64_t{0}, c1}, std::pair{c1, c2}, std::pair{c2, N}})
            nbits::MatMulInt8Vnni(packed, qa, n0, n1, y.data(), /*streams=*/true);
          for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y[n], y1[n]) << Describe(c, 1) << " ranges, column " << n;
          ExpectWithinInt8Bound(Oracle(d, a, 1), y1, Int8Bound(d, a, 1), K, Describe(c, 1));
          if (HasFatalFailure()) return;
        }
}

// GEMVs (M < 4) split the column groups by CPU (ParallelRangeByCpu: two regions of 4
// parts per 2-thread pool, cut unevenly when the groups do not divide): 1, 2 and 3 threads
// give the serial result bit for bit, int8 (1-3-row tiles, 1 and 4 groups side by side)
// and fp32 (every ISA), N around the 4-column group and the parts.
TEST(MatmulNBitsKernel, GemvCpuSplitIsBitExactAcrossThreadCounts) {
  ThreadPool two(2), three(3);
  uint32_t seed = 900;
  for (int64_t bits : {4, 8})
    for (int64_t N : {129, 150, 258, 263}) {  // 33-66 groups: 16-group grain, parts of 4-9 groups
      const Case c{0, 300, N, bits, 32, static_cast<int>(seed % 3), (seed % 2) == 0};
      CaseData d = MakeCase(c, seed++);
      for (bool int8 : {false, true}) {
        if (int8 && !nbits::HasAvx512Vnni()) continue;
        d.p.accuracy_level = int8 ? 4 : 0;
        nbits::Packed packed = nbits::Pack(d.p, d.in(), int8);
        packed.gemv_serial = false;  // small weights: the pools below split them anyway
        for (bool streams : {false, true}) {
          if (streams && !int8) continue;
          packed.gemv_streams = streams;
          for (int64_t M : {1, 2, 3}) {
            const std::vector<float> a = RandomA(M * c.K, seed);
            const std::string what = Describe(c, M) + (int8 ? " int8" : "") + (streams ? " streams" : "");
            for (nbits::Isa isa : int8 ? std::vector<nbits::Isa>{nbits::Isa::kAvx512} : AvailableIsas()) {
              const auto run = [&](ThreadPool* pool) {
                std::vector<float> y(M * N, -1.0f);
                if (int8) {
                  nbits::PackedMatMulInt8(packed, a.data(), M, y.data(), pool);
                } else {
                  nbits::PackedMatMul(isa, packed, a.data(), M, y.data(), pool);
                }
                return y;
              };
              const std::vector<float> serial = run(nullptr);
              if (int8) {
                ExpectWithinInt8Bound(Oracle(d, a, M), serial, Int8Bound(d, a, M), c.K, what);
              } else {
                ExpectClose(Oracle(d, a, M), serial, c.K, what + " " + nbits::IsaName(isa));
              }
              for (ThreadPool* pool : {&two, &three}) {
                const std::vector<float> y = run(pool);
                for (size_t i = 0; i < y.size(); ++i)
                  ASSERT_EQ(y[i], serial[i])
                      << what << " " << nbits::IsaName(isa) << " " << pool->num_threads() << " threads, output " << i;
              }
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
}

TEST(MatmulNBitsInt8, LargeWeightsTakeTheGroupsSideBySideGemv) {
  if (!nbits::HasAvx512Vnni()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  // Past kGemvStreamsBytes (int4, block 32: 0.66 bytes per weight), Pack picks the 4-group
  // GEMV; its result is the 1-group GEMV's, bit for bit.
  const Case c{0, 4160, 6150, 4, 32, 1, true};
  CaseData d = MakeCase(c, 77);
  d.p.accuracy_level = 4;
  nbits::Packed packed = nbits::Pack(d.p, d.in(), /*int8=*/true);
  ASSERT_GT(static_cast<int64_t>(packed.bytes()), nbits::kGemvStreamsBytes);
  ASSERT_TRUE(packed.gemv_streams);
  ASSERT_FALSE(packed.gemv_serial);
  const std::vector<float> a = RandomA(c.K, 78);
  std::vector<float> y(c.N), y1(c.N);
  nbits::PackedMatMulInt8(packed, a.data(), 1, y.data(), nullptr);
  packed.gemv_streams = false;
  nbits::PackedMatMulInt8(packed, a.data(), 1, y1.data(), nullptr);
  for (int64_t n = 0; n < c.N; ++n) ASSERT_EQ(y[n], y1[n]) << "column " << n;
}

TEST(MatmulNBitsKernel, PackedWeightsLieOnLargePages) {
  // The packed codes and scales are read whole by every run: they live on AllocateLargePages
  // memory (huge pages), never on malloc'd 4 KiB pages (see LargePageAllocator), in both layouts.
  const Case c{0, 2048, 1024, 8, 32, 1, false};
  CaseData d = MakeCase(c, 5);
  for (bool int8 : {false, true}) {
    d.p.accuracy_level = int8 ? 4 : 0;
    const nbits::Packed packed = nbits::Pack(d.p, d.in(), int8);
    ASSERT_GE(packed.codes.size(), size_t{2} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.codes.data()) % kHugePageBytes, 0u) << "int8 " << int8;
    ASSERT_GE(packed.scale.size() * sizeof(float), kLargePagesMinBytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.scale.data()) % PageSize(), 0u) << "int8 " << int8;
  }
}

TEST(MatmulNBitsInt8, KOrderInt8CodesFallBackToFp32) {
  if (nbits::ResolveIsa(nullptr) != nbits::Isa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  // 8-bit codes packed for the fp32 kernels (K order) must not be read by the int8 kernel.
  const Case c{0, 200, 9, 8, 32, 1, true};
  CaseData d = MakeCase(c, 41);
  const nbits::Packed packed = nbits::Pack(d.p, d.in());
  ASSERT_FALSE(packed.int8_layout);
  const std::vector<float> a = RandomA(3 * c.K, 4);
  std::vector<float> y(3 * c.N);
  nbits::PackedMatMulInt8(packed, a.data(), 3, y.data(), nullptr);
  ExpectClose(Oracle(d, a, 3), y, c.K, "fp32 fallback");
}

TEST(MatmulNBitsInt8, Int8PathChooser) {
  nbits::Params p;
  p.accuracy_level = 4;
  // Only AVX-512 with VNNI runs int8 activations; a capped ISA never does.
  EXPECT_EQ(nbits::UseInt8Path(p, nbits::Isa::kAvx512), nbits::HasAvx512Vnni());
  EXPECT_FALSE(nbits::UseInt8Path(p, nbits::Isa::kAvx2));
  EXPECT_FALSE(nbits::UseInt8Path(p, nbits::Isa::kScalar));
  for (int64_t level : {0, 1, 2, 3}) {
    p.accuracy_level = level;
    EXPECT_FALSE(nbits::UseInt8Path(p, nbits::Isa::kAvx512)) << level;
  }
}

// ---- session-level tests: models built with the onnx protobuf API ----

void SetType(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

template <typename T>
void AddInit(onnx::GraphProto* g, const std::string& name, onnx::TensorProto::DataType dt, const Shape& dims,
             const T* data, size_t count) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(dt);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data), count * sizeof(T)));
}

void SetAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == name) {
      a.set_i(v);
      return;
    }
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

onnx::ModelProto NBitsModel(const Case& c, const CaseData& d) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  op = m.add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("nbits");
  SetType(g->add_input(), "A", {c.M, c.K});
  SetType(g->add_output(), "Y", {c.M, c.N});
  AddInit(g, "B", onnx::TensorProto::UINT8, d.b.shape(), d.b.data<uint8_t>(), d.b.num_elements());
  AddInit(g, "S", onnx::TensorProto::FLOAT, d.scales.shape(), d.scales.data<float>(), d.scales.num_elements());
  auto* n = g->add_node();
  n->set_name("qmm");
  n->set_op_type("MatMulNBits");
  n->set_domain("com.microsoft");
  n->add_input("A");
  n->add_input("B");
  n->add_input("S");
  if (d.zp.valid()) {
    if (d.zp.dtype() == DataType::kFloat) {
      AddInit(g, "Z", onnx::TensorProto::FLOAT, d.zp.shape(), d.zp.data<float>(), d.zp.num_elements());
    } else {
      AddInit(g, "Z", onnx::TensorProto::UINT8, d.zp.shape(), d.zp.data<uint8_t>(), d.zp.num_elements());
    }
  }
  if (d.zp.valid() || d.bias.valid()) n->add_input(d.zp.valid() ? "Z" : "");
  if (d.bias.valid()) {
    AddInit(g, "bias", onnx::TensorProto::FLOAT, d.bias.shape(), d.bias.data<float>(), d.bias.num_elements());
    n->add_input("");
    n->add_input("bias");
  }
  n->add_output("Y");
  SetAttr(n, "K", c.K);
  SetAttr(n, "N", c.N);
  SetAttr(n, "bits", c.bits);
  SetAttr(n, "block_size", c.block_size);
  return m;
}

Result<std::unique_ptr<Session>> CreateSession(const onnx::ModelProto& m, bool reference = false) {
  std::string bytes;
  m.SerializeToString(&bytes);
  SessionOptions so;
  so.threads = 2;
  so.kernel.prefer_reference = reference;
  return Session::CreateFromBytes(bytes.data(), bytes.size(), so);
}

std::vector<float> RunModel(Session& s, const std::string& input, const std::vector<float>& a, Shape shape) {
  Tensor t = Tensor::FromVector(a, std::move(shape));
  auto r = s.Run({{input, Value(t)}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  const Tensor& y = (*r)[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements());
}

TEST(MatmulNBitsSession, OptimizedAndReferenceAgree) {
  for (const Case& c : {Case{1, 100, 9, 4, 32, 1, true}, Case{17, 64, 5, 8, 16, 2, false},
                        Case{16, 96, 33, 4, 16, 0, true}, Case{3, 300, 4, 8, 128, 1, true}}) {
    CaseData d = MakeCase(c, 7);
    onnx::ModelProto m = NBitsModel(c, d);
    auto fast = CreateSession(m);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    auto ref = CreateSession(m, true);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_EQ((*fast)->assignments()[0].impl, nbits::IsaName(nbits::ResolveIsa(std::getenv("STRATA_FORCE_ISA"))));
    EXPECT_EQ((*ref)->assignments()[0].impl, "ref");
    const std::vector<float> a = RandomA(c.M * c.K, 3);
    const std::vector<float> want = Oracle(d, a, c.M);
    ExpectClose(want, RunModel(**fast, "A", a, {c.M, c.K}), c.K, "optimized");
    ExpectClose(want, RunModel(**ref, "A", a, {c.M, c.K}), c.K, "reference");
  }
}

// A product over 2^34 multiply-adds runs in chunks of rows (so the run's deadline is read
// between them): each row must come out as it does from an unchunked run, on the fp32 and
// (with VNNI) the int8 path. 2500 x 4096 x 4096 (4.2 * 10^10) runs as chunks of 1024 and
// 1476 rows; runs of its first 1100 and last 1400 rows alone are not chunked, and group the
// rows differently (rows 1024-1099 go with the first chunk's there).
TEST(MatmulNBitsSession, RowChunksMatchSeparateRuns) {
  for (int64_t level : {0, 4}) {
    SCOPED_TRACE("accuracy_level " + std::to_string(level));
    const Case big{2500, 4096, 4096, 4, 32, 1, true};
    CaseData d = MakeCase(big, 31);
    const std::vector<float> a = RandomA(big.M * big.K, 9);
    auto session_for = [&](int64_t rows) {
      Case c = big;
      c.M = rows;
      onnx::ModelProto m = NBitsModel(c, d);
      if (level) SetAttr(m.mutable_graph()->mutable_node(0), "accuracy_level", level);
      return CreateSession(m);
    };
    auto whole = session_for(big.M);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    const std::vector<float> all = RunModel(**whole, "A", a, {big.M, big.K});
    ASSERT_EQ(all.size(), static_cast<size_t>(big.M * big.N));
    for (auto [m0, rows] : {std::pair<int64_t, int64_t>{0, 1100}, {1100, 1400}}) {
      auto part = session_for(rows);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      const std::vector<float> slice(a.begin() + m0 * big.K, a.begin() + (m0 + rows) * big.K);
      const std::vector<float> got = RunModel(**part, "A", slice, {rows, big.K});
      ASSERT_EQ(got.size(), static_cast<size_t>(rows * big.N));
      for (int64_t i = 0; i < rows * big.N; ++i)
        ASSERT_EQ(got[i], all[m0 * big.N + i]) << "row " << m0 + i / big.N << " column " << i % big.N;
    }
  }
}

TEST(MatmulNBitsSession, ForcedIsaEnvVariable) {
  const char* old = std::getenv("STRATA_FORCE_ISA");
  const std::string saved = old ? old : "";
  Case c{5, 70, 6, 4, 32, 1, true};
  CaseData d = MakeCase(c, 11);
  const std::vector<float> a = RandomA(c.M * c.K, 5);
  const std::vector<float> want = Oracle(d, a, c.M);
  for (const char* isa : {"scalar", "avx2"}) {
    setenv("STRATA_FORCE_ISA", isa, 1);
    auto s = CreateSession(NBitsModel(c, d));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ExpectClose(want, RunModel(**s, "A", a, {c.M, c.K}), c.K, isa);
  }
  if (old) {
    setenv("STRATA_FORCE_ISA", saved.c_str(), 1);
  } else {
    unsetenv("STRATA_FORCE_ISA");
  }
}

TEST(MatmulNBitsSession, AccuracyLevel4UsesInt8OnlyWithVnni) {
  const char* old = std::getenv("STRATA_FORCE_ISA");
  const std::string saved = old ? old : "";
  unsetenv("STRATA_FORCE_ISA");
  for (const Case& c : {Case{1, 300, 9, 4, 32, 1, true}, Case{17, 96, 7, 8, 16, 0, false}}) {
    CaseData d = MakeCase(c, 21);
    onnx::ModelProto m = NBitsModel(c, d);
    SetAttr(m.mutable_graph()->mutable_node(0), "accuracy_level", 4);
    const std::vector<float> a = RandomA(c.M * c.K, 8);
    const std::vector<float> want = Oracle(d, a, c.M);
    auto s = CreateSession(m);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const std::vector<float> got = RunModel(**s, "A", a, {c.M, c.K});
    if (nbits::HasAvx512Vnni()) {
      ExpectWithinInt8Bound(want, got, Int8Bound(d, a, c.M), c.K, "level 4");
      // The int8 path really ran: its rounding is visible against the fp32 oracle.
      double diff = 0;
      for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(static_cast<double>(want[i]) - got[i]));
      EXPECT_GT(diff, 1e-6);
    } else {
      ExpectClose(want, got, c.K, "level 4 without VNNI computes in fp32");
    }
    // A capped ISA has no int8 path: level 4 then computes in fp32.
    setenv("STRATA_FORCE_ISA", "avx2", 1);
    auto capped = CreateSession(m);
    ASSERT_TRUE(capped.ok()) << capped.status().ToString();
    ExpectClose(want, RunModel(**capped, "A", a, {c.M, c.K}), c.K, "level 4, avx2");
    unsetenv("STRATA_FORCE_ISA");
  }
  if (old) setenv("STRATA_FORCE_ISA", saved.c_str(), 1);
}

void ExpectRejected(const onnx::ModelProto& m, StatusCode code, const std::vector<std::string>& needles) {
  for (bool ref : {false, true}) {
    auto s = CreateSession(m, ref);
    ASSERT_FALSE(s.ok()) << "accepted a bad model";
    EXPECT_EQ(s.status().code(), code) << s.status().ToString();
    for (const auto& n : needles) EXPECT_NE(s.status().message().find(n), std::string::npos) << s.status().message();
  }
}

TEST(MatmulNBitsSession, RejectsBadAttributesAndInputs) {
  const Case c{2, 64, 8, 4, 32, 1, true};
  const CaseData d = MakeCase(c, 13);
  const onnx::ModelProto good = NBitsModel(c, d);
  ASSERT_TRUE(CreateSession(good).ok());
  auto node = [](onnx::ModelProto& m) { return m.mutable_graph()->mutable_node(0); };
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "K", 96);  // K inconsistent with B's blocks
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'K'=96", "blocks"});
  }
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "N", 9);
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'N'=9"});
  }
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "block_size", 16);  // K=64 then needs 4 blocks, B has 2
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'block_size'=16"});
  }
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "block_size", 24);
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'block_size'", "power of two"});
  }
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "bits", 3);
    ExpectRejected(m, StatusCode::kUnsupported, {"'qmm'", "'bits'", "4 or 8"});
  }
  {
    onnx::ModelProto m = good;
    SetAttr(node(m), "bits", 8);  // 8-bit needs 32 bytes per block, B has 16
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'block_size'=32", "'bits'=8"});
  }
  {
    onnx::ModelProto m = good;
    auto* s = m.mutable_graph()->mutable_initializer(1);
    s->clear_dims();
    s->add_dims(c.N * 2 - 1);
    s->set_raw_data(s->raw_data().substr(0, (c.N * 2 - 1) * 4));
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "scales", "16 elements"});
  }
  {
    onnx::ModelProto m = good;
    auto* z = m.mutable_graph()->mutable_initializer(2);
    z->set_dims(0, 3);
    z->set_raw_data(z->raw_data().substr(0, 3));
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "zero_points"});
  }
  {
    onnx::ModelProto m = good;
    auto* a = node(m)->add_attribute();
    a->set_name("weight_prepacked");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("cuda-sm80");
    ExpectRejected(
        m, StatusCode::kUnsupported,
        {"'qmm'", "weight_prepacked", "prepacked for cuda-sm80", "the CPU kernel needs the standard layout"});
  }
  {
    onnx::ModelProto m = good;
    std::vector<int32_t> gi(c.K);
    for (int64_t k = 0; k < c.K; ++k) gi[k] = static_cast<int32_t>((c.K - 1 - k) / c.block_size);
    AddInit(m.mutable_graph(), "gidx", onnx::TensorProto::INT32, {c.K}, gi.data(), gi.size());
    node(m)->set_input(4, "gidx");
    ExpectRejected(m, StatusCode::kUnsupported, {"'qmm'", "g_idx"});
  }
  {
    onnx::ModelProto m = good;  // the identity g_idx is accepted
    std::vector<int32_t> gi(c.K);
    for (int64_t k = 0; k < c.K; ++k) gi[k] = static_cast<int32_t>(k / c.block_size);
    AddInit(m.mutable_graph(), "gidx", onnx::TensorProto::INT32, {c.K}, gi.data(), gi.size());
    node(m)->set_input(4, "gidx");
    EXPECT_TRUE(CreateSession(m).ok());
  }
  {
    onnx::ModelProto m = good;
    auto* b = m.mutable_graph()->mutable_initializer(3);  // bias
    b->set_dims(0, c.N - 1);
    b->set_raw_data(b->raw_data().substr(0, (c.N - 1) * 4));
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "bias"});
  }
  {
    onnx::ModelProto m = good;
    auto& attrs = *node(m)->mutable_attribute();
    for (int i = 0; i < attrs.size(); ++i)
      if (attrs[i].name() == "K") attrs.DeleteSubrange(i, 1);
    ExpectRejected(m, StatusCode::kInvalidModel, {"'qmm'", "'K'", "missing"});
  }
  {
    // A whose last dimension is not K fails at run time with the node named.
    auto s = CreateSession(good);
    ASSERT_TRUE(s.ok());
    Tensor t = Tensor::FromVector(RandomA(2 * 60, 1), {2, 60});
    auto r = (*s)->Run({{"A", Value(t)}});
    EXPECT_FALSE(r.ok());
  }
}

// ---- quantize round trip on a generated MLP ----

onnx::ModelProto MlpModel(int64_t batch, int64_t in, int64_t hidden, int64_t out) {
  std::mt19937 rng(99);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  SetType(g->add_input(), "X", {batch, in});
  SetType(g->add_output(), "Y", {batch, out});
  std::vector<float> w1(in * hidden), w2(out * hidden), c2(out);
  for (auto& v : w1) v = dist(rng) / std::sqrt(static_cast<float>(in));
  for (auto& v : w2) v = dist(rng) / std::sqrt(static_cast<float>(hidden));
  for (auto& v : c2) v = dist(rng) * 0.1f;
  AddInit(g, "W1", onnx::TensorProto::FLOAT, {in, hidden}, w1.data(), w1.size());
  AddInit(g, "W2", onnx::TensorProto::FLOAT, {out, hidden}, w2.data(), w2.size());
  AddInit(g, "C2", onnx::TensorProto::FLOAT, {out}, c2.data(), c2.size());
  auto* n = g->add_node();
  n->set_name("fc1");
  n->set_op_type("MatMul");
  n->add_input("X");
  n->add_input("W1");
  n->add_output("H");
  // Relu between the layers when this build has it (the elementwise family may be absent).
  const bool relu = CpuKernels().Supports("", "Relu", 17);
  if (relu) {
    n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("H");
    n->add_output("R");
  }
  n = g->add_node();
  n->set_name("fc2");
  n->set_op_type("Gemm");
  n->add_input(relu ? "R" : "H");
  n->add_input("W2");
  n->add_input("C2");
  n->add_output("Y");
  SetAttr(n, "transB", 1);
  return m;
}

// The fp32 MLP's output on a seeded input, and its largest magnitude (the error scale).
struct MlpReference {
  std::vector<float> x, want;
  double max_abs = 0;
};
MlpReference RunFp32(const onnx::ModelProto& fp32, int64_t batch, int64_t in) {
  MlpReference r;
  auto ref = CreateSession(fp32);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  if (!ref.ok()) return r;
  r.x = RandomA(batch * in, 21);
  r.want = RunModel(**ref, "X", r.x, {batch, in});
  for (float v : r.want) r.max_abs = std::max(r.max_abs, std::fabs(static_cast<double>(v)));
  return r;
}

TEST(MatmulNBitsQuantize, MlpRoundTripIsClose) {
  const int64_t batch = 4, in = 200;
  const onnx::ModelProto fp32 = MlpModel(batch, in, 96, 10);
  const MlpReference r = RunFp32(fp32, batch, in);
  ASSERT_FALSE(r.want.empty());
  const std::vector<float>& x = r.x;
  const std::vector<float>& want = r.want;
  const double ref_max = r.max_abs;
  for (int bits : {4, 8})
    for (bool symmetric : {false, true}) {
      std::string in_bytes, out_bytes;
      fp32.SerializeToString(&in_bytes);
      QuantizeOptions opts;
      opts.bits = bits;
      opts.block_size = 32;
      opts.symmetric = symmetric;
      auto rep = QuantizeModelBytes(in_bytes, &out_bytes, opts);
      ASSERT_TRUE(rep.ok()) << rep.status().ToString();
      EXPECT_EQ(rep->quantized, 2);
      EXPECT_LT(out_bytes.size(), in_bytes.size() / (bits == 4 ? 4 : 2));
      onnx::ModelProto q;
      ASSERT_TRUE(q.ParseFromString(out_bytes));
      int nbits_nodes = 0;
      for (const auto& n : q.graph().node()) nbits_nodes += n.op_type() == "MatMulNBits";
      EXPECT_EQ(nbits_nodes, 2);
      for (const auto& t : q.graph().initializer()) EXPECT_NE(t.name(), "W1");  // fp32 weight dropped
      for (bool reference : {false, true}) {
        auto s = CreateSession(q, reference);
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        const std::vector<float> got = RunModel(**s, "X", x, {batch, in});
        ASSERT_EQ(got.size(), want.size());
        double max_err = 0;
        for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - want[i]));
        // int4 with block 32 on random Gaussian weights through two layers (with Relu) keeps
        // the error within 20% of the largest output; int8 within 2%.
        EXPECT_LT(max_err / ref_max, bits == 4 ? 0.20 : 0.02) << "bits=" << bits << " symmetric=" << symmetric;
      }
    }
}

TEST(MatmulNBitsQuantize, ExcludeAndBadOptions) {
  const onnx::ModelProto fp32 = MlpModel(2, 64, 32, 8);
  std::string in_bytes, out_bytes;
  fp32.SerializeToString(&in_bytes);
  QuantizeOptions opts;
  opts.exclude = {"fc2"};
  auto rep = QuantizeModelBytes(in_bytes, &out_bytes, opts);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->quantized, 1);
  ASSERT_EQ(rep->skipped.size(), 1u);
  EXPECT_NE(rep->skipped[0].find("fc2"), std::string::npos);
  opts.block_size = 48;
  EXPECT_EQ(QuantizeModelBytes(in_bytes, &out_bytes, opts).status().code(), StatusCode::kInvalidArgument);
  opts.block_size = 32;
  opts.bits = 2;
  EXPECT_EQ(QuantizeModelBytes(in_bytes, &out_bytes, opts).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeModelBytes("not a model", &out_bytes, QuantizeOptions{}).status().code(),
            StatusCode::kInvalidModel);
}

// `strata quantize --dynamic-int8`: ONNX Runtime's dynamic int8 pattern, which the optimized
// session fuses (DynQuantMatMul on AVX512-VNNI) with the same bits as the reference kernels
// running it unfused; close to fp32.
TEST(DynamicInt8Quantize, MlpRoundTripIsCloseAndFusedBitsMatchUnfused) {
  const int64_t batch = 4, in = 200;
  const onnx::ModelProto fp32 = MlpModel(batch, in, 96, 10);
  const MlpReference r = RunFp32(fp32, batch, in);
  ASSERT_FALSE(r.want.empty());
  const std::vector<float>& x = r.x;
  const std::vector<float>& want = r.want;
  const double ref_max = r.max_abs;
  for (bool per_channel : {false, true}) {
    std::string in_bytes, out_bytes;
    fp32.SerializeToString(&in_bytes);
    QuantizeOptions opts;
    opts.dynamic_int8 = true;
    opts.per_channel = per_channel;
    auto rep = QuantizeModelBytes(in_bytes, &out_bytes, opts);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_EQ(rep->quantized, 2);
    EXPECT_LT(out_bytes.size(), in_bytes.size() / 3);
    onnx::ModelProto q;
    ASSERT_TRUE(q.ParseFromString(out_bytes));
    std::map<std::string, int> ops;
    for (const auto& n : q.graph().node()) ++ops[n.op_type()];
    EXPECT_EQ(ops["DynamicQuantizeLinear"], 2);
    EXPECT_EQ(ops["MatMulInteger"], 2);
    EXPECT_EQ(ops["Cast"], 2);
    EXPECT_EQ(ops["Mul"], 4);
    EXPECT_EQ(ops["Add"], 1);  // fc2's C
    EXPECT_EQ(ops["MatMul"] + ops["Gemm"] + ops["MatMulNBits"], 0);
    for (const auto& t : q.graph().initializer()) EXPECT_TRUE(t.name() != "W1" && t.name() != "W2");
    auto fast = CreateSession(q);
    auto plain = CreateSession(q, true);
    ASSERT_TRUE(fast.ok() && plain.ok());
    int fused = 0;
    for (const auto& a : (*fast)->assignments()) fused += a.op_type == "DynQuantMatMul";
    EXPECT_EQ(fused, int8gemm::Available() ? 2 : 0);
    const std::vector<float> got = RunModel(**fast, "X", x, {batch, in});
    const std::vector<float> unfused = RunModel(**plain, "X", x, {batch, in});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got, unfused) << "per_channel=" << per_channel;
    double max_err = 0;
    for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - want[i]));
    // int8 weights and activations through two layers: within 5% of the largest output.
    EXPECT_LT(max_err / ref_max, 0.05) << "per_channel=" << per_channel;
  }
}

TEST(DynamicInt8Quantize, SharedInputIsQuantizedOnceAndBadOptionsAreRefused) {
  onnx::ModelProto m = MlpModel(2, 64, 32, 8);
  // A second MatMul of X: both read one DynamicQuantizeLinear.
  std::vector<float> w3(64 * 8, 0.25f);
  AddInit(m.mutable_graph(), "W3", onnx::TensorProto::FLOAT, {64, 8}, w3.data(), w3.size());
  auto* n = m.mutable_graph()->add_node();
  n->set_name("side");
  n->set_op_type("MatMul");
  n->add_input("X");
  n->add_input("W3");
  n->add_output("Z");
  SetType(m.mutable_graph()->add_output(), "Z", {2, 8});
  std::string in_bytes, out_bytes;
  m.SerializeToString(&in_bytes);
  QuantizeOptions opts;
  opts.dynamic_int8 = true;
  auto rep = QuantizeModelBytes(in_bytes, &out_bytes, opts);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->quantized, 3);
  onnx::ModelProto q;
  ASSERT_TRUE(q.ParseFromString(out_bytes));
  int dql = 0;
  for (const auto& node : q.graph().node()) dql += node.op_type() == "DynamicQuantizeLinear";
  EXPECT_EQ(dql, 2);  // X once (fc1 and side), fc1's output once
  auto s = CreateSession(q);
  ASSERT_TRUE(s.ok()) << s.status().ToString();

  QuantizeOptions bad;
  bad.per_channel = true;  // without dynamic_int8
  auto r = QuantizeModelBytes(in_bytes, &out_bytes, bad);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--per-channel goes with --dynamic-int8"), std::string::npos);
  onnx::ModelProto old = m;
  old.mutable_opset_import(0)->set_version(10);
  old.SerializeToString(&in_bytes);
  r = QuantizeModelBytes(in_bytes, &out_bytes, opts);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("opset >= 11"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace strata
