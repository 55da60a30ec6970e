// Vulkan objects of the provider: the process-wide instance (volk-loaded), devices,
// buffers, the per-device pipeline cache and a command recorder for one execution.
// Nothing here throws across the ABI; fallible functions return VkErr.
#pragma once

#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/provider.h"

namespace strata_vk {

// A provider result code with its message ("" when OK).
struct VkErr {
  int32_t code = STRATA_PROVIDER_RESULT_OK;
  std::string msg;
  bool ok() const { return code == STRATA_PROVIDER_RESULT_OK; }
  static VkErr Ok() { return {}; }
};
VkErr MakeErr(int32_t code, std::string msg);
// "vkCreateBuffer failed: VK_ERROR_OUT_OF_DEVICE_MEMORY", with OOM mapped to OUT_OF_MEMORY.
VkErr FromVk(VkResult r, const char* what);
const char* VkResultName(VkResult r);

#define VK_RETURN_IF_ERROR(expr)     \
  do {                               \
    ::strata_vk::VkErr e__ = (expr); \
    if (!e__.ok()) return e__;       \
  } while (0)

// The compute shaders embedded in the library.
enum class Shader : int {
  kGemm,
  kIm2col,
  kBinary,
  kUnary,
  kSoftmax,
  kLayerNorm,
  kReduce,
  kPool,
  kCopy,
  kGather,
  kCount
};
const char* ShaderName(Shader s);

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;
};

class Device;

// A VkBuffer with its own memory. Mapped persistently when host-visible.
class Buffer {
 public:
  enum class Kind { kDevice, kHostVisible };
  ~Buffer();
  static VkErr Create(Device* d, size_t bytes, Kind kind, std::shared_ptr<Buffer>* out);
  // Host <-> buffer copies; through a staging buffer when the memory is not mappable.
  VkErr Write(size_t offset, const void* src, size_t bytes);
  VkErr Read(size_t offset, void* dst, size_t bytes) const;
  size_t size() const { return size_; }
  VkBuffer handle() const { return buf_; }
  Device* device() const { return dev_; }
  void* mapped() const { return map_; }
  bool is_constant = false;  // holds a compiled partition's constant (never handed out)

 private:
  Device* dev_ = nullptr;
  VkBuffer buf_ = VK_NULL_HANDLE;
  VkDeviceMemory mem_ = VK_NULL_HANDLE;
  size_t size_ = 0;
  void* map_ = nullptr;
};

class Device {
 public:
  Device(VkInstance instance, VkPhysicalDevice phys, uint32_t queue_family);
  ~Device();
  // Creates the logical device and queue on first use (listing devices does not).
  VkErr EnsureReady();
  // The cached pipeline for a shader, created on first request; a build failure names
  // the shader.
  VkErr GetPipeline(Shader s, const Pipeline** out);
  // Submits one command buffer and waits for it (queue access is serialized).
  VkErr SubmitAndWait(VkCommandBuffer cb);
  // Records and runs a one-off command buffer.
  template <typename F>
  VkErr OneShot(F&& record);

  VkPhysicalDevice phys() const { return phys_; }
  VkDevice dev() const { return dev_; }
  const VolkDeviceTable& vk() const { return t_; }
  const VkPhysicalDeviceProperties& props() const { return props_; }
  const VkPhysicalDeviceMemoryProperties& memory() const { return mem_props_; }
  uint32_t queue_family() const { return queue_family_; }
  // Whether device-local memory is also host-visible and preferred (CPU/integrated).
  bool unified_memory() const { return unified_; }
  // STRATA_VULKAN_STAGING=1: device buffers are never mapped, so every host transfer
  // takes the staging path a discrete GPU uses (lets CPU-only CI cover it).
  bool force_staging() const { return force_staging_; }
  const std::string& name() const { return name_; }
  const std::string& driver_version() const { return driver_; }
  const std::string& api_version() const { return api_; }
  uint64_t memory_bytes() const { return memory_bytes_; }

 private:
  VkErr CreatePipeline(Shader s, Pipeline* p);
  VkInstance instance_;
  VkPhysicalDevice phys_;
  uint32_t queue_family_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  bool unified_ = false;
  bool force_staging_ = false;
  std::string name_, driver_, api_;
  uint64_t memory_bytes_ = 0;

  std::mutex init_mu_;
  bool ready_ = false;
  VkDevice dev_ = VK_NULL_HANDLE;
  VolkDeviceTable t_{};
  VkQueue queue_ = VK_NULL_HANDLE;
  std::mutex queue_mu_;
  std::mutex pipe_mu_;
  Pipeline pipelines_[static_cast<int>(Shader::kCount)];
  VkPipelineCache cache_ = VK_NULL_HANDLE;
};

// One binding of a dispatch: a buffer from `offset` to its end.
struct BufRef {
  const Buffer* buf;
  size_t offset = 0;
};

// Records dispatches into one command buffer with a full compute barrier between them,
// then submits and waits. Descriptor sets come from pools owned by the recorder.
class Recorder {
 public:
  explicit Recorder(Device* d) : d_(d) {}
  ~Recorder();
  VkErr Begin();
  VkErr Dispatch(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes, uint32_t gx,
                 uint32_t gy, uint32_t gz);
  // Dispatch over `total` threads of 256 (2-D grid beyond 65535 groups).
  VkErr Dispatch1D(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes, uint64_t total);
  // One workgroup per row (2-D grid beyond 65535 rows).
  VkErr DispatchRows(Shader s, const std::vector<BufRef>& bufs, const void* push, size_t push_bytes, uint64_t rows);
  void CopyBuffer(const Buffer& src, size_t src_off, const Buffer& dst, size_t dst_off, size_t bytes);
  VkErr Submit();
  // Keeps a buffer alive until the recorder is destroyed (after the submission finished).
  void Keep(std::shared_ptr<Buffer> b) { keep_.push_back(std::move(b)); }
  Device* device() const { return d_; }

 private:
  VkErr AllocateSet(const Pipeline& p, VkDescriptorSet* out);
  void Barrier();
  Device* d_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> dpools_;
  uint32_t sets_left_ = 0;
  bool recorded_any_ = false;
  std::vector<std::shared_ptr<Buffer>> keep_;
};

// The process-wide Vulkan state, reference-counted across strata_provider_init calls.
class Context {
 public:
  // Loads libvulkan.so.1 (volk), creates the instance and lists usable devices. NO_DEVICE
  // when the loader or every device is unusable, with the reason.
  static VkErr Acquire(Context** out);
  static void Release();
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  // Why devices were skipped ("llvmpipe: lacks ..."); "" when none were.
  const std::string& skipped() const { return skipped_; }

 private:
  VkErr Init();
  ~Context();
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<Device>> devices_;
  std::string skipped_;
};

template <typename F>
VkErr Device::OneShot(F&& record) {
  VK_RETURN_IF_ERROR(EnsureReady());
  Recorder r(this);
  VK_RETURN_IF_ERROR(r.Begin());
  record(r);
  return r.Submit();
}

}  // namespace strata_vk
