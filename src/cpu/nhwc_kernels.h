// Internal NHWC kernels (domain kInternalDomain, see core/layout_pass.h). Only the layout
// pass creates these nodes; their operands are NHWC [N, H, W, C] unless stated otherwise:
//   NchwToNhwc / NhwcToNchw   rank-4 layout changes at the edges of an NHWC region
//   NhwcConv                  Conv attributes and constant OIHW W / B, NHWC X and Y
//   NhwcMaxPool / NhwcAveragePool   the ONNX attributes, NHWC X and Y (no Indices output)
//   NhwcGlobalAveragePool     NHWC X -> NCHW-shaped [N, C, 1, 1] Y (the same bytes as NHWC
//                             [N, 1, 1, C]), so a following Flatten/Reshape needs no transpose
#pragma once

#include <memory>

#include "core/kernel.h"

namespace strata {

void RegisterNhwcConvKernels(KernelRegistry& r);  // conv_nhwc.cc: NhwcConv and the two layout changes
void RegisterNhwcPoolKernels(KernelRegistry& r);  // pool_nhwc.cc

// Runs an NCHW kernel `ref` (built for `nchw_node`, the original ONNX node) on NHWC input 0
// and writes its result to output 0 as NHWC: the exact fallback for parameters XNNPACK
// rejects. Inputs 1.. are passed through unchanged.
Status RunNchwFallback(KernelContext& ctx, const OpKernel& ref, const Node& nchw_node);

// The original ONNX node behind an internal NHWC node: same attributes and inputs, the
// ONNX op type, domain "" and the opset recorded by the pass. Used to build the fallbacks.
Node OriginalNode(const Node& nhwc_node, const char* onnx_op);

}  // namespace strata
