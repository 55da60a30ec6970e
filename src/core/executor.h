// Executor: runs a planned graph. The plan (topological order, per-value last use)
// is computed once; each run holds its values in a frame and releases every
// intermediate right after its last consumer, so the caching allocator reuses
// buffers whose lifetimes do not overlap.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "core/status.h"

namespace strata {

struct ExecOptions {
  KernelConfig kernel;
  size_t memory_cap_bytes = 0;
};

class Executor {
 public:
  // Creates a kernel for every node of `graph` (and, recursively, of its subgraphs).
  static Result<std::unique_ptr<Executor>> Create(std::shared_ptr<const Graph> graph, ThreadPool* pool,
                                                  const ExecOptions& opts);
  ~Executor();

  // Runs with graph-input values in `inputs` (indexed like graph.inputs). Returns the
  // graph outputs in order. `outer` resolves captured names (nullptr at top level).
  Result<std::vector<Value>> Run(const std::vector<Value>& inputs, const class Frame* outer = nullptr) const;

  const Graph& graph() const { return *graph_; }
  // Implementation name of node i's kernel ("xnnpack", "ref", ...).
  const std::string& impl(size_t node) const { return impls_[node]; }

 private:
  Executor() = default;
  std::shared_ptr<const Graph> graph_;
  ThreadPool* pool_ = nullptr;
  ExecOptions opts_;
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::vector<std::string> impls_;
  // release_after_[i]: values whose last use is node i (freed right after it runs).
  std::vector<std::vector<int>> release_after_;
  // Executors for subgraph attributes, keyed by Graph pointer.
  std::vector<std::pair<const Graph*, std::unique_ptr<Executor>>> subexecs_;
  friend class FrameRunner;
};

}  // namespace strata
