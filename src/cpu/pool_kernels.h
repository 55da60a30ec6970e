// Internal interface between the pooling reference kernels (pool.cc) and the
// optimized fp32 ones (pool_xnnpack.cc).
#pragma once

#include <memory>

#include "core/kernel.h"

namespace strata {

Result<std::unique_ptr<OpKernel>> MakeRefMaxPool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefAveragePool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefGlobalAveragePool(const KernelInit& init);
// fp32 2-D MaxPool/AveragePool via XNNPACK (per-call fallback to the reference kernel
// for what XNNPACK does not express), and a vectorised GlobalAveragePool.
Result<std::unique_ptr<OpKernel>> MakeXnnMaxPool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeXnnAveragePool(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeFastGlobalAveragePool(const KernelInit& init);

}  // namespace strata
