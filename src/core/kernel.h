// The kernel interface. A kernel is created once per node at session creation
// (where it may prepack constant weights) and its Compute is const, so one
// kernel object serves concurrent runs of the same session.
#pragma once

#include <climits>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ir.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"

namespace strata {

// Session-wide settings a kernel may consult at creation time.
struct KernelConfig {
  bool bf16_fast_math = false;    // allow bf16 weights with fp32 accumulation
  bool prefer_reference = false;  // force the plain reference kernels (tests, debugging)
};

// What a kernel factory sees at session creation.
struct KernelInit {
  const Node& node;
  const Graph& graph;
  ThreadPool* pool = nullptr;
  KernelConfig config;

  size_t num_inputs() const { return node.inputs.size(); }
  bool has_input(size_t i) const { return i < node.inputs.size() && node.inputs[i] >= 0; }
  // The constant (initializer) feeding input i, or nullptr if it is computed at run time.
  const Tensor* constant_input(size_t i) const { return has_input(i) ? graph.Constant(node.inputs[i]) : nullptr; }
  // Declared/inferred type of input i (may be kUnknown).
  const TypeInfo& input_type(size_t i) const;
  const TypeInfo& output_type(size_t i) const;
};

// Runs a subgraph (If/Loop/Scan bodies). Outer-scope captures are resolved from the
// frame of the node that calls it.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual Result<std::vector<Value>> Run(const Graph& g, const std::vector<Value>& inputs) = 0;
};

class KernelContext {
 public:
  KernelContext(const Node& node, const std::vector<const Value*>& inputs, std::vector<Value>* outputs,
                ThreadPool* pool, Allocator* alloc, SubgraphRunner* runner)
      : node_(node), inputs_(inputs), outputs_(outputs), pool_(pool), alloc_(alloc), runner_(runner) {}

  const Node& node() const { return node_; }
  size_t num_inputs() const { return inputs_.size(); }
  // The value of input i; an empty Value when the input is omitted or out of range.
  const Value& input_value(size_t i) const;
  // The tensor of input i, or nullptr when omitted or not a tensor.
  const Tensor* input(size_t i) const;
  size_t num_outputs() const { return outputs_->size(); }
  // False for outputs the model leaves unnamed; the kernel may skip computing them.
  bool output_requested(size_t i) const { return i < node_.outputs.size() && node_.outputs[i] >= 0; }
  // Allocates output i with the given dtype and shape and returns it for writing.
  Result<Tensor*> AllocateOutput(size_t i, DataType dtype, Shape shape);
  // Sets output i directly: used for aliasing (Reshape/Identity) and sequences.
  void SetOutput(size_t i, Value v);
  ThreadPool* pool() const { return pool_; }
  Allocator* allocator() const { return alloc_; }
  SubgraphRunner* subgraphs() const { return runner_; }
  // This node's context with other inputs (same outputs, pool and allocator): for a kernel
  // that rewrites an input, e.g. scales it, and hands the node on to an inner kernel.
  // `inputs` must outlive the returned context.
  KernelContext WithInputs(const std::vector<const Value*>& inputs) const {
    return KernelContext(node_, inputs, outputs_, pool_, alloc_, runner_);
  }

 private:
  const Node& node_;
  const std::vector<const Value*>& inputs_;
  std::vector<Value>* outputs_;
  ThreadPool* pool_;
  Allocator* alloc_;
  SubgraphRunner* runner_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Compute(KernelContext& ctx) const = 0;
  // The input whose buffer output 0 may take over, or -1 (the default: none). A kernel
  // returns i only if it handles AllocateOutput(0) handing back input i's own buffer
  // (same dtype and shape): each output element is then written only after the input
  // element at the same index has been read, and nothing else of input i is read after.
  // The executor offers the buffer only when this node is the value's last reader and
  // nothing else holds the buffer (not a graph input, output, constant or alias), so a
  // Conv with a fused residual Add writes the sum over the residual, as an in-place Add
  // would, instead of into a cold new buffer.
  virtual int InPlaceInput() const { return -1; }
  // The implementation this kernel is, when its registry entry's factory chooses among
  // several (NhwcConv: Winograd, the SGEMM conv, bf16, XNNPACK, ...); nullptr (the default)
  // reports the entry's `impl`. Shown by `strata run -v` and in the session's assignments.
  virtual const char* ImplName() const { return nullptr; }
};

// Wraps a callable `Status(KernelContext&)` as a kernel (for stateless ops).
template <typename F>
class FnKernel final : public OpKernel {
 public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  Status Compute(KernelContext& ctx) const override { return f_(ctx); }

 private:
  F f_;
};
template <typename F>
std::unique_ptr<OpKernel> MakeFnKernel(F f) {
  return std::make_unique<FnKernel<F>>(std::move(f));
}

using KernelFactory = std::function<Result<std::unique_ptr<OpKernel>>(const KernelInit&)>;

// A registered implementation, keyed on (domain, op type, opset range, dtype).
struct KernelDef {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int since_version = 1;
  int end_version = INT_MAX;  // inclusive
  // Allowed dtypes of input `type_input` (the dispatch key). Empty: any dtype.
  std::vector<DataType> types;
  int type_input = 0;
  KernelFactory factory;
  // Optional: false for nodes this entry does not cover (an option is off, a shape it does
  // not handle). Select then passes to the next-best entry, so the reported impl names the
  // kernel that really runs. Empty: covers every node that matches the key.
  std::function<bool(const KernelInit&)> covers;
  // True for the plain reference implementation (the test oracle). When an op has an
  // optimized kernel too, the optimized one is preferred unless reference is asked for.
  bool reference = true;
  std::string impl = "ref";  // "ref", "xnnpack", "avx512", ... shown by --verbose
};

class KernelRegistry {
 public:
  void Register(KernelDef def);
  // Best match for the node's domain/op/opset and dtype of its type input.
  // `want_reference` selects the reference kernel even when an optimized one exists.
  const KernelDef* Find(const std::string& domain, const std::string& op_type, int opset, DataType dtype,
                        bool want_reference = false) const;
  // Like Find for init.node, skipping entries whose `covers` rejects the node: the entry a
  // session creates the node's kernel from.
  const KernelDef* Select(const KernelInit& init, DataType dtype, bool want_reference = false) const;
  // True if some kernel covers this op at this opset (any dtype).
  bool Supports(const std::string& domain, const std::string& op_type, int opset) const;
  // All kernels for an op, for tests that compare optimized with reference.
  std::vector<const KernelDef*> FindAll(const std::string& domain, const std::string& op_type) const;
  const std::vector<KernelDef>& all() const { return defs_; }
  // Run once on each pool worker thread at session creation (ThreadPool's init): the
  // kernels' per-thread scratch is made then, not in whichever run a worker first works.
  void SetThreadInit(void (*fn)()) { thread_init_ = fn; }
  void (*thread_init() const)() { return thread_init_; }

 private:
  const KernelDef* Best(const std::string& domain, const std::string& op_type, int opset, DataType dtype,
                        bool want_reference, const KernelInit* init) const;
  std::vector<KernelDef> defs_;
  void (*thread_init_)() = nullptr;
};

// The CPU kernel registry, built once on first use by explicit registration calls
// (src/cpu/register.cc); there are no static-initializer registries.
const KernelRegistry& CpuKernels();

// Helpers shared by kernels.
// Normalises a possibly negative axis against rank; error names the node.
Result<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node);
// Numpy-style broadcast of two shapes; error names the node.
Result<Shape> BroadcastShapes(const Shape& a, const Shape& b, const Node& node);

}  // namespace strata
