// CPU reference packer for the CUDA MatMulNBits weight layout (docs/cuda-weight-layout.md).
// Pure data layout: no CUDA headers, usable by the core and the CLI on any machine. The
// CUDA provider carries the same packer as a kernel (providers/cuda/kernels_nbits.cu);
// the CudaPackParity test checks both produce identical bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::cpu {

// The quantized weights of one com.microsoft MatMulNBits node, as stored in the model.
struct NBitsWeights {
  int bits = 4;                           // 4 or 8
  int64_t n = 0, k = 0, block_size = 0;   // block_size: power of two >= 16
  const uint8_t* b = nullptr;             // [n, ceil(k/block), block*bits/8], low bits first along K
  size_t b_bytes = 0;
  const float* scales = nullptr;          // [n * n_blocks]
  size_t scale_count = 0;
  const uint8_t* zero_points = nullptr;   // optional: 4-bit [n, ceil(n_blocks/2)], 8-bit [n, n_blocks]
  size_t zp_bytes = 0;
};

// One packing target ("cuda-sm80", "cuda-sm90") and its layout parameters.
struct CudaWeightLayout {
  std::string tag;
  uint8_t arch = 0;       // 80, 90: stored in the blob header
  int64_t tile_n = 0;     // columns per tile
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kHeaderBytes = 32;
};

// The layout for `target`; InvalidArgument naming the known tags otherwise.
Result<CudaWeightLayout> CudaLayoutForTarget(const std::string& target);
// The packed blob's size; InvalidArgument when the weights' description is inconsistent.
Result<size_t> CudaPackedSize(const CudaWeightLayout& layout, const NBitsWeights& w);
// Packs `w` into `out` (exactly CudaPackedSize bytes).
Status PackCudaWeights(const CudaWeightLayout& layout, const NBitsWeights& w, uint8_t* out, size_t out_size);
// Convenience: target tag to packed bytes.
Result<std::vector<uint8_t>> PackCudaWeights(const std::string& target, const NBitsWeights& w);

// Header fields of a packed blob (validated against its size).
struct CudaPackedInfo {
  std::string tag;
  int bits = 0;
  int64_t n = 0, k = 0, block_size = 0, tile_n = 0;
  bool has_zero_points = false;
};
Result<CudaPackedInfo> ReadCudaPackedHeader(const uint8_t* blob, size_t bytes);

}  // namespace strata::cpu
