// Stub: replaced by the real reduce kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterReduceKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
