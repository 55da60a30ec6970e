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
  RegisterQuantizeKernels(r);
  RegisterResizeKernels(r);
  RegisterDetectionKernels(r);
  RegisterStringKernels(r);
  RegisterSignalKernels(r);
  RegisterRandomKernels(r);
  RegisterMiscKernels(r);
  RegisterQuantWeightKernels(r);
}

}  // namespace strata
