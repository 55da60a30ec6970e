// An NHWC conv that reads its input through a fused channel Concat and a fused per-channel
// BatchNormalization (+ Relu / Clip): conv(act(BN(Concat(X0, X1, ...)))). DenseNet's dense
// layers read every earlier feature map this way: each layer's Concat copies all of them
// (a quadratic amount of copying over a block) and its pre-activation BN rewrites the copy,
// both before a 1x1 conv reads it. FuseNhwcConvInputNorm (core/optimizer.h) hands the
// Concat's inputs and the BN's parameters to the conv instead: the SGEMM conv applies them
// to A's tiles as it packs them, so neither map is written; every other conv kernel gets
// the transformed input as one tensor, as the graph made it (WrapNhwcTransformedInput).
//
// Encoding on the NhwcConv node (inputs 0-4 keep their meaning: X, W, B, residual, scale):
//  - inputs 5-8: the BatchNormalization's scale, B, mean and var (constant float32 [C]),
//    attributes input_norm_epsilon and input_norm_activation (+ _min / _max, as the fused
//    activation of NhwcBatchNormalization: Relu or Clip);
//  - attribute input_parts = P >= 2: X is the channel concatenation of input 0 and inputs
//    9 .. 9 + P - 2, each [N, H, W, C_i] with the C_i summing to W's C.
// The input scale (input 4) does not combine with either.
#pragma once

#include <memory>
#include <vector>

#include "core/kernel.h"
#include "core/tensor.h"

namespace strata {

inline constexpr size_t kNhwcConvInputNorm = 5;   // 5, 6, 7, 8: scale, B, mean, var
inline constexpr size_t kNhwcConvInputParts = 9;  // parts 1 .. P - 1 of the fused Concat

// True when the node has a fused input norm (input 5) or parts (attribute input_parts).
bool HasNhwcConvInputTransform(const Node& node);

// The transform, checked and computed once at kernel creation from the node's constants.
struct NhwcConvInputTransform {
  int64_t channels = 0;  // C: W's input channels, the sum over the parts
  int64_t parts = 1;
  bool norm = false;
  // y = (x - mean[c]) * a[c] + b[c], a = scale / sqrt(var + eps) in double (as
  // NhwcBatchNormalization), then clamped to [lo, hi] when `clamp`.
  std::vector<float> mean, a, b;
  bool clamp = false;
  float lo = 0, hi = 0;
};
// Errors (InvalidModel, naming the node) for a bad encoding: norm parameters that are not
// constant float32 [C], an unknown activation, fewer than 2 parts or absent part inputs, or
// an input scale as well.
Result<NhwcConvInputTransform> ParseNhwcConvInputTransform(const KernelInit& init, int64_t channels);

// A pointwise (1x1, stride 1, unpadded, group 1) NhwcConv on the SGEMM with the transform
// applied to A's tiles as they are gathered; kUnsupported where the SGEMM does not run
// (no AVX-512F) or the conv is not pointwise.
Result<std::unique_ptr<OpKernel>> MakeNhwcInputNormGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                            NhwcConvInputTransform t);

// `inner`, an NhwcConv kernel that reads X as one tensor, run on the transformed X (from
// the run's allocator); it keeps inner's in-place residual and constant packing.
std::unique_ptr<OpKernel> WrapNhwcTransformedInput(std::unique_ptr<OpKernel> inner, NhwcConvInputTransform t);

}  // namespace strata
