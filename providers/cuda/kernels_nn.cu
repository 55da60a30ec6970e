// Neural-network kernels: row softmax / layer norm / reductions, pooling, im2col, depthwise conv.
#include <cuda_runtime.h>

#include <cfloat>

#include "cuda_kernels.h"

namespace strata_cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 4 ? 65535 * 4 : (b < 1 ? 1 : b));
}

// Block-wide reduction of one value per thread (sum or max); all threads get the result.
__device__ float BlockReduce(float v, bool is_max) {
  __shared__ float shared[32];
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : (is_max ? -FLT_MAX : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  return v;
}

// One block per row.
__global__ void SoftmaxKernel(const float* in, float* out, int64_t cols, bool log) {
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float mx = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, x[c]);
  mx = BlockReduce(mx, true);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(x[c] - mx);
  sum = BlockReduce(sum, false);
  if (log) {
    const float ls = logf(sum);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[c] = x[c] - mx - ls;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - mx) * inv;
  }
}

__global__ void LayerNormKernel(const float* in, const float* scale, const float* bias, float* out, int64_t cols,
                                float eps) {
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += x[c];
  const float mean = BlockReduce(s, false) / static_cast<float>(cols);
  float v = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) v += (x[c] - mean) * (x[c] - mean);
  const float inv = rsqrtf(BlockReduce(v, false) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[c] = (x[c] - mean) * inv * scale[c] + (bias ? bias[c] : 0.0f);
}

__global__ void ReduceRowsKernel(const float* in, float* out, int64_t cols, bool mean) {
  const float* x = in + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += x[c];
  s = BlockReduce(s, false);
  if (threadIdx.x == 0) out[blockIdx.x] = mean ? s / static_cast<float>(cols) : s;
}

__global__ void PoolKernel(const float* in, float* out, Pool2d p, bool is_max, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % p.ow, oh = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh);
    const float* x = in + plane * p.h * p.w;
    float acc = is_max ? -FLT_MAX : 0.0f;
    int64_t count = 0;
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = oh * p.sh - p.ph + kh * p.dh;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const int64_t iw = ow * p.sw - p.pw + kw * p.dw;
        const bool inside = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w;
        if (inside) {
          const float v = x[ih * p.w + iw];
          acc = is_max ? fmaxf(acc, v) : acc + v;
          ++count;
        } else if (!is_max && p.count_include_pad && ih < p.h + p.ph && iw < p.w + p.pw) {
          ++count;  // padding counts; the window's part beyond the padding does not
        }
      }
    }
    out[i] = is_max ? acc : (count ? acc / static_cast<float>(count) : 0.0f);
  }
}

__global__ void Im2ColKernel(const float* image, Conv2d p, int64_t g, float* col, int64_t total) {
  const int64_t cg = p.c / p.group, spatial = p.oh * p.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = i % spatial, r = i / spatial;
    const int64_t kw = r % p.kw, kh = (r / p.kw) % p.kh, c = r / (p.kw * p.kh);
    const int64_t ow = s % p.ow, oh = s / p.ow;
    const int64_t ih = oh * p.sh - p.ph + kh * p.dh, iw = ow * p.sw - p.pw + kw * p.dw;
    col[i] = (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) ? image[((g * cg + c) * p.h + ih) * p.w + iw] : 0.0f;
    (void)cg;
  }
}

__global__ void DepthwiseKernel(const float* in, const float* w, float* out, Conv2d p, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % p.ow, oh = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh), c = plane % p.c;
    const float* x = in + plane * p.h * p.w;
    const float* k = w + c * p.kh * p.kw;
    float acc = 0.0f;
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = oh * p.sh - p.ph + kh * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const int64_t iw = ow * p.sw - p.pw + kw * p.dw;
        if (iw >= 0 && iw < p.w) acc += x[ih * p.w + iw] * k[kh * p.kw + kw];
      }
    }
    out[i] = acc;
  }
}

int RowThreads(int64_t cols) { return cols >= 512 ? 512 : (cols >= 128 ? 128 : 32); }

}  // namespace

cudaError_t LaunchSoftmax(const float* in, float* out, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  SoftmaxKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, stream>>>(in, out, cols, log);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(const float* in, const float* scale, const float* bias, float* out, int64_t rows,
                            int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  LayerNormKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, stream>>>(in, scale, bias, out, cols, epsilon);
  return cudaGetLastError();
}

cudaError_t LaunchReduceRows(const float* in, float* out, int64_t rows, int64_t cols, bool mean, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  ReduceRowsKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, stream>>>(in, out, cols, mean);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool(const float* in, float* out, const Pool2d& p, cudaStream_t stream) {
  const int64_t total = p.n * p.c * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  PoolKernel<<<Blocks(total), kThreads, 0, stream>>>(in, out, p, true, total);
  return cudaGetLastError();
}

cudaError_t LaunchAvgPool(const float* in, float* out, const Pool2d& p, cudaStream_t stream) {
  const int64_t total = p.n * p.c * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  PoolKernel<<<Blocks(total), kThreads, 0, stream>>>(in, out, p, false, total);
  return cudaGetLastError();
}

cudaError_t LaunchIm2Col(const float* image, const Conv2d& p, int64_t group_index, float* col, cudaStream_t stream) {
  const int64_t total = (p.c / p.group) * p.kh * p.kw * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  Im2ColKernel<<<Blocks(total), kThreads, 0, stream>>>(image, p, group_index, col, total);
  return cudaGetLastError();
}

cudaError_t LaunchDepthwise(const float* in, const float* w, float* out, int64_t n, const Conv2d& p,
                            cudaStream_t stream) {
  const int64_t total = n * p.c * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  DepthwiseKernel<<<Blocks(total), kThreads, 0, stream>>>(in, w, out, p, total);
  return cudaGetLastError();
}

}  // namespace strata_cuda
