// Run control: how a run in progress is stopped from outside. A session's runs can be
// given a deadline (SessionOptions::run_timeout_ms) and can be terminated from another
// thread (Session::TerminateRuns); so can the runs given one RunOptions (a deadline of
// their own, RunOptions::Terminate), which leaves the session's other runs alone. The
// executor checks all of them before each node and before each subgraph run (every Loop,
// Scan and SequenceMap iteration), so a model that loops for hours, by design or by a
// hostile trip count, can be ended. A single kernel is interrupted only where it checks
// too (core/kernel_stop.h: pooling, convs, GEMMs, recurrences, LRN, Einsum, NMS); elsewhere
// the latency of a stop is the node's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/status.h"

namespace strata {

// The longest run deadline, 10^12 ms (about 31 years): start + deadline stays inside the
// steady clock's range. Session creation refuses a run_timeout_ms outside [0, this].
constexpr int64_t kMaxRunTimeoutMs = 1000000000000;

// Ends the runs in progress when Terminate is called: each run records the epoch at its
// start and stops once it has moved. Runs that start afterwards are unaffected, so no
// flag has to be cleared (and no later run can be lost to a stale one).
class RunTerminator {
 public:
  void Terminate() { epoch_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> epoch_{0};
};

// Limits for the runs a caller passes them to (C strata_run_options): a deadline of their
// own and a terminator that ends only those runs. One RunOptions may serve many runs, on
// many threads and sessions at once; it must outlive them. Thread-safe.
class RunOptions {
 public:
  // 0: no deadline of its own. With a session deadline too, the earlier one ends the run.
  // INVALID_ARGUMENT outside [0, kMaxRunTimeoutMs]. A run reads it when it starts.
  [[nodiscard]] Status SetTimeoutMs(int64_t ms);
  int64_t timeout_ms() const { return timeout_ms_.load(std::memory_order_relaxed); }
  // Ends the runs given these options that are in progress at the call; later ones are
  // unaffected, so the options stay usable and nothing has to be reset.
  void Terminate() { terminator_.Terminate(); }
  const RunTerminator& terminator() const { return terminator_; }

 private:
  std::atomic<int64_t> timeout_ms_{0};
  RunTerminator terminator_;
};

// Installs one top-level run's limits on the calling thread for the scope's length;
// CheckRunControl reads them. Nested scopes (a session run from inside another's kernel)
// restore the outer one.
class RunControlScope {
 public:
  // terminator may be nullptr (no terminate requests); timeout_ms 0: no deadline, at most
  // kMaxRunTimeoutMs (checked at session creation). run: the run's own options, or nullptr.
  RunControlScope(const RunTerminator* terminator, int64_t timeout_ms, const RunOptions* run = nullptr);
  ~RunControlScope();
  RunControlScope(const RunControlScope&) = delete;
  RunControlScope& operator=(const RunControlScope&) = delete;

  struct State {
    const RunTerminator* terminator = nullptr;      // the session's
    const RunTerminator* run_terminator = nullptr;  // the run options'
    uint64_t start_epoch = 0;
    uint64_t run_start_epoch = 0;
    int64_t timeout_ms = 0;         // the deadline in force: the earlier of the two
    bool timeout_from_run = false;  // it is the run options' (for the message)
    std::chrono::steady_clock::time_point start;
    std::chrono::steady_clock::time_point deadline;
  };

 private:
  State state_;
  const State* saved_ = nullptr;
};

// Ok while the calling thread's run may go on (and when no run control is installed:
// work on pool threads). Otherwise kCancelled saying why: terminated, or past its
// deadline with the time it has run. One relaxed load, plus a clock read with a deadline.
Status CheckRunControl();

// The calling thread's run limits (nullptr outside a run), for a kernel whose single call
// can take unbounded time (Einsum's cost is the product of all label sizes): captured on
// the run's thread before a parallel region, checked with CheckRunControl(ref) every so
// often on any thread, also pool workers. Valid until the kernel returns.
using RunControlRef = const RunControlScope::State*;
RunControlRef CurrentRunControl();
Status CheckRunControl(RunControlRef ref);

}  // namespace strata
