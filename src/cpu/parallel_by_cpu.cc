// The CPU-affine static split (parallel_by_cpu.h).
#include "cpu/parallel_by_cpu.h"

#include <sched.h>

#include <algorithm>
#include <atomic>

namespace strata {

namespace {

// Parts per region: the granularity at which a thread that is done helps a late one.
constexpr int64_t kPartsPerRegion = 4;
// Regions (threads) the on-stack claim flags cover; larger pools use dynamic chunks.
constexpr int64_t kMaxRegions = 64;

struct CpuSplit {
  CpuSplit(ThreadPool::RangeRef f, int64_t items, int64_t threads)
      : fn(f), n(items), regions(threads), parts(threads * kPartsPerRegion) {}

  ThreadPool::RangeRef fn;
  int64_t n, regions, parts;
  std::atomic<uint8_t> taken[kMaxRegions * kPartsPerRegion] = {};  // claim flags, all zero

  // Runs part i if nobody has claimed it yet.
  void Try(int64_t i) {
    if (taken[i].load(std::memory_order_relaxed) || taken[i].exchange(1, std::memory_order_acq_rel)) return;
    const int64_t b = n * i / parts, e = n * (i + 1) / parts;
    if (b < e) fn(b, e);
  }
  // One participant: its CPU's region front to back, then the other regions' leftovers
  // from their ends (where their owners arrive last).
  void Participate(int64_t index) {
    const int cpu = sched_getcpu();
    const int64_t own = cpu >= 0 ? cpu % regions : index % regions;
    for (int64_t j = 0; j < kPartsPerRegion; ++j) Try(own * kPartsPerRegion + j);
    for (int64_t d = 1; d < regions; ++d) {
      const int64_t r = (own + d) % regions;
      for (int64_t j = kPartsPerRegion - 1; j >= 0; --j) Try(r * kPartsPerRegion + j);
    }
  }
};

}  // namespace

void ParallelRangeByCpu(ThreadPool* pool, int64_t n, int64_t grain, ThreadPool::RangeRef fn) {
  const int64_t threads = pool ? pool->num_threads() : 1;
  if (threads <= 1 || n <= grain) return fn(0, n);
  if (threads > kMaxRegions || n < threads * std::max<int64_t>(grain, 1)) return pool->ParallelFor(n, grain, fn);
  CpuSplit s(fn, n, threads);
  pool->RunParticipants(
      threads,
      [](void* ctx, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) static_cast<CpuSplit*>(ctx)->Participate(i);
      },
      &s);
}

}  // namespace strata
