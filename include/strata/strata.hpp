// strata.hpp: a header-only C++17 RAII wrapper over the C API in strata.h.
// Errors become strata::Error exceptions on the caller's side of the ABI; the
// library itself never throws across it.
#ifndef STRATA_STRATA_HPP_
#define STRATA_STRATA_HPP_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "strata/strata.h"

namespace strata {

/// An error returned by the C API, with its code.
class Error : public std::runtime_error {
 public:
  Error(strata_status_code code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  strata_status_code code() const noexcept { return code_; }

 private:
  strata_status_code code_;
};

namespace detail {
/// Throws strata::Error for a non-NULL status (and releases it).
inline void Check(strata_status* st) {
  if (!st) return;
  strata_status_code code = strata_status_get_code(st);
  std::string msg = strata_status_get_message(st);
  strata_status_release(st);
  throw Error(code, msg);
}
template <typename T, void (*D)(T*)>
struct Deleter {
  void operator()(T* p) const noexcept { D(p); }
};
}  // namespace detail

/// Library version string.
inline std::string Version() { return strata_version(); }

/// A tensor owned by this object (or wrapping caller memory), or a sequence, map or empty optional.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(strata_tensor* raw) : p_(raw) {}
  /// Allocates a zero-filled tensor.
  static Tensor Create(strata_dtype dtype, const std::vector<int64_t>& dims) {
    strata_tensor* t = nullptr;
    detail::Check(strata_tensor_create(dtype, dims.data(), dims.size(), &t));
    return Tensor(t);
  }
  /// Wraps caller memory without copying; the caller keeps `data` alive.
  template <typename T>
  static Tensor Wrap(strata_dtype dtype, const std::vector<int64_t>& dims, T* data, size_t count) {
    strata_tensor* t = nullptr;
    detail::Check(strata_tensor_wrap(dtype, dims.data(), dims.size(), data, count * sizeof(T), &t));
    return Tensor(t);
  }
  strata_dtype dtype() const { return strata_tensor_dtype(p_.get()); }
  std::vector<int64_t> shape() const {
    const int64_t* d = strata_tensor_dims(p_.get());
    return std::vector<int64_t>(d, d + strata_tensor_rank(p_.get()));
  }
  int64_t size() const { return strata_tensor_element_count(p_.get()); }
  template <typename T>
  T* data() {
    return static_cast<T*>(strata_tensor_data(p_.get()));
  }
  /// A string tensor of `dims` holding `values` (row-major; bytes, NULs allowed).
  static Tensor Strings(const std::vector<int64_t>& dims, const std::vector<std::string>& values) {
    Tensor t = Create(STRATA_DTYPE_STRING, dims);
    if (values.size() != static_cast<size_t>(t.size()))
      throw Error(STRATA_INVALID_ARGUMENT,
                  std::to_string(values.size()) + " strings for a tensor of " + std::to_string(t.size()) + " elements");
    for (size_t i = 0; i < values.size(); ++i)
      detail::Check(strata_tensor_set_string(t.get(), i, values[i].data(), values[i].size()));
    return t;
  }
  /// String `i` of a string tensor (bytes, NULs kept).
  std::string String(size_t i) const {
    const char* d = nullptr;
    size_t n = 0;
    detail::Check(strata_tensor_get_string(p_.get(), i, &d, &n));
    return std::string(d, n);
  }
  strata_tensor* get() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

  // Non-tensor values (a sequence, a map, an empty optional) use the same handle.
  strata_value_kind kind() const { return strata_value_kind_of(p_.get()); }
  /// A tensor's dtype, a sequence's item dtype, a map's value dtype.
  strata_dtype elem_dtype() const { return strata_value_elem_dtype(p_.get()); }
  /// A sequence of `items` (tensors of one dtype, or maps of one type); the items' memory is shared.
  static Tensor Sequence(const std::vector<const Tensor*>& items, strata_dtype elem_dtype = STRATA_DTYPE_UNDEFINED) {
    std::vector<const strata_tensor*> raw;
    for (const Tensor* t : items) raw.push_back(t->get());
    strata_tensor* out = nullptr;
    detail::Check(strata_value_create_sequence(raw.data(), raw.size(), elem_dtype, &out));
    return Tensor(out);
  }
  /// A map of 1-D `keys` (int64 or string) and `values`, sorted by key; repeated keys throw.
  static Tensor Map(const Tensor& keys, const Tensor& values) {
    strata_tensor* out = nullptr;
    detail::Check(strata_value_create_map(keys.get(), values.get(), &out));
    return Tensor(out);
  }
  /// An optional without a value.
  static Tensor None() {
    strata_tensor* out = nullptr;
    detail::Check(strata_value_create_none(&out));
    return Tensor(out);
  }
  /// The items of a sequence (sharing its memory).
  std::vector<Tensor> Items() const {
    size_t n = 0;
    detail::Check(strata_value_sequence_length(p_.get(), &n));
    std::vector<Tensor> items;
    for (size_t i = 0; i < n; ++i) {
      strata_tensor* t = nullptr;
      detail::Check(strata_value_sequence_item(p_.get(), i, &t));
      items.emplace_back(t);
    }
    return items;
  }
  /// A map's keys (ascending) and values, as 1-D tensors sharing its memory.
  std::pair<Tensor, Tensor> MapEntries() const {
    strata_tensor* k = nullptr;
    strata_tensor* v = nullptr;
    detail::Check(strata_value_map_entries(p_.get(), &k, &v));
    return {Tensor(k), Tensor(v)};
  }

 private:
  std::unique_ptr<strata_tensor, detail::Deleter<strata_tensor, strata_tensor_destroy>> p_;
};

/// Process-level environment.
class Env {
 public:
  Env() {
    strata_env* e = nullptr;
    detail::Check(strata_env_create(&e));
    p_.reset(e);
  }
  /// True if a capability (e.g. "cuda.weight_prepack") is available. Never throws.
  bool HasCapability(const std::string& name) const { return strata_has_capability(p_.get(), name.c_str()) != 0; }
  strata_env* get() const { return p_.get(); }

 private:
  std::unique_ptr<strata_env, detail::Deleter<strata_env, strata_env_destroy>> p_;
};

/// Session options (threads, optimization level, providers, precision).
class SessionOptions {
 public:
  SessionOptions() {
    strata_session_options* o = nullptr;
    detail::Check(strata_session_options_create(&o));
    p_.reset(o);
  }
  SessionOptions& SetThreads(int n) {
    detail::Check(strata_session_options_set_threads(p_.get(), n));
    return *this;
  }
  SessionOptions& SetOptimizationLevel(int level) {
    detail::Check(strata_session_options_set_optimization_level(p_.get(), level));
    return *this;
  }
  /// "cpu", "auto", or provider names in preference order, comma separated.
  SessionOptions& SetProviders(const std::string& list) {
    detail::Check(strata_session_options_set_providers(p_.get(), list.c_str()));
    return *this;
  }
  SessionOptions& AddProviderPath(const std::string& path) {
    detail::Check(strata_session_options_add_provider_path(p_.get(), path.c_str()));
    return *this;
  }
  SessionOptions& Set(const std::string& key, const std::string& value) {
    detail::Check(strata_session_options_set(p_.get(), key.c_str(), value.c_str()));
    return *this;
  }
  const strata_session_options* get() const { return p_.get(); }

 private:
  std::unique_ptr<strata_session_options, detail::Deleter<strata_session_options, strata_session_options_destroy>> p_;
};

/// Limits for the runs given these options, besides the session's: a deadline of their own
/// ("timeout_ms") and Terminate(), which ends only those runs. Must outlive the runs.
class RunOptions {
 public:
  RunOptions() {
    strata_run_options* o = nullptr;
    detail::Check(strata_run_options_create(&o));
    p_.reset(o);
  }
  /// Keys: "timeout_ms" = N (0: no deadline of its own).
  RunOptions& Set(const std::string& key, const std::string& value) {
    detail::Check(strata_run_options_set(p_.get(), key.c_str(), value.c_str()));
    return *this;
  }
  /// Ends the runs given these options in progress now (they throw Error with
  /// STRATA_CANCELLED); later runs are unaffected. Safe from any thread.
  void Terminate() { strata_run_options_terminate(p_.get()); }
  const strata_run_options* get() const { return p_.get(); }

 private:
  std::unique_ptr<strata_run_options, detail::Deleter<strata_run_options, strata_run_options_destroy>> p_;
};

/// Metadata of a model input or output.
struct ValueInfo {
  std::string name;
  strata_dtype dtype = STRATA_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;  // -1 for dynamic dims
  std::string type;           // ONNX type: "tensor(float)", "seq(map(int64,tensor(float)))", ...
};

/// A loaded, planned model. Run() may be called from several threads at once.
class Session {
 public:
  Session(const Env& env, const std::string& path, const SessionOptions* opts = nullptr) {
    strata_session* s = nullptr;
    detail::Check(strata_session_create(env.get(), path.c_str(), opts ? opts->get() : nullptr, &s));
    p_.reset(s);
  }
  Session(const Env& env, const void* data, size_t size, const SessionOptions* opts = nullptr) {
    strata_session* s = nullptr;
    detail::Check(strata_session_create_from_memory(env.get(), data, size, opts ? opts->get() : nullptr, &s));
    p_.reset(s);
  }
  std::vector<ValueInfo> Inputs() const { return Infos(true); }
  std::vector<ValueInfo> Outputs() const { return Infos(false); }

  /// Runs with named inputs; returns all outputs in model order. `run`: per-run options, or null.
  std::vector<Tensor> Run(const std::vector<std::pair<std::string, const Tensor*>>& feeds,
                          const RunOptions* run = nullptr) {
    std::vector<const char*> names;
    std::vector<const strata_tensor*> ins;
    for (const auto& f : feeds) {
      names.push_back(f.first.c_str());
      ins.push_back(f.second->get());
    }
    size_t n = strata_session_output_count(p_.get());
    std::vector<strata_tensor*> outs(n, nullptr);
    detail::Check(strata_session_run_with_options(p_.get(), run ? run->get() : nullptr, names.data(), ins.data(),
                                                  ins.size(), nullptr, outs.data(), n));
    std::vector<Tensor> result;
    for (strata_tensor* t : outs) result.emplace_back(t);
    return result;
  }
  /// Ends the runs in progress (they throw Error with STRATA_CANCELLED); later runs are
  /// unaffected. Safe from any thread, also while Run is in progress on others.
  void TerminateRuns() { strata_session_terminate_runs(p_.get()); }
  strata_session* get() const { return p_.get(); }

 private:
  std::vector<ValueInfo> Infos(bool inputs) const {
    size_t n = inputs ? strata_session_input_count(p_.get()) : strata_session_output_count(p_.get());
    std::vector<ValueInfo> out(n);
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      size_t rank = 0;
      int64_t dims[64];
      auto fn = inputs ? strata_session_input_info : strata_session_output_info;
      detail::Check(fn(p_.get(), i, &name, &out[i].dtype, &rank, dims, 64));
      out[i].name = name;
      out[i].dims.assign(dims, dims + rank);
      const char* type = nullptr;
      detail::Check((inputs ? strata_session_input_type : strata_session_output_type)(p_.get(), i, &type));
      out[i].type = type;
    }
    return out;
  }
  std::unique_ptr<strata_session, detail::Deleter<strata_session, strata_session_destroy>> p_;
};

/// Caller-owned input and output buffers bound to a session, for repeated runs that
/// reuse all per-run state (see docs/hardening.md, "Real-time use"). Used by one
/// thread at a time; the session and the bound memory must outlive it. Run() does not
/// allocate on the caller's side: errors are the only path that builds a string.
class IoBinding {
 public:
  explicit IoBinding(Session& session) : session_(session.get()) {
    strata_io_binding* b = nullptr;
    detail::Check(strata_io_binding_create(session_, &b));
    p_.reset(b);
  }
  /// Binds `tensor`'s memory (read in place on every run) to the input `name`.
  IoBinding& BindInput(const std::string& name, const Tensor& tensor) {
    detail::Check(strata_io_binding_bind_input(p_.get(), name.c_str(), tensor.get()));
    return *this;
  }
  /// Binds a caller-owned buffer that receives the output `name` on every run.
  IoBinding& BindOutput(const std::string& name, Tensor& tensor) {
    detail::Check(strata_io_binding_bind_output(p_.get(), name.c_str(), tensor.get()));
    return *this;
  }
  void Clear() { strata_io_binding_clear(p_.get()); }
  /// Runs the session with the bound buffers; outputs land in the bound tensors.
  /// `run`: per-run options, or null.
  void Run(const RunOptions* run = nullptr) {
    detail::Check(strata_session_run_binding_with_options(session_, p_.get(), run ? run->get() : nullptr));
  }
  /// True if the last run wrote every bound output in place (no copy).
  bool OutputsInPlace() const { return strata_io_binding_outputs_in_place(p_.get()) != 0; }
  strata_io_binding* get() const { return p_.get(); }

 private:
  strata_session* session_;
  std::unique_ptr<strata_io_binding, detail::Deleter<strata_io_binding, strata_io_binding_destroy>> p_;
};

}  // namespace strata

#endif  // STRATA_STRATA_HPP_
