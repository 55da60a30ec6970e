// A thread-safe caching allocator: freed buffers go back to per-size free lists
// and are handed out again, so after the first run a session reuses the same
// memory for values whose lifetimes do not overlap instead of calling malloc.
//
// Steady state is heap-free: free blocks are kept in intrusive lists (the link
// lives in the free block itself) and the shared_ptr control blocks of returned
// buffers are recycled from a pool, so once a size class has been seen neither
// Allocate nor a buffer release calls malloc/free. The lock is per allocator
// (per session), never process-wide.
#pragma once

#include <cstddef>
#include <memory>

#include "core/tensor.h"

namespace strata {

class CachingAllocator final : public Allocator {
 public:
  // memory_cap_bytes: 0 = unlimited; otherwise a single allocation above it is refused.
  explicit CachingAllocator(size_t memory_cap_bytes = 0);
  ~CachingAllocator() override;
  Result<std::shared_ptr<Buffer>> Allocate(size_t bytes) override;

  size_t memory_cap() const;
  size_t cached_bytes() const;
  size_t allocation_count() const;  // heap allocations made so far (for tests)

  struct State;  // shared with live buffers so they can return themselves

 private:
  std::shared_ptr<State> state_;
};

// The memory cap of the session that owns `alloc` (0: none, or not a session allocator).
size_t MemoryCapOf(const Allocator* alloc);

}  // namespace strata
