// The bf16 fast-math pieces of the fused inverted-residual block (conv_nhwc_block.cc): its
// 1x1 GEMMs on AVX512_BF16 with A already rounded to bf16 pair rows by the block itself
// (the expand GEMM's input rows per strip, the depthwise output row by row while it is in
// L1), so the GEMM reads A in place with no packing pass. Reached only after
// Bf16GemmAvailable().
#pragma once

#include <cstdint>

#include "cpu/gemm_bf16.h"

namespace strata::block_bf16 {

// uint32 words of one row of k floats as bf16 pairs (an odd k ends in a zero-padded pair).
inline int64_t PairsPerRow(int64_t k) { return (k + 1) / 2; }

// Rounds `rows` rows of k floats (row stride lda) to bf16 pair rows (round-to-nearest-even,
// element 2i in the low half), ldp >= PairsPerRow(k) words apart.
void RoundRows(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp);

// C[m, N] (row stride ldc) = A x B + ep (bias, residual, clamp) on the calling thread, where
// A is m pair rows ldp words apart (RoundRows) and B was packed by PackBf16 with B.K = the
// rows' k. The residual, if any, has rows ep.ldr apart starting at A's row 0.
void PairRowsGemm(int64_t m, const uint32_t* a, int64_t ldp, const PackedBf16B& b, float* c, int64_t ldc,
                  const Bf16Epilogue& ep);

}  // namespace strata::block_bf16
