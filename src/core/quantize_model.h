// Quantization of an ONNX model (`strata quantize`): MatMul and Gemm nodes with constant 2-D
// float weights become com.microsoft MatMulNBits nodes (weight-only, blockwise) with the
// weights stored as ONNX Runtime defines them (see docs/quantization.md), or, with
// dynamic_int8, ONNX Runtime's dynamic int8 MatMul pattern (docs/int8.md).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata {

struct QuantizeOptions {
  int bits = 4;             // 4 or 8
  int64_t block_size = 32;  // power of two >= 16
  bool symmetric = false;   // true: no zero points (ORT's default 2^(bits-1))
  int64_t accuracy_level = 0;
  std::vector<std::string> exclude;  // node names (or first output names) left in fp32
  // Instead of MatMulNBits: ONNX Runtime's dynamic int8 form (its quantize_dynamic output),
  // DynamicQuantizeLinear(A) -> MatMulInteger(A_q, W_q int8) -> Cast -> Mul(A_scale * W_scale)
  // [-> Add(bias)], W symmetric in [-127, 127] with one scale per tensor or, with
  // per_channel, per output column. bits/block_size/symmetric/accuracy_level do not apply.
  bool dynamic_int8 = false;
  bool per_channel = false;
  // Called after each quantized weight with (done, total).
  std::function<void(size_t, size_t)> progress;
};

// MatMulNBits inputs for one weight, in ONNX Runtime's layout.
struct BlockQuantized {
  int64_t n_blocks = 0;
  std::vector<uint8_t> b;            // [N, n_blocks, block_size * bits / 8]
  std::vector<float> scales;         // [N * n_blocks]
  std::vector<uint8_t> zero_points;  // [N * ceil(n_blocks * bits / 8)]; empty when symmetric
};
// Quantizes W, given as [K, N] row-major (MatMul's B) or, with w_is_nk, as [N, K].
Result<BlockQuantized> QuantizeBlockwise(const float* w, int64_t K, int64_t N, bool w_is_nk, int bits,
                                         int64_t block_size, bool symmetric);

struct QuantizeReport {
  int quantized = 0;                 // nodes converted
  std::vector<std::string> skipped;  // "node 'x': why", for MatMul/Gemm left in fp32
  size_t weight_bytes_before = 0;    // float weights replaced
  size_t weight_bytes_after = 0;     // codes + scales + zero points written
};

// Rewrites the model in place.
Result<QuantizeReport> QuantizeModelProto(onnx::ModelProto* model, const QuantizeOptions& opts);
// Serialized model in, serialized model out.
Result<QuantizeReport> QuantizeModelBytes(const std::string& in, std::string* out, const QuantizeOptions& opts);

}  // namespace strata
