// Stub: replaced by the real tensor_ops kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterTensorKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
