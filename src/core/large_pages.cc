#include "core/large_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "core/tensor.h"

namespace strata {

namespace {

constexpr size_t kHugePage = kHugePageBytes;
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // Linux 5.14; older kernels reject it (harmless)
#endif

}  // namespace

size_t PageSize() {
  static const size_t page = [] {
    long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

bool LargePagesUsable() {
  static const bool usable = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
  }();
  return usable;
}

namespace {

// A fresh populated mapping of `len` (page multiple) bytes; 2 MiB aligned with MADV_HUGEPAGE
// when len >= 2 MiB.
void* MapPopulated(size_t len) {
  const size_t page = PageSize();
  // Only a 2 MiB aligned range can get huge pages: over-map by 2 MiB and trim both ends,
  // so no memory beyond `len` stays mapped.
  const size_t slack = len >= kHugePage ? kHugePage - page : 0;
  void* m = ::mmap(nullptr, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(m);
  char* p = base;
  if (slack) {
    p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage);
    if (p > base) ::munmap(base, static_cast<size_t>(p - base));
    const size_t tail = static_cast<size_t>(base + len + slack - (p + len));
    if (tail) ::munmap(p + len, tail);
    ::madvise(p, len, MADV_HUGEPAGE);
  }
  ::madvise(p, len, kMadvPopulateWrite);
  return p;
}

// Blocks under 2 MiB are carved, page aligned, from shared 2 MiB huge-page chunks. On this
// kind of VM the first touch of every 4 KiB page costs a hypervisor exit even when the page
// was populated beforehand (the store that first touches it takes the time), so a 1 MiB
// block of its own cost more than its copy; in a chunk it is part of one huge page (lstm
// creation: ~4x less CPU). A chunk is unmapped when its last block is freed. Space is never
// reused within a chunk, so every block is still fresh, zeroed memory.
struct Chunk {
  size_t used = 0;  // bytes handed out (bump pointer)
  size_t live = 0;  // blocks not yet freed
};

struct Chunks {
  std::mutex mu;
  std::map<uintptr_t, Chunk> by_base;
  uintptr_t open = 0;  // the chunk new blocks come from; 0: none
};

// Two sets: blocks freed soon (short_lived: weight payloads read for packing) are kept apart
// from lasting ones, because a chunk's space comes back only with its last block: a
// payload between two packed weights would stay resident (resnet50: +18 MiB).
Chunks& TheChunks(bool short_lived) {
  static Chunks* lasting = new Chunks();  // never destroyed: blocks may be freed during exit
  static Chunks* brief = new Chunks();
  return short_lived ? *brief : *lasting;
}

// Freed blocks of 2 MiB and more, kept while a LargePageRecycleScope lives (see large_pages.h).
// Each is 2 MiB aligned (MapPopulated) and still populated.
struct Recycler {
  std::mutex mu;
  int scopes = 0;
  size_t bytes = 0;                            // total length kept
  std::multimap<size_t, uintptr_t> by_length;  // length -> base
};

Recycler& TheRecycler() {
  static Recycler* r = new Recycler();  // never destroyed, like TheChunks
  return *r;
}

// Takes a kept block of at least `len` (a page multiple) bytes, the smallest that fits, cut
// to exactly `len` so that FreeLargePages gets the length callers compute (bytes rounded to
// pages). What lies past `len` rounded up to 2 MiB stays kept when it is 2 MiB or more;
// the rest is unmapped. nullptr when none fits.
void* TakeRecycled(size_t len) {
  Recycler& r = TheRecycler();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_length.lower_bound(len);
  if (it == r.by_length.end()) return nullptr;
  const size_t have = it->first;
  char* p = reinterpret_cast<char*>(it->second);
  r.by_length.erase(it);
  r.bytes -= have;
  const size_t keep = std::min(have, (len + kHugePage - 1) / kHugePage * kHugePage);
  const size_t rest = have - keep;
  if (rest >= kHugePage) {
    r.by_length.emplace(rest, reinterpret_cast<uintptr_t>(p + keep));
    r.bytes += rest;
  } else if (rest > 0) {
    ::munmap(p + keep, rest);
  }
  if (keep > len) ::munmap(p + len, keep - len);
  return p;
}

// Keeps a freed block for reuse; false when no scope is open, the block is not a whole
// huge-page mapping, or the bound is reached (the caller unmaps it).
bool KeepForRecycling(void* p, size_t len) {
  if (len < kHugePage || reinterpret_cast<uintptr_t>(p) % kHugePage != 0) return false;
  Recycler& r = TheRecycler();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.scopes == 0 || r.bytes + len > kRecycleMaxBytes) return false;
  r.by_length.emplace(len, reinterpret_cast<uintptr_t>(p));
  r.bytes += len;
  return true;
}

void* AllocateFromChunk(size_t len, bool short_lived) {
  Chunks& c = TheChunks(short_lived);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.open) {
    Chunk& ch = c.by_base[c.open];
    if (ch.used + len <= kHugePage) {
      void* p = reinterpret_cast<void*>(c.open + ch.used);
      ch.used += len;
      ++ch.live;
      return p;
    }
  }
  void* m = TakeRecycled(kHugePage);
  if (m) {
    std::memset(m, 0, kHugePage);  // blocks in a chunk are zeroed memory
  } else {
    m = MapPopulated(kHugePage);
  }
  if (!m) return nullptr;
  // The previous open chunk keeps its live blocks and is unmapped with the last of them.
  c.open = reinterpret_cast<uintptr_t>(m);
  c.by_base[c.open] = Chunk{len, 1};
  return m;
}

// True when p was a chunk block (now freed).
bool FreeToChunk(void* p, bool short_lived) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(p) / kHugePage * kHugePage;
  Chunks& c = TheChunks(short_lived);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.by_base.find(base);
  if (it == c.by_base.end()) return false;
  if (--it->second.live == 0) {
    if (!KeepForRecycling(reinterpret_cast<void*>(base), kHugePage)) ::munmap(reinterpret_cast<void*>(base), kHugePage);
    if (c.open == base) c.open = 0;
    c.by_base.erase(it);
  }
  return true;
}

}  // namespace

void* AllocateLargePages(size_t bytes, size_t* mapped_len, bool zeroed, bool short_lived) {
  const size_t page = PageSize();
  if (bytes == 0) bytes = 1;
  if (bytes > SIZE_MAX - kHugePage) return nullptr;
  const size_t len = (bytes + page - 1) / page * page;
  void* p = len < kHugePage && LargePagesUsable() ? AllocateFromChunk(len, short_lived) : nullptr;
  if (!p && len >= kHugePage) {
    p = TakeRecycled(len);
    if (p && zeroed) std::memset(p, 0, len);
  }
  if (!p) p = MapPopulated(len);
  if (!p) return nullptr;
  *mapped_len = len;
  return p;
}

void FreeLargePages(void* p, size_t mapped_len) {
  if (!p) return;
  if (mapped_len < kHugePage && (FreeToChunk(p, false) || FreeToChunk(p, true))) return;
  if (KeepForRecycling(p, mapped_len)) return;
  ::munmap(p, mapped_len);
}

LargePageRecycleScope::LargePageRecycleScope() {
  Recycler& r = TheRecycler();
  std::lock_guard<std::mutex> lock(r.mu);
  ++r.scopes;
}

LargePageRecycleScope::~LargePageRecycleScope() {
  Recycler& r = TheRecycler();
  std::lock_guard<std::mutex> lock(r.mu);
  if (--r.scopes > 0) return;
  for (const auto& [len, base] : r.by_length) ::munmap(reinterpret_cast<void*>(base), len);
  r.by_length.clear();
  r.bytes = 0;
}

namespace {

// AllocateLargePages memory as a Buffer (AllocateWeightBuffer).
class LargePageBuffer final : public Buffer {
 public:
  LargePageBuffer(void* p, size_t len, size_t size) : p_(p), len_(len), size_(size) {}
  ~LargePageBuffer() override { ReleaseStorage(); }
  void* data() override { return p_; }
  size_t size() const override { return size_; }
  bool ReleaseStorage() override {
    if (p_) FreeLargePages(p_, len_);
    p_ = nullptr;
    len_ = size_ = 0;
    return true;
  }

 private:
  void* p_;
  size_t len_;
  size_t size_;
};

}  // namespace

Result<std::shared_ptr<Buffer>> AllocateWeightBuffer(size_t bytes) {
  if (bytes >= kLargePagesMinBytes) {
    size_t len = 0;
    if (void* m = AllocateLargePages(bytes, &len, /*zeroed=*/false))
      return std::shared_ptr<Buffer>(std::make_shared<LargePageBuffer>(m, len, bytes));
    // Out of mappings: the ordinary allocator below reports a real shortage.
  }
  return DefaultAllocator()->Allocate(bytes);
}

}  // namespace strata
