// Stub: replaced by the real conv kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterConvKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
