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
  // ONNX type strings of the inputs and outputs (strata_session_input_type), made on creation.
  std::vector<std::string> input_types, output_types;
};

// A tensor, or (when `value` is not empty) a sequence, map or empty optional; `tensor` is
// then invalid, so the strata_tensor_* accessors see an empty tensor.
struct strata_tensor {
  strata::Tensor tensor;
  strata::Value value;
};

struct strata_run_options {
  strata::RunOptions opts;
};

namespace strata::capi {

inline strata::DataType ToDType(strata_dtype d) { return static_cast<strata::DataType>(d); }
// Whether `d` is one of the strata_dtype values (not UNDEFINED).
bool ValidDType(strata_dtype d);

// What a handle holds, as a Value (a tensor handle as a tensor Value).
inline strata::Value AsValue(const strata_tensor& t) { return t.value.empty() ? strata::Value(t.tensor) : t.value; }
// A new handle holding `v`.
strata_tensor* NewHandle(strata::Value v);
// Fills the session's input_types/output_types (capi_value.cc).
void FillTypeStrings(strata_session* s);
// A copy of `v` sharing no memory with it (tensors, sequence items, map keys and values).
strata::Result<strata::Value> DeepCopy(const strata::Value& v);

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
