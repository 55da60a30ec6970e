// Process-wide CUDA state of the provider: the caching device allocator, pinned staging
// buffers for host<->device copies, and a pool of (stream, cuBLAS handle) pairs so each
// execute runs on a stream of its own.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace strata_cuda {

// "cudaMalloc(4096 bytes): out of memory (cudaErrorMemoryAllocation)".
std::string CudaErrorText(cudaError_t e);
std::string CublasErrorText(cublasStatus_t s);

// One device allocation handed out by the allocator; returned to its cache on release.
class DeviceAllocator;
struct Block {
  void* ptr = nullptr;
  size_t bytes = 0;  // rounded size (the cache bucket)
  DeviceAllocator* owner = nullptr;
  ~Block();
};
using BlockRef = std::shared_ptr<Block>;

// Caching allocator: freed blocks go to a size-keyed free list and are reused by later
// requests of up to twice their size; on cudaErrorMemoryAllocation the cache is emptied
// and the request retried once, so one OOM leaves the provider usable.
class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  ~DeviceAllocator();
  // Returns null with *error set on failure; *oom tells out-of-memory apart.
  BlockRef Allocate(size_t bytes, std::string* error, bool* oom);
  void Release(void* ptr, size_t bytes);
  void EmptyCache();
  size_t cached_bytes() const;

 private:
  int device_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // bucket size -> pointer
  size_t cached_ = 0;
};

struct StreamSlot {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* workspace_flag = nullptr;  // device int used by kernels that report bad input (Gather)
};

// Everything per device. Created in init for each visible device.
class DeviceState {
 public:
  DeviceState(int device, const cudaDeviceProp& prop);
  ~DeviceState();
  int device() const { return device_; }
  const cudaDeviceProp& prop() const { return prop_; }
  DeviceAllocator& allocator() { return allocator_; }

  // A stream + cuBLAS handle for one run; Return puts it back. Error text on failure.
  StreamSlot* AcquireStream(std::string* error);
  void ReturnStream(StreamSlot* slot);

  // Synchronous copies through pinned staging (chunked, double-buffered).
  bool CopyToDevice(void* dst, const void* src, size_t bytes, std::string* error);
  bool CopyToHost(void* dst, const void* src, size_t bytes, std::string* error);

  std::string name, driver_version, runtime_version;

 private:
  int device_;
  cudaDeviceProp prop_;
  DeviceAllocator allocator_;
  std::mutex mu_;
  std::vector<StreamSlot*> idle_;
  std::vector<std::unique_ptr<StreamSlot>> all_;
  std::mutex copy_mu_;  // one staging pair per device
  void* staging_[2] = {nullptr, nullptr};
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t staged_[2] = {nullptr, nullptr};
};

}  // namespace strata_cuda
