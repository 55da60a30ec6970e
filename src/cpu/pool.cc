// Stub: replaced by the real pool kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterPoolKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
