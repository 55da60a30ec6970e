/*
 * strata_cuda_ext.h: extension functions of the CUDA provider, obtained through
 * strata_provider_api.get_extension(self, name). A name never changes signature; a new
 * signature gets a new name.
 */
#ifndef STRATA_CUDA_EXT_H_
#define STRATA_CUDA_EXT_H_

#include <stddef.h>
#include <stdint.h>

#include "strata/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Extension name of strata_cuda_pack_weights_fn. */
#define STRATA_CUDA_EXT_PACK_WEIGHTS "cuda.pack_weights.v1"

/**
 * Packs com.microsoft MatMulNBits weights into the device layout `target`
 * ("cuda-sm80" or "cuda-sm90", docs/cuda-weight-layout.md) on device `device`, using the
 * GPU. All pointers are host memory; the result is byte-identical to strata_pack_weights.
 * b: uint8 [n, ceil(k/block_size), block_size*bits/8]; scales: float [n*n_blocks];
 * zero_points: NULL or uint8 packed as in MatMulNBits. With out == NULL only *out_size is
 * set (the packed size). Returns a strata_provider_result.
 */
typedef int32_t (*strata_cuda_pack_weights_fn)(void* self, uint32_t device, const char* target, int32_t bits,
                                               int64_t n, int64_t k, int64_t block_size, const uint8_t* b,
                                               size_t b_bytes, const float* scales, size_t scale_count,
                                               const uint8_t* zero_points, size_t zp_bytes, void* out,
                                               size_t out_capacity, size_t* out_size, strata_provider_error* err);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_CUDA_EXT_H_ */
