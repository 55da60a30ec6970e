// The packed MatMulNBits layout parameters (docs/cuda-weight-layout.md), provider side.
// src/cpu/cuda_weight_layout.cc computes the same; CudaPackParity keeps them identical.
#pragma once

#include <cstdint>
#include <string>

#include "cuda_kernels.h"

namespace strata_cuda {

constexpr size_t kLayoutHeaderBytes = 32;
constexpr uint16_t kLayoutVersion = 1;

// Fills p (offsets included) for target/bits/n/k/block and returns the blob size, or 0
// with *error set when the arguments are not valid.
size_t LayoutParams(const std::string& target, int bits, int64_t n, int64_t k, int64_t block, bool has_zp,
                    NBitsPackParams* p, uint8_t* arch, std::string* error);
// Writes the 32-byte header into `out`.
void WriteLayoutHeader(const NBitsPackParams& p, uint8_t arch, uint8_t* out);
// Reads a header back (compile of a node already packed by `strata pack`).
bool ReadLayoutHeader(const uint8_t* blob, size_t bytes, NBitsPackParams* p, std::string* tag, std::string* error);

}  // namespace strata_cuda
