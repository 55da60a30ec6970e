// A thread-safe caching allocator: freed buffers go back to per-size free lists
// and are handed out again, so after the first run a session reuses the same
// memory for values whose lifetimes do not overlap instead of calling malloc.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace strata {

class CachingAllocator final : public Allocator {
 public:
  // memory_cap_bytes: 0 = unlimited; otherwise a single allocation above it is refused.
  explicit CachingAllocator(size_t memory_cap_bytes = 0);
  ~CachingAllocator() override;
  Result<std::shared_ptr<Buffer>> Allocate(size_t bytes) override;

  size_t cached_bytes() const;
  size_t allocation_count() const;  // heap allocations made so far (for tests)

  struct State;  // shared with live buffers so they can return themselves

 private:
  std::shared_ptr<State> state_;
};

}  // namespace strata
