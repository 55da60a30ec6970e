#include "core/threadpool.h"

#include <pthreadpool.h>
#include <unistd.h>

#include <algorithm>

namespace strata {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  threads_ = threads;
  if (threads_ > 1) pool_ = pthreadpool_create(static_cast<size_t>(threads_));
  if (!pool_) threads_ = 1;
}

ThreadPool::~ThreadPool() {
  if (pool_) pthreadpool_destroy(pool_);
}

namespace {
struct ForCtx {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int64_t chunk;
};
void ForTask(void* p, size_t i) {
  auto* c = static_cast<ForCtx*>(p);
  int64_t b = static_cast<int64_t>(i) * c->chunk;
  int64_t e = std::min(c->n, b + c->chunk);
  (*c->fn)(b, e);
}
}  // namespace

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!pool_ || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balances load without much scheduling overhead.
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(threads_) * 4);
  int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  ForCtx ctx{&fn, n, chunk};
  pthreadpool_parallelize_1d(pool_, &ForTask, &ctx, static_cast<size_t>(chunks), 0);
}

}  // namespace strata
