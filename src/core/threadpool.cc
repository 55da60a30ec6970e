#include "core/threadpool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <pthreadpool.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

namespace strata {

namespace {

constexpr uint64_t kChunkBits = 20;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr int64_t kMaxChunks = static_cast<int64_t>(kChunkMask);

uint64_t PackClaim(uint32_t gen, uint64_t nchunks, uint64_t next) {
  return (static_cast<uint64_t>(gen & 0xFFFFFF) << (2 * kChunkBits)) | (nchunks << kChunkBits) | next;
}
uint32_t ClaimGen(uint64_t c) { return static_cast<uint32_t>(c >> (2 * kChunkBits)); }
uint64_t ClaimChunks(uint64_t c) { return (c >> kChunkBits) & kChunkMask; }
uint64_t ClaimNext(uint64_t c) { return c & kChunkMask; }

inline void CpuRelax() { _mm_pause(); }

// Raw futex on the wake counter (libstdc++ 12's std::atomic::wait can miss a notify_all
// from another thread's destructor path; the futex protocol here is explicit instead).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

// How long an idle worker keeps polling for the next region before it sleeps: long
// enough to bridge the gap between the kernels of one run, short enough not to burn a
// shared core between runs.
constexpr auto kIdleSpin = std::chrono::microseconds(200);

// While every worker shares the caller's CPU, regions run inline, and the first region
// after this interval wakes the workers to see where they are now (a probe costs a futex
// wake and two context switches, a few microseconds). Time, not a region count: a false
// sighting (the caller briefly migrated onto the worker's CPU) must not cost an LSTM, with
// a few millisecond-long regions per run, many runs on one thread.
constexpr auto kProbeInterval = std::chrono::milliseconds(1);

// CPUs the calling thread may run on (0 when unknown, e.g. more CPUs than a cpu_set_t holds).
int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

// Moves the calling thread off `cpu` when its affinity allows another CPU, and leaves its
// affinity as it was: a mask without `cpu` migrates the thread at once, and restoring the
// mask does not move it back. The scheduler stays free to place it later. False when the
// thread is still on `cpu` (confined to it, or a call failed).
bool MoveOffCpu(int cpu) {
  cpu_set_t mask, others;
  CPU_ZERO(&mask);
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(mask), &mask) != 0) return false;
  others = mask;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof(others), &others) != 0) return false;
  sched_setaffinity(0, sizeof(mask), &mask);
  return sched_getcpu() != cpu;
}

}  // namespace

ThreadPool::ThreadPool(int threads, ThreadInit init) {
  const int allowed = AllowedCpus();
  if (threads <= 0)
    threads = allowed > 0 ? allowed : static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  // Confined to one CPU (e.g. `taskset -c 0`), workers inherit the mask and can only take
  // turns with the caller: measured 2.5x slower than one thread on small regions.
  if (allowed == 1) threads = 1;
  threads_ = threads;
  // One entry per worker (threads_ - 1 of them).
  worker_cpu_ = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(threads_ - 1));
  for (int i = 0; i + 1 < threads_; ++i) worker_cpu_[i].store(-1, std::memory_order_relaxed);
  inits_pending_.store(init ? threads_ - 1 : 0, std::memory_order_relaxed);
  for (int i = 1; i < threads_; ++i)
    workers_.emplace_back([this, init, i] {
      if (init) {
        init();
        inits_pending_.fetch_sub(1, std::memory_order_release);
      }
      WorkerLoop(i - 1);
    });
  // The constructor does not wait for the inits: the first region does (RunRegion), and a
  // session at the end of its creation (AwaitWorkerInits), so the creation goes on while its
  // workers start and reserve their scratch. Idle, they are done within the creation either
  // way; with both CPUs busy a worker can take milliseconds to be scheduled (2-thread LSTM
  // creation next to two busy loops: 11.4-11.8 ms waiting here, 7.9-8.5 ms not).
}

void ThreadPool::AwaitWorkerInits() {
  while (inits_pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

pthreadpool* ThreadPool::handle() const {
  if (threads_ <= 1) return nullptr;
  std::call_once(pool_once_, [this] { pool_ = pthreadpool_create(static_cast<size_t>(threads_)); });
  return pool_;
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&wake_);
  for (std::thread& t : workers_) t.join();
  if (pool_) pthreadpool_destroy(pool_);
}

void ThreadPool::WorkerLoop(int index) {
  // Start from 0, not from the current count: regions (or the destructor) may already
  // have bumped it before this thread first runs.
  uint32_t seen = 0;
  bool spin = true;  // false while this worker was last seen on its caller's CPU
  for (;;) {
    if (stop_.load(std::memory_order_acquire)) return;
    // Poll briefly (unless sharing the caller's CPU, where polling only delays the caller),
    // then sleep until the next region bumps wake_.
    auto spin_start = std::chrono::steady_clock::now();
    int polls = 0;
    uint32_t w;
    while ((w = wake_.load(std::memory_order_acquire)) == seen) {
      CpuRelax();
      if (!spin || (++polls % 256 == 0 && std::chrono::steady_clock::now() - spin_start > kIdleSpin)) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        // Re-check after registering as a sleeper: the caller reads sleepers_ after bumping wake_.
        if (wake_.load(std::memory_order_seq_cst) == seen) FutexWait(&wake_, seen);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        spin_start = std::chrono::steady_clock::now();
      }
    }
    seen = w;
    if (stop_.load(std::memory_order_acquire)) return;
    // sched_getcpu reads the rseq area (glibc >= 2.35): no system call. A worker woken on
    // its caller's CPU tends to stay there (wake-up placement favours the waker's CPU, and a
    // sleeping thread is never load-balanced away): it moves off it when its mask allows.
    // Still there, claiming a chunk would only interleave with the caller, and a chunk held
    // while descheduled makes the caller wait for it: the region is left to the caller.
    int cpu = sched_getcpu();
    if (cpu >= 0 && cpu == caller_cpu_.load(std::memory_order_acquire) && MoveOffCpu(cpu)) cpu = sched_getcpu();
    worker_cpu_[index].store(cpu, std::memory_order_relaxed);
    spin = cpu < 0 || cpu != caller_cpu_.load(std::memory_order_acquire);
    if (spin) Drain(ClaimGen(claim_.load(std::memory_order_acquire)));
  }
}

bool ThreadPool::Colocated(int cpu) const {
  if (cpu < 0 || threads_ <= 1) return false;  // no workers: nothing shares the CPU
  for (int i = 0; i + 1 < threads_; ++i)
    if (worker_cpu_[i].load(std::memory_order_relaxed) != cpu) return false;
  return true;
}

void ThreadPool::Drain(uint32_t gen) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (ClaimGen(c) != (gen & 0xFFFFFF) || ClaimNext(c) >= ClaimChunks(c)) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The claimed chunk keeps the region open, so its fields are stable until done_ counts it.
    const int64_t b = static_cast<int64_t>(ClaimNext(c)) * chunk_;
    // A chunk that throws (std::bad_alloc from a kernel's scratch vector) must neither end a
    // worker thread (std::terminate: the host process dies) nor unwind the caller out of
    // an open region: the first exception is kept and rethrown on the caller at its end.
    try {
      fn_(ctx_, b, std::min(n_, b + chunk_));
    } catch (...) {
      bool first = false;
      if (error_set_.compare_exchange_strong(first, true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    c = claim_.load(std::memory_order_acquire);
  }
}

bool ThreadPool::RunRegion(int64_t n, int64_t chunk, int64_t nchunks, RangeFn fn, void* ctx) {
  // One region at a time; a concurrent run (another session thread) or a nested region
  // (called from inside a chunk, even on this thread) gets false and runs inline, and so
  // does a region whose caller shares its CPU with every worker (except probes).
  if (busy_.exchange(true, std::memory_order_acquire)) return false;
  // Every worker has run the ThreadInit before the first region's chunks are published.
  if (inits_pending_.load(std::memory_order_acquire) > 0) AwaitWorkerInits();
  const int cpu = sched_getcpu();
  if (Colocated(cpu)) {
    const auto now = std::chrono::steady_clock::now();
    if (inline_since_ == std::chrono::steady_clock::time_point{}) inline_since_ = now;
    if (now - inline_since_ < kProbeInterval) {
      busy_.store(false, std::memory_order_release);
      return false;
    }
  }
  inline_since_ = {};
  caller_cpu_.store(cpu, std::memory_order_relaxed);  // published by the seq_cst wake_ bump
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  chunk_ = chunk;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = ++gen_;
  claim_.store(PackClaim(gen, static_cast<uint64_t>(nchunks), 0), std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&wake_);
  Drain(gen);
  // Every chunk is claimed; wait only for chunks other threads are still running.
  int polls = 0;
  while (done_.load(std::memory_order_acquire) != static_cast<uint32_t>(nchunks)) {
    CpuRelax();
    if (++polls % 4096 == 0) sched_yield();  // the holder was preempted: let it run
  }
  // Close the region so no stale worker can match its generation any more.
  claim_.store(PackClaim(gen, 0, 0), std::memory_order_release);
  std::exception_ptr error;
  if (error_set_.load(std::memory_order_acquire)) {  // written before its chunk's done_ count
    error = std::move(error_);
    error_ = nullptr;
    error_set_.store(false, std::memory_order_relaxed);
  }
  busy_.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
  return true;
}

void ThreadPool::ParallelForRaw(int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (threads_ <= 1 || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  // A few chunks per thread balances load without much scheduling overhead.
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(threads_) * 4);
  int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  if (!RunRegion(n, chunk, chunks, fn, ctx)) fn(ctx, 0, n);
}

void ThreadPool::RunParticipants(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (threads_ <= 1 || n == 1 || n > kMaxChunks) {
    for (int64_t i = 0; i < n; ++i) fn(ctx, i, i + 1);
    return;
  }
  if (!RunRegion(n, 1, n, fn, ctx))
    for (int64_t i = 0; i < n; ++i) fn(ctx, i, i + 1);
}

}  // namespace strata
