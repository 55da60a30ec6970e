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

namespace strata {

// Buffers below this go to aligned_alloc: a mapping each would cost a VMA and a syscall.
inline constexpr size_t kLargePagesMinBytes = size_t{64} << 10;
// A transparent huge page: blocks smaller than this get only 4 KiB pages.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A populated, zero-filled, writable block of at least `bytes` (>= 1) bytes, 2 MiB aligned
// when it is at least 2 MiB, otherwise page aligned; nullptr when the mapping fails.
// *mapped_len receives the length to give FreeLargePages. With THP, blocks under 2 MiB share
// 2 MiB huge-page chunks (a chunk is unmapped when its last block is freed); thread-safe.
void* AllocateLargePages(size_t bytes, size_t* mapped_len);
void FreeLargePages(void* p, size_t mapped_len);

// True when transparent huge pages can back AllocateLargePages blocks (THP "always" or
// "madvise"), read once.
bool LargePagesUsable();

// The system page size (sysconf), read once; 4096 if sysconf fails.
size_t PageSize();

}  // namespace strata
