#include "cpu/register.h"

#include "core/kernel.h"
#include "cpu/conv_nhwc_winograd.h"
#include "cpu/gemm_bf16.h"
#include "cpu/gemm_kernels.h"
#include "cpu/gemv.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {

namespace {
// Per-thread scratch the CPU kernels reuse across runs, made when a pool worker starts.
void PrepareCpuThreadScratch() {
  sgemm::PrepareThreadScratch();
  PrepareGemvThreadScratch();
  PrepareBf16ThreadScratch();
  PrepareBf16ConvThreadScratch();
  PrepareWinogradThreadScratch();
}
}  // namespace

void RegisterAllCpuKernels(KernelRegistry& r) {
  // Here, once, before the first session's kernels: OpenBLAS's idle workers would otherwise
  // spin next to that session's creation and first runs (see EnsureBlasSingleThreaded).
  EnsureBlasSingleThreaded();
  r.SetThreadInit(PrepareCpuThreadScratch);
  RegisterElementwiseKernels(r);
  RegisterTensorKernels(r);
  // Before the fp32 Gemm/Conv kernels: equal-priority ties go to the first registered.
  RegisterBf16Kernels(r);
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
  RegisterTokenizerKernels(r);
  RegisterSignalKernels(r);
  RegisterRandomKernels(r);
  RegisterMiscKernels(r);
  RegisterSpatialKernels(r);
  RegisterDeformConvKernels(r);
  RegisterQuantWeightKernels(r);
  RegisterFusedMatMulKernels(r);
  RegisterDynQuantMatMulKernels(r);
  RegisterAttentionKernels(r);
  RegisterTransformerContribKernels(r);
  RegisterMsAttentionKernels(r);
  RegisterMsFusedMatMulKernels(r);
  RegisterMsMhaKernels(r);
  RegisterMsGqaKernels(r);
  RegisterChannelShuffleKernels(r);
  RegisterMlTreeKernels(r);
  RegisterMlKernels(r);
}

}  // namespace strata
