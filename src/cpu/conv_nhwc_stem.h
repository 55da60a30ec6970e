// Direct NHWC convolution for few input channels (RGB stems), conv_nhwc_stem.cc.
#pragma once

#include <memory>

#include "core/kernel.h"
#include "cpu/xnnpack_util.h"

namespace strata {

// Ungrouped 2-D NhwcConv with C_in <= 4 (e.g. MobileNetV2's 3x3 s2 3->32, ResNet's 7x7 s2
// 3->64): per output pixel, each input value is broadcast against the output channels'
// weight vectors. kUnsupported for other convs, a fused residual input or without AVX-512F.
Result<std::unique_ptr<OpKernel>> MakeNhwcStemConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act);

}  // namespace strata
