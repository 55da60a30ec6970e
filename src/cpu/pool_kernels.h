// Internal interface between the pooling reference kernels (pool.cc) and the
// optimized fp32 ones (pool_xnnpack.cc, pool_nhwc.cc, pool_nhwc_max.cc).
#pragma once

#include <memory>

#include "core/kernel.h"
#include "cpu/conv_geometry.h"
#include "cpu/xnnpack_util.h"

namespace strata {

Result<std::unique_ptr<OpKernel>> MakeRefMaxPool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefAveragePool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefGlobalAveragePool(const KernelInit& init);
// fp32 2-D MaxPool/AveragePool via XNNPACK (per-call fallback to the reference kernel
// for what XNNPACK does not express), and a vectorised GlobalAveragePool.
Result<std::unique_ptr<OpKernel>> MakeXnnMaxPool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeXnnAveragePool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeFastGlobalAveragePool(const KernelInit& init);

// strata.internal NhwcMaxPool (pool_nhwc_max.cc): 2-D fp32 max pooling on NHWC data, rows
// split over the session pool; AVX-512F when the CPU has it, else a plain loop (or always
// the plain loop after SetNhwcMaxPoolPlainForTesting(true)).
Result<std::unique_ptr<OpKernel>> MakeNhwcMaxPool(const KernelInit& init);
void SetNhwcMaxPoolPlainForTesting(bool plain);

// Runs one 2-D max/average pooling through XNNPACK on NHWC data `in` [n, in_hw, c] into
// `out`, (re)creating the cached operator for `pads` (top, left, bottom, right: end pads
// already chosen so XNNPACK's output size equals ONNX's) and c. kUnsupported: XNNPACK
// rejected the parameters and the caller falls back.
Status RunXnnPool2d(const XnnOperatorCache& cache, bool is_max, const Shape& pads, const Shape& kernel,
                    const SpatialGeometry& g, int64_t n, int64_t c, const float* in, float* out, KernelContext& ctx);

// True when a pool of this window over `outputs` output values (batch x channels x
// positions) goes to the reference kernel instead of XNNPACK: a window of more than 1024
// taps with more than 2^27 taps in all. Its cost is then the window's, which the input does
// not bound, and an XNNPACK call cannot be stopped; the reference kernel checks the run's
// deadline and terminate calls.
bool PoolWindowTooCostlyForXnnpack(const Shape& kernel, int64_t outputs);

}  // namespace strata
