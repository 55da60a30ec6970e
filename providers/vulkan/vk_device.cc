// Vulkan instance, devices, buffers, pipelines and command recording.
#include "vk_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "binary_spv.h"
#include "copy_spv.h"
#include "gather_spv.h"
#include "gemm_spv.h"
#include "im2col_spv.h"
#include "layernorm_spv.h"
#include "pool_spv.h"
#include "reduce_spv.h"
#include "softmax_spv.h"
#include "unary_spv.h"

namespace strata_vk {
namespace {

struct ShaderInfo {
  const char* name;
  const uint32_t* code;
  size_t bytes;
  uint32_t bindings;
};
#define SHADER(n, arr, b) \
  { n, arr, sizeof(arr), b }
const ShaderInfo kShaders[] = {
    SHADER("gemm", kgemmSpv, 5),     SHADER("im2col", kim2colSpv, 2),   SHADER("binary", kbinarySpv, 3),
    SHADER("unary", kunarySpv, 2),   SHADER("softmax", ksoftmaxSpv, 2), SHADER("layernorm", klayernormSpv, 4),
    SHADER("reduce", kreduceSpv, 2), SHADER("pool", kpoolSpv, 2),       SHADER("copy", kcopySpv, 2),
    SHADER("gather", kgatherSpv, 4),
};
#undef SHADER
static_assert(sizeof(kShaders) / sizeof(kShaders[0]) == static_cast<size_t>(Shader::kCount));

constexpr uint32_t kPushBytes = 128;  // the guaranteed minimum maxPushConstantsSize
constexpr uint32_t kSetsPerPool = 64;
constexpr uint32_t kMaxBindings = 5;
// Shared memory the GEMM tiles use (2 x 16 x 68 floats), rounded up.
constexpr uint32_t kSharedBytesNeeded = 2 * 16 * 68 * 4;

std::string VersionString(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

// Optional extra features a deployment can require (STRATA_VULKAN_REQUIRE, comma-separated
// VkPhysicalDeviceFeatures names); a device lacking one is skipped and named in the reason.
struct FeatureField {
  const char* name;
  VkBool32 VkPhysicalDeviceFeatures::*field;
};
const FeatureField kFeatures[] = {
    {"robustBufferAccess", &VkPhysicalDeviceFeatures::robustBufferAccess},
    {"shaderFloat64", &VkPhysicalDeviceFeatures::shaderFloat64},
    {"shaderInt64", &VkPhysicalDeviceFeatures::shaderInt64},
    {"shaderInt16", &VkPhysicalDeviceFeatures::shaderInt16},
    {"sparseBinding", &VkPhysicalDeviceFeatures::sparseBinding},
    {"sparseResidencyBuffer", &VkPhysicalDeviceFeatures::sparseResidencyBuffer},
    {"geometryShader", &VkPhysicalDeviceFeatures::geometryShader},
    {"shaderStorageBufferArrayDynamicIndexing", &VkPhysicalDeviceFeatures::shaderStorageBufferArrayDynamicIndexing},
};

// "" when the device can run every shader, else what it lacks, by name.
std::string MissingRequirements(VkPhysicalDevice pd, const VkPhysicalDeviceProperties& pr) {
  std::string miss;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) miss += (miss.empty() ? "" : ", ") + what;
  };
  const VkPhysicalDeviceLimits& l = pr.limits;
  need(l.maxComputeWorkGroupInvocations >= 256,
       "maxComputeWorkGroupInvocations >= 256 (has " + std::to_string(l.maxComputeWorkGroupInvocations) + ")");
  need(l.maxComputeWorkGroupSize[0] >= 256 && l.maxComputeWorkGroupSize[1] >= 16,
       "maxComputeWorkGroupSize >= (256, 16)");
  need(l.maxComputeSharedMemorySize >= kSharedBytesNeeded,
       "maxComputeSharedMemorySize >= " + std::to_string(kSharedBytesNeeded) + " (has " +
           std::to_string(l.maxComputeSharedMemorySize) + ")");
  need(l.maxPushConstantsSize >= kPushBytes, "maxPushConstantsSize >= 128");
  need(l.maxBoundDescriptorSets >= 1 && l.maxPerStageDescriptorStorageBuffers >= kMaxBindings,
       "maxPerStageDescriptorStorageBuffers >= 5");
  if (const char* req = std::getenv("STRATA_VULKAN_REQUIRE"); req && *req) {
    VkPhysicalDeviceFeatures f{};
    vkGetPhysicalDeviceFeatures(pd, &f);
    std::string list = req;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string name = list.substr(pos, end - pos);
      pos = end + 1;
      if (name.empty()) continue;
      const FeatureField* ff = nullptr;
      for (const auto& k : kFeatures)
        if (name == k.name) ff = &k;
      need(ff && f.*(ff->field), "feature " + name + (ff ? "" : " (unknown to strata)"));
    }
  }
  return miss;
}

}  // namespace

VkErr MakeErr(int32_t code, std::string msg) { return VkErr{code, std::move(msg)}; }

const char* VkResultName(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
      return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL:
      return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV:
      return "VK_ERROR_INVALID_SHADER_NV";
    default:
      return "VK_ERROR_UNKNOWN";
  }
}

VkErr FromVk(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return VkErr::Ok();
  const int32_t code = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                           ? STRATA_PROVIDER_RESULT_OUT_OF_MEMORY
                           : STRATA_PROVIDER_RESULT_ERROR;
  return MakeErr(code, std::string(what) + " failed: " + VkResultName(r));
}

const char* ShaderName(Shader s) {
  const int i = static_cast<int>(s);
  return i >= 0 && i < static_cast<int>(Shader::kCount) ? kShaders[i].name : "?";
}

// ------------------------------------------------------------------ Buffer

Buffer::~Buffer() {
  if (!dev_ || !dev_->dev()) return;
  const VolkDeviceTable& t = dev_->vk();
  if (map_) t.vkUnmapMemory(dev_->dev(), mem_);
  if (buf_) t.vkDestroyBuffer(dev_->dev(), buf_, nullptr);
  if (mem_) t.vkFreeMemory(dev_->dev(), mem_, nullptr);
}

VkErr Buffer::Create(Device* d, size_t bytes, Kind kind, std::shared_ptr<Buffer>* out) {
  VK_RETURN_IF_ERROR(d->EnsureReady());
  auto b = std::shared_ptr<Buffer>(new (std::nothrow) Buffer());
  if (!b) return MakeErr(STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of host memory");
  b->dev_ = d;
  b->size_ = bytes;
  const VolkDeviceTable& t = d->vk();
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = std::max<size_t>(bytes, 16);  // Vulkan forbids empty buffers
  bi.size = (bi.size + 15) & ~VkDeviceSize{15};
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_RETURN_IF_ERROR(FromVk(t.vkCreateBuffer(d->dev(), &bi, nullptr, &b->buf_), "vkCreateBuffer"));
  VkMemoryRequirements req;
  t.vkGetBufferMemoryRequirements(d->dev(), b->buf_, &req);
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  std::vector<VkMemoryPropertyFlags> prefs;
  if (kind == Kind::kHostVisible) {
    prefs = {host};
  } else if (d->unified_memory()) {
    prefs = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host};
  } else {
    prefs = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host};
  }
  const VkPhysicalDeviceMemoryProperties& mp = d->memory();
  VkResult last = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  for (VkMemoryPropertyFlags want : prefs) {
    for (uint32_t i = 0; i < mp.memoryTypeCount && !b->mem_; ++i) {
      if (!(req.memoryTypeBits & (1u << i)) || (mp.memoryTypes[i].propertyFlags & want) != want) continue;
      VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
      ai.allocationSize = req.size;
      ai.memoryTypeIndex = i;
      last = t.vkAllocateMemory(d->dev(), &ai, nullptr, &b->mem_);
      if (last != VK_SUCCESS) {
        b->mem_ = VK_NULL_HANDLE;
        continue;
      }
      const bool may_map = kind == Kind::kHostVisible || !d->force_staging();
      if (may_map && (mp.memoryTypes[i].propertyFlags & host) == host) {
        VkResult r = t.vkMapMemory(d->dev(), b->mem_, 0, VK_WHOLE_SIZE, 0, &b->map_);
        if (r != VK_SUCCESS) b->map_ = nullptr;  // falls back to staging copies
      }
    }
    if (b->mem_) break;
  }
  if (!b->mem_)
    return MakeErr(STRATA_PROVIDER_RESULT_OUT_OF_MEMORY,
                   "cannot allocate " + std::to_string(bytes) + " bytes of device memory (" + VkResultName(last) + ")");
  VK_RETURN_IF_ERROR(FromVk(t.vkBindBufferMemory(d->dev(), b->buf_, b->mem_, 0), "vkBindBufferMemory"));
  *out = std::move(b);
  return VkErr::Ok();
}

VkErr Buffer::Write(size_t offset, const void* src, size_t bytes) {
  if (offset > size_ || bytes > size_ - offset)
    return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "write of " + std::to_string(bytes) + " bytes at offset " +
                                                                std::to_string(offset) + " exceeds the buffer (" +
                                                                std::to_string(size_) + " bytes)");
  if (bytes == 0) return VkErr::Ok();
  if (map_) {
    std::memcpy(static_cast<char*>(map_) + offset, src, bytes);
    return VkErr::Ok();
  }
  std::shared_ptr<Buffer> staging;
  VK_RETURN_IF_ERROR(Create(dev_, bytes, Kind::kHostVisible, &staging));
  if (!staging->map_) return MakeErr(STRATA_PROVIDER_RESULT_ERROR, "staging memory cannot be mapped");
  std::memcpy(staging->map_, src, bytes);
  return dev_->OneShot([&](Recorder& r) { r.CopyBuffer(*staging, 0, *this, offset, bytes); });
}

VkErr Buffer::Read(size_t offset, void* dst, size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset)
    return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "read of " + std::to_string(bytes) + " bytes at offset " +
                                                                std::to_string(offset) + " exceeds the buffer (" +
                                                                std::to_string(size_) + " bytes)");
  if (bytes == 0) return VkErr::Ok();
  if (map_) {
    std::memcpy(dst, static_cast<const char*>(map_) + offset, bytes);
    return VkErr::Ok();
  }
  std::shared_ptr<Buffer> staging;
  VK_RETURN_IF_ERROR(Create(dev_, bytes, Kind::kHostVisible, &staging));
  if (!staging->map_) return MakeErr(STRATA_PROVIDER_RESULT_ERROR, "staging memory cannot be mapped");
  VK_RETURN_IF_ERROR(dev_->OneShot([&](Recorder& r) { r.CopyBuffer(*this, offset, *staging, 0, bytes); }));
  std::memcpy(dst, staging->map_, bytes);
  return VkErr::Ok();
}

// ------------------------------------------------------------------ Device

Device::Device(VkInstance instance, VkPhysicalDevice phys, uint32_t queue_family)
    : instance_(instance), phys_(phys), queue_family_(queue_family) {
  vkGetPhysicalDeviceProperties(phys, &props_);
  vkGetPhysicalDeviceMemoryProperties(phys, &mem_props_);
  name_ = props_.deviceName;
  api_ = "Vulkan " + VersionString(props_.apiVersion);
  driver_ = VersionString(props_.driverVersion);
  unified_ =
      props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const char* staging = std::getenv("STRATA_VULKAN_STAGING");
  force_staging_ = staging && std::strcmp(staging, "1") == 0;
  if (force_staging_) unified_ = false;
  for (uint32_t h = 0; h < mem_props_.memoryHeapCount; ++h)
    if (mem_props_.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      memory_bytes_ += mem_props_.memoryHeaps[h].size;
}

Device::~Device() {
  if (!dev_) return;
  t_.vkDeviceWaitIdle(dev_);
  for (Pipeline& p : pipelines_) {
    if (p.pipeline) t_.vkDestroyPipeline(dev_, p.pipeline, nullptr);
    if (p.layout) t_.vkDestroyPipelineLayout(dev_, p.layout, nullptr);
    if (p.set_layout) t_.vkDestroyDescriptorSetLayout(dev_, p.set_layout, nullptr);
  }
  if (cache_) t_.vkDestroyPipelineCache(dev_, cache_, nullptr);
  t_.vkDestroyDevice(dev_, nullptr);
}

VkErr Device::EnsureReady() {
  std::lock_guard<std::mutex> lock(init_mu_);
  if (ready_) return VkErr::Ok();
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  VkResult r = vkCreateDevice(phys_, &di, nullptr, &dev_);
  if (r != VK_SUCCESS) {
    dev_ = VK_NULL_HANDLE;
    VkErr e = FromVk(r, "vkCreateDevice");
    e.msg = name_ + ": " + e.msg;
    return e;
  }
  volkLoadDeviceTable(&t_, dev_);
  t_.vkGetDeviceQueue(dev_, queue_family_, 0, &queue_);
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  if (t_.vkCreatePipelineCache(dev_, &ci, nullptr, &cache_) != VK_SUCCESS) cache_ = VK_NULL_HANDLE;
  ready_ = true;
  return VkErr::Ok();
}

VkErr Device::CreatePipeline(Shader s, Pipeline* p) {
  const ShaderInfo& info = kShaders[static_cast<int>(s)];
  VkDescriptorSetLayoutBinding b[kMaxBindings];
  for (uint32_t i = 0; i < info.bindings; ++i)
    b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = info.bindings;
  li.pBindings = b;
  VK_RETURN_IF_ERROR(
      FromVk(t_.vkCreateDescriptorSetLayout(dev_, &li, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout"));
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pr;
  VK_RETURN_IF_ERROR(FromVk(t_.vkCreatePipelineLayout(dev_, &pli, nullptr, &p->layout), "vkCreatePipelineLayout"));
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = info.bytes;
  mi.pCode = info.code;
  VkShaderModule mod;
  VK_RETURN_IF_ERROR(FromVk(t_.vkCreateShaderModule(dev_, &mi, nullptr, &mod), "vkCreateShaderModule"));
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.layout = p->layout;
  VkResult r = t_.vkCreateComputePipelines(dev_, cache_, 1, &ci, nullptr, &p->pipeline);
  t_.vkDestroyShaderModule(dev_, mod, nullptr);
  if (r != VK_SUCCESS) p->pipeline = VK_NULL_HANDLE;
  VK_RETURN_IF_ERROR(FromVk(r, "vkCreateComputePipelines"));
  p->bindings = info.bindings;
  return VkErr::Ok();
}

VkErr Device::GetPipeline(Shader s, const Pipeline** out) {
  VK_RETURN_IF_ERROR(EnsureReady());
  std::lock_guard<std::mutex> lock(pipe_mu_);
  Pipeline& p = pipelines_[static_cast<int>(s)];
  if (!p.pipeline) {
    // A failed build leaves nothing half-made behind and is retried next time.
    VkErr e = CreatePipeline(s, &p);
    if (!e.ok()) {
      if (p.layout) t_.vkDestroyPipelineLayout(dev_, p.layout, nullptr);
      if (p.set_layout) t_.vkDestroyDescriptorSetLayout(dev_, p.set_layout, nullptr);
      p = Pipeline{};
      e.msg = std::string("cannot build the '") + ShaderName(s) + "' compute pipeline: " + e.msg;
      return e;
    }
  }
  *out = &p;
  return VkErr::Ok();
}

VkErr Device::SubmitAndWait(VkCommandBuffer cb) {
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  VK_RETURN_IF_ERROR(FromVk(t_.vkCreateFence(dev_, &fi, nullptr, &fence), "vkCreateFence"));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VkResult r;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    r = t_.vkQueueSubmit(queue_, 1, &si, fence);
  }
  if (r == VK_SUCCESS) r = t_.vkWaitForFences(dev_, 1, &fence, VK_TRUE, UINT64_MAX);
  t_.vkDestroyFence(dev_, fence, nullptr);
  return FromVk(r, "vkQueueSubmit/vkWaitForFences");
}

// ------------------------------------------------------------------ Recorder

Recorder::~Recorder() {
  if (!d_->dev()) return;
  const VolkDeviceTable& t = d_->vk();
  for (VkDescriptorPool p : dpools_) t.vkDestroyDescriptorPool(d_->dev(), p, nullptr);
  if (pool_) t.vkDestroyCommandPool(d_->dev(), pool_, nullptr);
}

VkErr Recorder::Begin() {
  VK_RETURN_IF_ERROR(d_->EnsureReady());
  const VolkDeviceTable& t = d_->vk();
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = d_->queue_family();
  VK_RETURN_IF_ERROR(FromVk(t.vkCreateCommandPool(d_->dev(), &pi, nullptr, &pool_), "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VK_RETURN_IF_ERROR(FromVk(t.vkAllocateCommandBuffers(d_->dev(), &ai, &cb_), "vkAllocateCommandBuffers"));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  return FromVk(t.vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
}

VkErr Recorder::AllocateSet(const Pipeline& p, VkDescriptorSet* out) {
  const VolkDeviceTable& t = d_->vk();
  if (sets_left_ == 0) {
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
    VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    ci.maxSets = kSetsPerPool;
    ci.poolSizeCount = 1;
    ci.pPoolSizes = &ps;
    VkDescriptorPool pool;
    VK_RETURN_IF_ERROR(FromVk(t.vkCreateDescriptorPool(d_->dev(), &ci, nullptr, &pool), "vkCreateDescriptorPool"));
    dpools_.push_back(pool);
    sets_left_ = kSetsPerPool;
  }
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = dpools_.back();
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VK_RETURN_IF_ERROR(FromVk(t.vkAllocateDescriptorSets(d_->dev(), &ai, out), "vkAllocateDescriptorSets"));
  --sets_left_;
  return VkErr::Ok();
}

void Recorder::Barrier() {
  if (!recorded_any_) return;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  d_->vk().vkCmdPipelineBarrier(cb_, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

VkErr Recorder::Dispatch(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes, uint32_t gx,
                         uint32_t gy, uint32_t gz) {
  const Pipeline* p;
  VK_RETURN_IF_ERROR(d_->GetPipeline(s, &p));
  if (bufs.size() != p->bindings || push_bytes > kPushBytes)
    return MakeErr(STRATA_PROVIDER_RESULT_ERROR, std::string("internal: bad bindings for shader ") + ShaderName(s));
  const uint32_t* maxg = d_->props().limits.maxComputeWorkGroupCount;
  if (gx > maxg[0] || gy > maxg[1] || gz > maxg[2])
    return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, std::string("the '") + ShaderName(s) + "' dispatch (" +
                                                           std::to_string(gx) + "x" + std::to_string(gy) + "x" +
                                                           std::to_string(gz) + " groups) exceeds the device limits");
  if (gx == 0 || gy == 0 || gz == 0) return VkErr::Ok();
  VkDescriptorSet set;
  VK_RETURN_IF_ERROR(AllocateSet(*p, &set));
  VkDescriptorBufferInfo bi[kMaxBindings];
  VkWriteDescriptorSet w[kMaxBindings];
  for (size_t i = 0; i < bufs.size(); ++i) {
    bi[i] = {bufs[i].buf->handle(), bufs[i].offset, VK_WHOLE_SIZE};
    w[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w[i].dstSet = set;
    w[i].dstBinding = static_cast<uint32_t>(i);
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &bi[i];
  }
  const VolkDeviceTable& t = d_->vk();
  t.vkUpdateDescriptorSets(d_->dev(), static_cast<uint32_t>(bufs.size()), w, 0, nullptr);
  Barrier();
  t.vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  t.vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, nullptr);
  uint8_t pc[kPushBytes] = {0};
  std::memcpy(pc, push, push_bytes);
  t.vkCmdPushConstants(cb_, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, pc);
  t.vkCmdDispatch(cb_, gx, gy, gz);
  recorded_any_ = true;
  return VkErr::Ok();
}

VkErr Recorder::Dispatch1D(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes,
                           uint64_t total) {
  const uint64_t groups = (total + 255) / 256;
  const uint64_t gx = std::min<uint64_t>(groups, 65535), gy = gx ? (groups + gx - 1) / gx : 0;
  if (gy > 65535) return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, "tensor too large for one dispatch");
  return Dispatch(s, bufs, push, push_bytes, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 1);
}

VkErr Recorder::DispatchRows(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes,
                             uint64_t rows) {
  const uint64_t gx = std::min<uint64_t>(rows, 65535), gy = gx ? (rows + gx - 1) / gx : 0;
  if (gy > 65535) return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, "too many rows for one dispatch");
  return Dispatch(s, bufs, push, push_bytes, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 1);
}

void Recorder::CopyBuffer(const Buffer& src, size_t src_off, const Buffer& dst, size_t dst_off, size_t bytes) {
  if (bytes == 0) return;
  Barrier();
  VkBufferCopy c{src_off, dst_off, bytes};
  d_->vk().vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &c);
  recorded_any_ = true;
}

VkErr Recorder::Submit() {
  const VolkDeviceTable& t = d_->vk();
  VK_RETURN_IF_ERROR(FromVk(t.vkEndCommandBuffer(cb_), "vkEndCommandBuffer"));
  if (!recorded_any_) return VkErr::Ok();
  return d_->SubmitAndWait(cb_);
}

// ------------------------------------------------------------------ Context

namespace {
std::mutex g_ctx_mu;
Context* g_ctx = nullptr;
int g_ctx_refs = 0;
}  // namespace

VkErr Context::Acquire(Context** out) {
  std::lock_guard<std::mutex> lock(g_ctx_mu);
  if (!g_ctx) {
    auto* c = new (std::nothrow) Context();
    if (!c) return MakeErr(STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of host memory");
    VkErr e = c->Init();
    if (!e.ok()) {
      delete c;
      return e;
    }
    g_ctx = c;
  }
  ++g_ctx_refs;
  *out = g_ctx;
  return VkErr::Ok();
}

void Context::Release() {
  std::lock_guard<std::mutex> lock(g_ctx_mu);
  if (g_ctx_refs > 0 && --g_ctx_refs == 0) {
    delete g_ctx;
    g_ctx = nullptr;
  }
}

VkErr Context::Init() {
  // volk dlopens libvulkan.so.1; its absence means no usable driver on this machine.
  if (volkInitialize() != VK_SUCCESS)
    return MakeErr(STRATA_PROVIDER_RESULT_NO_DEVICE,
                   "the Vulkan loader libvulkan.so.1 cannot be loaded (install libvulkan1 and a Vulkan driver)");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "strata";
  app.pEngineName = "strata";
  app.apiVersion = VK_API_VERSION_1_0;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
  if (r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    return MakeErr(STRATA_PROVIDER_RESULT_NO_DEVICE,
                   std::string("vkCreateInstance failed: ") + VkResultName(r) + " (no Vulkan driver installed?)");
  }
  volkLoadInstanceOnly(instance_);
  uint32_t n = 0;
  r = vkEnumeratePhysicalDevices(instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (r == VK_SUCCESS && n) r = vkEnumeratePhysicalDevices(instance_, &n, pds.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return MakeErr(STRATA_PROVIDER_RESULT_NO_DEVICE,
                   std::string("vkEnumeratePhysicalDevices failed: ") + VkResultName(r));
  pds.resize(n);
  for (VkPhysicalDevice pd : pds) {
    VkPhysicalDeviceProperties pr;
    vkGetPhysicalDeviceProperties(pd, &pr);
    uint32_t qn = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qf(qn);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < qn && family == UINT32_MAX; ++i)
      if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    std::string miss = family == UINT32_MAX ? "a compute queue" : MissingRequirements(pd, pr);
    if (!miss.empty()) {
      skipped_ += (skipped_.empty() ? "" : "; ") + std::string(pr.deviceName) + " lacks " + miss;
      continue;
    }
    devices_.push_back(std::make_unique<Device>(instance_, pd, family));
  }
  if (devices_.empty())
    return MakeErr(STRATA_PROVIDER_RESULT_NO_DEVICE, pds.empty() ? "the Vulkan loader reports no physical device"
                                                                 : "no usable Vulkan device: " + skipped_);
  return VkErr::Ok();
}

Context::~Context() {
  devices_.clear();  // logical devices go before the instance
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

}  // namespace strata_vk
