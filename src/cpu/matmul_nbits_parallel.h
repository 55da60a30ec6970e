// How the MatMulNBits kernels split work over the session's thread pool (shared by
// matmul_nbits.cc and matmul_nbits_gemm.cc).
#pragma once

#include <cstdint>

#include "core/threadpool.h"

namespace strata::nbits {

// fn over [0, n) in chunks of at least `grain`, claimed dynamically on the pool; inline
// (one call with the whole range) without a pool.
inline void ParallelRange(ThreadPool* pool, int64_t n, int64_t grain, ThreadPool::RangeRef fn) {
  if (pool) {
    pool->ParallelFor(n, grain, fn);
  } else {
    fn(0, n);
  }
}

// fn over [0, n), split the same way on every call into one contiguous region per pool
// thread, region r run preferably by whichever thread is on a CPU c with c % threads == r.
// For kernels that stream weights the caches keep between runs (a GEMV on weights that fit
// in the L3s): a CPU then reads the same bytes every run, from its own core's caches.
// With dynamic chunks the bytes a thread reads change from run to run, and on this VM
// (each vCPU with its own cache domain) a read of data last read by the other vCPU ran at
// half the rate (2-thread read of 18.5 MiB: 115-120 us with fixed halves, 253-270 us
// with the halves swapped each pass). Each region is cut in a few parts: a thread that
// finishes its region takes the others' remaining parts from their ends (a late or
// preempted thread delays the call by at most one part), so every index runs exactly once
// whatever the scheduling. Regions hold at least `grain` items; fewer items than
// threads * grain fall back to ParallelRange.
void ParallelRangeByCpu(ThreadPool* pool, int64_t n, int64_t grain, ThreadPool::RangeRef fn);

}  // namespace strata::nbits
