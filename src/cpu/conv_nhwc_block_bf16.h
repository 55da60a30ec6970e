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

// Row stride (uint32 words) of pair rows `pairs` long: on AMX rounded up to 16, so the
// tiles read the rows in place (bf16_internal::AmxRowsGemm); the round functions below zero
// the pad.
int64_t RowWords(int64_t pairs);

// Rounds `rows` rows of k floats (row stride lda) to bf16 pair rows (round-to-nearest-even,
// element 2i in the low half), ldp >= PairsPerRow(k) words apart; words [PairsPerRow(k), ldp)
// of each row are zeroed.
void RoundRows(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp);

// Split rows for blocks too sensitive to one bf16 rounding (conv_nhwc_block.cc): each row
// becomes three segments of PairsPerRow(k) pairs, hi = bf16(a), lo = bf16(a - hi), then hi
// again. Against B packed by PackSplitWeights ([W; W; W - bf16(W)] stacked along K) one bf16
// GEMM sums hi*W + lo*W + hi*(W - bf16(W)) (the bf16x3 scheme): each product is exact to
// about 2^-16 relative instead of bf16's 2^-8, at three times the bf16 work. Worth it only
// on AMX, where bf16 runs at many times the fp32 FMA rate. Where hi is not finite (an input
// Inf or NaN, or a float that rounds to Inf) lo and the third segment are 0, so the row
// carries what one rounding would (Inf stays Inf, never Inf - Inf = NaN).
inline int64_t SplitPairsPerRow(int64_t k) { return 3 * PairsPerRow(k); }
void RoundRowsSplit(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp);
// W [n, k] (a 1x1 conv weight [M, C]) as the split GEMM's B: K = 2 * SplitPairsPerRow(k).
// Rows are read as PackBf16Rows reads them (in place, or a panel at a time from the model
// file) and stacked into [W; W; W - bf16(W)] per row while they are packed.
Result<PackedBf16B> PackSplitWeights(const sgemm::WeightRows& w, int64_t n, int64_t k, ThreadPool* pool = nullptr);
// The same for a resident W.
Result<PackedBf16B> PackSplitWeights(const float* w, int64_t n, int64_t k);

// C[m, N] (row stride ldc) = A x B + ep (bias, residual, clamp) on the calling thread, where
// A is m pair rows ldp words apart (RoundRows) and B was packed by PackBf16 with B.K = the
// rows' k. The residual, if any, has rows ep.ldr apart starting at A's row 0.
void PairRowsGemm(int64_t m, const uint32_t* a, int64_t ldp, const PackedBf16B& b, float* c, int64_t ldc,
                  const Bf16Epilogue& ep);

}  // namespace strata::block_bf16
