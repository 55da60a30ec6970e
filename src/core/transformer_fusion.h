// Transformer graph fusions (optimization level >= 2, CPU-only sessions):
//
//   GELU, erf form   x * 0.5 * (1 + Erf(x / sqrt 2))             -> com.microsoft Gelu(x)
//   GELU, tanh form  0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 x^3))) -> com.microsoft FastGelu(x)
//   SiLU             x * Sigmoid(x)                             -> com.microsoft QuickGelu(x, alpha = 1)
//   MatMul(A, W[K,N]) + bias[N] (+ Gelu/FastGelu | + residual R)
//                                                    -> strata.internal FusedMatMul(A, W, bias[, R])
//   Softmax(MatMul-scores / c (or * c) + mask)      -> strata.internal MaskedSoftmax(scores, mask)
//   head split/merge Reshape+Transpose around MatMul -> MaskedSoftmax -> MatMul
//                                                    -> strata.internal Attention(q, k, v, mask)
//   ONNX Runtime's dynamic int8 MatMul: DynamicQuantizeLinear(X) -> MatMulInteger(X_q, W_q, X_zp[, W_zp])
//     -> Cast(float) -> Mul(., Mul(X_scale, W_scale)) [-> Add(bias[N])]
//                                      -> strata.internal DynQuantMatMul(X, W_q, W_scale, W_zp?, bias?)
//
// Every pattern is matched strictly (constants within 1e-4 of their value, intermediate
// values with a single consumer and not graph outputs, float constants of the expected
// shape); anything else is left as written. Kernels: src/cpu/fused_matmul.cc,
// src/cpu/attention.cc and src/cpu/dynq_matmul.cc.
#pragma once

#include "core/ir.h"
#include "core/optimizer.h"
#include "core/status.h"

namespace strata {

// Internal op names (domain kInternalDomain of core/layout_pass.h).
inline constexpr char kFusedMatMulOp[] = "FusedMatMul";
inline constexpr char kMaskedSoftmaxOp[] = "MaskedSoftmax";
inline constexpr char kAttentionOp[] = "Attention";
inline constexpr char kDynQuantMatMulOp[] = "DynQuantMatMul";

struct TransformerFusionStats {
  int gelu = 0;             // erf-form GELU subgraphs -> Gelu
  int fast_gelu = 0;        // tanh-form GELU subgraphs -> FastGelu
  int silu = 0;             // Mul(x, Sigmoid(x)) -> QuickGelu(alpha = 1)
  int matmul_bias = 0;      // MatMul + Add(bias) -> FusedMatMul
  int matmul_gelu = 0;      // FusedMatMul + (Fast)Gelu -> FusedMatMul with activation
  int matmul_residual = 0;  // FusedMatMul + Add(same-shape residual) -> FusedMatMul(A, W, bias, R)
  int masked_softmax = 0;   // scale [+ mask] + Softmax -> MaskedSoftmax
  int attention = 0;        // head split + MatMul + MaskedSoftmax + MatMul + head merge -> Attention
  int dynq_matmul = 0;      // DynamicQuantizeLinear + MatMulInteger + Cast + Mul(scales) [+ bias] -> DynQuantMatMul
  int total() const {
    return gelu + fast_gelu + silu + matmul_bias + matmul_gelu + matmul_residual + masked_softmax + attention +
           dynq_matmul;
  }
};

// Runs all the transformer fusions. Skipped (all zero) when reference kernels are requested
// (the test oracle must see the model as written) and when accelerator providers may
// partition the graph afterwards (they would not take the internal ops).
Result<TransformerFusionStats> FuseTransformerPatterns(Graph& g, const OptimizerOptions& opts);

}  // namespace strata
