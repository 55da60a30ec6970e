#include "cpu/register.h"

#include "core/kernel.h"

namespace strata {

void RegisterAllCpuKernels(KernelRegistry& r) {
  RegisterElementwiseKernels(r);
  RegisterTensorKernels(r);
  RegisterGemmKernels(r);
  RegisterConvKernels(r);
  RegisterPoolKernels(r);
  RegisterNormKernels(r);
  RegisterReduceKernels(r);
  RegisterRnnKernels(r);
  RegisterControlFlowKernels(r);
  RegisterSequenceKernels(r);
  RegisterQuantWeightKernels(r);
}

}  // namespace strata
