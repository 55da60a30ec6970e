// Scratch buffers for the chunks of a parallel region whose chunks are not numbered by thread
// (ParallelRangeByCpu's parts, a GEMM's tile producer): a chunk claims a free slot, uses
// that slot's buffer, and frees it. At most one chunk per pool thread (and the caller) runs at
// once, so SlotsFor(pool) slots always leave one free.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/threadpool.h"

namespace strata {

inline int64_t SlotsFor(const ThreadPool* pool) { return pool ? pool->num_threads() + 1 : 1; }

class ScratchSlots {
 public:
  // No heap allocation up to kInline slots (a per-run object of a kernel's Compute).
  explicit ScratchSlots(int64_t slots)
      : big_(slots > kInline ? new std::atomic<bool>[static_cast<size_t>(slots)] : nullptr),
        busy_(slots > kInline ? big_.get() : small_),
        n_(slots) {
    for (int64_t s = 0; s < n_; ++s) busy_[s].store(false, std::memory_order_relaxed);
  }
  ScratchSlots(const ScratchSlots&) = delete;
  ScratchSlots& operator=(const ScratchSlots&) = delete;

  // A free slot, now held by the caller.
  int64_t Acquire() {
    for (int64_t s = 0;; s = (s + 1) % n_) {
      bool expected = false;
      if (busy_[s].compare_exchange_strong(expected, true, std::memory_order_acquire)) return s;
    }
  }
  void Release(int64_t s) { busy_[s].store(false, std::memory_order_release); }

 private:
  static constexpr int64_t kInline = 64;
  std::atomic<bool> small_[kInline];
  std::unique_ptr<std::atomic<bool>[]> big_;
  std::atomic<bool>* busy_;
  int64_t n_;
};

}  // namespace strata
