// Per-phase timing of session creation, printed to stderr when STRATA_TRACE_LOAD=1.
// Used to see where creation time goes (read, parse, checker, shape inference, import,
// optimize, kernels, plan) without a profiler; costs one getenv per session otherwise.
#pragma once

#include <chrono>
#include <string>

namespace strata {

// True when STRATA_TRACE_LOAD is set to something other than "" or "0" (read once).
bool LoadTraceEnabled();
// Current VmRSS in MiB (0 if /proc is unavailable); traced next to each phase.
double CurrentRssMiB();

class LoadTrace {
 public:
  explicit LoadTrace(const char* scope) : scope_(scope), on_(LoadTraceEnabled()), t0_(Clock::now()), last_(t0_) {}
  // Prints "strata load [scope] phase: X ms (rss Y MiB)" for the time since the previous phase.
  void Phase(const char* name);
  // Prints the total since construction.
  void Total();
  bool on() const { return on_; }

 private:
  using Clock = std::chrono::steady_clock;
  const char* scope_;
  bool on_;
  Clock::time_point t0_, last_;
};

}  // namespace strata
