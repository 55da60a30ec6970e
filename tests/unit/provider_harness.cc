#include "provider_harness.h"

#include <unistd.h>

#include <map>
#include <mutex>

#include "plugin/partition.h"

namespace strata::testing {
namespace {

std::string LibraryFor(const std::string& name) {
  const std::string lib = std::string(STRATA_BINARY_DIR) + "/lib/strata/";
  if (name == "ref") return lib + "test-providers/libstrata-provider-ref.so";
  return lib + "providers/libstrata-provider-" + name + ".so";
}

}  // namespace

const ProviderUnderTest& LoadProviderForTest(const std::string& name) {
  // One manager per provider, kept for the whole process: devices and compiled
  // pipelines are reused by every case, and providers are never unloaded mid-run.
  static std::mutex mu;
  static auto* loaded =
      new std::map<std::string, std::pair<std::unique_ptr<plugin::ProviderManager>, ProviderUnderTest>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(name);
  if (it != loaded->end()) return it->second.second;
  auto& slot = (*loaded)[name];
  slot.first = std::make_unique<plugin::ProviderManager>();
  ProviderUnderTest& put = slot.second;
  const std::string path = LibraryFor(name);
  if (::access(path.c_str(), R_OK) != 0) {
    put.skip = "the " + name + " provider is not built in this tree (" + path + " is missing)";
    return put;
  }
  Status st = slot.first->Discover({path}, /*load=*/true);
  if (!st.ok()) {
    put.skip = "provider discovery failed: " + st.ToString();
    return put;
  }
  for (const auto& e : slot.first->Report()) {
    if (e.name == name && e.status != plugin::ProviderStatus::kOk) {
      put.skip = "no usable " + name + " device here: " + e.ToString();
      return put;
    }
  }
  auto p = slot.first->Acquire(name);
  if (!p.ok()) {
    put.skip = "the " + name + " provider does not load: " + p.status().ToString();
    return put;
  }
  put.provider = *p;
  return put;
}

Result<std::vector<Tensor>> RunOnProvider(const std::string& provider, const OpSpec& spec,
                                          const std::vector<Tensor>& inputs, const RunOptions& opts) {
  const ProviderUnderTest& put = LoadProviderForTest(provider);
  if (!put.provider) return MakeStatus(StatusCode::kProviderError, put.skip);
  std::vector<Value> values;
  for (const Tensor& t : inputs) values.push_back(t.valid() ? Value(t) : Value());
  Graph g;
  Node node;
  RETURN_IF_ERROR(BuildSingleNodeGraph(spec, values, opts, &g, &node));
  // value id -> the caller's input, to feed the partition node's inputs in its order.
  std::map<int, const Value*> by_id;
  for (size_t i = 0; i < values.size(); ++i)
    if (node.inputs[i] >= 0) by_id[node.inputs[i]] = &values[i];
  // A session knows output types from shape inference before it asks providers (some
  // decline untyped outputs); the harness takes them from the CPU reference's results.
  RunOptions ref_opts = opts;
  ref_opts.want_reference = true;
  auto typed = RunKernelValues(spec, values, ref_opts);
  if (typed.ok()) {
    for (size_t k = 0; k < node.outputs.size() && k < typed->size(); ++k) {
      const Value& out = (*typed)[k];
      if (!out.is_tensor()) continue;
      TypeInfo& t = g.values[node.outputs[k]].type;
      t.kind = TypeInfo::Kind::kTensor;
      t.elem_type = out.tensor().dtype();
      t.has_shape = true;
      for (int64_t d : out.tensor().shape()) t.dims.push_back(Dim{d, ""});
    }
  }
  const std::vector<int> outputs = node.outputs;
  const std::string described = node.Describe();
  g.nodes.push_back(std::move(node));
  RETURN_IF_ERROR(plugin::PartitionForProvider(g, *put.provider, {}, nullptr));
  if (g.nodes.size() != 1 || g.nodes[0].op_type != plugin::kPartitionOp)
    return Unsupported(described, ": the ", provider, " provider declined the node");
  const Node& part = g.nodes[0];
  KernelInit init{part, g, nullptr, opts.config};
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, plugin::CreateProviderPartitionKernel(init, put.provider));
  std::vector<const Value*> in_ptrs;
  for (int v : part.inputs) {
    auto it = by_id.find(v);
    if (it == by_id.end()) return InternalError(described, ": partition input ", v, " is not a harness input");
    in_ptrs.push_back(it->second);
  }
  std::vector<Value> outs(part.outputs.size());
  KernelContext ctx(part, in_ptrs, &outs, nullptr, DefaultAllocator(), nullptr);
  RETURN_IF_ERROR(kernel->Compute(ctx));
  std::vector<Tensor> result;
  for (int v : outputs) {
    Tensor t;
    for (size_t k = 0; k < part.outputs.size(); ++k)
      if (part.outputs[k] == v && outs[k].is_tensor()) t = outs[k].tensor();
    if (!t.valid()) return InternalError(described, ": the provider did not produce output value ", v);
    result.push_back(t);
  }
  return result;
}

::testing::AssertionResult ProviderMatchesReference(const std::string& provider, const OpSpec& spec,
                                                    const std::vector<Tensor>& inputs, double rtol, double atol,
                                                    const RunOptions& opts) {
  RunOptions ref_opts = opts;
  ref_opts.want_reference = true;
  auto want = RunKernel(spec, inputs, ref_opts);
  if (!want.ok()) return ::testing::AssertionFailure() << "CPU reference failed: " << want.status().ToString();
  auto got = RunOnProvider(provider, spec, inputs, opts);
  if (!got.ok()) return ::testing::AssertionFailure() << provider << ": " << got.status().ToString();
  if (got->size() != want->size())
    return ::testing::AssertionFailure() << provider << " produced " << got->size() << " outputs, reference "
                                         << want->size();
  for (size_t k = 0; k < got->size(); ++k) {
    ::testing::AssertionResult r = TensorsNear((*want)[k], (*got)[k], rtol, atol);
    if (!r) return ::testing::AssertionFailure() << provider << ", output " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace strata::testing
