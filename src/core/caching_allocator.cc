#include "core/caching_allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace strata {

namespace {
// A free block (or a free control-block node) stores the link to the next one in
// its first bytes, so keeping it on a list needs no memory of its own.
struct FreeLink {
  FreeLink* next;
};
}  // namespace

struct CachingAllocator::State {
  std::mutex mu;
  size_t cap = 0;
  size_t cached = 0;
  size_t allocations = 0;
  // Size class -> head of its intrusive free list. A class gets its map node the first
  // time it is seen and keeps it (with a null head when empty): no node churn per run.
  std::map<size_t, FreeLink*> free_blocks;
  // Recycled shared_ptr control blocks (all of one size, see NodeAlloc).
  FreeLink* free_nodes = nullptr;
  size_t node_size = 0;

  ~State() {
    for (auto& [sz, head] : free_blocks)
      while (head) {
        FreeLink* next = head->next;
        std::free(head);
        head = next;
      }
    while (free_nodes) {
      FreeLink* next = free_nodes->next;
      ::operator delete(free_nodes);
      free_nodes = next;
    }
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

// Allocator for std::allocate_shared: the control block of a CachedBuffer is taken
// from and returned to the State's node pool. It holds the State alive so a buffer
// that outlives its session can still hand its node back.
template <typename T>
struct NodeAlloc {
  using value_type = T;
  std::shared_ptr<CachingAllocator::State> state;
  explicit NodeAlloc(std::shared_ptr<CachingAllocator::State> s) : state(std::move(s)) {}
  template <typename U>
  NodeAlloc(const NodeAlloc<U>& o) : state(o.state) {}  // NOLINT: rebinding, as the standard requires

  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->free_nodes && bytes == state->node_size) {
        FreeLink* p = state->free_nodes;
        state->free_nodes = p->next;
        return reinterpret_cast<T*>(p);
      }
    }
    return static_cast<T*>(::operator new(std::max(bytes, sizeof(FreeLink))));
  }
  void deallocate(T* p, size_t n) {
    size_t bytes = n * sizeof(T);
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->node_size == 0) state->node_size = bytes;
    if (bytes != state->node_size || bytes < sizeof(FreeLink)) {
      ::operator delete(p);
      return;
    }
    auto* link = reinterpret_cast<FreeLink*>(p);
    link->next = state->free_nodes;
    state->free_nodes = link;
  }
  template <typename U>
  bool operator==(const NodeAlloc<U>& o) const {
    return state == o.state;
  }
};

class CachedBuffer final : public Buffer {
 public:
  CachedBuffer(CachingAllocator::State* s, void* p, size_t cls, size_t size)
      : state_(s), p_(p), cls_(cls), size_(size) {}
  ~CachedBuffer() override {
    // The control block (and its NodeAlloc) keeps the State alive while this runs.
    std::lock_guard<std::mutex> lock(state_->mu);
    FreeLink*& head = state_->free_blocks[cls_];  // the class exists: it was seen in Allocate
    auto* link = static_cast<FreeLink*>(p_);
    link->next = head;
    head = link;
    state_->cached += cls_;
  }
  void* data() override { return p_; }
  size_t size() const override { return size_; }

 private:
  CachingAllocator::State* state_;
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
    FreeLink*& head = state_->free_blocks[cls];  // creates the class node once
    if (head) {
      p = head;
      head = head->next;
      state_->cached -= cls;
    } else {
      ++state_->allocations;
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, cls);  // cls is a multiple of 64, as aligned_alloc requires
    if (!p) return MakeStatus(StatusCode::kOutOfMemory, "out of memory allocating ", bytes, " bytes");
  }
  return std::shared_ptr<Buffer>(
      std::allocate_shared<CachedBuffer>(NodeAlloc<CachedBuffer>(state_), state_.get(), p, cls, bytes));
}

size_t CachingAllocator::memory_cap() const { return state_->cap; }
size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->cached;
}
size_t CachingAllocator::allocation_count() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->allocations;
}

size_t MemoryCapOf(const Allocator* alloc) {
  const auto* ca = dynamic_cast<const CachingAllocator*>(alloc);
  return ca ? ca->memory_cap() : 0;
}

}  // namespace strata
