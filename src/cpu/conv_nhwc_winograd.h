// Winograd F(4x4, 3x3) for NHWC fp32 3x3 stride-1 convolutions (conv_nhwc_winograd.cc).
#pragma once

#include <memory>

#include "core/ir.h"
#include "core/kernel.h"
#include "cpu/xnnpack_util.h"

namespace strata {

// Ungrouped 3x3, stride 1, dilation 1 NhwcConv with 16 <= C <= kWinogradMaxC and M >= 16,
// computed as Winograd F(4x4, 3x3): each 4x4 output tile comes from a 6x6 input tile in 36
// products instead of 144 multiplies per channel pair, so the GEMM work drops 4x (2.25x
// counting the ragged last tiles of a 14x14 map) for the cost of the tile transforms.
// The weights are transformed (U = G g G^T, in double) and packed once here into 36
// sgemm::PackedB of [C, M]; per run, blocks of tiles are transformed into per-thread
// scratch (V = B^T d B), multiplied on the SGEMM (one [tiles, C] x [C, M] product per
// transform position) and transformed back (Y = A^T m A) with bias, the residual
// (input 3, also in place) and the fused activation. Results do not depend on the thread
// count. The error grows with the transform (about 1e-6 relative to the output's scale
// at C = 64, versus 1e-7 direct).
// kUnsupported for other convs, for CPUs without AVX-512F, with STRATA_WINOGRAD=0 in the
// environment, and where the input's static size makes tiles too ragged or too few
// (output maps under kWinogradMinPixels pixels, e.g. resnet's 7x7 stage, whose 36 transformed
// weight matrices would be read from memory for 4 tiles): the SGEMM conv takes those.
Result<std::unique_ptr<OpKernel>> MakeNhwcWinogradConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                       const FusedActivation& act);

// In bf16 fast-math sessions only maps of at least 28x28 (known statically) take this fp32
// kernel instead of the bf16 GEMM: there it is both faster (resnet18's 56x56 and 28x28
// 3x3 convs, 1 thread: 0.44 vs 0.60 ms) and exact to fp32 rounding; on 14x14 maps the
// bf16 GEMM is faster (0.59 vs 0.68 ms).
inline constexpr int64_t kWinogradBf16MinPixels = 28 * 28;
inline constexpr int64_t kWinogradMaxC = 512;
inline constexpr int64_t kWinogradMinPixels = 14 * 14;

// Reserves the calling thread's tile scratch now (pool workers at start, see
// KernelRegistry::thread_init), so that no run after the first allocates.
void PrepareWinogradThreadScratch();

}  // namespace strata
