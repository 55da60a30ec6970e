#include "core/large_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

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

void* AllocateLargePages(size_t bytes, size_t* mapped_len) {
  const size_t page = PageSize();
  if (bytes == 0) bytes = 1;
  if (bytes > SIZE_MAX - kHugePage) return nullptr;
  const size_t len = (bytes + page - 1) / page * page;
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
  *mapped_len = len;
  return p;
}

void FreeLargePages(void* p, size_t mapped_len) {
  if (p) ::munmap(p, mapped_len);
}

}  // namespace strata
