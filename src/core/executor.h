// Executor: runs a planned graph. The plan (topological order, per-value last use,
// free names of subgraphs) is computed once; each run keeps its values in a Frame
// and releases every intermediate right after its last consumer, so the session's
// caching allocator hands the same buffers to values whose lifetimes do not overlap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "core/run_control.h"
#include "core/status.h"

namespace strata {

struct ExecOptions {
  KernelConfig kernel;
  Allocator* allocator = nullptr;  // nullptr: DefaultAllocator()
  // Optional kernel factory consulted before the CPU registry (provider partitions).
  std::function<Result<std::unique_ptr<OpKernel>>(const KernelInit&, std::string* impl)> custom_factory;
  // Optional: told after each top-level node's kernel is created (node index, kernel), so
  // the session can drop constants already packed before the next kernel packs its own
  // (core/constant_release.h). Not called for subgraph nodes.
  std::function<void(size_t node, const OpKernel* kernel)> on_kernel_created;
  // Run control (core/run_control.h), installed by each top-level run: terminate requests
  // (nullptr: none) and a deadline in ms (0: none).
  const RunTerminator* terminator = nullptr;
  int64_t run_timeout_ms = 0;
};

class Frame;

// Bit i set: output slot i of the node now being computed on this thread holds a
// caller-bound tensor, or a dying input's buffer (OpKernel::InPlaceInput), offered for
// writing (RunState::bound_outputs). Read and cleared by
// KernelContext::AllocateOutput, which uses the offer only once and only when the dtype
// and shape match; every other allocation is unaffected.
uint64_t& OfferedOutputs();

// Reusable storage of one graph execution: value slots and the kernel I/O scratch.
// A caller that runs the same executor again and again (an IoBinding) keeps one, so
// the executor's own bookkeeping is allocated once instead of on every run.
struct RunState {
  std::vector<Value> values;          // by value index
  std::vector<const Value*> in_ptrs;  // inputs of the node being run
  std::vector<Value> outs;            // outputs of the node being run
  // Optional, by graph output position: a caller tensor that output should be written
  // into directly (an invalid Tensor: none). Kernels that allocate their output with
  // the same dtype and shape write there; others are copied by the caller afterwards.
  const std::vector<Tensor>* bound_outputs = nullptr;
  // The run's own limits (a deadline, a terminator), besides the session's; may be null.
  const RunOptions* run_options = nullptr;
};

// Holds one kernel per node of one graph (and executors for its subgraphs).
class Executor {
 public:
  static Result<std::unique_ptr<Executor>> Create(std::shared_ptr<const Graph> graph, ThreadPool* pool,
                                                  const ExecOptions& opts);
  ~Executor();

  // Runs with values for graph.inputs (same order; an empty Value for an input that
  // has an initializer default). Returns graph.outputs in order. `outer` resolves
  // names captured from an enclosing graph (nullptr at top level).
  // `run`: a top-level run's own limits (core/run_control.h), or nullptr.
  Result<std::vector<Value>> Run(const std::vector<Value>& inputs, const Frame* outer = nullptr,
                                 const RunOptions* run = nullptr) const;
  // Top-level run reusing `state` from previous runs; graph outputs go to *results
  // (resized to graph.outputs.size()). Not for subgraphs.
  Status RunWith(RunState* state, const std::vector<Value>& inputs, std::vector<Value>* results) const;

  const Graph& graph() const { return *graph_; }
  // Implementation name of node i's kernel ("xnnpack", "ref", ...).
  const std::string& impl(size_t node) const { return impls_[node]; }
  // Node i's kernel (for ReleasePackedConstants at session creation).
  const OpKernel* kernel(size_t node) const { return kernels_[node].get(); }
  // The value whose buffer node i's output 0 may take over when nothing else holds it
  // (OpKernel::InPlaceInput, checked against the graph), or -1.
  int in_place_value(size_t node) const { return in_place_value_[node]; }
  // Names the graph reads from enclosing scopes (its own and its subgraphs').
  const std::vector<std::string>& free_names() const { return free_names_; }

 private:
  friend class Frame;
  Executor() = default;
  Status Plan();
  Status RunImpl(RunState* st, const std::vector<Value>& inputs, const Frame* outer, std::vector<Value>* results) const;
  const Executor* SubExecutor(const Graph* g) const;

  std::shared_ptr<const Graph> graph_;
  ThreadPool* pool_ = nullptr;
  ExecOptions opts_;
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::vector<std::string> impls_;
  std::vector<Value> constants_;                 // by value index; empty when not constant
  std::vector<std::vector<int>> release_after_;  // values freed right after node i
  std::vector<std::string> free_names_;
  std::vector<int> free_slots_;   // value index for each free name
  std::vector<int> output_pos_;   // by value index: position in graph.outputs, or -1
  std::vector<bool> input_slot_;  // by value index: a graph input
  // By node: the value whose buffer output 0 may take (OpKernel::InPlaceInput), or -1.
  std::vector<int> in_place_value_;
  std::unordered_map<const Graph*, std::unique_ptr<Executor>> subexecs_;
};

// Per-run value storage of one graph execution.
class Frame {
 public:
  // `values` is the slot storage (sized here); it outlives the frame.
  Frame(const Executor& exec, const Frame* outer, std::vector<Value>* values);
  // Looks a value up by name here, then in enclosing frames. nullptr if absent.
  const Value* Lookup(const std::string& name) const;

 private:
  friend class Executor;
  const Executor& exec_;
  const Frame* outer_;
  std::vector<Value>& values_;
};

}  // namespace strata
