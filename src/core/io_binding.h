// IoBinding: runs a session with caller-owned input and output buffers, reusing all
// per-run executor state between runs (the basis of strata_io_binding_* in the C API).
//
// What it guarantees (docs/hardening.md, "Real-time use"): inputs are used in place,
// outputs are written into the caller's buffers (directly by the producing kernel when
// it allocates exactly the bound dtype/shape, else by one copy), the executor's value
// slots and scratch are allocated once and reused, intermediate buffers come from the
// session's caching allocator without touching the heap once warm, and the only locks
// taken are the session's own. A binding is single-threaded: a second concurrent Run
// on the same binding is refused with an error, never interleaved.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/session.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata {

class IoBinding {
 public:
  // The session must outlive the binding.
  explicit IoBinding(const Session& session);
  IoBinding(const IoBinding&) = delete;
  IoBinding& operator=(const IoBinding&) = delete;

  // Binds the caller's tensor (not copied: its buffer is read in place on every run)
  // to the model input `name`. Checks dtype and shape against the model now.
  Status BindInput(const std::string& name, const Tensor& t);
  // Binds a caller-owned buffer for the model output `name`. Checks the dtype and the
  // known dims against the model now, and the exact shape after each run.
  Status BindOutput(const std::string& name, const Tensor& t);
  // Drops all bindings (the buffers are the caller's; nothing is freed).
  void Clear();

  // Runs the model with the bound inputs; every bound output receives its result.
  // Unbound outputs are computed and discarded. Fails when an input is unbound, an
  // output's shape differs from its bound buffer, or another thread is running this
  // binding. `run`: this run's own deadline and terminator (core/run_control.h), or nullptr.
  Status Run(const RunOptions* run = nullptr);

  // Runs completed so far, and whether the last one needed no copy into a bound output
  // (every bound output was written in place by its kernel).
  size_t run_count() const { return runs_; }
  bool last_run_wrote_in_place() const { return in_place_; }

 private:
  Status RunLocked(const RunOptions* run);
  int InputPos(const std::string& name) const;
  int OutputPos(const std::string& name) const;

  const Session& session_;
  const Executor& exec_;
  std::vector<Value> inputs_;    // by graph input position; empty: unbound
  std::vector<Tensor> outputs_;  // by graph output position; invalid: unbound
  RunState state_;
  std::vector<Value> results_;
  std::atomic<bool> busy_{false};
  size_t runs_ = 0;
  bool in_place_ = false;
};

}  // namespace strata
