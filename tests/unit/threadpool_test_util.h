// Checks shared by the thread-pool tests (concurrency_test.cc, threadpool_colocation_test.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/threadpool.h"

namespace strata::testing {

// Sets *err (if still empty) when some index of `hits` did not run exactly once.
inline void ExpectEachOnce(const std::vector<std::atomic<int>>& hits, const std::string& what, std::string* err) {
  for (size_t i = 0; i < hits.size() && err->empty(); ++i) {
    int h = hits[i].load();
    if (h != 1) *err = what + ": index " + std::to_string(i) + " ran " + std::to_string(h) + " times";
  }
}

// `rounds` regions of `outer` items on `pool` whose chunks each run a nested region of
// `inner` items (grain `inner_grain`) on the same pool. Returns "" when every (outer,
// inner) index ran exactly once, else what went wrong.
inline std::string NestedRegionsError(ThreadPool& pool, int64_t outer, int64_t inner, int64_t inner_grain, int rounds) {
  std::string err;
  for (int round = 0; round < rounds && err.empty(); ++round) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(outer * inner));
    pool.Run(outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        pool.Run(inner, inner_grain, [&](int64_t ib, int64_t ie) {
          for (int64_t i = ib; i < ie; ++i) hits[static_cast<size_t>(o * inner + i)].fetch_add(1);
        });
    });
    ExpectEachOnce(hits, "round " + std::to_string(round), &err);
  }
  return err;
}

}  // namespace strata::testing
