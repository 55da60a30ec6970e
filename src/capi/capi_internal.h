// Definitions of the opaque C API handles and helpers shared by src/capi/*.cc.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/session.h"
#include "core/status.h"
#include "core/tensor.h"
#include "strata/strata.h"

struct strata_status {
  strata_status_code code;
  std::string message;
};

struct strata_session_options {
  strata::SessionOptions opts;
};

struct strata_session {
  strata_env* env = nullptr;
  std::unique_ptr<strata::Session> session;
};

struct strata_tensor {
  strata::Tensor tensor;
};

struct strata_run_options {
  strata::RunOptions opts;
};

namespace strata::capi {

// Converts an internal Status into a C status (nullptr on success).
strata_status* ToC(const Status& st);
strata_status* MakeError(strata_status_code code, const std::string& msg);

// A decimal count in [0, max]: digits only, the whole string, no overflow.
bool ParseCount(const std::string& v, unsigned long long max, unsigned long long* out);

// Runs `fn` (returning strata_status*), turning any escaping C++ exception into a status:
// nothing may unwind across the C boundary.
template <typename F>
strata_status* Guard(F&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return MakeError(STRATA_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return MakeError(STRATA_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return MakeError(STRATA_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace strata::capi

#define STRATA_CHECK_ARG(cond, msg) \
  do {                              \
    if (!(cond)) return ::strata::capi::MakeError(STRATA_INVALID_ARGUMENT, msg); \
  } while (0)
