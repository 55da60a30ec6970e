// Data-movement kernels: strided copy (Transpose, Slice), Gather.
#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace strata_cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 4 ? 65535 * 4 : (b < 1 ? 1 : b));
}

template <typename T>
__global__ void StridedCopyKernel(const T* in, int64_t offset, StridedShape src, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = offset;
    for (int d = src.rank - 1; d >= 0; --d) {
      off += (rem % src.dims[d]) * src.strides[d];
      rem /= src.dims[d];
    }
    out[i] = in[off];
  }
}

template <typename T, typename I>
__global__ void GatherKernel(const T* in, int64_t outer, int64_t axis_len, int64_t inner, const I* idx, int64_t ni,
                             T* out, int* bad) {
  const int64_t n = outer * ni * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in_i = i % inner, j = (i / inner) % ni, o = i / (inner * ni);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_len;
    if (k < 0 || k >= axis_len) {
      *bad = 1;  // reported by the host after the run; the element is zeroed
      out[i] = T(0);
      continue;
    }
    out[i] = in[(o * axis_len + k) * inner + in_i];
  }
}

template <typename T>
cudaError_t Gather(const void* in, int64_t outer, int64_t axis_len, int64_t inner, const void* indices, bool i32,
                   int64_t ni, void* out, int* bad, cudaStream_t s) {
  const int64_t n = outer * ni * inner;
  if (i32)
    GatherKernel<T, int32_t><<<Blocks(n), kThreads, 0, s>>>(static_cast<const T*>(in), outer, axis_len, inner,
                                                           static_cast<const int32_t*>(indices), ni,
                                                           static_cast<T*>(out), bad);
  else
    GatherKernel<T, int64_t><<<Blocks(n), kThreads, 0, s>>>(static_cast<const T*>(in), outer, axis_len, inner,
                                                           static_cast<const int64_t*>(indices), ni,
                                                           static_cast<T*>(out), bad);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchStridedCopy(const void* in, int64_t offset, const StridedShape& src, void* out, int elem_size,
                              cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < src.rank; ++d) n *= src.dims[d];
  if (n == 0) return cudaSuccess;
  if (elem_size == 4)
    StridedCopyKernel<uint32_t><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint32_t*>(in), offset, src,
                                                                     static_cast<uint32_t*>(out), n);
  else if (elem_size == 8)
    StridedCopyKernel<uint64_t><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const uint64_t*>(in), offset, src,
                                                                     static_cast<uint64_t*>(out), n);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t LaunchGather(const void* in, int elem_size, int64_t outer, int64_t axis_len, int64_t inner,
                         const void* indices, bool indices_int32, int64_t n_indices, void* out, int* bad_index,
                         cudaStream_t stream) {
  if (outer * n_indices * inner == 0) return cudaSuccess;
  if (elem_size == 4)
    return Gather<uint32_t>(in, outer, axis_len, inner, indices, indices_int32, n_indices, out, bad_index, stream);
  if (elem_size == 8)
    return Gather<uint64_t>(in, outer, axis_len, inner, indices, indices_int32, n_indices, out, bad_index, stream);
  return cudaErrorInvalidValue;
}

}  // namespace strata_cuda
