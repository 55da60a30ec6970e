// NHWC layout pass (optimization level >= 2). Rewrites runs of fp32 2-D Conv, the 2-D
// pools and layout-agnostic elementwise ops between them into internal NHWC nodes
// (domain kInternalDomain, kernels in src/cpu/*nhwc*), with one NchwToNhwc at each region
// entry and one NhwcToNchw per value that leaves it (graph outputs, NCHW consumers).
// XNNPACK's convolutions are NHWC-native, so this removes the two transposes every NCHW
// Conv would otherwise pay. Static int8 models' QLinearConvs on the VNNI GEMM (whose rows are
// NHWC pixels) join as NhwcQLinearConv, with the per-tensor Q/DQ nodes and QdqAdd between
// them and 8-bit layout changes at the edges.
#pragma once

#include "core/ir.h"
#include "core/optimizer.h"
#include "core/status.h"

namespace strata {

// Domain of strata's internal operators; never appears in imported models.
inline constexpr char kInternalDomain[] = "strata.internal";
// The NHWC form of a QLinearConv (static int8 models), run by the VNNI kernel of
// src/cpu/int_conv.cc: x [N, H, W, C] and y [N, OH, OW, M] uint8/int8, the other inputs as
// QLinearConv's.
inline constexpr char kNhwcQLinearConvOp[] = "NhwcQLinearConv";
// core/qdq_fusion.cc's fused residual sum of static int8 models (kernel src/cpu/qdq_add.cc):
// elementwise over two same-shaped 8-bit tensors, so layout-free.
inline constexpr char kQdqAddOp[] = "QdqAdd";
// The ONNX opset of the rewritten node, kept as an attribute so fallbacks can rebuild it.
inline constexpr char kOriginalOpsetAttr[] = "strata_onnx_opset";

// Returns how many ONNX nodes were moved to NHWC. Skipped (0) when reference kernels are
// requested (the test oracle must see the model as written) and when accelerator providers
// may partition the graph afterwards (opts.cpu_only false: they would not take the ops).
Result<int> ConvertToNhwc(Graph& g, const OptimizerOptions& opts);

}  // namespace strata
