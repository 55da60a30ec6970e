// The MatMulNBits work splits (cpu/matmul_nbits_parallel.h) and the CPU-affine split
// (cpu/parallel_by_cpu.h): every index exactly once on any pool, and the CPU-affine
// split's parts the same on every call.
#include "cpu/matmul_nbits_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "threadpool_test_util.h"

namespace strata {
namespace {

using Split = void (*)(ThreadPool*, int64_t, int64_t, ThreadPool::RangeRef);

// Runs `split` `rounds` times over n items; "" when each round ran every index exactly once
// in non-empty ranges inside [0, n).
std::string SplitError(Split split, ThreadPool* pool, int64_t n, int64_t grain, int rounds) {
  std::string err;
  for (int round = 0; round < rounds && err.empty(); ++round) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<bool> bad_range{false};
    split(pool, n, grain, [&](int64_t b, int64_t e) {
      if (b < 0 || e > n || b >= e) bad_range = true;
      for (int64_t i = std::max<int64_t>(b, 0); i < std::min(e, n); ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    const std::string what =
        "n=" + std::to_string(n) + " grain=" + std::to_string(grain) + " round " + std::to_string(round);
    if (bad_range) err = what + ": a range was empty or outside [0, n)";
    testing::ExpectEachOnce(hits, what, &err);
  }
  return err;
}

TEST(MatmulNBitsParallel, EveryIndexRunsOnceOnAnyPool) {
  ThreadPool one(1), two(2), three(3);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &two, &three})
    for (Split split : {Split{nbits::ParallelRange}, Split{ParallelRangeByCpu}})
      // n below, at and above threads * grain, not a multiple of the parts (8 or 12), and
      // fewer items than parts (empty parts are skipped).
      for (int64_t n : {1, 2, 5, 7, 8, 9, 16, 31, 33, 63, 100, 1023, 1025})
        for (int64_t grain : {1, 4, 16}) {
          const std::string err = SplitError(split, pool, n, grain, 20);
          ASSERT_EQ(err, "") << (pool ? pool->num_threads() : 0) << " threads";
        }
}

TEST(MatmulNBitsParallel, CpuSplitCutsTheSameRangesEveryCall) {
  // Two regions of 4 parts each (the caches keep what each CPU read last call): the ranges
  // are fixed by n and the thread count, whichever thread runs them.
  ThreadPool pool(2);
  if (pool.num_threads() < 2) GTEST_SKIP() << "the process is confined to one CPU";
  const int64_t n = 1001;
  std::vector<std::pair<int64_t, int64_t>> want;
  for (int64_t i = 0; i < 8; ++i) want.emplace_back(n * i / 8, n * (i + 1) / 8);
  for (int round = 0; round < 50; ++round) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> got;
    ParallelRangeByCpu(&pool, n, 16, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      got.emplace_back(b, e);
    });
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(MatmulNBitsParallel, CpuSplitNestedInARegionRunsEveryIndexOnce) {
  // Inside a region of the same pool the split runs inline (the pool's nested-region rule).
  ThreadPool pool(2);
  const int64_t outer = 6, inner = 200;
  std::vector<std::atomic<int>> hits(static_cast<size_t>(outer * inner));
  pool.Run(outer, 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      ParallelRangeByCpu(&pool, inner, 8, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) hits[static_cast<size_t>(o * inner + i)].fetch_add(1);
      });
  });
  std::string err;
  testing::ExpectEachOnce(hits, "nested", &err);
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace strata
