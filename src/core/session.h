// Session: the internal C++ engine object behind strata_session. Import ->
// optimize -> partition -> create kernels -> plan, once; then Run, many times,
// possibly from several threads at once.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "core/run_control.h"
#include "core/status.h"

namespace strata {

namespace plugin {
class ProviderManager;
}

struct SessionOptions {
  int threads = 0;            // 0: online CPUs
  int optimization_level = 99;
  // "cpu" (default), "auto", or provider names in preference order.
  std::vector<std::string> providers = {"cpu"};
  std::vector<std::string> provider_paths;  // explicit provider library paths/folders
  KernelConfig kernel;
  size_t memory_cap_bytes = 0;  // 0: no cap on a single tensor
  int64_t run_timeout_ms = 0;   // 0: no deadline (core/run_control.h)
  // Options for accelerator providers, "<provider>.<key>" -> value ("cuda.precision" ->
  // "fp16"). Each reaches only the named provider's compile, prefix removed; a provider
  // refuses keys it does not know. Naming a provider the session cannot use is an error,
  // except under "auto", where it applies only if that provider is picked.
  std::vector<std::pair<std::string, std::string>> provider_options;
  // Where providers are discovered and loaded; nullptr: the process-wide manager.
  plugin::ProviderManager* provider_manager = nullptr;
};

struct NodeAssignment {
  std::string node_name;
  std::string op_type;
  std::string provider;  // "cpu", "ref", "cuda", ...
  std::string impl;      // kernel implementation ("xnnpack", "ref", ...)
};

class Executor;          // core/executor.h
class CachingAllocator;  // core/caching_allocator.h
struct ImportOptions;    // core/onnx_import.h
struct ExecOptions;

// Splits a provider option name "cuda.precision" into ("cuda", "precision"); an error
// names the option when it is not "<provider>.<key>" with a provider name of [a-z0-9_].
Status SplitProviderOption(const std::string& full, std::string* provider, std::string* key);

class Session {
 public:
  static Result<std::unique_ptr<Session>> CreateFromFile(const std::string& path, const SessionOptions& opts);
  static Result<std::unique_ptr<Session>> CreateFromBytes(const void* data, size_t size,
                                                          const SessionOptions& opts);
  ~Session();

  const Model& model() const { return *model_; }
  // Declared graph inputs (excluding initializers) and outputs.
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }

  // Runs with named feeds; returns the requested outputs (all, in order, if `output_names`
  // is empty). `run`: this run's own deadline and terminator besides the session's
  // (core/run_control.h), or nullptr. Thread-safe.
  Result<std::vector<Value>> Run(const std::vector<std::pair<std::string, Value>>& feeds,
                                 const std::vector<std::string>& output_names = {},
                                 const RunOptions* run = nullptr) const;

  // Ends the runs in progress at the call with kCancelled (core/run_control.h); later runs
  // are unaffected. Thread-safe, also while runs are in progress.
  void TerminateRuns() { terminator_->Terminate(); }

  const std::vector<NodeAssignment>& assignments() const { return assignments_; }
  const SessionOptions& options() const { return opts_; }
  // What provider selection decided: "auto: picked vulkan; skipped cuda: MISSING_DEPENDENCY ...".
  const std::vector<std::string>& provider_notes() const { return provider_notes_; }

 private:
  friend class IoBinding;  // core/io_binding.h: runs the executor with reused state
  Session() = default;
  Status Init(std::shared_ptr<Model> model, const SessionOptions& opts);
  // Loads and partitions for the requested providers (session_providers.cc).
  Status SetUpProviders(Graph& g, ExecOptions* eo);
  static void SetKernelPredicate(ImportOptions* io);
  static Status CheckInput(const ValueInfo& vi, const Value& v);
  static Status CheckMapTypes(const ValueInfo& vi, const TypeInfo& t, const Value& v);

  SessionOptions opts_;
  std::shared_ptr<Model> model_;
  std::vector<ValueInfo> inputs_;
  std::vector<ValueInfo> outputs_;
  std::vector<NodeAssignment> assignments_;
  std::vector<std::string> provider_notes_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CachingAllocator> allocator_;
  // Keeps loaded provider libraries alive as long as the session (opaque here).
  std::vector<std::shared_ptr<void>> provider_handles_;
  // Read by every run of exec_ (ExecOptions::terminator): declared first, so it outlives it.
  std::unique_ptr<RunTerminator> terminator_ = std::make_unique<RunTerminator>();
  std::unique_ptr<Executor> exec_;
};

}  // namespace strata
