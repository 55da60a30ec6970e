// "vulkan": the Vulkan compute provider. ABI entry points only; the device layer is in
// vk_device.*, kernels in vk_ops.* and the capability query in vk_support.cc.
//
// The loader (libvulkan.so.1) is never linked: volk dlopens it in init. The probe and
// the sidecar manifest list it as a needed library, so a machine without it reports
// MISSING_DEPENDENCY before any provider code runs; a loader without a usable device
// makes init return NO_DEVICE with the reason.
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "strata/provider.h"
#include "vk_device.h"
#include "vk_ops.h"

namespace strata_vk {
namespace {

int32_t Fail(strata_provider_error* err, int32_t code, const std::string& msg) {
  strata_provider_set_error(err, ("vulkan: " + msg).c_str());
  return code;
}
int32_t Report(strata_provider_error* err, const VkErr& e) {
  return e.ok() ? STRATA_PROVIDER_RESULT_OK : Fail(err, e.code, e.msg);
}

// One per successful init; the shared Context is reference-counted.
struct Instance {
  Context* ctx = nullptr;
  const strata_host_api* host = nullptr;
  strata_provider_api api{};  // carries `self`, so one table per init
};

Context* Ctx(void* self) { return static_cast<Instance*>(self)->ctx; }

Device* DeviceAt(void* self, uint32_t index, strata_provider_error* err, int32_t* rc) {
  const auto& devs = Ctx(self)->devices();
  if (index >= devs.size()) {
    *rc = Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
               "device index " + std::to_string(index) + " out of range (" + std::to_string(devs.size()) + " devices)");
    return nullptr;
  }
  return devs[index].get();
}

// Every entry point: no exception may cross the ABI.
template <typename F>
int32_t Guard(strata_provider_error* err, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(err, STRATA_PROVIDER_RESULT_ERROR, "internal error");
  }
}

int32_t DeviceCount(void* self, uint32_t* count, strata_provider_error* err) {
  if (!count) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "count is NULL");
  *count = static_cast<uint32_t>(Ctx(self)->devices().size());
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t DeviceInfo(void* self, uint32_t index, strata_device_info* out, strata_provider_error* err) {
  int32_t rc = STRATA_PROVIDER_RESULT_OK;
  Device* d = DeviceAt(self, index, err, &rc);
  if (!d) return rc;
  if (!out || out->struct_size < sizeof(strata_device_info))
    return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "device_info: output struct too small");
  out->name = d->name().c_str();
  out->memory_bytes = d->memory_bytes();
  out->compute_units = 0;  // Vulkan 1.0 does not expose a core/CU count
  out->driver_version = d->driver_version().c_str();
  out->api_version = d->api_version().c_str();
  return STRATA_PROVIDER_RESULT_OK;
}

int32_t SupportsNode(void* self, uint32_t device, const strata_node_desc* node, int32_t* supported,
                     strata_provider_error* err) {
  return Guard(err, [&] {
    if (!node || !supported) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "node or supported is NULL");
    int32_t rc = STRATA_PROVIDER_RESULT_OK;
    if (!DeviceAt(self, device, err, &rc)) return rc;
    *supported = WhyUnsupported(node).empty() ? 1 : 0;
    return static_cast<int32_t>(STRATA_PROVIDER_RESULT_OK);
  });
}

int32_t Compile(void* self, uint32_t device, const strata_partition_desc* p, strata_compiled_partition** out,
                strata_provider_error* err) {
  return Guard(err, [&] {
    if (!p || !out) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "partition or out is NULL");
    // The Vulkan provider has no options yet: refuse any, never ignore one silently.
    if (strata_partition_option_count(p) > 0)
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                  std::string("unknown option vulkan.") + (p->option_keys[0] ? p->option_keys[0] : "") +
                      " (the vulkan provider has no options)");
    int32_t rc = STRATA_PROVIDER_RESULT_OK;
    Device* d = DeviceAt(self, device, err, &rc);
    if (!d) return rc;
    std::unique_ptr<strata_compiled_partition> cp;
    VkErr e = CompilePartition(d, p, &cp);
    if (!e.ok()) return Report(err, e);
    *out = cp.release();
    return static_cast<int32_t>(STRATA_PROVIDER_RESULT_OK);
  });
}

void ReleasePartition(void*, strata_compiled_partition* p) { delete p; }

int32_t BufferAlloc(void* self, uint32_t device, size_t bytes, strata_device_buffer** out, strata_provider_error* err) {
  return Guard(err, [&] {
    if (!out) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "out is NULL");
    int32_t rc = STRATA_PROVIDER_RESULT_OK;
    Device* d = DeviceAt(self, device, err, &rc);
    if (!d) return rc;
    std::shared_ptr<Buffer> b;
    VkErr e = Buffer::Create(d, bytes, Buffer::Kind::kDevice, &b);
    if (!e.ok()) return Report(err, e);
    *out = new strata_device_buffer{std::move(b)};
    return static_cast<int32_t>(STRATA_PROVIDER_RESULT_OK);
  });
}

void BufferFree(void*, strata_device_buffer* b) { delete b; }

int32_t CopyToDevice(void*, strata_device_buffer* dst, size_t offset, const void* src, size_t bytes,
                     strata_provider_error* err) {
  return Guard(err, [&] {
    if (!dst || !dst->buf || (bytes && !src))
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_device: NULL buffer or source");
    return Report(err, dst->buf->Write(offset, src, bytes));
  });
}

int32_t CopyToHost(void*, void* dst, const strata_device_buffer* src, size_t offset, size_t bytes,
                   strata_provider_error* err) {
  return Guard(err, [&] {
    if (!src || !src->buf || (bytes && !dst))
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "copy_to_host: NULL buffer or destination");
    return Report(err, src->buf->Read(offset, dst, bytes));
  });
}

int32_t Execute(void*, strata_compiled_partition* p, const strata_device_tensor* inputs, size_t input_count,
                strata_device_tensor* outputs, size_t output_count, strata_provider_error* err) {
  return Guard(err, [&] {
    if (!p) return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "no partition");
    if ((input_count && !inputs) || (output_count && !outputs))
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "inputs or outputs is NULL");
    return Report(err, ExecutePartition(p, inputs, input_count, outputs, output_count));
  });
}

// Every execute and copy waits for its own work, so nothing is left queued.
int32_t Synchronize(void* self, uint32_t device, strata_provider_error* err) {
  int32_t rc = STRATA_PROVIDER_RESULT_OK;
  return DeviceAt(self, device, err, &rc) ? STRATA_PROVIDER_RESULT_OK : rc;
}

void Shutdown(void* self) {
  delete static_cast<Instance*>(self);
  Context::Release();
}

int32_t HasCapability(void*, const char* name) {
  return name && (std::strcmp(name, "fp32") == 0 || std::strcmp(name, "spirv") == 0) ? 1 : 0;
}

const strata_provider_probe_info kProbe = {sizeof(strata_provider_probe_info),
                                           STRATA_PROVIDER_ABI_VERSION,
                                           "vulkan",
                                           "vulkan1.0-spirv",
                                           "0.1.0",
                                           "",
                                           "libvulkan.so.1",
                                           "Vulkan 1.0"};

}  // namespace
}  // namespace strata_vk

extern "C" __attribute__((visibility("default"))) const strata_provider_probe_info* strata_provider_probe(void) {
  return &strata_vk::kProbe;
}

extern "C" __attribute__((visibility("default"))) int32_t strata_provider_init(const strata_host_api* host,
                                                                               const strata_provider_api** out,
                                                                               strata_provider_error* err) {
  using namespace strata_vk;
  return Guard(err, [&]() -> int32_t {
    if (!host || host->struct_size < sizeof(uint32_t) * 2 || !out)
      return Fail(err, STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "bad host API table");
    Context* ctx = nullptr;
    VkErr e = Context::Acquire(&ctx);
    if (!e.ok()) return Report(err, e);
    auto* inst = new (std::nothrow) Instance{ctx, host, {}};
    if (!inst) {
      Context::Release();
      return Fail(err, STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of host memory");
    }
    inst->api = strata_provider_api{sizeof(strata_provider_api),
                                    STRATA_PROVIDER_ABI_VERSION,
                                    inst,
                                    DeviceCount,
                                    DeviceInfo,
                                    SupportsNode,
                                    Compile,
                                    ReleasePartition,
                                    BufferAlloc,
                                    BufferFree,
                                    CopyToDevice,
                                    CopyToHost,
                                    Execute,
                                    Synchronize,
                                    Shutdown,
                                    HasCapability};
    *out = &inst->api;
    return STRATA_PROVIDER_RESULT_OK;
  });
}
