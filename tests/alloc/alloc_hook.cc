// Replaces the allocation functions of the process (the executable's definitions
// interpose on glibc's for every shared object, libstrata.so included) and forwards
// them to glibc's internal entry points, counting calls while armed. The flag is a
// plain global atomic, not thread-local, so pool threads are counted too.
//
// With STRATA_ALLOC_TRACE=N in the environment, the first N counted allocations print
// a raw backtrace to stderr (resolve the "(+0x...)" offsets of libstrata.so with
// `addr2line -Cfe` or `nm`): that is how the remaining allocation sites are found.
#include "alloc_hook.h"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>

// Under a sanitizer the runtime owns malloc: replacing it here would bypass its allocator
// (no heap checking at all) and mix its pointers with glibc's (a strdup from the runtime freed
// by glibc). There the counts come from the sanitizer's allocation hooks instead, which see
// the same calls: every malloc-family call and operator new/delete in every thread.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_HOOK_VIA_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_HOOK_VIA_SANITIZER 1
#endif
#endif

#ifdef ALLOC_HOOK_VIA_SANITIZER
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                                         void (*free_hook)(const volatile void*));
#endif

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<bool> g_armed{false};
std::atomic<size_t> g_allocs{0};
std::atomic<size_t> g_frees{0};

std::atomic<long> g_trace_left{0};
thread_local bool t_in_trace = false;

// Prints the caller's stack; backtrace() itself may allocate (it loads libgcc_s once),
// hence the per-thread reentrancy guard and the warm-up call in Arm().
void Trace(const char* what) {
  if (t_in_trace || g_trace_left.fetch_sub(1, std::memory_order_relaxed) <= 0) return;
  t_in_trace = true;
  void* frames[24];
  int n = backtrace(frames, 24);
  char head[64];
  int len = std::snprintf(head, sizeof(head), "=== %s\n", what);
  if (write(2, head, static_cast<size_t>(len)) < 0) t_in_trace = false;
  backtrace_symbols_fd(frames, n, 2);
  t_in_trace = false;
}

inline void CountAlloc() {
  if (g_armed.load(std::memory_order_relaxed)) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    if (g_trace_left.load(std::memory_order_relaxed) > 0) Trace("alloc");
  }
}
inline void CountFree(void* p) {
  if (p && g_armed.load(std::memory_order_relaxed)) g_frees.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#ifdef ALLOC_HOOK_VIA_SANITIZER
namespace {
void SanitizerMallocHook(const volatile void*, size_t) { CountAlloc(); }
void SanitizerFreeHook(const volatile void* p) { CountFree(const_cast<void*>(p)); }
// Installed before main so the first Arm() already counts. Should the runtime have no free
// slot, nothing is counted and AllocTest.HookCountsPlainRuns fails.
[[maybe_unused]] const int g_hook_slot =
    __sanitizer_install_malloc_and_free_hooks(SanitizerMallocHook, SanitizerFreeHook);
}  // namespace
#endif

namespace alloc_hook {
void Arm() {
  static const long trace = [] {
    const char* env = std::getenv("STRATA_ALLOC_TRACE");
    void* warm[2];
    backtrace(warm, 2);  // loads the unwinder now, not while armed
    return env ? std::atol(env) : 0L;
  }();
  static bool trace_set = false;
  if (!trace_set) {
    g_trace_left = trace;
    trace_set = true;
  }
  g_allocs = 0;
  g_frees = 0;
  g_armed = true;
}
void Disarm() { g_armed = false; }
size_t Allocations() { return g_allocs.load(); }
size_t Frees() { return g_frees.load(); }
}  // namespace alloc_hook

#ifndef ALLOC_HOOK_VIA_SANITIZER
extern "C" {
void* malloc(size_t n) {
  CountAlloc();
  return __libc_malloc(n);
}
void free(void* p) {
  CountFree(p);
  __libc_free(p);
}
void* calloc(size_t n, size_t m) {
  CountAlloc();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  CountAlloc();
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  CountAlloc();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  CountAlloc();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  CountAlloc();
  if (a < sizeof(void*) || (a & (a - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"

// operator new/delete go straight to glibc so each call counts once.
namespace {
void* NewImpl(size_t n) {
  CountAlloc();
  void* p = __libc_malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* NewAligned(size_t n, std::align_val_t a) {
  CountAlloc();
  void* p = __libc_memalign(static_cast<size_t>(a), n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return NewImpl(n); }
void* operator new[](size_t n) { return NewImpl(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  CountAlloc();
  return __libc_malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  CountAlloc();
  return __libc_malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t a) { return NewAligned(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return NewAligned(n, a); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }
#endif  // ALLOC_HOOK_VIA_SANITIZER
