#include "core/run_control.h"

namespace strata {
namespace {
thread_local const RunControlScope::State* t_active = nullptr;
}  // namespace

Status RunOptions::SetTimeoutMs(int64_t ms) {
  if (ms < 0 || ms > kMaxRunTimeoutMs)
    return InvalidArgument("run option timeout_ms must be from 0 (no deadline) to 10^12, got ", ms);
  timeout_ms_.store(ms, std::memory_order_relaxed);
  return Status::Ok();
}

RunControlScope::RunControlScope(const RunTerminator* terminator, int64_t timeout_ms, const RunOptions* run) {
  state_.terminator = terminator;
  state_.start_epoch = terminator != nullptr ? terminator->epoch() : 0;
  state_.timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  if (run != nullptr) {
    state_.run_terminator = &run->terminator();
    state_.run_start_epoch = run->terminator().epoch();
    const int64_t own = run->timeout_ms();
    if (own > 0 && (state_.timeout_ms == 0 || own < state_.timeout_ms)) {
      state_.timeout_ms = own;
      state_.timeout_from_run = true;
    }
  }
  state_.start = std::chrono::steady_clock::now();
  state_.deadline = state_.start + std::chrono::milliseconds(state_.timeout_ms);
  saved_ = t_active;
  t_active = &state_;
}

RunControlScope::~RunControlScope() { t_active = saved_; }

RunControlRef CurrentRunControl() { return t_active; }

Status CheckRunControl() { return CheckRunControl(t_active); }

Status CheckRunControl(RunControlRef s) {
  if (s == nullptr) return Status::Ok();
  if (s->terminator != nullptr && s->terminator->epoch() != s->start_epoch)
    return MakeStatus(StatusCode::kCancelled, "run terminated (strata_session_terminate_runs)");
  if (s->run_terminator != nullptr && s->run_terminator->epoch() != s->run_start_epoch)
    return MakeStatus(StatusCode::kCancelled, "run terminated (strata_run_options_terminate)");
  if (s->timeout_ms > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= s->deadline) {
      const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - s->start).count();
      return MakeStatus(StatusCode::kCancelled, "run passed its deadline of ", s->timeout_ms, " ms (",
                        s->timeout_from_run ? "run option timeout_ms" : "run_timeout_ms", ") after ", ran, " ms");
    }
  }
  return Status::Ok();
}

}  // namespace strata
