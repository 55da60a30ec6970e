#include "core/run_control.h"

namespace strata {
namespace {
thread_local const RunControlScope::State* t_active = nullptr;
}  // namespace

RunControlScope::RunControlScope(const RunTerminator* terminator, int64_t timeout_ms) {
  state_.terminator = terminator;
  state_.start_epoch = terminator != nullptr ? terminator->epoch() : 0;
  state_.timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  state_.start = std::chrono::steady_clock::now();
  state_.deadline = state_.start + std::chrono::milliseconds(state_.timeout_ms);
  saved_ = t_active;
  t_active = &state_;
}

RunControlScope::~RunControlScope() { t_active = saved_; }

Status CheckRunControl() {
  const RunControlScope::State* s = t_active;
  if (s == nullptr) return Status::Ok();
  if (s->terminator != nullptr && s->terminator->epoch() != s->start_epoch)
    return MakeStatus(StatusCode::kCancelled, "run terminated (strata_session_terminate_runs)");
  if (s->timeout_ms > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= s->deadline) {
      const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - s->start).count();
      return MakeStatus(StatusCode::kCancelled, "run passed its deadline of ", s->timeout_ms,
                        " ms (run_timeout_ms) after ", ran, " ms");
    }
  }
  return Status::Ok();
}

}  // namespace strata
