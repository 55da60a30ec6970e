// Partitioning a graph for an accelerator provider, and the kernel that runs a partition.
//
// Design: after optimization and before kernel creation, the session calls
// PartitionForProvider. It asks the provider about every node (supports_node), then
// replaces each maximal run of consecutive supported nodes (in the graph's topological
// order, so a run can never form a cycle with the rest of the graph) by one node
//   domain "strata.provider", op "Partition", provider = <name>
// whose inputs are the run's non-constant external inputs, whose outputs are the run's
// values used after it (or graph outputs), and whose attributes are
//   "body"     (graph): the original nodes, their values and the constants they use,
//   "provider" (string), "device" (int),
//   "options"  (strings, optional): "key=value" session options for this provider.
// CreateProviderPartitionKernel compiles "body" once through the provider; Compute
// copies inputs host->device, executes, and copies outputs device->host. Intermediate
// values never leave the device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "plugin/provider_manager.h"

namespace strata::plugin {

inline constexpr const char* kPartitionDomain = "strata.provider";
inline constexpr const char* kPartitionOp = "Partition";

struct PartitionOptions {
  uint32_t device = 0;
  size_t min_nodes = 1;  // runs shorter than this stay on the CPU
  // Session options for this provider, prefix removed ({"precision", "fp16"}); they reach
  // the provider's compile in strata_partition_desc::option_keys/option_values.
  std::vector<std::pair<std::string, std::string>> provider_options;
};

struct PartitionInfo {
  std::string name;                     // name of the Partition node
  std::vector<std::string> node_names;  // the original nodes it covers
};

// Asks the provider about every node of g still assigned to "cpu"; nodes that another
// provider took or that cannot cross the ABI (subgraphs, strings, sequences) answer false
// without a call. Errors name the node.
Result<std::vector<bool>> QuerySupport(const Graph& g, const LoadedProvider& p, uint32_t device = 0);

// Sets node.provider = p.name() on every supported node (others keep "cpu").
Status AssignNodes(Graph& g, const LoadedProvider& p, uint32_t device = 0);

// AssignNodes, then the rewrite described above. `out` (may be null) lists the partitions.
Status PartitionForProvider(Graph& g, const LoadedProvider& p, const PartitionOptions& opts,
                            std::vector<PartitionInfo>* out);

// Kernel factory for a strata.provider/Partition node (compiles the body at creation).
Result<std::unique_ptr<OpKernel>> CreateProviderPartitionKernel(const KernelInit& init,
                                                                std::shared_ptr<LoadedProvider> provider);
// Same, resolving the node's "provider" attribute through the manager.
Result<std::unique_ptr<OpKernel>> CreateProviderPartitionKernel(const KernelInit& init, ProviderManager& providers);

}  // namespace strata::plugin
