// The one intra-op thread pool of a session. Backed by pthreadpool so that
// XNNPACK operators share the same workers.
#pragma once

#include <cstdint>
#include <functional>

struct pthreadpool;

namespace strata {

class ThreadPool {
 public:
  // threads <= 0 means "number of online CPUs".
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return threads_; }
  // Splits [0, n) into chunks of at least `grain` items and calls fn(begin, end) on
  // them, possibly in parallel. Runs inline when the pool has one thread or n <= grain.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The underlying pthreadpool (nullptr when single-threaded), for XNNPACK.
  pthreadpool* handle() const { return pool_; }

 private:
  int threads_ = 1;
  pthreadpool* pool_ = nullptr;
};

}  // namespace strata
