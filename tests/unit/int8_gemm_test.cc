// The AVX512-VNNI 8-bit GEMM (cpu/int8_gemm.h) against the plain sum of (a - za)(b - zb): every
// signedness of A and B, zero points absent / per tensor / per column / per row, edge sizes
// (empty, 1, K not a multiple of 4, one panel +/- 1, a tile +/- 1), row strides wider than K,
// 1 and 2 threads, and the int32 wrap-around of long sums. Skipped where the CPU lacks VNNI.
#include "cpu/int8_gemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/threadpool.h"

namespace strata {
namespace {

struct Case {
  int64_t rows, k, n;
};

std::vector<uint8_t> RandomBytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

int32_t Val(const uint8_t* p, size_t i, bool s) {
  return s ? static_cast<int32_t>(static_cast<int8_t>(p[i])) : static_cast<int32_t>(p[i]);
}

// zb_mode: 0 none, 1 per tensor, 2 per column. za_mode: 0 scalar, 1 per row.
// prepacked: A given already packed (PackTile from row pointers, as the int8 convs do).
// in_place: AMatrix::read_in_place (A read where it lies where the GEMM can, as 1x1 convs ask).
void Check(const Case& c, bool a_s, bool b_s, int zb_mode, int za_mode, int64_t lda_pad, ThreadPool* pool,
           std::mt19937& rng, bool prepacked = false, bool in_place = false) {
  const int64_t lda = c.k + lda_pad;
  auto a = RandomBytes(static_cast<size_t>(std::max<int64_t>(c.rows * lda, 1)), rng);
  auto b = RandomBytes(static_cast<size_t>(std::max<int64_t>(c.k * c.n, 1)), rng);
  const int64_t zb_count = zb_mode == 0 ? 0 : zb_mode == 1 ? 1 : c.n;
  auto zb = RandomBytes(static_cast<size_t>(std::max<int64_t>(zb_count, 1)), rng);
  std::vector<int32_t> za_rows(static_cast<size_t>(std::max<int64_t>(c.rows, 1)));
  for (auto& z : za_rows) z = Val(RandomBytes(1, rng).data(), 0, a_s);
  const int32_t za = Val(RandomBytes(1, rng).data(), 0, a_s);

  auto packed = int8gemm::Pack(b.data(), b_s, c.k, c.n, zb_count ? zb.data() : nullptr, zb_count);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  int8gemm::AMatrix am;
  am.a = a.data();
  am.a_signed = a_s;
  am.rows = c.rows;
  am.lda = lda;
  am.za = za;
  am.za_rows = za_mode ? za_rows.data() : nullptr;
  am.read_in_place = in_place;
  std::vector<uint32_t> tiles;
  std::vector<int32_t> rowsums;
  if (prepacked) {
    const int64_t T = int8gemm::kTileRows, nt = (c.rows + T - 1) / T, kq = packed->kp() / 4;
    tiles.assign(static_cast<size_t>(std::max<int64_t>(nt * T * kq, 1)), 0xDEADBEEF);
    rowsums.assign(static_cast<size_t>(std::max<int64_t>(c.rows, 1)), 0x5A5A5A5A);
    for (int64_t t = 0; t < nt; ++t) {
      const uint8_t* ptrs[16] = {};
      const int n = static_cast<int>(std::min(T, c.rows - t * T));
      for (int i = 0; i < n; ++i) ptrs[i] = a.data() + (t * T + i) * lda;
      int8gemm::PackTile(ptrs, n, c.k, packed->kp(), a_s, tiles.data() + t * T * kq, rowsums.data() + t * T);
    }
    am.packed = tiles.data();
    am.packed_rowsum = rowsums.data();
  }
  auto bytes = int8gemm::ScratchBytes(am, *packed);
  ASSERT_TRUE(bytes.ok());
  std::vector<uint8_t> scratch(static_cast<size_t>(*bytes) + 64);
  const int64_t ldc = c.n + 3;
  std::vector<int32_t> got(static_cast<size_t>(std::max<int64_t>(c.rows * ldc, 1)), 0x5A5A5A5A);
  ASSERT_TRUE(int8gemm::Gemm(am, *packed, got.data(), ldc, scratch.data(), pool).ok());

  for (int64_t r = 0; r < c.rows; ++r) {
    const int32_t zr = za_mode ? za_rows[static_cast<size_t>(r)] : za;
    for (int64_t j = 0; j < c.n; ++j) {
      const int32_t zc = zb_count == 0 ? 0 : Val(zb.data(), static_cast<size_t>(zb_count == 1 ? 0 : j), b_s);
      uint32_t want = 0;  // mod 2^32, as int32 hardware sums and the ONNX reference
      for (int64_t kk = 0; kk < c.k; ++kk)
        want += static_cast<uint32_t>((Val(a.data(), static_cast<size_t>(r * lda + kk), a_s) - zr) *
                                      (Val(b.data(), static_cast<size_t>(kk * c.n + j), b_s) - zc));
      ASSERT_EQ(static_cast<int32_t>(want), got[static_cast<size_t>(r * ldc + j)])
          << "rows=" << c.rows << " k=" << c.k << " n=" << c.n << " a_signed=" << a_s << " b_signed=" << b_s
          << " zb_mode=" << zb_mode << " za_mode=" << za_mode << " at (" << r << ", " << j << ")";
    }
    // Columns past N (the row stride's padding) are left alone.
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(got[static_cast<size_t>(r * ldc + j)], 0x5A5A5A5A);
  }
}

TEST(Int8Gemm, MatchesPlainSumsAtEdgeSizesForEverySignednessAndZeroPoint) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(7);
  const Case cases[] = {{0, 8, 16},  {3, 0, 5},    {1, 1, 1},   {1, 4, 16},   {1, 5, 17},  {2, 3, 15},
                        {12, 8, 32}, {13, 12, 33}, {11, 7, 31}, {25, 64, 48}, {5, 67, 65}, {37, 133, 70}};
  for (const Case& c : cases)
    for (bool a_s : {false, true})
      for (bool b_s : {false, true})
        for (int zb_mode : {0, 1, 2})
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            Check(c, a_s, b_s, zb_mode, 0, 0, p, rng);
            if (HasFatalFailure()) return;
          }
}

TEST(Int8Gemm, PerRowZeroPointsAndWideRowStrides) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (const Case& c : {Case{7, 20, 9}, Case{30, 36, 40}, Case{13, 5, 3}})
    for (bool a_s : {false, true})
      for (int64_t pad : {0, 1, 5}) {
        Check(c, a_s, !a_s, 2, 1, pad, &pool, rng);
        if (HasFatalFailure()) return;
      }
}

// A packed by the caller (PackTile): partial tiles, K not a multiple of 4 or of 64, both
// signednesses, B with and without a column offset (row sums), per-row zero points.
TEST(Int8Gemm, PrepackedAMatchesPlainSums) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(19);
  for (const Case& c : {Case{1, 1, 1}, Case{11, 7, 31}, Case{13, 147, 64}, Case{25, 64, 48}, Case{40, 576, 33}})
    for (bool a_s : {false, true})
      for (bool b_s : {false, true})
        for (int zb_mode : {0, 2})
          for (int za_mode : {0, 1}) {
            Check(c, a_s, b_s, zb_mode, za_mode, 3, &pool, rng, true);
            if (HasFatalFailure()) return;
          }
}

// Large products split over 2 threads by columns (many panels) and by rows (one panel).
TEST(Int8Gemm, BigProductsOnTwoThreadsMatchOneThread) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(3);
  for (const Case& c : {Case{64, 256, 200}, Case{300, 260, 20}}) {
    Check(c, false, true, 1, 0, 0, &pool, rng);
    Check(c, true, false, 2, 0, 0, &pool, rng);
    if (HasFatalFailure()) return;
  }
}

// A read in place (unsigned, K a multiple of 4, B without a column offset: 1x1 convs): partial
// tiles, wide row strides, per-row zero points, 1 thread and 2 (the row split from 16 tiles);
// where a condition fails (signed A, a column offset, K not a multiple of 4) A is packed.
TEST(Int8Gemm, InPlaceAMatchesPlainSums) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(23);
  for (const Case& c : {Case{1, 4, 16}, Case{13, 16, 33}, Case{25, 64, 48}, Case{300, 96, 40}, Case{200, 20, 64}})
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool})
      for (int64_t pad : {0, 5})
        for (int za_mode : {0, 1}) {
          Check(c, false, true, 0, za_mode, pad, p, rng, false, true);
          Check(c, true, true, 0, za_mode, pad, p, rng, false, true);    // signed A: packed
          Check(c, false, false, 2, za_mode, pad, p, rng, false, true);  // column offset: packed
          if (HasFatalFailure()) return;
        }
  Check(Case{30, 18, 20}, false, true, 0, 0, 0, &pool, rng, false, true);  // K % 4: packed
}

// Sums past 2^31 wrap like the reference: K = 70000 of 255 * 127 each.
TEST(Int8Gemm, LongSumsWrapAroundLikeInt32) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  const int64_t k = 70000;
  std::vector<uint8_t> a(static_cast<size_t>(k), 255), b(static_cast<size_t>(k), 127);
  auto packed = int8gemm::Pack(b.data(), true, k, 1, nullptr, 0);
  ASSERT_TRUE(packed.ok());
  int8gemm::AMatrix am;
  am.a = a.data();
  am.rows = 1;
  am.lda = k;
  auto bytes = int8gemm::ScratchBytes(am, *packed);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, 12 * k);  // one packed tile of A; an s8 B without zero point needs no row sums
  std::vector<uint8_t> scratch(static_cast<size_t>(*bytes));
  int32_t got = 0;
  ASSERT_TRUE(int8gemm::Gemm(am, *packed, &got, 1, scratch.data(), nullptr).ok());
  const uint32_t want = static_cast<uint32_t>(255 * 127) * static_cast<uint32_t>(k);
  EXPECT_EQ(got, static_cast<int32_t>(want));
  EXPECT_LT(got, 0);  // it did wrap
}

TEST(Int8Gemm, BadGeometryIsRefused) {
  uint8_t b = 0;
  auto p = int8gemm::Pack(&b, true, 4, 3, &b, 2);  // 2 zero points for 3 columns
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("zero points=2"), std::string::npos) << p.status().ToString();
  auto huge = int8gemm::Pack(&b, true, int64_t{1} << 40, int64_t{1} << 30, nullptr, 0);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos) << huge.status().ToString();
}

}  // namespace
}  // namespace strata
