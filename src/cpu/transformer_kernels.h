// Kernels for the transformer fusions of core/transformer_fusion.h, and the vectorised
// row helpers they share with the ordinary Gelu/FastGelu and Softmax kernels.
#pragma once

#include <cstdint>

namespace strata {

class KernelRegistry;

// strata.internal FusedMatMul (fused_matmul.cc) and MaskedSoftmax (attention.cc).
void RegisterFusedMatMulKernels(KernelRegistry& r);
void RegisterAttentionKernels(KernelRegistry& r);
// strata.internal DynQuantMatMul and QdqMatMul (dynq_matmul.cc), the fused dynamic- and
// static-int8 MatMuls with a float output.
void RegisterDynQuantMatMulKernels(KernelRegistry& r);
// ONNX Runtime's transformer contrib ops (transformer_contrib.cc): SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization, BiasGelu,
// EmbedLayerNormalization; com.microsoft Attention (attention_contrib.cc), FusedMatMul
// (fused_matmul_contrib.cc), MultiHeadAttention (mha_contrib.cc) and GroupQueryAttention
// (gqa_contrib.cc).
void RegisterTransformerContribKernels(KernelRegistry& r);
void RegisterMsAttentionKernels(KernelRegistry& r);
void RegisterMsFusedMatMulKernels(KernelRegistry& r);
void RegisterMsMhaKernels(KernelRegistry& r);
void RegisterMsGqaKernels(KernelRegistry& r);

namespace cpu {

// y[0, n) = GELU(y) in place: the erf form (com.microsoft Gelu) or, with tanh_form, the
// tanh approximation (FastGelu). Same math and ISA dispatch as those kernels
// (elementwise_simd.cc).
void GeluInPlace(float* y, int64_t n, bool tanh_form);

// Softmax of one contiguous fp32 row in place, with the Softmax kernel's AVX-512/AVX2/
// scalar row function (norm_softmax.cc).
void SoftmaxRowInPlace(float* row, int64_t n);

}  // namespace cpu
}  // namespace strata
