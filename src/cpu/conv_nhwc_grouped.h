// Grouped NhwcConv with groups of 4 or 8 channels (RegNet, ResNeXt): a direct AVX-512
// kernel on the session pool (conv_nhwc_grouped.cc).
#pragma once

#include <memory>

#include "core/kernel.h"
#include "cpu/conv_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {

// Grouped 2-D NhwcConv with 4 or 8 input and output channels per group (any kernel size,
// stride, dilation and padding): each 16-channel output vector spans whole groups, whose
// 16 input channels are one vector load per pixel and tap, spread in registers so that
// every lane of every FMA does useful work. XNNPACK ran these as one small GEMM per group
// (RegNetY-400MF's groups of 8: 35-70 GFLOP/s, and no faster at 2 threads than at 1).
// Bias and the fused clamp are applied in the store. Groups of 32 or 64 channels, and of
// 16 on a pool of 2 or more threads, go to MakeNhwcGroupedGemmConv. kUnsupported for other
// convs (they stay on XNNPACK), for CPUs without AVX-512F and with STRATA_GROUPED_CONV=0 in
// the environment.
Result<std::unique_ptr<OpKernel>> MakeNhwcGroupedConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                      const FusedActivation& act);

// Grouped 2-D NhwcConv with wide groups (G input and output channels per group, G a
// multiple of 16 up to 64): one implicit-GEMM SGEMM per group on the group's G
// channels of each input pixel, read in place (conv_nhwc_grouped_gemm.cc), the groups
// spread over the session pool. Called by MakeNhwcGroupedConv for such convs; W (and B)
// are validated float32 of the conv's shape.
Result<std::unique_ptr<OpKernel>> MakeNhwcGroupedGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                          const FusedActivation& act);

}  // namespace strata
