// How the MatMulNBits kernels split work over the session's thread pool (shared by
// matmul_nbits.cc and matmul_nbits_gemm.cc).
#pragma once

#include <cstdint>

#include "core/threadpool.h"
#include "cpu/parallel_by_cpu.h"

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

// The CPU-affine split of the GEMVs and the level-0 GEMM: strata::ParallelRangeByCpu
// (cpu/parallel_by_cpu.h).

}  // namespace strata::nbits
