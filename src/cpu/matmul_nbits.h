// com.microsoft MatMulNBits (weight-only 4/8-bit quantized MatMul): shared definitions
// for the reference kernel, the repacked optimized kernels and their tests.
//
// Y[.., N] = A[.., K] . ((q - zp) * scale)^T + bias, with q the 4/8-bit codes of B
// stored [N, n_blocks, block_size * bits / 8], low bits first along K.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ir.h"
#include "core/large_pages.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"

namespace strata::nbits {

// The validated attributes of one MatMulNBits node.
struct Params {
  int64_t K = 0, N = 0, bits = 0, block_size = 0;
  int64_t n_blocks = 0;  // ceil(K / block_size)
  int64_t blob = 0;      // bytes per block of one column: block_size * bits / 8
  int64_t accuracy_level = 0;
};

// Reads and checks the attributes; errors name the node and the attribute.
Result<Params> ParseParams(const Node& node);

// The inputs of one node (any of them may be null when absent).
struct Inputs {
  const Tensor* b = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* zero_points = nullptr;
  const Tensor* g_idx = nullptr;
  const Tensor* bias = nullptr;
};
// Checks dtypes and sizes of B, scales, zero_points, g_idx and bias against Params.
// A g_idx that is not the identity order (k / block_size) is UNSUPPORTED.
Status CheckInputs(const Node& node, const Params& p, const Inputs& in);

// Dequantizes column-major weights W[N][K] exactly as ONNX Runtime defines them.
std::vector<float> Dequantize(const Params& p, const Inputs& in);

// K steps of the int8 (VNNI) kernel: 128 codes, 64 bytes of 4-bit codes.
inline constexpr int64_t kInt8Step = 128;

// The weights repacked once at session creation. Two layouts:
//
// fp32 kernels (int8_layout false):
//  * codes, per column, K padded to k_pad (whole blocks, a multiple of kInt8Step) with zero
//    codes. For 4 bits each 32-code chunk is 16 bytes; byte j holds code j (low nibble) and
//    code j+16 (high nibble), so one load and two nibble masks give two vectors of 16 codes
//    in K order. 8-bit codes are in K order.
//  * scale and offset (= -zero_point * scale) per block, nb_stride entries per column
//    (padded with zeros to a multiple of 16), so w = q * scale + offset.
//
// int8 (VNNI, accuracy_level 4) kernel (int8_layout true): columns in groups of 4 (N padded
// with zero-scale columns), K in steps of kInt8Step codes; everything one group needs is
// contiguous, in the order the kernel reads it, so a GEMV reads three sequential streams.
//  * codes[group][step][column of 4][kInt8Step * bits / 8 bytes]. Within a step, code r =
//    32i + 16h + t (i < 4, h < 2, t < 16) is, for 4 bits, the low (h = 0) or high (h = 1)
//    nibble of byte 16i + t; for 8 bits, byte 64h + 16i + t. So one 64-byte load and two
//    nibble masks (8 bits: two loads) give vector h whose 128-bit lane i holds codes
//    32i + 16h + [0, 16).
//  * scale[group][group_slots] floats and zp8 (uint8 or absent zero points: the code
//    value, default 2^(bits-1)) or zpf (float zero points) in the same order. Blocks of 32
//    and 64: [step][16 slots], slot 4i + c the block holding codes 32i + [0, 32) of the
//    step, column c; blocks of 16: [step][32 slots], slot 16h + 4i + c the block holding
//    codes 32i + 16h + [0, 16); blocks >= kInt8Step (a step lies in one block):
//    [block][4 columns], broadcast to the 4 lanes.
//    This is the order in which the kernel's per-step integer dot products come out after
//    reducing the four columns' vpdpbusd results, so one convert and one FMA cover 16 slots.
struct Packed {
  Params p;
  int64_t k_pad = 0;      // K rounded up to whole blocks and to a multiple of kInt8Step
  int64_t col_bytes = 0;  // k_pad * bits / 8
  int64_t nb_stride = 0;  // fp32 layout: per-column stride of scale/offset
  // Packed data on huge pages (LargePageAllocator: a run touches all of it, and on this VM a
  // TLB flush then costs a nested page walk per 4 KiB page).
  LargePageVector<uint8_t> codes;
  LargePageVector<float> scale, offset;
  std::vector<float> bias;       // N entries (zeros when absent)
  bool int8_layout = false;      // the int8 kernel's layout (see above)
  int64_t steps = 0;             // int8 layout: k_pad / kInt8Step
  int64_t lane_slots = 0;        // int8 layout: A's slots per step: 16, or 32 for blocks of 16
  int64_t group_slots = 0;       // int8 layout: scale and zero-point entries per group
  LargePageVector<uint8_t> zp8;  // int8 layout: integer zero points per slot
  LargePageVector<float> zpf;    // int8 layout: float zero points per slot (zp8 then empty)
  // A GEMV on weights past kGemvStreamsBytes: int8 layout, it reads 4 groups side by side
  // (on one thread; with more, when each thread's share is past it, see PackedMatMulInt8);
  // fp32 layout, 8 bits, the AVX-512 GEMV prefetches the next group (4 bits always does).
  bool gemv_streams = false;
  bool gemv_serial = false;  // a GEMV (M = 1) runs on the calling thread (kGemvParallelMinBytes)
  size_t bytes() const { return codes.size() + zp8.size() + 4 * (scale.size() + offset.size() + zpf.size()); }
};
// A GEMV (M = 1) on more bytes of packed weights than this reads for weights the L3 does
// not keep: int8 layout, 4 groups side by side (matmul_nbits_vnni.cc, more concurrent
// streams); fp32 layout, 8 bits, with a prefetch of the next group (matmul_nbits_avx.cc).
inline constexpr int64_t kGemvStreamsBytes = int64_t{16} << 20;
// A GEMV (M = 1) on fewer bytes of packed weights than this runs on one thread: its work
// (about 8 us at level 4, 20 us at level 0, one thread) cannot pay for waking a worker.
// In-process A/B (1 vs 2 threads, min of 2000 runs): below ~0.7 MB a 2-thread level-4
// GEMV was never faster; from 1.2 MB on it was up to 1.9x faster.
inline constexpr int64_t kGemvParallelMinBytes = int64_t{512} << 10;
// int8: the int8 (VNNI) kernel's layout, which then is the only kernel that may read the
// weights (PackedMatMulInt8).
Packed Pack(const Params& p, const Inputs& in, bool int8 = false);

enum class Isa { kScalar, kAvx2, kAvx512 };
const char* IsaName(Isa isa);
// The best ISA this CPU supports, capped by `force` ("avx2", "scalar"; STRATA_FORCE_ISA).
// AVX-512 is never chosen when the CPU lacks avx512f/bw/vl.
Isa ResolveIsa(const char* force);

// Per-run scratch: the kernel takes it from the session allocator (AllocateScratch), which
// hands the same memory back run after run, so a run allocates nothing once warm. The
// functions below take `scratch` (64-byte aligned, at least ScratchFloats floats); a null
// one (tests, benchmarks) is allocated for the call. Fixed-size per-task buffers (the GEMM
// panels, at most 32 KiB) live on the stack.
//
// Floats of scratch PackedMatMul (int8: PackedMatMulInt8) needs for M rows.
int64_t ScratchFloats(const Packed& w, Isa isa, int64_t M, bool int8);

// Y[M, N] = A[M, K] . W^T + bias with the packed weights (A rows are K floats apart).
void PackedMatMul(Isa isa, const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool,
                  float* scratch = nullptr);

// Level-0 GEMM on AVX-512 (matmul_nbits_gemm.cc): `a` holds M rows of k_pad floats
// (zero-padded past K); writes y[M, N] with the bias. Needs avx512f/bw/vl.
void PackedGemmAvx512(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool, float* scratch = nullptr);
// Floats of scratch PackedGemmAvx512 needs for M rows (the packed A).
int64_t GemmAvx512ScratchFloats(const Packed& w, int64_t M);
// The same for 4 bits and few rows (matmul_nbits_gemm.cc): 4-row x 4-column register tiles
// on weights dequantized in registers by table lookup; no fp32 panel, no transpose.
void PackedGemmTableAvx512(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool);

// ISA kernels (matmul_nbits_avx.cc). `a` is one row zero-padded to k_pad, `asum` the
// per-block sums of that row (nb_stride entries); writes y[n0..n1).
void GemvScalar(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1);
void GemvAvx2(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1);
void GemvAvx512(const Packed& w, const float* a, const float* asum, float* y, int64_t n0, int64_t n1);
// Dequantizes columns [n0, n0+4) (missing columns zero) for k in [k0, k0+kc) into
// panel[j * kc + k - k0]. k0 and kc are multiples of 32.
void DequantPanelScalar(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel);
void DequantPanelAvx2(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel);
void DequantPanelAvx512(const Packed& w, int64_t n0, int64_t k0, int64_t kc, float* panel);
// y[m * ldy + j] += dot(a[m * lda .. + kc], panel[j * kc ..]) for m < rows, j < cols (<= 4).
void DotTileScalar(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc, int64_t cols, float* y,
                   int64_t ldy);
void DotTileAvx2(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc, int64_t cols, float* y,
                 int64_t ldy);
void DotTileAvx512(const float* a, int64_t lda, int64_t rows, const float* panel, int64_t kc, int64_t cols, float* y,
                   int64_t ldy);

// ---- accuracy_level 4: int8 activations, AVX512-VNNI (matmul_nbits_vnni.cc) ----

// True when the CPU has avx512f/bw/vl and avx512_vnni (vpdpbusd on 512-bit vectors).
bool HasAvx512Vnni();

// Rows of A quantized to int8 per K block (symmetric: scale = max|a| / 127 per block), in
// caller scratch (QuantAFloats).
struct QuantA {
  int64_t M = 0;
  int64_t row_slots = 0;  // steps * lane_slots: floats of sa and sq per row
  int8_t* q = nullptr;    // M x k_pad, each kInt8Step span in the order of the codes
  float* sa = nullptr;    // per row, step and slot (as Packed::scale): the A scale of the slot's block
  float* sq = nullptr;    // the same: the sum of the slot's int8 values (for the zero points)
};
// Floats of scratch a QuantA of M rows occupies.
int64_t QuantAFloats(const Packed& w, int64_t M);
// `a` holds M rows of K floats; `scratch` QuantAFloats(w, M) floats, 64-byte aligned.
void QuantizeA(const Packed& w, const float* a, int64_t M, float* scratch, QuantA* qa);
// y[m * N + n] for all rows and columns [n0, n1), bias included; n0 a multiple of 4 and
// n1 one too, or N. streams: a GEMV (M = 1) reads 4 groups side by side (see
// Packed::gemv_streams; PackedMatMulInt8 decides it per call). Results do not depend on it.
// Needs HasAvx512Vnni() and w.int8_layout.
void MatMulInt8Vnni(const Packed& w, const QuantA& qa, int64_t n0, int64_t n1, float* y, bool streams);
// Whether a kernel with these attributes on `isa` takes the int8 path (then Pack with
// int8 and run PackedMatMulInt8): accuracy_level 4, AVX-512 and VNNI.
bool UseInt8Path(const Params& p, Isa isa);
// Y = A . W^T + bias through the int8 path (quantizes A, then MatMulInt8Vnni in parallel).
// Needs HasAvx512Vnni(); weights not in the int8 layout are computed in fp32.
void PackedMatMulInt8(const Packed& w, const float* a, int64_t M, float* y, ThreadPool* pool, float* scratch = nullptr);

}  // namespace strata::nbits
