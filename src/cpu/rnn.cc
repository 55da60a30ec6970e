// Stub: replaced by the real rnn kernels.
#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {

void RegisterRnnKernels(KernelRegistry& r) { (void)r; }

}  // namespace strata
