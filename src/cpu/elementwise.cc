// Stub: replaced by the real elementwise kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterElementwiseKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
