// Anonymous memory for big buffers that are filled right after allocation: weight payloads
// read from the model file and packed weights.
//
// Why not malloc: on a virtual machine every first touch of a 4 KiB page costs a fault and a
// hypervisor page-table update, which made page faults, not copying, the largest cost of
// session creation (a 256 MiB copy into fresh 4 KiB pages: ~1.2 s; into 2 MiB pages faulted
// in by one MADV_POPULATE_WRITE: ~60 ms). So buffers of at least kLargePagesMinBytes are
// their own mapping, 2 MiB aligned when they span a 2 MiB page, with MADV_HUGEPAGE
// (transparent huge pages in "madvise" mode, the Debian default) and populated with one
// call. Unmapping returns the memory at once (a freed malloc block can stay resident).
// Everything is best effort: without THP or on kernels before 5.14 the advice is ignored and
// pages fault on first touch as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "core/status.h"

namespace strata {

class Buffer;

// Buffers below this go to aligned_alloc: a mapping each would cost a VMA and a syscall.
inline constexpr size_t kLargePagesMinBytes = size_t{64} << 10;
// A transparent huge page: blocks smaller than this get only 4 KiB pages.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A populated, zero-filled, writable block of at least `bytes` (>= 1) bytes, 2 MiB aligned
// when it is at least 2 MiB, otherwise page aligned; nullptr when the mapping fails.
// *mapped_len receives the length to give FreeLargePages. With THP, blocks under 2 MiB share
// 2 MiB huge-page chunks (a chunk is unmapped when its last block is freed); thread-safe.
// zeroed = false: a caller that writes every byte it reads may get a recycled block (see
// LargePageRecycleScope) with old contents; fresh mappings are zero either way.
// short_lived = true: a block freed again soon (a weight payload read for packing). Small
// ones share chunks only with each other, so their chunks empty and come back.
void* AllocateLargePages(size_t bytes, size_t* mapped_len, bool zeroed = true, bool short_lived = false);
void FreeLargePages(void* p, size_t mapped_len);

// At most this much freed memory is kept for reuse (LargePageRecycleScope).
inline constexpr size_t kRecycleMaxBytes = size_t{16} << 20;

// While at least one scope lives, blocks of 2 MiB and more that FreeLargePages gets are kept
// (up to kRecycleMaxBytes) and handed out again by AllocateLargePages, memset to zero unless
// the caller passes zeroed = false; the last scope to end unmaps them all. Session creation
// opens one: weights released as soon as they are packed (core/constant_release.h) become
// the memory the next packed weights go into. Why: the kernel zeroes a fresh huge page at
// about half the speed of a memset of a resident one (this Xeon VM: 96 MiB populated in
// 18.7 ms, memset in 10.4), and zeroing was a quarter of resnet18's session creation.
class LargePageRecycleScope {
 public:
  LargePageRecycleScope();
  ~LargePageRecycleScope();
  LargePageRecycleScope(const LargePageRecycleScope&) = delete;
  LargePageRecycleScope& operator=(const LargePageRecycleScope&) = delete;
};

// True when transparent huge pages can back AllocateLargePages blocks (THP "always" or
// "madvise"), read once.
bool LargePagesUsable();

// The system page size (sysconf), read once; 4096 if sysconf fails.
size_t PageSize();

// A std::allocator for containers that hold hot read-only data for a kernel's lifetime
// (packed weights): allocations of at least kLargePagesMinBytes come from AllocateLargePages,
// smaller ones from aligned_alloc (64-byte aligned). Why: this VM runs with PTI and without
// PCID, so every kernel entry (syscall, interrupt, a futex wake of a pool worker) flushes the
// TLB, and a run then re-walks the nested page tables for every 4 KiB page it touches:
// 4.6 MB of malloc'd weights are ~1150 walks per run, 2 MiB pages 3 (docs/quantization.md).
template <class T>
struct LargePageAllocator {
  using value_type = T;
  LargePageAllocator() = default;
  template <class U>
  LargePageAllocator(const LargePageAllocator<U>&) noexcept {}  // NOLINT(runtime/explicit): rebinding

  T* allocate(size_t n) {
    if (n > (SIZE_MAX - kHugePageBytes) / sizeof(T)) throw std::bad_alloc();  // std::allocator's contract
    const size_t bytes = n * sizeof(T);
    void* p = nullptr;
    if (bytes >= kLargePagesMinBytes) {
      size_t mapped = 0;
      p = AllocateLargePages(bytes, &mapped);
    } else {
      p = std::aligned_alloc(64, bytes == 0 ? 64 : (bytes + 63) / 64 * 64);
    }
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kLargePagesMinBytes) {
      // AllocateLargePages maps whole pages: the length it reported is bytes rounded up.
      FreeLargePages(p, (bytes + PageSize() - 1) / PageSize() * PageSize());
    } else {
      std::free(p);
    }
  }
  template <class U>
  bool operator==(const LargePageAllocator<U>&) const noexcept {
    return true;
  }
};

// A Buffer of `bytes` bytes that the caller fills completely before anything reads it
// (contents undefined): AllocateLargePages memory (zeroed = false) from kLargePagesMinBytes
// on, 64-byte aligned DefaultAllocator memory below. For weight payloads read at import and
// packed weights. Not malloc for the large ones: once earlier frees have raised glibc's
// dynamic mmap threshold, malloc serves multi-MiB blocks from the heap, and freeing one
// there (a constant released after packing, see core/constant_release.h) keeps its pages
// resident; munmap always gives them back. kOutOfMemory when neither can allocate.
Result<std::shared_ptr<Buffer>> AllocateWeightBuffer(size_t bytes);

// A scratch block for reading a weight at session creation (packers that read a payload
// still in the model file block by block): at least kHugePageBytes, so that when it is
// freed inside a LargePageRecycleScope the recycler keeps it and the next packer's block
// (or packed weight) reuses its pages instead of the kernel zeroing fresh ones. Contents
// are undefined. data() is null when the mapping failed (or bytes is 0: nothing is mapped).
class ScratchPages {
 public:
  explicit ScratchPages(size_t bytes)
      : p_(bytes == 0
               ? nullptr
               : AllocateLargePages(bytes > kHugePageBytes ? bytes : kHugePageBytes, &mapped_, /*zeroed=*/false)) {}
  ~ScratchPages() {
    if (p_) FreeLargePages(p_, mapped_);
  }
  ScratchPages(const ScratchPages&) = delete;
  ScratchPages& operator=(const ScratchPages&) = delete;
  void* data() const { return p_; }

 private:
  size_t mapped_ = 0;
  void* p_;
};

// A vector whose storage is LargePageAllocator memory.
template <class T>
using LargePageVector = std::vector<T, LargePageAllocator<T>>;

}  // namespace strata
