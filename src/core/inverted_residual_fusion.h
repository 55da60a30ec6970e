// MobileNetV2's inverted-residual block as one internal node, so the expanded tensor lives
// only in an L2-sized strip buffer (see cpu/conv_nhwc_block.cc).
#pragma once

#include "core/ir.h"

namespace strata {

// The fused node's op type (domain kInternalDomain). Inputs: X, We, Be, Wd, Bd, Wp, Bp, R
// (expand 1x1 weight and bias, depthwise weight and bias, project 1x1 weight and bias, the
// residual; -1 where absent; no expand in a block with expansion factor 1). Each part's
// Conv attributes are kept under the prefixes "expand.", "depthwise." and "project.".
inline constexpr char kInvertedResidualOp[] = "NhwcInvertedResidual";
inline constexpr char kExpandPrefix[] = "expand.";
inline constexpr char kDepthwisePrefix[] = "depthwise.";
inline constexpr char kProjectPrefix[] = "project.";

// After ConvertToNhwc and FuseNhwcConvResidual: [NhwcConv 1x1 (expand)] -> NhwcConv
// depthwise -> NhwcConv 1x1 (project, optionally with the fused residual) becomes one
// node when each intermediate feeds only the next conv (no graph output, no other
// reader), the weights are constant with the expected shapes, the 1x1 convs are
// unstrided and unpadded, and the CPU runs the SGEMM and depthwise kernels (AVX-512F).
// The fused node takes the project conv's place. Returns the number of fusions.
int FuseInvertedResidualBlocks(Graph& g);

}  // namespace strata
