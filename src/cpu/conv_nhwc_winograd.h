// Winograd F(4x4, 3x3) and F(2x2, 3x3) for NHWC fp32 3x3 stride-1 convolutions
// (conv_nhwc_winograd.cc).
#pragma once

#include <memory>

#include "core/ir.h"
#include "core/kernel.h"
#include "cpu/xnnpack_util.h"

namespace strata {

// Ungrouped 3x3, stride 1, dilation 1 NhwcConv with 16 <= C <= kWinogradMaxC and M >= 16,
// computed as Winograd F(4x4, 3x3) on maps of at least kWinogradF4MinPixels pixels: each
// 4x4 output tile comes from a 6x6 input tile in 36 products instead of 144 multiplies per
// channel pair, so the GEMM work drops 4x, for the cost of the tile transforms. Maps from
// kWinogradMinPixels up take F(2x2, 3x3): 2.25x fewer products, but no ragged tiles on a
// 14x14 map and 16 transformed weight matrices instead of 36, which few tiles read from
// memory (resnet18's 14x14x256 convs, 1 thread: 0.67-0.69 vs 0.75-0.78 ms).
// The weights are transformed (U = G g G^T) and packed once here into one sgemm::PackedB
// of [C, M] per transform position (1.8x / 4x the fp32 weight bytes); per run, blocks of
// tiles are transformed into per-thread scratch (V = B^T d B), multiplied on the SGEMM
// (one [tiles, C] x [C, M] product per transform position) and transformed back
// (Y = A^T m A) with bias, the residual (input 3, also in place) and the fused activation.
// Results do not depend on the thread count. The error grows with the transform (resnet
// outputs: about 2x the direct conv's).
// kUnsupported for other convs, for CPUs without AVX-512F, with STRATA_WINOGRAD=0 in the
// environment (2 or 4 force that variant wherever one applies), and where the output's
// static size (StaticNhwcOutputPixels) is a map under kWinogradMinPixels pixels (resnet's
// 7x7 stage: F(2x2, 3x3) ran its 512-channel convs 10-20% faster, but their 17 MB of
// transformed weights each cost more in session creation and memory than that was worth):
// the SGEMM conv takes those. Unknown sizes take F(4x4, 3x3).
Result<std::unique_ptr<OpKernel>> MakeNhwcWinogradConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                       const FusedActivation& act);

// bf16 fast-math sessions take these fp32 kernels too: exact to fp32 rounding, and on maps
// of 28x28 and more faster than the bf16 GEMM (resnet18's 56x56 and 28x28 3x3 convs, 1
// thread: 0.44 vs 0.60 ms); see kBf16ConvMaxConvsAfter.
inline constexpr int64_t kWinogradMaxC = 512;
inline constexpr int64_t kWinogradMinPixels = 14 * 14;
inline constexpr int64_t kWinogradF4MinPixels = 28 * 28;

// Reserves the calling thread's tile scratch now (pool workers at start, see
// KernelRegistry::thread_init), so that no run after the first allocates.
void PrepareWinogradThreadScratch();

}  // namespace strata
