// The fused MobileNetV2 inverted-residual block (core/inverted_residual_fusion.h):
// [expand 1x1 (+clamp)] -> depthwise (+clamp) -> project 1x1 (+residual, +clamp) on NHWC
// activations, computed in strips of output rows (conv_nhwc_block.cc).
#pragma once

#include <memory>

#include "core/kernel.h"

namespace strata {

// Kernel factory for kInvertedResidualOp nodes. kInvalidModel for weights that are not
// constant float32 of matching shapes; kUnsupported without AVX-512F (the fusion pass
// only forms the node where it runs). In bf16 fast-math sessions on an AVX512_BF16 CPU the
// two 1x1 convs run on bf16 (the kernel is then one IsBf16Kernel reports).
Result<std::unique_ptr<OpKernel>> MakeNhwcInvertedResidual(const KernelInit& init);

}  // namespace strata
