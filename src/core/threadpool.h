// The one intra-op thread pool of a session.
//
// Two sets of workers live here:
//  * strata's own workers run ParallelFor regions. A region publishes its chunks
//    through one atomic claim word; the caller claims chunks too, so a worker that is
//    preempted (or still asleep) when the region starts finds nothing left to do and
//    never delays the caller beyond the one chunk it may already hold. Concurrent or
//    nested regions on the same pool run inline instead of queueing.
//    When the scheduler puts the pool's worker(s) on the caller's CPU, a parallel region only
//    makes them take turns with the caller (and an idle worker's spin takes the caller's
//    time): each worker records the CPU it last saw a region on; one that sees a region on
//    its caller's CPU moves itself off it when its affinity allows, and otherwise declines
//    the region's chunks and sleeps at once instead of spinning. The caller runs regions
//    inline while every worker was last seen on its CPU, and wakes them again after
//    kProbeInterval to see whether one is elsewhere now.
//  * a pthreadpool, created only for XNNPACK operators, on first use (handle()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

struct pthreadpool;

namespace strata {

class ThreadPool {
 public:
  // Runs once on each worker thread before it takes any work.
  using ThreadInit = void (*)();
  // threads <= 0 means "number of CPUs the calling thread may run on" (its affinity mask). A
  // caller confined to one CPU gets a one-thread pool whatever `threads` says: a worker could
  // only take turns with it. With `init`, every worker runs it when it starts; the constructor
  // returns at once, and the first parallel region and AwaitWorkerInits (which a session
  // calls at the end of its creation) wait until all have run it, so kernels' per-thread
  // scratch exists before the first run (KernelRegistry::thread_init) and runs after the
  // first never allocate, even on a worker that took no task in the first.
  explicit ThreadPool(int threads, ThreadInit init = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return threads_; }
  // A non-owning reference to a callable `void(int64_t begin, int64_t end)`: binding a
  // lambda never allocates (a std::function does once the captures outgrow its small
  // buffer). The callable must outlive the call, which a ParallelFor argument always does.
  class RangeRef {
   public:
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeRef>>>
    RangeRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): binds lambdas implicitly
        : obj_(const_cast<void*>(static_cast<const void*>(&f))),
          call_([](void* o, int64_t b, int64_t e) { (*static_cast<std::remove_reference_t<F>*>(o))(b, e); }) {}
    void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

   private:
    friend class ThreadPool;
    void* obj_;
    void (*call_)(void*, int64_t, int64_t);
  };
  // Splits [0, n) into chunks of at least `grain` items and calls fn(begin, end) on
  // them, possibly in parallel. Runs inline when the pool has one thread or n <= grain.
  // If fn throws, on any thread, the other chunks still run and the first exception is
  // rethrown here once all have finished (the executor turns it into a Status).
  void ParallelFor(int64_t n, int64_t grain, RangeRef fn) { ParallelForRaw(n, grain, fn.call_, fn.obj_); }
  // Same, without a std::function: fn(ctx, begin, end). Hot paths use this (or Run).
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
  void ParallelForRaw(int64_t n, int64_t grain, RangeFn fn, void* ctx);
  // Lambda form of ParallelForRaw: no heap allocation, one indirect call per chunk.
  template <typename F>
  void Run(int64_t n, int64_t grain, F&& f) {
    using Fn = std::remove_reference_t<F>;
    ParallelForRaw(
        n, grain, [](void* c, int64_t b, int64_t e) { (*static_cast<Fn*>(c))(b, e); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }
  // Exactly `n` chunks of one item each (n <= 4 * num_threads()): for callers that run
  // their own cooperative protocol per participant (e.g. the LSTM's recurrent steps).
  // Every chunk runs exactly once, on whichever thread claims it first. Participants must
  // not throw: the others would wait for its steps for ever.
  void RunParticipants(int64_t n, RangeFn fn, void* ctx);
  // Returns once every worker has run the constructor's ThreadInit (the constructor does
  // not wait; the first parallel region does). A session calls it at the end of its
  // creation, so no worker is still reserving its scratch during the first runs.
  void AwaitWorkerInits();

  // The underlying pthreadpool (nullptr when single-threaded or when it cannot be created),
  // for XNNPACK. Created on first use: its workers spin for milliseconds after creation,
  // which on two cores slowed session creation at 2 threads even for graphs without XNNPACK.
  pthreadpool* handle() const;

 private:
  void WorkerLoop(int index);
  // True when every worker was last seen running on `cpu` (the caller's CPU).
  bool Colocated(int cpu) const;
  // Claims and runs chunks of the current region (generation `gen`) until none is left.
  void Drain(uint32_t gen);
  // False (nothing run) when another region is active on this pool.
  bool RunRegion(int64_t n, int64_t chunk, int64_t nchunks, RangeFn fn, void* ctx);

  int threads_ = 1;
  mutable std::once_flag pool_once_;
  mutable pthreadpool* pool_ = nullptr;
  std::vector<std::thread> workers_;

  // Region state. claim_ packs (generation:24 | nchunks:20 | next chunk:20); a chunk is
  // claimed by a CAS on the whole word, so a stale worker can never claim a chunk of a
  // region it did not wake for. fn_/ctx_/n_/chunk_ are read only after a successful claim.
  std::atomic<bool> busy_{false};
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> done_{0};
  std::atomic<uint32_t> wake_{0};  // bumped per region; sleeping workers wait on it
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> inits_pending_{0};  // workers yet to run the constructor's ThreadInit
  // Co-location: the CPU the current region's caller started on, and per worker the CPU it
  // last saw a region on (-1: none yet). inline_since_: when regions started running inline
  // because of it (zero: they do not); only the holder of busy_ touches it.
  std::atomic<int> caller_cpu_{-1};
  std::unique_ptr<std::atomic<int>[]> worker_cpu_;
  std::chrono::steady_clock::time_point inline_since_{};
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  // The first exception a chunk of the current region threw (error_set_ claims the slot);
  // RunRegion rethrows it on the caller once every chunk has finished.
  std::atomic<bool> error_set_{false};
  std::exception_ptr error_;
  int64_t n_ = 0, chunk_ = 0;
  uint32_t gen_ = 0;  // written only by the thread that holds busy_
};

}  // namespace strata
