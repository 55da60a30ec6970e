// Weight memory and packing at session creation: AllocateLargePages (core/large_pages.h),
// the SGEMM's B packing (sgemm_pack.cc) with the one-pass conv weight reorder, the GEMV
// weight packing that shares its transposing packer, and the lazily created pthreadpool.
#include <cblas.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "core/kernel.h"
#include "core/large_pages.h"
#include "core/threadpool.h"
#include "cpu/gemm_kernels.h"
#include "cpu/gemv.h"
#include "cpu/rnn_lstm_fused.h"
#include "cpu/sgemm.h"

namespace strata {
namespace {

std::vector<float> Rand(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(LoadPages, LargeBlocksAreZeroedWritableAndAligned) {
  for (size_t bytes : {size_t{1}, size_t{64} << 10, (size_t{2} << 20) - 4, size_t{2} << 20, (size_t{5} << 20) + 12}) {
    SCOPED_TRACE(bytes);
    size_t len = 0;
    auto* p = static_cast<unsigned char*>(AllocateLargePages(bytes, &len));
    ASSERT_NE(p, nullptr);
    EXPECT_GE(len, bytes);
    EXPECT_EQ(len % 4096, 0u);
    EXPECT_LT(len - bytes, 4096u);  // trimmed: no 2 MiB of slack stays mapped
    // Blocks spanning a huge page start on one, so THP can back them.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (bytes >= (size_t{2} << 20) ? size_t{2} << 20 : 4096), 0u);
    bool zero = true;
    for (size_t i = 0; i < len; i += 509) zero &= p[i] == 0;
    EXPECT_TRUE(zero);
    std::memset(p, 0xab, len);
    EXPECT_EQ(p[len - 1], 0xab);
    FreeLargePages(p, len);
  }
  FreeLargePages(nullptr, 0);  // no-op
}

// OIHW -> [M][taps][C] the obvious way, then the generic B^T packing: the reference for
// the one-pass PackConvWeights.
sgemm::PackedB ReferenceConvPack(const std::vector<float>& w, int64_t m, int64_t c, int64_t taps) {
  const int64_t k = c * taps;
  std::vector<float> ohwi(static_cast<size_t>(m * k));
  for (int64_t o = 0; o < m; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t t = 0; t < taps; ++t) ohwi[(o * taps + t) * c + i] = w[(o * c + i) * taps + t];
  auto packed = sgemm::PackB(ohwi.data(), k, m, /*trans_b=*/true);
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  return std::move(packed).value();
}

void ExpectSamePanels(const sgemm::PackedB& a, const sgemm::PackedB& b) {
  ASSERT_EQ(a.k(), b.k());
  ASSERT_EQ(a.n(), b.n());
  for (int64_t p = 0; p < a.panels(); ++p)
    ASSERT_EQ(std::memcmp(a.panel(p), b.panel(p), static_cast<size_t>(a.k() * sgemm::kPanelWidth) * 4), 0)
        << "panel " << p;
}

// Packed by a pool's threads (B of 2^20 floats and more), the panels are those of the
// one-thread packing, for both orientations and conv weights, partial last panel included.
TEST(LoadPack, PoolPackingMatchesOneThread) {
  if (!sgemm::Available()) GTEST_SKIP();
  ThreadPool pool(2);
  for (bool trans : {false, true}) {
    const int64_t k = 2048, n = 525;  // 1,075,200 floats; last panel 13 columns
    const std::vector<float> b = Rand(k * n, 11);
    auto one = sgemm::PackB(b.data(), k, n, trans);
    auto two = sgemm::PackB(b.data(), k, n, trans, 0, &pool);
    ASSERT_TRUE(one.ok() && two.ok());
    SCOPED_TRACE(trans ? "B^T" : "B");
    ExpectSamePanels(*one, *two);
  }
  const int64_t m = 230, c = 512, taps = 9;  // 1,059,840 floats
  const std::vector<float> w = Rand(m * c * taps, 12);
  auto one = sgemm::PackConvWeights(w.data(), m, c, taps);
  auto two = sgemm::PackConvWeights(w.data(), m, c, taps, &pool);
  ASSERT_TRUE(one.ok() && two.ok());
  ExpectSamePanels(*one, *two);
  ExpectSamePanels(*two, ReferenceConvPack(w, m, c, taps));
}

TEST(LoadPages, SmallBlocksShareChunksAndStayFreshWhenFreed) {
  // Blocks under 2 MiB come from shared huge-page chunks: distinct, page aligned, zeroed,
  // and space freed inside a chunk that is still in use is never handed out again dirty.
  const size_t page = PageSize();
  std::vector<std::pair<char*, size_t>> blocks;
  for (size_t bytes : {size_t{64} << 10, size_t{100} << 10, size_t{1} << 20, size_t{700} << 10, size_t{64} << 10,
                       (size_t{2} << 20) - 1}) {
    size_t mapped = 0;
    char* p = static_cast<char*>(AllocateLargePages(bytes, &mapped));
    ASSERT_NE(p, nullptr);
    ASSERT_GE(mapped, bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
    for (size_t i = 0; i < bytes; i += 509) ASSERT_EQ(p[i], 0) << "block of " << bytes << " byte " << i;
    ASSERT_EQ(p[bytes - 1], 0);
    std::memset(p, 0x5a, bytes);
    for (const auto& [q, len] : blocks) EXPECT_TRUE(p + mapped <= q || q + len <= p) << "blocks overlap";
    blocks.emplace_back(p, mapped);
  }
  // Free every other block, then allocate again: the new blocks are zeroed and do not
  // overlap the ones still alive (whose contents are intact).
  for (size_t i = 0; i < blocks.size(); i += 2) FreeLargePages(blocks[i].first, blocks[i].second);
  for (int round = 0; round < 3; ++round) {
    size_t mapped = 0;
    char* p = static_cast<char*>(AllocateLargePages(size_t{300} << 10, &mapped));
    ASSERT_NE(p, nullptr);
    for (size_t i = 0; i < mapped; i += 997) ASSERT_EQ(p[i], 0);
    for (size_t i = 1; i < blocks.size(); i += 2) {
      const auto& [q, len] = blocks[i];
      EXPECT_TRUE(p + mapped <= q || q + len <= p) << "new block overlaps a live one";
      EXPECT_EQ(q[0], 0x5a);
      EXPECT_EQ(q[len / 2], 0x5a);
    }
    FreeLargePages(p, mapped);
  }
  for (size_t i = 1; i < blocks.size(); i += 2) FreeLargePages(blocks[i].first, blocks[i].second);
  FreeLargePages(nullptr, 0);  // no-op
}

// Inside a LargePageRecycleScope a freed block of 2 MiB or more is handed out again: zeroed
// unless the caller said it writes everything, cut to the asked length (the rest stays
// kept), and every kept block is unmapped when the last scope ends.
bool Mapped(const void* p) {
  unsigned char v = 0;
  return ::mincore(const_cast<void*>(p), 4096, &v) == 0;  // ENOMEM: not mapped
}

TEST(LoadPages, RecycledBlocksInsideAScope) {
  const size_t mib = size_t{1} << 20;
  size_t len_a = 0, len_b = 0, len_c = 0, len_d = 0;
  {
    // Outside a scope a freed block is unmapped at once.
    auto* p = static_cast<unsigned char*>(AllocateLargePages(6 * mib, &len_a));
    ASSERT_NE(p, nullptr);
    FreeLargePages(p, len_a);
    EXPECT_FALSE(Mapped(p));
  }
  unsigned char* a = nullptr;
  {
    LargePageRecycleScope scope;
    {
      LargePageRecycleScope nested;  // scopes nest: only the outer one's end unmaps
    }
    a = static_cast<unsigned char*>(AllocateLargePages(6 * mib, &len_a));
    ASSERT_NE(a, nullptr);
    std::memset(a, 0x77, len_a);
    FreeLargePages(a, len_a);
    EXPECT_TRUE(Mapped(a)) << "kept for reuse";
    // zeroed = false: the same memory, contents as they were; 3 MiB of the 6 (the first
    // 4 MiB stay with the block, the 2 MiB past them are kept on their own).
    auto* b = static_cast<unsigned char*>(AllocateLargePages(3 * mib, &len_b, /*zeroed=*/false));
    ASSERT_EQ(b, a);
    EXPECT_EQ(len_b, 3 * mib);
    EXPECT_EQ(b[0], 0x77);
    EXPECT_EQ(b[len_b - 1], 0x77);
    EXPECT_FALSE(Mapped(a + 3 * mib)) << "the cut-off slack up to 4 MiB is unmapped";
    // The kept 2 MiB rest, asked for with zeroing: zero although it held 0x77.
    auto* c = static_cast<unsigned char*>(AllocateLargePages(2 * mib, &len_c));
    ASSERT_EQ(c, a + 4 * mib);
    bool zero = true;
    for (size_t i = 0; i < len_c; i += 509) zero &= c[i] == 0;
    EXPECT_TRUE(zero && c[len_c - 1] == 0);
    // Nothing kept fits 5 MiB: a fresh (zero) mapping.
    auto* d = static_cast<unsigned char*>(AllocateLargePages(5 * mib, &len_d, /*zeroed=*/false));
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(d + len_d <= a || a + len_a <= d);
    EXPECT_EQ(d[0], 0);
    FreeLargePages(b, len_b);
    FreeLargePages(c, len_c);
    FreeLargePages(d, len_d);
    EXPECT_TRUE(Mapped(b) && Mapped(c) && Mapped(d));
  }
  EXPECT_FALSE(Mapped(a)) << "the scope's end unmaps what it kept";
  EXPECT_FALSE(Mapped(a + 4 * mib));
}

// Small short-lived blocks (weight payloads read for packing) never share a chunk with
// lasting ones, so freeing them gives their chunk back even while lasting blocks live.
TEST(LoadPages, ShortLivedSmallBlocksHaveChunksOfTheirOwn) {
  if (!LargePagesUsable()) GTEST_SKIP() << "no transparent huge pages: small blocks are mappings of their own";
  const size_t kib = 1024;
  size_t len_a = 0, len_b = 0, len_c = 0;
  auto* lasting = static_cast<unsigned char*>(AllocateLargePages(300 * kib, &len_a));
  auto* brief = static_cast<unsigned char*>(AllocateLargePages(300 * kib, &len_b, /*zeroed=*/false, true));
  auto* lasting2 = static_cast<unsigned char*>(AllocateLargePages(300 * kib, &len_c));
  ASSERT_TRUE(lasting && brief && lasting2);
  const auto chunk = [](const void* p) { return reinterpret_cast<uintptr_t>(p) / (size_t{2} << 20); };
  EXPECT_NE(chunk(brief), chunk(lasting));
  EXPECT_NE(chunk(brief), chunk(lasting2));
  EXPECT_EQ(brief[0], 0);
  FreeLargePages(brief, len_b);
  EXPECT_FALSE(Mapped(brief)) << "its chunk held nothing else";
  EXPECT_TRUE(Mapped(lasting) && Mapped(lasting2));
  FreeLargePages(lasting, len_a);
  FreeLargePages(lasting2, len_c);
}

TEST(LoadPages, ConcurrentSmallBlocksAreDistinct) {
  // Sessions are created concurrently: the shared chunks must hand each thread its own block.
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        size_t mapped = 0;
        const size_t bytes = (size_t{64} << 10) + static_cast<size_t>(t * 4096 + i * 512);
        auto* p = static_cast<unsigned char*>(AllocateLargePages(bytes, &mapped));
        if (!p) {
          ++bad;
          continue;
        }
        for (size_t k = 0; k < bytes; k += 4096) bad += p[k] != 0;
        std::memset(p, t + 1, bytes);
        for (size_t k = 0; k < bytes; k += 4096) bad += p[k] != t + 1;
        FreeLargePages(p, mapped);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(LoadPages, LargePageVectorPlacesBlocksByTheirSize) {
  // LargePageVector (packed weights): >= kLargePagesMinBytes on AllocateLargePages memory
  // (2 MiB aligned from 2 MiB, page aligned below: huge pages when THP is usable), smaller
  // blocks 64-byte aligned; contents survive growth, copies and moves, and all of it frees.
  const size_t page = PageSize();
  LargePageVector<uint8_t> big(size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % kHugePageBytes, 0u);
  for (size_t i = 0; i < big.size(); i += 4093) ASSERT_EQ(big[i], 0);
  LargePageVector<float> mid(size_t{100} << 8, 1.5f);  // 100 KiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mid.data()) % page, 0u);
  LargePageVector<float> small(100, 2.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  LargePageVector<float> empty;
  EXPECT_EQ(empty.size(), 0u);
  // Growth from a small block through a chunk block to a mapping of its own.
  LargePageVector<uint32_t> grow;
  for (uint32_t i = 0; i < (1u << 20); ++i) grow.push_back(i * 7u);
  for (uint32_t i = 0; i < (1u << 20); i += 997) ASSERT_EQ(grow[i], i * 7u);
  LargePageVector<uint32_t> copy = grow;
  LargePageVector<uint32_t> moved = std::move(grow);
  EXPECT_EQ(copy, moved);
  copy.assign(10, 3u);
  copy.shrink_to_fit();
  EXPECT_EQ(copy, LargePageVector<uint32_t>(10, 3u));
  EXPECT_EQ(mid[mid.size() - 1], 1.5f);
  EXPECT_EQ(small[99], 2.0f);
}

TEST(LoadPack, ConvWeightsPackInOnePassLikeReorderThenPack) {
  struct Case {
    int64_t m, c, taps;
  };
  // Partial last panels, 1x1 and 3x3/7x7 taps, small and > 64 KiB (AllocateLargePages) sizes,
  // and >= sgemm::kStreamPackBytes (4.8 MB: stored non-temporally; checked below that one case is).
  bool streamed = false;
  for (Case cs : {Case{1, 1, 1}, Case{5, 3, 9}, Case{32, 16, 1}, Case{33, 7, 9}, Case{64, 3, 49}, Case{70, 64, 9},
                  Case{256, 128, 9}, Case{520, 256, 9}}) {
    streamed = streamed || cs.m * cs.c * cs.taps * 4 >= sgemm::kStreamPackBytes;
    SCOPED_TRACE("M=" + std::to_string(cs.m) + " C=" + std::to_string(cs.c) + " taps=" + std::to_string(cs.taps));
    std::vector<float> w = Rand(cs.m * cs.c * cs.taps, 7);
    auto packed = sgemm::PackConvWeights(w.data(), cs.m, cs.c, cs.taps);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    EXPECT_EQ(packed->k(), cs.c * cs.taps);
    EXPECT_EQ(packed->n(), cs.m);
    ExpectSamePanels(*packed, ReferenceConvPack(w, cs.m, cs.c, cs.taps));
    // And straight from the definition: packed (k = t * C + i, n = o) is W[o][i][t].
    for (int64_t o = 0; o < cs.m; ++o)
      for (int64_t i = 0; i < cs.c; ++i)
        for (int64_t t = 0; t < cs.taps; ++t)
          ASSERT_EQ(packed->panel(o / sgemm::kPanelWidth)[(t * cs.c + i) * sgemm::kPanelWidth + o % sgemm::kPanelWidth],
                    w[(o * cs.c + i) * cs.taps + t])
              << "o=" << o << " i=" << i << " t=" << t;
    // Padding columns of the last panel are zero.
    const int64_t last = packed->panels() - 1, cols = cs.m - last * sgemm::kPanelWidth;
    for (int64_t kk = 0; kk < packed->k(); ++kk)
      for (int64_t j = cols; j < sgemm::kPanelWidth; ++j)
        ASSERT_EQ(packed->panel(last)[kk * sgemm::kPanelWidth + j], 0.0f);
  }
  EXPECT_TRUE(streamed) << "no case reaches sgemm::kStreamPackBytes";
}

TEST(LoadPack, PackBLayoutForBothOrientationsAndSizes) {
  // Element (kk, n) of B lands at panel n/32, row kk, column n%32, for both orientations,
  // from small (aligned_alloc) to large (AllocateLargePages) packed sizes; reused storage
  // (PackBInto into a larger PackedB) must zero the new padding too.
  sgemm::PackedB reused;
  for (int64_t k : {int64_t{3}, int64_t{300}}) {
    for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{64}, int64_t{200}}) {
      for (bool trans : {false, true}) {
        SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n) + (trans ? " trans" : ""));
        const int64_t ldb = (trans ? k : n) + 3;
        std::vector<float> b = Rand((trans ? n : k) * ldb, 11);
        auto packed = sgemm::PackB(b.data(), k, n, trans, ldb);
        ASSERT_TRUE(packed.ok()) << packed.status().ToString();
        // Dirty the reused storage first so stale values would show.
        std::vector<float> junk(static_cast<size_t>((k + 1) * (n + 32)), 9.0f);
        ASSERT_TRUE(sgemm::PackBInto(junk.data(), k + 1, n + 32, 0, false, &reused).ok());
        ASSERT_TRUE(sgemm::PackBInto(b.data(), k, n, ldb, trans, &reused).ok());
        for (const sgemm::PackedB* pb : {&*packed, &reused}) {
          for (int64_t kk = 0; kk < k; ++kk)
            for (int64_t j = 0; j < pb->panels() * sgemm::kPanelWidth; ++j) {
              const float want = j < n ? (trans ? b[j * ldb + kk] : b[kk * ldb + j]) : 0.0f;
              ASSERT_EQ(pb->panel(j / sgemm::kPanelWidth)[kk * sgemm::kPanelWidth + j % sgemm::kPanelWidth], want)
                  << "k=" << kk << " n=" << j;
            }
        }
      }
    }
  }
}

TEST(LoadPack, GemvWeightsPackBothOrientationsExactly) {
  // Small and > 64 KiB (AllocateLargePages) packed sizes, partial panels, alpha 1 and not.
  for (int64_t k : {int64_t{5}, int64_t{333}}) {
    for (int64_t n : {int64_t{3}, int64_t{64}, int64_t{150}}) {
      for (bool nk : {false, true}) {
        for (float alpha : {1.0f, 0.37f}) {
          SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n) + (nk ? " [N,K]" : " [K,N]") +
                       " alpha=" + std::to_string(alpha));
          std::vector<float> b = Rand(k * n, 5), bias = Rand(n, 6);
          auto w = GemvWeights::Pack(b.data(), k, n, nk, alpha, bias.data());
          ASSERT_TRUE(w.ok()) << w.status().ToString();
          for (int64_t kk = 0; kk < k; ++kk)
            // Every packed column, the zero padding of the (possibly narrower) last panel too.
            for (int64_t j = 0; j < (w->panels() - 1) * kGemvPanel + w->panel_width(w->panels() - 1); ++j) {
              const float want = j < n ? alpha * (nk ? b[j * k + kk] : b[kk * n + j]) : 0.0f;
              ASSERT_EQ(w->at(kk, j), want) << "k=" << kk << " n=" << j;
            }
          for (int64_t j = 0; j < n; ++j) ASSERT_EQ(w->bias()[j], bias[j]);
        }
      }
    }
  }
}

TEST(LoadPack, TransposedColumnsWriteOnlyTheirColumns) {
  // A run of 5 columns at column 7 of a 64-wide panel: masked stores and the scalar tail
  // leave every other column as it was (PackRows fills one panel from several runs).
  for (int64_t k : {int64_t{3}, int64_t{37}}) {
    SCOPED_TRACE(k);
    const int64_t ldb = k + 2, width = 64;
    std::vector<float> b = Rand(20 * ldb, 3), dst(static_cast<size_t>(k * width), 7.0f);
    sgemm::PackTransposedColumns(b.data(), ldb, k, 1, /*n0=*/9, /*cols=*/5, width, dst.data() + 7);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < width; ++j) {
        const float want = j >= 7 && j < 12 ? b[(9 + j - 7) * ldb + kk] : 7.0f;
        ASSERT_EQ(dst[kk * width + j], want) << "k=" << kk << " col=" << j;
      }
  }
}

TEST(LoadPack, GemvWeightsPackRowsMatchesPackOfTheReorderedMatrix) {
  // Columns taken from rows of a strided source in runs, out of order and with gaps (-1:
  // zero columns), small and > 64 KiB (AllocateLargePages) sizes: exactly what packing an
  // explicitly reordered [N, K] copy gives.
  for (int64_t k : {int64_t{1}, int64_t{19}, int64_t{260}}) {
    for (int64_t n : {int64_t{5}, int64_t{64}, int64_t{150}}) {
      SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n));
      const int64_t src_rows = 2 * n + 3, ldb = k + 5;
      std::vector<float> src = Rand(src_rows * ldb, 21), bias = Rand(n, 22);
      std::vector<int64_t> rows(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) rows[j] = j % 7 == 3 ? -1 : (j < n / 2 ? j + 2 : src_rows - 1 - j);
      std::vector<float> reordered(static_cast<size_t>(n * k), 0.0f);
      for (int64_t j = 0; j < n; ++j)
        if (rows[j] >= 0) std::memcpy(&reordered[j * k], &src[rows[j] * ldb], k * sizeof(float));
      auto want = GemvWeights::Pack(reordered.data(), k, n, /*b_is_nk=*/true, 1.0f, bias.data());
      auto got = GemvWeights::PackRows(src.data(), ldb, k, n, rows.data(), bias.data());
      ASSERT_TRUE(want.ok() && got.ok());
      ASSERT_EQ(got->panels(), want->panels());
      // Stored columns: the last panel holds only its columns rounded up to 16.
      const int64_t stored = (got->panels() - 1) * kGemvPanel + got->panel_width(got->panels() - 1);
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < stored; ++j) ASSERT_EQ(got->at(kk, j), want->at(kk, j)) << "k=" << kk << " n=" << j;
      for (int64_t j = 0; j < got->panels() * kGemvPanel; ++j) ASSERT_EQ(got->bias()[j], want->bias()[j]);
    }
  }
  std::vector<float> src(8, 1.0f);
  std::vector<int64_t> rows = {0, 1};
  auto bad = GemvWeights::PackRows(src.data(), 2, 4, 2, rows.data(), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("row stride 2 is shorter than K=4"), std::string::npos)
      << bad.status().ToString();
}

TEST(LoadPack, LstmFusedPackMatchesGateInterleavedCopy) {
  // lstm_fused::Pack packs W and R straight from the constants; the result must equal
  // packing explicit gate-interleaved copies (column (p, g, u) = row g*H + p*16 + u, zero
  // past H; bias Wb + Rb), at hidden sizes with and without a partial panel.
  for (int64_t hidden : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{40}, int64_t{130}}) {
    for (int64_t input : {int64_t{3}, int64_t{33}}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE("H=" + std::to_string(hidden) + " I=" + std::to_string(input) + (with_bias ? " bias" : ""));
        const int64_t H = hidden, I = input, U = lstm_fused::kUnits;
        const int64_t panels = (H + U - 1) / U, cols = panels * kGemvPanel;
        std::vector<float> w = Rand(4 * H * I, 31), r = Rand(4 * H * H, 32), b = Rand(8 * H, 33);
        std::vector<float> wp(static_cast<size_t>(cols * I), 0.0f), rp(static_cast<size_t>(cols * H), 0.0f),
            bias(static_cast<size_t>(cols), 0.0f);
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t g = 0; g < 4; ++g)
            for (int64_t u = 0; u < U && p * U + u < H; ++u) {
              const int64_t col = p * kGemvPanel + g * U + u, row = g * H + p * U + u;
              std::memcpy(&wp[col * I], &w[row * I], I * sizeof(float));
              std::memcpy(&rp[col * H], &r[row * H], H * sizeof(float));
              if (with_bias) bias[col] = b[row] + b[4 * H + row];
            }
        auto want_w = GemvWeights::Pack(wp.data(), I, cols, true, 1.0f, bias.data());
        auto want_r = GemvWeights::Pack(rp.data(), H, cols, true, 1.0f, nullptr);
        auto got = lstm_fused::Pack(sgemm::WeightRows{w.data(), nullptr}, sgemm::WeightRows{r.data(), nullptr}, 0,
                                    with_bias ? b.data() : nullptr, H, I);
        ASSERT_TRUE(want_w.ok() && want_r.ok() && got.ok()) << got.status().ToString();
        for (int64_t kk = 0; kk < I; ++kk)
          for (int64_t j = 0; j < cols; ++j)
            ASSERT_EQ(got->w.at(kk, j), want_w->at(kk, j)) << "W k=" << kk << " n=" << j;
        for (int64_t kk = 0; kk < H; ++kk)
          for (int64_t j = 0; j < cols; ++j)
            ASSERT_EQ(got->r.at(kk, j), want_r->at(kk, j)) << "R k=" << kk << " n=" << j;
        for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(got->w.bias()[j], bias[j]);
      }
    }
  }
}

int ThreadsInProcess() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST(LoadPool, PthreadpoolIsCreatedOnFirstUse) {
  EXPECT_EQ(ThreadPool(1).handle(), nullptr);
  const int before = ThreadsInProcess();
  ThreadPool pool(2);
  // A thread allowed on one CPU only (e.g. under `taskset -c 0`) gets a one-thread pool.
  if (pool.num_threads() == 1) GTEST_SKIP() << "the calling thread may run on one CPU only";
  // Session creation starts only strata's own worker: the pthreadpool's workers, which
  // spin after they start, wait until an XNNPACK kernel asks for the handle.
  EXPECT_EQ(ThreadsInProcess(), before + 1);
  pthreadpool* h = pool.handle();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(pool.handle(), h);  // created once
  EXPECT_GT(ThreadsInProcess(), before + 1);
}

// OpenBLAS's pthread build starts a worker per CPU when it loads, which spins before it
// sleeps; setting up the CPU kernels (the first session) joins them, and BLAS stays on one
// thread. Under ctest this runs in a process of its own, so nothing else has done it yet.
TEST(LoadPool, CpuKernelsStopOpenBlasWorkers) {
  const int before = ThreadsInProcess();
  (void)CpuKernels();
  EnsureBlasSingleThreaded();  // idempotent
  EXPECT_EQ(openblas_get_num_threads(), 1);
  EXPECT_LE(ThreadsInProcess(), before);
  EXPECT_EQ(ThreadsInProcess(), 1) << "threads left besides the caller (OpenBLAS workers?)";
  // BLAS still works, on the caller.
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[3], 50.0f);
  EXPECT_EQ(ThreadsInProcess(), 1);
}

TEST(LoadPack, BadConvWeightArgumentsGiveClearErrors) {
  std::vector<float> w(64, 1.0f);
  auto neg = sgemm::PackConvWeights(w.data(), -1, 4, 9);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("negative size M=-1"), std::string::npos) << neg.status().ToString();
  auto null_w = sgemm::PackConvWeights(nullptr, 4, 4, 9);
  ASSERT_FALSE(null_w.ok());
  EXPECT_NE(null_w.status().message().find("W is null"), std::string::npos) << null_w.status().ToString();
  auto huge = sgemm::PackConvWeights(w.data(), int64_t{1} << 30, int64_t{1} << 30, int64_t{1} << 20);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos) << huge.status().ToString();
  // Empty K: nothing to pack, still a valid (empty) operand.
  auto empty = sgemm::PackConvWeights(w.data(), 4, 0, 9);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->k(), 0);
  EXPECT_EQ(empty->n(), 4);
}

}  // namespace
}  // namespace strata
