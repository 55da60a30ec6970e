// MatMulNBits weight prepacking and dequantization on the device. The layout is
// specified in docs/cuda-weight-layout.md; src/cpu/cuda_weight_layout.cc is the CPU
// reference and the parity test (CudaPackParity) checks both agree byte for byte.
#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace strata_cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 4 ? 65535 * 4 : (b < 1 ? 1 : b));
}

// Slot of code s (0..7) inside a 32-bit word of 4-bit codes: even codes fill the low
// nibbles of bytes 0..3, odd codes the high nibbles ("interleaved", see the doc).
__device__ __forceinline__ int Slot4(int s, bool interleave) { return interleave ? (s >> 1) + (s & 1) * 4 : s; }

__device__ __forceinline__ uint32_t Code(const uint8_t* b, const NBitsPackParams& p, int64_t n, int64_t k) {
  if (n >= p.n || k >= p.k) return 0;
  const int64_t blob = p.block * p.bits / 8;
  const uint8_t byte = b[(n * p.n_blocks + k / p.block) * blob + (k % p.block) * p.bits / 8];
  if (p.bits == 8) return byte;
  return (k & 1) ? (byte >> 4) : (byte & 15);
}

__global__ void PackWordsKernel(const uint8_t* b, NBitsPackParams p, uint32_t* words, int64_t total) {
  const int per_word = 32 / p.bits;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.tile_n, kw = (i / p.tile_n) % p.words_per_col, t = i / (p.tile_n * p.words_per_col);
    const int64_t n = t * p.tile_n + j;
    uint32_t w = 0;
    for (int s = 0; s < per_word; ++s) {
      const uint32_t c = Code(b, p, n, kw * per_word + s);
      const int slot = p.bits == 4 ? Slot4(s, p.interleave) : s;
      w |= c << (slot * p.bits);
    }
    words[i] = w;
  }
}

__global__ void PackScalesKernel(const float* scales, const uint8_t* zp, NBitsPackParams p, float* out_scales,
                                 uint8_t* out_zp, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.tile_n, blk = (i / p.tile_n) % p.n_blocks, t = i / (p.tile_n * p.n_blocks);
    const int64_t n = t * p.tile_n + j;
    float s = 0.0f;
    uint8_t z = 0;
    if (n < p.n) {
      s = scales[n * p.n_blocks + blk];
      if (!p.has_zp) {
        z = static_cast<uint8_t>(1u << (p.bits - 1));
      } else if (p.bits == 8) {
        z = zp[n * p.n_blocks + blk];
      } else {
        const uint8_t byte = zp[n * ((p.n_blocks + 1) / 2) + blk / 2];
        z = (blk & 1) ? (byte >> 4) : (byte & 15);
      }
    }
    out_scales[i] = s;
    out_zp[i] = z;
  }
}

__global__ void DequantKernel(const uint8_t* blob, NBitsPackParams p, float* w, int64_t total) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(blob + p.words_off);
  const float* scales = reinterpret_cast<const float*>(blob + p.scales_off);
  const uint8_t* zps = blob + p.zp_off;
  const int per_word = 32 / p.bits;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i % p.n, k = i / p.n;
    const int64_t t = n / p.tile_n, j = n % p.tile_n, kw = k / per_word, blk = k / p.block;
    const int s = static_cast<int>(k % per_word);
    const int slot = p.bits == 4 ? Slot4(s, p.interleave) : s;
    const uint32_t word = words[(t * p.words_per_col + kw) * p.tile_n + j];
    const uint32_t code = (word >> (slot * p.bits)) & ((1u << p.bits) - 1u);
    const int64_t sz = (t * p.n_blocks + blk) * p.tile_n + j;
    w[i] = (static_cast<float>(code) - static_cast<float>(zps[sz])) * scales[sz];
  }
}

}  // namespace

cudaError_t LaunchPackNBits(const uint8_t* b, const float* scales, const uint8_t* zp, uint8_t* blob,
                            const NBitsPackParams& p, cudaStream_t stream) {
  const int64_t words = p.tiles * p.words_per_col * p.tile_n, entries = p.tiles * p.n_blocks * p.tile_n;
  PackWordsKernel<<<Blocks(words), kThreads, 0, stream>>>(b, p, reinterpret_cast<uint32_t*>(blob + p.words_off),
                                                          words);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  PackScalesKernel<<<Blocks(entries), kThreads, 0, stream>>>(
      scales, zp, p, reinterpret_cast<float*>(blob + p.scales_off), blob + p.zp_off, entries);
  return cudaGetLastError();
}

cudaError_t LaunchDequantNBits(const uint8_t* blob, const NBitsPackParams& p, float* w, cudaStream_t stream) {
  const int64_t total = p.k * p.n;
  if (total == 0) return cudaSuccess;
  DequantKernel<<<Blocks(total), kThreads, 0, stream>>>(blob, p, w, total);
  return cudaGetLastError();
}

}  // namespace strata_cuda
