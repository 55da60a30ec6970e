#include "core/caching_allocator.h"

#include <cstdlib>

namespace strata {

struct CachingAllocator::State {
  std::mutex mu;
  size_t cap = 0;
  size_t cached = 0;
  size_t allocations = 0;
  // Size class -> free blocks. Buffers outliving the allocator free themselves.
  std::multimap<size_t, void*> free_blocks;
  ~State() {
    for (auto& [sz, p] : free_blocks) std::free(p);
  }
};

namespace {

// Size classes: 64-byte granularity up to 4 KiB, then quarter-power-of-two steps,
// so a slightly different shape at run time still finds a block.
size_t SizeClass(size_t bytes) {
  if (bytes <= 4096) return ((bytes + 63) / 64) * 64;
  size_t p = 4096;
  while (p < bytes) p <<= 1;
  size_t q = p / 8;  // steps of 1/8 below the next power of two
  return ((bytes + q - 1) / q) * q;
}

class CachedBuffer final : public Buffer {
 public:
  CachedBuffer(std::weak_ptr<CachingAllocator::State> s, void* p, size_t cls, size_t size)
      : state_(std::move(s)), p_(p), cls_(cls), size_(size) {}
  ~CachedBuffer() override {
    if (auto s = state_.lock()) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->free_blocks.emplace(cls_, p_);
      s->cached += cls_;
      return;
    }
    std::free(p_);
  }
  void* data() override { return p_; }
  size_t size() const override { return size_; }

 private:
  std::weak_ptr<CachingAllocator::State> state_;
  void* p_;
  size_t cls_;
  size_t size_;
};

}  // namespace

CachingAllocator::CachingAllocator(size_t cap) : state_(std::make_shared<State>()) { state_->cap = cap; }
CachingAllocator::~CachingAllocator() = default;

Result<std::shared_ptr<Buffer>> CachingAllocator::Allocate(size_t bytes) {
  if (state_->cap && bytes > state_->cap)
    return MakeStatus(StatusCode::kOutOfMemory, "allocation of ", bytes, " bytes exceeds the session memory cap of ",
                      state_->cap, " bytes");
  size_t cls = SizeClass(bytes == 0 ? 1 : bytes);
  if (cls < bytes) return MakeStatus(StatusCode::kOutOfMemory, "allocation size overflows: ", bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->free_blocks.find(cls);
    if (it != state_->free_blocks.end()) {
      p = it->second;
      state_->free_blocks.erase(it);
      state_->cached -= cls;
    } else {
      ++state_->allocations;
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, cls);
    if (!p) return MakeStatus(StatusCode::kOutOfMemory, "out of memory allocating ", bytes, " bytes");
  }
  return std::shared_ptr<Buffer>(std::make_shared<CachedBuffer>(state_, p, cls, bytes));
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->cached;
}
size_t CachingAllocator::allocation_count() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->allocations;
}

}  // namespace strata
