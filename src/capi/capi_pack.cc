// C API: strata_pack_weights, the CPU reference packer for device weight layouts.
#include <string>

#include "capi/capi_internal.h"
#include "cpu/cuda_weight_layout.h"

extern "C" {

STRATA_API strata_status* strata_pack_weights(const char* target, int bits, int64_t n, int64_t k, int64_t block_size,
                                              const uint8_t* b, size_t b_bytes, const float* scales,
                                              size_t scale_count, const uint8_t* zero_points, size_t zp_bytes,
                                              void* out, size_t out_capacity, size_t* out_size) {
  return strata::capi::Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(target, "strata_pack_weights: target is NULL");
    STRATA_CHECK_ARG(out || out_size, "strata_pack_weights: out and out_size are both NULL");
    auto layout = strata::cpu::CudaLayoutForTarget(target);
    if (!layout.ok()) return strata::capi::ToC(layout.status());
    strata::cpu::NBitsWeights w;
    w.bits = bits;
    w.n = n;
    w.k = k;
    w.block_size = block_size;
    w.b = b;
    w.b_bytes = b_bytes;
    w.scales = scales;
    w.scale_count = scale_count;
    w.zero_points = zero_points;
    w.zp_bytes = zp_bytes;
    auto size = strata::cpu::CudaPackedSize(*layout, w);
    if (!size.ok()) return strata::capi::ToC(size.status());
    if (out_size) *out_size = *size;
    if (!out) return nullptr;
    STRATA_CHECK_ARG(b && scales, "strata_pack_weights: b or scales is NULL");
    if (out_capacity < *size)
      return strata::capi::MakeError(STRATA_INVALID_ARGUMENT, "strata_pack_weights: out_capacity " +
                                                                  std::to_string(out_capacity) + " is below the " +
                                                                  std::to_string(*size) + " bytes needed");
    return strata::capi::ToC(strata::cpu::PackCudaWeights(*layout, w, static_cast<uint8_t*>(out), *size));
  });
}

}  // extern "C"
