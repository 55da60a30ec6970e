// Compiled partitions of the Vulkan provider and their execution.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../common/node_copy.h"
#include "strata/provider.h"
#include "vk_device.h"

namespace strata_vk {

constexpr int32_t kFloat = 1;  // strata_dtype values
constexpr int32_t kInt32 = 6;
constexpr int32_t kInt64 = 7;

// "" when the provider can run `node` exactly as described, else the reason. Shared by
// supports_node and compile, so compile never accepts what the query declined.
std::string WhyUnsupported(const strata_node_desc* node);

// A node copied out of its description (descriptions die when compile returns).
using Attr = strata_provider_common::Attr;
using CNode = strata_provider_common::NodeCopy;

// A constant: host copy (for shapes, axes, starts...) plus a device copy.
struct ConstValue {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> host;
  std::shared_ptr<Buffer> buf;
};

// A tensor during one execution.
struct DTensor {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::shared_ptr<Buffer> buf;
  size_t offset = 0;                  // bytes
  const ConstValue* konst = nullptr;  // set for constants
  bool valid() const { return dtype != 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace strata_vk

// The ABI's opaque handles.
struct strata_device_buffer {
  std::shared_ptr<strata_vk::Buffer> buf;
};

struct strata_compiled_partition {
  strata_vk::Device* device = nullptr;
  std::string name;
  std::vector<std::unique_ptr<strata_vk::ConstValue>> constants;  // by value index; null if not constant
  std::vector<strata_vk::CNode> nodes;
  std::vector<int32_t> inputs, outputs;
  std::vector<std::string> value_names;
};

namespace strata_vk {

// Copies the partition (constants uploaded to the device) and builds every pipeline it
// needs, so a pipeline that cannot be built fails here, naming the op.
VkErr CompilePartition(Device* d, const strata_partition_desc* p, std::unique_ptr<strata_compiled_partition>* out);

// Runs the partition on device tensors; fills `outputs` with freshly owned buffers.
VkErr ExecutePartition(strata_compiled_partition* p, const strata_device_tensor* inputs, size_t input_count,
                       strata_device_tensor* outputs, size_t output_count);

}  // namespace strata_vk
