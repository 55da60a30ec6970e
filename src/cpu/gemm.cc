// Stub: replaced by the real gemm kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterGemmKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
