// Elementwise kernels: broadcast binary ops, unary activations, bias + clamp epilogue, cast.
#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace strata_cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 4 ? 65535 * 4 : (b < 1 ? 1 : b));
}

__device__ __forceinline__ float ApplyBinary(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::kAdd: return x + y;
    case BinaryOp::kSub: return x - y;
    case BinaryOp::kMul: return x * y;
    case BinaryOp::kDiv: return x / y;
    case BinaryOp::kPow: return powf(x, y);
  }
  return 0.0f;
}

__global__ void BinaryKernel(BinaryOp op, const float* a, StridedShape as, const float* b, StridedShape bs, float* out,
                             StridedShape os, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = os.rank - 1; d >= 0; --d) {
      const int64_t idx = rem % os.dims[d];
      rem /= os.dims[d];
      oa += idx * as.strides[d];
      ob += idx * bs.strides[d];
    }
    out[i] = ApplyBinary(op, a[oa], b[ob]);
  }
}

// Same-shape fast path: no index arithmetic.
__global__ void BinaryFlatKernel(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = ApplyBinary(op, a[i], b[i]);
}

__global__ void UnaryKernel(UnaryOp op, const float* in, float* out, int64_t n, float p0, float p1) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = in[i];
    float y = x;
    switch (op) {
      case UnaryOp::kRelu: y = x > 0.0f ? x : 0.0f; break;
      case UnaryOp::kSigmoid: y = 1.0f / (1.0f + expf(-x)); break;
      case UnaryOp::kTanh: y = tanhf(x); break;
      case UnaryOp::kErf: y = erff(x); break;
      case UnaryOp::kExp: y = expf(x); break;
      case UnaryOp::kSqrt: y = sqrtf(x); break;
      case UnaryOp::kClip: y = fminf(fmaxf(x, p0), p1); break;
      case UnaryOp::kLeakyRelu: y = x >= 0.0f ? x : x * p0; break;
      case UnaryOp::kIdentity: break;
    }
    out[i] = y;
  }
}

__global__ void BiasClampKernel(float* y, int64_t rows, int64_t cols, const float* bias, bool per_row,
                                int64_t bias_len, float lo, float hi) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = y[i];
    if (bias) v += per_row ? bias[(i / cols) % bias_len] : bias[(i % cols) % bias_len];
    y[i] = fminf(fmaxf(v, lo), hi);
  }
}

template <typename From, typename To>
__global__ void CastKernel(const From* in, To* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<To>(in[i]);
}

template <typename From>
cudaError_t CastFrom(const From* in, void* out, int to, int64_t n, cudaStream_t s) {
  if (to == 1) CastKernel<From, float><<<Blocks(n), kThreads, 0, s>>>(in, static_cast<float*>(out), n);
  else if (to == 6) CastKernel<From, int32_t><<<Blocks(n), kThreads, 0, s>>>(in, static_cast<int32_t*>(out), n);
  else if (to == 7) CastKernel<From, int64_t><<<Blocks(n), kThreads, 0, s>>>(in, static_cast<int64_t*>(out), n);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchBinary(BinaryOp op, const float* a, const StridedShape& as, const float* b, const StridedShape& bs,
                         float* out, const StridedShape& os, cudaStream_t stream) {
  int64_t n = 1;
  bool flat = true;
  int64_t contiguous = 1;
  for (int d = os.rank - 1; d >= 0; --d) {
    n *= os.dims[d];
    if (os.dims[d] != 1 && (as.strides[d] != contiguous || bs.strides[d] != contiguous)) flat = false;
    contiguous *= os.dims[d];
  }
  if (n == 0) return cudaSuccess;
  if (flat)
    BinaryFlatKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, b, out, n);
  else
    BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, as, b, bs, out, os, n);
  return cudaGetLastError();
}

cudaError_t LaunchUnary(UnaryOp op, const float* in, float* out, int64_t n, float p0, float p1, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, in, out, n, p0, p1);
  return cudaGetLastError();
}

cudaError_t LaunchBiasClamp(float* y, int64_t rows, int64_t cols, const float* bias, bool bias_per_row,
                            int64_t bias_len, float lo, float hi, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  BiasClampKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(y, rows, cols, bias, bias_per_row, bias_len, lo, hi);
  return cudaGetLastError();
}

cudaError_t LaunchCast(const void* in, int from, void* out, int to, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (from == 1) return CastFrom(static_cast<const float*>(in), out, to, n, stream);
  if (from == 6) return CastFrom(static_cast<const int32_t*>(in), out, to, n, stream);
  if (from == 7) return CastFrom(static_cast<const int64_t*>(in), out, to, n, stream);
  return cudaErrorInvalidValue;
}

}  // namespace strata_cuda
