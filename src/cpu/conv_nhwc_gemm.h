// NHWC convolutions on strata's own AVX-512 SGEMM (conv_nhwc_gemm.cc) and the residual
// fusion that feeds them (conv_nhwc_fuse.cc).
#pragma once

#include <memory>

#include "core/ir.h"
#include "core/kernel.h"
#include "cpu/xnnpack_util.h"

namespace strata {

// Ungrouped 2-D NhwcConv as one GEMM: Y[N*OH*OW, M] = im2col(X)[N*OH*OW, KH*KW*C] x W'
// with W' packed once here. A 1x1 stride-1 unpadded conv is a plain sgemm::Gemm over X.
// Other shapes (strides, pads, dilations, auto_pad) with C >= 16 and K <= 4608 read
// im2col(X) through per-tap pointers into X (sgemm::GemmIndirect: no gather, no packing);
// short-channel convs (C < 16 with KW * C >= 16, e.g. the RGB stem, dilation 1 along W)
// through per-kernel-row pointers into a zero-padded copy of X; the rest gather their
// im2col rows per micro-tile.
// Bias, the fused activation and an optional residual (input 3, NHWC, the output's
// shape) are applied in the GEMM epilogue.
// kUnsupported when group != 1 or the CPU lacks AVX-512F: the caller keeps XNNPACK.
Result<std::unique_ptr<OpKernel>> MakeNhwcGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act);

// Depthwise 2-D NhwcConv (group == C == M) with AVX-512F on the session pool
// (conv_nhwc_depthwise.cc), at every thread count. kUnsupported otherwise.
Result<std::unique_ptr<OpKernel>> MakeNhwcDepthwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                        const FusedActivation& act);

// True when MakeNhwcGemmConv would take a Conv with this weight and attributes (the fusion
// pass only gives residual inputs to convs that can consume them).
bool NhwcGemmConvApplies(const Node& node, const Tensor& w);
// Short-channel convs (C < 16) whose kernel rows span at least this many floats (KW * C;
// the 7x7 RGB stem: 21) run on kernel-row segments of a zero-padded X; shorter rows (the
// 3x3 RGB stem: 9) are where the direct stem kernel (conv_nhwc_stem.cc) wins instead.
inline constexpr int64_t kMinRowSegmentFloats = 16;

// After ConvertToNhwc: NhwcConv -> Add(other) [-> Relu] becomes one NhwcConv with `other`
// as input 3 (residual) and activation=Relu, when the conv output feeds only the Add, the
// Add's operands have the same static shape and the conv runs on the SGEMM. The fused
// node takes the Add's place in the node order (the residual may be produced after the
// conv). Returns the number of fusions. Call after ConvertToNhwc, before dead-node removal.
int FuseNhwcConvResidual(Graph& g);

}  // namespace strata
