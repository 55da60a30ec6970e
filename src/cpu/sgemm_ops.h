// MatMul and Gemm (fp32) on strata's AVX-512 SGEMM (cpu/sgemm.h). The factories answer
// nullptr when the kernel does not apply (no AVX-512F, other dtypes, shapes it does not
// take), so MakeFastMatMul/MakeFastGemm keep their XNNPACK/OpenBLAS paths then.
#pragma once

#include <memory>

#include "core/kernel.h"

namespace strata {

// Constant 2-D B: packed once here; run-time B: packed per call.
Result<std::unique_ptr<OpKernel>> MakeSgemmMatMul(const KernelInit& init);
// Constant B (alpha applied in the epilogue, a constant row-vector C folded into the
// bias); otherwise run-time B and/or C (beta*C pre-filled, the product accumulated).
Result<std::unique_ptr<OpKernel>> MakeSgemmGemm(const KernelInit& init);

}  // namespace strata
