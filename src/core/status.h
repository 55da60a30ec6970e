// Status and Result<T>: the internal error currency. Nothing in the core throws
// across an API boundary; every fallible function returns one of these.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace strata {

// Values match strata_status_code in include/strata/strata.h.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // bad caller input: a flag, a tensor, a name
  kInvalidModel = 2,      // model does not parse, fails the checker, is malformed
  kUnsupported = 3,       // unsupported op, dtype or feature
  kNotFound = 4,          // a file, input, output or provider is missing
  kRuntimeError = 5,      // a kernel failed while running
  kOutOfMemory = 6,       // allocation failed or a memory cap was hit
  kProviderError = 7,     // an accelerator provider could not be used
  kIOError = 8,           // reading or writing a file failed
  kInternal = 9,          // a bug in strata
  kCancelled = 10,        // a run was terminated or passed its deadline
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_MODEL: message"
  std::string ToString() const;
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

namespace detail {
template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Concatenates all arguments with operator<< into one message.
template <typename... Args>
Status MakeStatus(StatusCode code, Args&&... args) {
  return Status(code, detail::StrCat(std::forward<Args>(args)...));
}
template <typename... Args>
Status InvalidArgument(Args&&... args) {
  return MakeStatus(StatusCode::kInvalidArgument, std::forward<Args>(args)...);
}
template <typename... Args>
Status InvalidModel(Args&&... args) {
  return MakeStatus(StatusCode::kInvalidModel, std::forward<Args>(args)...);
}
template <typename... Args>
Status Unsupported(Args&&... args) {
  return MakeStatus(StatusCode::kUnsupported, std::forward<Args>(args)...);
}
template <typename... Args>
Status NotFound(Args&&... args) {
  return MakeStatus(StatusCode::kNotFound, std::forward<Args>(args)...);
}
template <typename... Args>
Status RuntimeError(Args&&... args) {
  return MakeStatus(StatusCode::kRuntimeError, std::forward<Args>(args)...);
}
template <typename... Args>
Status InternalError(Args&&... args) {
  return MakeStatus(StatusCode::kInternal, std::forward<Args>(args)...);
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace strata

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::strata::Status _st = (expr);             \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// ASSIGN_OR_RETURN(auto x, Foo()); declares x from a Result or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(STRATA_CONCAT(_res_, __LINE__), lhs, expr)
