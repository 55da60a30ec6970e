// An NHWC conv whose input is scaled per channel: NhwcConv input 4, S, multiplies X's channels
// before the conv reads them, conv(X * S). FuseNhwcConvInputScale (core/optimizer.h) gives it
// the squeeze-excitation Mul of EfficientNet / MobileNetV3 blocks (x * sigmoid(...)), which
// then never makes a pass over the expanded map: the SGEMM conv folds S into a scaled copy of
// its packed weights, or into the A tiles it packs anyway (conv_nhwc_gemm.cc); other conv
// kernels get a scaled copy of X (WrapNhwcScaledInput).
#pragma once

#include <memory>

#include "core/kernel.h"
#include "core/tensor.h"
#include "cpu/sgemm.h"

namespace strata {

// NhwcConv's input slot for S.
inline constexpr size_t kNhwcConvInputScale = 4;

// S of an NhwcConv over X [n, h, w, c]: nullptr when the node has none; otherwise float32
// [1, 1, 1, c] (one scale for every image) or [n, 1, 1, c], else an error naming the node.
Result<const Tensor*> NhwcConvInputScale(const KernelContext& ctx, int64_t n, int64_t c);

// dst[i, :, :, :] = x[i, :, :, :] * s[i or 0, :] over n images of hw pixels x c channels (s of
// one or n rows of c), split over the pool. dst may be x.
void ScaleNhwcChannels(const float* x, const Tensor& s, int64_t n, int64_t hw, int64_t c, float* dst, ThreadPool* pool);

// A 1x1 stride-1 unpadded conv (X [n * hw, c] as a matrix) on the SGEMM with X * S as A,
// without writing X * S: each image's rows run on diag(S) B when Gemm reads A in place and
// the map has at least as many pixels as B has columns (the scaled copy of B is the smaller
// pass), else A's tiles are scaled as the SGEMM gathers them. `scratch` holds the scaled B.
Status ScaledPointwiseGemm(const float* x, const Tensor& s, int64_t n, int64_t hw, int64_t c, const sgemm::PackedB& b,
                           float* y, int64_t m, const sgemm::Epilogue& ep, ThreadPool* pool, sgemm::PackedB* scratch);

// Runs `inner` on this node's inputs with X (input 0) replaced by x: the wrappers that
// hand an inner conv kernel a rewritten X (scaled, or concatenated and normalised).
Status ComputeOnInput0(const OpKernel& inner, KernelContext& ctx, const Value& x);

// `inner`, an NhwcConv kernel that ignores input 4, run on a scaled copy of X (from the run's
// allocator) when the node has S; it keeps inner's in-place residual and constant packing.
std::unique_ptr<OpKernel> WrapNhwcScaledInput(std::unique_ptr<OpKernel> inner);

}  // namespace strata
