// Caching allocator, pinned staging copies and the stream pool (see cuda_runtime_state.h).
#include "cuda_runtime_state.h"

#include <algorithm>
#include <cstring>

namespace strata_cuda {
namespace {

constexpr size_t kStagingBytes = 4u << 20;  // per staging buffer; two alternate

// Sizes round up to 512 bytes below 1 MiB and to 128 KiB above, so similar requests share
// cached blocks without wasting much.
size_t Bucket(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t q = bytes < (1u << 20) ? 512 : (128u << 10);
  return (bytes + q - 1) / q * q;
}

}  // namespace

std::string CudaErrorText(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

std::string CublasErrorText(cublasStatus_t s) {
  return std::string(cublasGetStatusString(s)) + " (" + cublasGetStatusName(s) + ")";
}

Block::~Block() {
  if (owner && ptr) owner->Release(ptr, bytes);
}

DeviceAllocator::~DeviceAllocator() { EmptyCache(); }

BlockRef DeviceAllocator::Allocate(size_t bytes, std::string* error, bool* oom) {
  *oom = false;
  const size_t want = Bucket(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(want);
    if (it != free_.end() && it->first <= want * 2) {
      auto b = std::make_shared<Block>();
      b->ptr = it->second;
      b->bytes = it->first;
      b->owner = this;
      cached_ -= it->first;
      free_.erase(it);
      return b;
    }
  }
  cudaSetDevice(device_);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, want);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error state before retrying
    EmptyCache();
    e = cudaMalloc(&p, want);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    *oom = e == cudaErrorMemoryAllocation;
    *error = "cudaMalloc(" + std::to_string(bytes) + " bytes) on device " + std::to_string(device_) + ": " +
             CudaErrorText(e);
    return nullptr;
  }
  auto b = std::make_shared<Block>();
  b->ptr = p;
  b->bytes = want;
  b->owner = this;
  return b;
}

void DeviceAllocator::Release(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(bytes, ptr);
  cached_ += bytes;
}

void DeviceAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return;
  cudaSetDevice(device_);
  for (auto& [size, p] : free_) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

size_t DeviceAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

DeviceState::DeviceState(int device, const cudaDeviceProp& prop) : device_(device), prop_(prop), allocator_(device) {}

DeviceState::~DeviceState() {
  cudaSetDevice(device_);
  cudaDeviceSynchronize();
  for (auto& s : all_) {
    if (s->cublas) cublasDestroy(s->cublas);
    if (s->workspace_flag) cudaFree(s->workspace_flag);
    if (s->stream) cudaStreamDestroy(s->stream);
  }
  for (int i = 0; i < 2; ++i) {
    if (staging_[i]) cudaFreeHost(staging_[i]);
    if (staged_[i]) cudaEventDestroy(staged_[i]);
  }
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  allocator_.EmptyCache();
}

StreamSlot* DeviceState::AcquireStream(std::string* error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      StreamSlot* s = idle_.back();
      idle_.pop_back();
      return s;
    }
  }
  cudaSetDevice(device_);
  auto slot = std::make_unique<StreamSlot>();
  cudaError_t e = cudaStreamCreateWithFlags(&slot->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    *error = "cudaStreamCreate: " + CudaErrorText(e);
    return nullptr;
  }
  e = cudaMalloc(&slot->workspace_flag, sizeof(int));
  if (e != cudaSuccess) {
    cudaStreamDestroy(slot->stream);
    *error = "cudaMalloc(flag): " + CudaErrorText(e);
    return nullptr;
  }
  cublasStatus_t st = cublasCreate(&slot->cublas);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(slot->cublas, slot->stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (slot->cublas) cublasDestroy(slot->cublas);
    cudaFree(slot->workspace_flag);
    cudaStreamDestroy(slot->stream);
    *error = "cublasCreate: " + CublasErrorText(st);
    return nullptr;
  }
  // fp32 stays fp32: no TF32 unless a session asks for it (not offered yet).
  cublasSetMathMode(slot->cublas, CUBLAS_PEDANTIC_MATH);
  std::lock_guard<std::mutex> lock(mu_);
  all_.push_back(std::move(slot));
  return all_.back().get();
}

void DeviceState::ReturnStream(StreamSlot* slot) {
  if (!slot) return;
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(slot);
}

namespace {
bool Check(cudaError_t e, const char* what, std::string* error) {
  if (e == cudaSuccess) return true;
  *error = std::string(what) + ": " + CudaErrorText(e);
  return false;
}
}  // namespace

bool DeviceState::CopyToDevice(void* dst, const void* src, size_t bytes, std::string* error) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(copy_mu_);
  cudaSetDevice(device_);
  if (!copy_stream_) {
    if (!Check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate", error))
      return false;
    for (int i = 0; i < 2; ++i) {
      if (!Check(cudaHostAlloc(&staging_[i], kStagingBytes, cudaHostAllocDefault), "cudaHostAlloc", error) ||
          !Check(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming), "cudaEventCreate", error))
        return false;
    }
  }
  // Double buffering: fill one pinned buffer while the other one's DMA is in flight.
  size_t done = 0;
  for (int i = 0; done < bytes; i ^= 1) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    if (!Check(cudaEventSynchronize(staged_[i]), "cudaEventSynchronize", error)) return false;
    std::memcpy(staging_[i], static_cast<const char*>(src) + done, n);
    if (!Check(cudaMemcpyAsync(static_cast<char*>(dst) + done, staging_[i], n, cudaMemcpyHostToDevice, copy_stream_),
               "cudaMemcpyAsync(host to device)", error) ||
        !Check(cudaEventRecord(staged_[i], copy_stream_), "cudaEventRecord", error))
      return false;
    done += n;
  }
  return Check(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize(copy)", error);
}

bool DeviceState::CopyToHost(void* dst, const void* src, size_t bytes, std::string* error) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(copy_mu_);
  cudaSetDevice(device_);
  if (!copy_stream_) {
    // Staging is created by the first upload; a download before any upload goes direct.
    return Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)", error);
  }
  size_t done = 0;
  while (done < bytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    if (!Check(cudaMemcpyAsync(staging_[0], static_cast<const char*>(src) + done, n, cudaMemcpyDeviceToHost,
                               copy_stream_),
               "cudaMemcpyAsync(device to host)", error) ||
        !Check(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize(copy)", error))
      return false;
    std::memcpy(static_cast<char*>(dst) + done, staging_[0], n);
    done += n;
  }
  return true;
}

}  // namespace strata_cuda
