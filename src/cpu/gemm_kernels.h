// Internal interface between the MatMul/Gemm reference kernels (gemm.cc) and the
// optimized fp32 kernels (gemm_fast.cc): shape checking and kernel factories.
#pragma once

#include <memory>
#include <vector>

#include "core/kernel.h"

namespace strata {

// Numpy matmul geometry: batch dims broadcast, 1-D operands promoted and squeezed.
// Which A (or B) matrix output matrix t reads under batch broadcasting: index[t]. Computed
// on demand from the broadcast batch dims and this operand's strides (a stride of 0 repeats
// the operand), so MatMulDims holds no per-call heap table whatever the batch size.
class BatchIndex {
 public:
  BatchIndex() = default;
  BatchIndex(Shape dims, Shape strides) : dims_(std::move(dims)), strides_(std::move(strides)) {}
  int64_t operator[](int64_t t) const {
    int64_t off = 0;
    for (size_t i = dims_.size(); i-- > 0;) {
      off += (t % dims_[i]) * strides_[i];
      t /= dims_[i];
    }
    return off;
  }

 private:
  Shape dims_, strides_;
};

struct MatMulDims {
  Shape out;  // final output shape
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1;   // number of output matrices
  BatchIndex a_index;  // per output matrix: index of the A matrix
  BatchIndex b_index;  // per output matrix: index of the B matrix
};
Result<MatMulDims> ComputeMatMulDims(const Shape& a, const Shape& b, const Node& node);

// The common start of every optimized fp32 MatMul kernel: inputs present and float32,
// geometry checked, output allocated. Errors name the node.
struct Fp32MatMulCall {
  MatMulDims d;
  const float* a = nullptr;
  const float* b = nullptr;
  float* y = nullptr;
};
Result<Fp32MatMulCall> BeginFp32MatMul(KernelContext& ctx);
// The common start of the FusedMatMul kernels (fp32 and bf16) for constant W [K, N]: A
// present and float32, the optional residual (input 3) float32 of the output shape, the
// output allocated. `residual` is null without one. Errors name the node.
struct FusedMatMulCall {
  MatMulDims d;
  const float* a = nullptr;
  const float* residual = nullptr;
  float* y = nullptr;
};
Result<FusedMatMulCall> BeginFusedMatMul(KernelContext& ctx, int64_t k, int64_t n);

// Gemm geometry after transA/transB, with C validated against [M, N].
struct GemmDims {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
};
Result<GemmDims> ComputeGemmDims(const Node& node, const Shape& a, const Shape& b, const Tensor* c);
// C's element offset for output element (m, n) under unidirectional broadcast to [M, N].
inline int64_t GemmCIndex(const Shape& c, int64_t m, int64_t n) {
  if (c.empty()) return 0;
  if (c.size() == 1) return c[0] == 1 ? 0 : n;
  return (c[0] == 1 ? 0 : m) * c[1] + (c[1] == 1 ? 0 : n);
}

Result<std::unique_ptr<OpKernel>> MakeRefMatMul(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefGemm(const KernelInit& init);
// fp32 kernels: XNNPACK fully-connected for constant B, OpenBLAS for run-time B.
// Both fall back to the reference kernel for shapes they do not cover.
Result<std::unique_ptr<OpKernel>> MakeFastMatMul(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeFastGemm(const KernelInit& init);

// Limits OpenBLAS to the calling thread (once per process); call before any cblas_* use.
void EnsureBlasSingleThreaded();

}  // namespace strata
