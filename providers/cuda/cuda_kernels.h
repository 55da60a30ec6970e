// Launchers for the CUDA provider's kernels. Plain C++ declarations (no CUDA types
// beyond cudaStream_t) so the host-side .cc files compile with the C++ compiler.
// Every launcher enqueues on `stream` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata_cuda {

constexpr int kMaxRank = 8;

// Shape + element strides of one operand, right-aligned to the output's rank; a
// broadcast dimension has stride 0.
struct StridedShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow };
enum class UnaryOp : int { kRelu, kSigmoid, kTanh, kErf, kExp, kSqrt, kClip, kLeakyRelu, kIdentity };

// out[i] = a[..] op b[..] over the output shape `out` (a and b carry broadcast strides).
cudaError_t LaunchBinary(BinaryOp op, const float* a, const StridedShape& as, const float* b, const StridedShape& bs,
                         float* out, const StridedShape& os, cudaStream_t stream);
// out[i] = f(in[i]); p0/p1 are Clip's min/max or LeakyRelu's alpha.
cudaError_t LaunchUnary(UnaryOp op, const float* in, float* out, int64_t n, float p0, float p1, cudaStream_t stream);
// y[r, c] = clamp(y[r, c] + bias[(r / rows_per_bias) % bias_len or c], lo, hi): bias per row
// group (Conv, NCHW: channel = (r / 1) % M over rows of length HW) or per column (Gemm).
cudaError_t LaunchBiasClamp(float* y, int64_t rows, int64_t cols, const float* bias, bool bias_per_row,
                            int64_t bias_len, float lo, float hi, cudaStream_t stream);

// Generic strided gather: out[i] = in[offset + sum_d idx_d(i) * src.strides[d]] where idx
// ranges over src.dims (which is also the output's shape). Covers Transpose and Slice.
cudaError_t LaunchStridedCopy(const void* in, int64_t offset, const StridedShape& src, void* out, int elem_size,
                              cudaStream_t stream);
// Gather along an axis: in viewed as [outer, axis_len, inner], indices int64 (or int32).
cudaError_t LaunchGather(const void* in, int elem_size, int64_t outer, int64_t axis_len, int64_t inner,
                         const void* indices, bool indices_int32, int64_t n_indices, void* out, int* bad_index,
                         cudaStream_t stream);
// Cast between float32 (1), int32 (6) and int64 (7) (strata_dtype values).
cudaError_t LaunchCast(const void* in, int from, void* out, int to, int64_t n, cudaStream_t stream);

// Row-wise ops over [rows, cols] (the last axis).
cudaError_t LaunchSoftmax(const float* in, float* out, int64_t rows, int64_t cols, bool log, cudaStream_t stream);
cudaError_t LaunchLayerNorm(const float* in, const float* scale, const float* bias, float* out, int64_t rows,
                            int64_t cols, float epsilon, cudaStream_t stream);
cudaError_t LaunchReduceRows(const float* in, float* out, int64_t rows, int64_t cols, bool mean, cudaStream_t stream);

struct Pool2d {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = false;
};
cudaError_t LaunchMaxPool(const float* in, float* out, const Pool2d& p, cudaStream_t stream);
cudaError_t LaunchAvgPool(const float* in, float* out, const Pool2d& p, cudaStream_t stream);

struct Conv2d {
  int64_t c = 0, h = 0, w = 0, m = 0, oh = 0, ow = 0, group = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};
// im2col of one image and one group: col[(c*kh*kw), (oh*ow)].
cudaError_t LaunchIm2Col(const float* image, const Conv2d& p, int64_t group_index, float* col, cudaStream_t stream);
// Direct depthwise convolution (group == c == m) for all `n` images.
cudaError_t LaunchDepthwise(const float* in, const float* w, float* out, int64_t n, const Conv2d& p,
                            cudaStream_t stream);

// MatMulNBits prepacking (docs/cuda-weight-layout.md), the device twin of
// src/cpu/cuda_weight_layout.cc. b/scales/zp and out are device pointers; out must
// hold the whole packed blob; the 32-byte header is written by the host.
struct NBitsPackParams {
  int bits = 4;
  int64_t n = 0, k = 0, block = 0, n_blocks = 0, tile_n = 0, tiles = 0, words_per_col = 0;
  bool interleave = false;
  bool has_zp = false;
  int64_t words_off = 0, scales_off = 0, zp_off = 0;  // byte offsets in the blob
};
cudaError_t LaunchPackNBits(const uint8_t* b, const float* scales, const uint8_t* zp, uint8_t* blob,
                            const NBitsPackParams& p, cudaStream_t stream);
// Dequantizes a packed blob into w[K, N] (row-major, float32) for cuBLAS.
cudaError_t LaunchDequantNBits(const uint8_t* blob, const NBitsPackParams& p, float* w, cudaStream_t stream);

// One LSTM time step of one direction (ONNX gate order i, o, f, c; activations
// Sigmoid/Tanh/Tanh). gates_x/gates_h: [batch, 4H] input and recurrent projections
// (without biases); bias: [8H] (Wb then Rb) or null; peephole: [3H] (i, o, f) or null.
// h and c ([batch, H]) are read as the previous state and overwritten; y (optional)
// receives h too.
struct LstmCellArgs {
  const float* gates_x = nullptr;
  const float* gates_h = nullptr;
  const float* bias = nullptr;
  const float* peephole = nullptr;
  float* h = nullptr;
  float* c = nullptr;
  float* y = nullptr;
  int64_t batch = 0, hidden = 0;
  float clip = 0.0f;  // <= 0: no clipping
  int input_forget = 0;
};
cudaError_t LaunchLstmCell(const LstmCellArgs& args, cudaStream_t stream);

}  // namespace strata_cuda
