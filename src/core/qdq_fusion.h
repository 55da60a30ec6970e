// Static int8 models in the QDQ format (ONNX Runtime's quantize_static default): each
// quantized op is written as float math between DequantizeLinear and QuantizeLinear nodes.
// Where an integer kernel runs the op faster than the float path, the group becomes that op:
//
//   Conv(DequantizeLinear(x_q, xs, xz), DequantizeLinear(W_q, ws, wz), [DequantizeLinear(B_q, bs) | B])
//     [-> Relu | Clip] -> QuantizeLinear(., ys, yz)
//   -> QLinearConv(x_q, xs, xz, W_q, ws, wz, ys, yz, B_q')
//
// B_q' is B_q when bs == xs * ws exactly (as quantizers write it), else the bias re-quantized
// to that scale (round half to even). A Relu or Clip (constant bounds) joins only where the
// saturation is its clamp: QuantizeLinear of its bounds gives the type's lowest and highest
// values (a Relu when yz is the lowest value; a ReLU6 when 6 quantizes to the top or past it). The integer kernel sums
// exactly and rounds once: outputs differ from the float graph's by at most one step where its float rounding lands
// near a half step (as in ONNX Runtime, which makes the same fusion).
//
// Runs before constant folding (which would turn DequantizeLinear(W_q) into float weights),
// at optimization level >= 2, in CPU-only sessions without reference kernels, and only where
// the optimized QLinearConv kernel covers the fused node (ungrouped convs on the VNNI GEMM,
// depthwise ones on the int8 depthwise kernel): elsewhere the float path is the faster one.
#pragma once

#include "core/ir.h"
#include "core/optimizer.h"

namespace strata {

// Returns the number of Conv groups fused.
int FuseQdqConv(Graph& g, const OptimizerOptions& opts);

// The residual sums of such models:
//
//   QuantizeLinear([Relu](DequantizeLinear(a) + DequantizeLinear(b)), ys, yz)
//   -> strata.internal QdqAdd(a, as, az, b, bs, bz, ys, yz; relu)
//
// with scalar constant scales and zero points and a, b of one static shape. The kernel
// (src/cpu/qdq_add.cc) does the same float operations in the same order: the same bytes.
// Same conditions as FuseQdqConv, bar the VNNI kernel. Returns the number fused.
int FuseQdqAdd(Graph& g, const OptimizerOptions& opts);

// The MatMuls of static int8 transformers (a Linear layer between DequantizeLinear nodes):
//
//   MatMul(DequantizeLinear(x_q, xs[, xz]), DequantizeLinear(W_q, ws[, wz])) [+ bias[N]]
//   -> strata.internal QdqMatMul(x_q, xs, xz, W_q, ws, wz[, bias])
//
// with scalar constant xs and xz, W_q a constant [K, N] of int8 or uint8 and ws / wz constants
// per tensor or per column (axis 1); the Add joins when it reads the MatMul's output alone and
// a constant float [N]. The output stays float (ONNX Runtime's MatMulIntegerToFloat): the
// kernel (src/cpu/dynq_matmul.cc) sums the integer products exactly and scales once, so the
// outputs differ from the float graph's by its float rounding. A quantized output joins too:
//
//   ... -> QuantizeLinear(., ys, yz) -> DequantizeLinear(., ds, dz) [-> Add(bias[N])]
//   -> QdqMatMul(x_q, xs, xz, W_q, ws, wz, -, ys, yz, ds, dz[, bias])
//
// (scalar constant parameters with zero points, each intermediate read by the next node
// alone): the GEMM's store does the three nodes' float operations (int8gemm::FloatOut's
// requant), so their bits, and the bytes are never written. Same conditions as FuseQdqConv
// (the VNNI GEMM). Returns the number fused.
inline constexpr char kQdqMatMulOp[] = "QdqMatMul";
int FuseQdqMatMul(Graph& g, const OptimizerOptions& opts);

// After the layout pass: an ungrouped NhwcQLinearConv whose output only a QdqAdd reads (a
// ResNet block's last conv and its residual sum) takes the sum into its GEMM's store:
//
//   QdqAdd(conv(x_q, ...), skip) -> NhwcQLinearConv(x_q, ..., [B], skip, skip's scale and zero
//   point, the sum's scale and zero point of the conv output, the sum's output scale and zero
//   point; residual_relu)
//
// The store does QdqAdd's float operations on the requantized byte (int8gemm::QuantOut::skip):
// the bytes of the two nodes. The conv's byte tensor is never written. Returns the number fused.
int FuseNhwcQConvAdd(Graph& g);

// MaxPool(DequantizeLinear(x_q)) -> DequantizeLinear(MaxPool(x_q)) for scalar constant
// parameters (scale > 0): DequantizeLinear is monotone, so the maximum commutes with it
// exactly, and the pool then reads bytes and the DequantizeLinear a quarter of the values
// (3x3/2). Only for pads smaller than the kernel and no dilation (every window has a tap in
// the image: no -inf of an empty window to keep), no Indices output, and x_q made by a
// (fused) QLinearConv, whose NHWC region the pool then joins. Returns the number moved.
int SinkDequantizeBelowMaxPool(Graph& g, const OptimizerOptions& opts);

}  // namespace strata
