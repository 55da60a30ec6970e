// A static, CPU-affine split of a parallel range over the session's thread pool (shared by
// the MatMulNBits kernels and the SGEMM).
#pragma once

#include <cstdint>

#include "core/threadpool.h"

namespace strata {

// fn over [0, n), split the same way on every call into one contiguous region per pool
// thread, region r run preferably by whichever thread is on a CPU c with c % threads == r.
// For kernels whose data the caches keep between calls: weights that fit in the L3s (the
// MatMulNBits GEMVs), or activations a layer wrote for the next one (SGEMM's M blocks: a
// CPU then reads the rows it wrote in the previous layer). A CPU then reads the same bytes
// every call, from its own core's caches.
// With dynamic chunks the bytes a thread reads change from run to run, and on this VM
// (each vCPU with its own cache domain) a read of data last read by the other vCPU ran at
// half the rate (2-thread read of 18.5 MiB: 115-120 us with fixed halves, 253-270 us
// with the halves swapped each pass). Each region is cut in a few parts: a thread that
// finishes its region takes the others' remaining parts from their ends (a late or
// preempted thread delays the call by at most one part), so every index runs exactly once
// whatever the scheduling. Regions hold at least `grain` items; fewer items than
// threads * grain fall back to the pool's dynamic chunks.
void ParallelRangeByCpu(ThreadPool* pool, int64_t n, int64_t grain, ThreadPool::RangeRef fn);

}  // namespace strata
