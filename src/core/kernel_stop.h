// KernelStop: ends a single kernel call at the run's deadline or terminate call
// (core/run_control.h) when the kernel's cost is not bounded by its inputs and outputs: a
// pooling window or a conv kernel as large as the image, an LRN window over thousands of
// channels, a recurrent layer's thousands of steps, Einsum's label product. The executor
// checks the run's limits only between nodes; without this a 130-byte model (one MaxPool
// with a 1024 x 1024 window over a padded 1024 x 1024 image: 10^12 compares) ran for hours
// past a 200 ms deadline.
//
// Usage: create it on the run's thread before the parallel region (it captures that
// thread's limits), give each task a counter, and call Continue with the work done:
//
//   KernelStop stop(node);
//   pool->ParallelFor(n, grain, [&](int64_t b, int64_t e) {
//     int64_t pending = 0;
//     for (int64_t i = b; i < e; ++i) {
//       if (!stop.Continue(pending, work_of_i)) return;  // the region's output is discarded
//       ...
//     }
//   });
//   return stop.status();
//
// A stopped kernel leaves its outputs partly written; status() is then CANCELLED naming the
// node, and the executor drops the run. So a kernel must not read back what its own skipped
// tasks would have written (an index computed in the region, say) before it returns.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/first_error.h"
#include "core/ir.h"
#include "core/run_control.h"
#include "core/status.h"

namespace strata {

class KernelStop {
 public:
  // Work units (about one multiply-add, compare or load each) between two reads of the
  // limits on one thread: about a millisecond of scalar work, so a check (a relaxed load,
  // plus a clock read when the run has a deadline) costs nothing measurable.
  static constexpr int64_t kCheckWork = int64_t{1} << 20;

  explicit KernelStop(const Node& node) : control_(CurrentRunControl()), node_(&node) {}
  // For code below the kernels (the SGEMM driver): the status then names no node, and the
  // kernel that called it adds its own.
  KernelStop() : control_(CurrentRunControl()) {}
  KernelStop(const KernelStop&) = delete;
  KernelStop& operator=(const KernelStop&) = delete;

  // False once the kernel must stop (this or another thread found the run ended): return
  // from the task. pending: the calling task's own counter (start it at 0); work: what the
  // task is about to do (or just did). Thread-safe; callable from pool workers.
  bool Continue(int64_t& pending, int64_t work) {
    if (control_ == nullptr) return true;  // not inside a run (constant folding has its own scope)
    pending += work;
    if (pending < kCheckWork) return true;
    pending = 0;
    return CheckNow();
  }

  // Reads the limits now, whatever the counter says (for a loop of few, long steps).
  bool CheckNow() {
    if (control_ == nullptr) return true;
    if (stopped_.load(std::memory_order_relaxed)) return false;
    Status st = CheckRunControl(control_);
    if (st.ok()) return true;
    error_.Set(node_ ? MakeStatus(st.code(), st.message(), ", in ", node_->Describe()) : std::move(st));
    stopped_.store(true, std::memory_order_relaxed);
    return false;
  }

  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

  // OK, or CANCELLED (the run's reason, naming the node if one was given). Call once, after
  // the region.
  [[nodiscard]] Status status() { return error_.Take(); }

 private:
  RunControlRef control_;
  const Node* node_ = nullptr;
  std::atomic<bool> stopped_{false};
  FirstError error_;
};

}  // namespace strata
