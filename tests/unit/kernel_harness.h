// Test harness for CPU kernels: runs one node through a kernel taken from
// CpuKernels() without importer, optimizer or executor, by building the Graph, Node,
// KernelInit and KernelContext directly. Also: tensor comparison with rtol/atol,
// seeded random tensors, and value extraction helpers.
//
//   OpSpec spec("LeakyRelu", 16);
//   spec.Attr("alpha", 0.1f);
//   auto out = RunKernel(spec, {RandomTensor(DataType::kFloat, {2, 3}, /*seed=*/1)});
//   ASSERT_TRUE(out.ok()) << out.status().ToString();
//   EXPECT_TRUE(OptimizedMatchesReference(spec, inputs, 1e-5, 1e-6));
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ir.h"
#include "core/kernel.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata::testing {

// One node to run: op type, domain, opset and attributes.
struct OpSpec {
  std::string op_type;
  int opset = 17;
  std::string domain;  // "" = ai.onnx
  std::map<std::string, Attribute> attrs;
  int num_outputs = 1;

  explicit OpSpec(std::string op, int opset_version = 17, std::string dom = "")
      : op_type(std::move(op)), opset(opset_version), domain(std::move(dom)) {}

  OpSpec& Attr(const std::string& name, int64_t v);
  OpSpec& Attr(const std::string& name, int v) { return Attr(name, static_cast<int64_t>(v)); }
  OpSpec& Attr(const std::string& name, float v);
  OpSpec& Attr(const std::string& name, double v) { return Attr(name, static_cast<float>(v)); }
  OpSpec& Attr(const std::string& name, const std::string& v);
  OpSpec& Attr(const std::string& name, const char* v) { return Attr(name, std::string(v)); }
  OpSpec& Attr(const std::string& name, const std::vector<int64_t>& v);
  OpSpec& Attr(const std::string& name, const std::vector<float>& v);
  OpSpec& Attr(const std::string& name, const std::vector<std::string>& v);
  OpSpec& Attr(const std::string& name, const Tensor& v);
  OpSpec& Outputs(int n) {
    num_outputs = n;
    return *this;
  }
};

struct RunOptions {
  bool want_reference = false;          // pick the reference kernel even if an optimized one exists
  int threads = 1;                      // > 1 runs with a shared ThreadPool of that size
  std::vector<size_t> constant_inputs;  // these inputs become initializers (KernelInit::constant_input)
  KernelConfig config;
  // Run exactly this kernel instead of the registry's choice (e.g. to check that a
  // kernel rejects a dtype the registry would never route to it).
  const KernelDef* force_kernel = nullptr;
};

// The one-node graph the harness runs: every present input is a graph input (constant
// ones also initializers), every output a graph output. `node` is not yet added to `g`.
Status BuildSingleNodeGraph(const OpSpec& spec, const std::vector<Value>& inputs, const RunOptions& opts, Graph* g,
                            Node* node);

// Runs the node on `inputs` (an empty Value marks an omitted optional input) and
// returns all its outputs. Errors from kernel lookup, creation or Compute come back
// unchanged so tests can check codes and messages.
Result<std::vector<Value>> RunKernelValues(const OpSpec& spec, const std::vector<Value>& inputs,
                                           const RunOptions& opts = {});
// Tensor form: an invalid Tensor() marks an omitted input; every output must be a tensor.
Result<std::vector<Tensor>> RunKernel(const OpSpec& spec, const std::vector<Tensor>& inputs,
                                      const RunOptions& opts = {});

// The kernel the session would choose (dispatch dtype taken from the def's type_input).
const KernelDef* FindKernel(const OpSpec& spec, const std::vector<Value>& inputs, bool want_reference);
// True when an optimized (non-reference) kernel covers the op at this opset and dtype.
bool HasOptimizedKernel(const OpSpec& spec, DataType dtype);

// Same dtype and shape, and |e - a| <= atol + rtol * |e| elementwise (NaN matches NaN,
// infinities must match exactly). Floats of every width are compared as double.
::testing::AssertionResult TensorsNear(const Tensor& expected, const Tensor& actual, double rtol = 1e-5,
                                       double atol = 1e-6);
// Exact equality (NaN matches NaN).
::testing::AssertionResult TensorsEqual(const Tensor& expected, const Tensor& actual);
// Runs the optimized and the reference kernel on the same inputs and compares every
// output. Fails if the op has no optimized kernel for the dtype of input 0.
::testing::AssertionResult OptimizedMatchesReference(const OpSpec& spec, const std::vector<Tensor>& inputs,
                                                     double rtol = 1e-5, double atol = 1e-6, int threads = 1);

// Seeded random tensor. Floats are uniform in [lo, hi); integers uniform in [lo, hi]
// clipped to the type's range; bools are fair coin flips.
Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);
// Seeded random shape of the given rank with dims in [min_dim, max_dim].
Shape RandomShape(size_t rank, uint64_t seed, int64_t min_dim = 1, int64_t max_dim = 5);

// Any numeric/bool tensor as doubles (fp16/bf16 widened exactly).
std::vector<double> ToDoubles(const Tensor& t);
// Typed element copy; T must match the dtype.
template <typename T>
std::vector<T> ToVector(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.num_elements());
}
// Builds a tensor of dtype `dt` from double values (converted like static_cast).
Tensor MakeTensor(DataType dt, const Shape& shape, const std::vector<double>& values);

}  // namespace strata::testing
