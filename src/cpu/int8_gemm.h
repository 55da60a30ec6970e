// 8-bit integer GEMM on AVX512-VNNI (vpdpbusd: four u8 x s8 products summed into each int32
// lane), for MatMulInteger and QLinearMatMul:
//
//   C[r, j] = sum_k (A[r, k] - za[r]) * (B[k, j] - zb[j])   (int32, mod 2^32 as ONNX's)
//
// Every signedness combination is brought to u8 x s8: an int8 A is read as A ^ 0x80 (= A + 128,
// its zero point + 128 likewise, so A - za is unchanged); a uint8 B is stored as B - 128 (s8)
// and its zero point folded into a per-column offset c[j] = (B unsigned ? 128 : 0) - zb[j]:
//
//   C = sum_k a_u * b' - za_u * colsum(b')[j] + c[j] * (rowsum(a_u)[r] - K * za_u)
//
// all in uint32 arithmetic, so the result is the exact int32 (mod 2^32) of the plain loop at
// any K. B is packed once (panels of 16 columns, K in groups of 4 bytes, zero padded); A is
// packed per call into tiles of 12 rows ([K / 4][12] groups of 4 bytes, u8, zero padded).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/status.h"

namespace strata {
class ThreadPool;
}

namespace strata::int8gemm {

// True when the CPU has avx512f/bw/vl and avx512_vnni, and STRATA_INT8_GEMM is not "0" (the
// switch back to the reference kernel, for comparisons).
bool Available();

inline constexpr int64_t kPanel = 16;  // columns per packed panel (one zmm of int32 lanes)

class PackedB {
 public:
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t kp() const { return kp_; }  // K rounded up to a multiple of 4
  int64_t panels() const { return (n_ + kPanel - 1) / kPanel; }
  // Panel p: kp / 4 groups of 64 bytes (16 columns x 4 consecutive k).
  const int8_t* panel(int64_t p) const { return data_.get() + p * kp_ * kPanel; }
  const int32_t* colsum() const { return colsum_.get(); }  // [panels * 16]: sum_k b'[k][j]
  const int32_t* offset() const { return offset_.get(); }  // [panels * 16]: c[j]
  bool any_offset() const { return any_offset_; }
  int64_t bytes() const { return kp_ * panels() * kPanel + 2 * panels() * kPanel * 4; }

 private:
  friend Result<PackedB> Pack(const void* b, bool b_signed, int64_t k, int64_t n, const void* zb, int64_t zb_count,
                              ThreadPool* pool);
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  // > 0: an AllocateLargePages block of this length (huge pages: a first touch of 4 KiB pages
  // was most of a dynamic-int8 BERT's session creation), else aligned_alloc memory.
  struct FreeData {
    size_t mapped;  // no initializer (see sgemm::PackedB::Free): value-initialized to 0
    void operator()(int8_t* p) const;
  };
  int64_t k_ = 0, n_ = 0, kp_ = 0;
  bool any_offset_ = false;
  std::unique_ptr<int8_t[], FreeData> data_;
  std::unique_ptr<int32_t[], Free> colsum_, offset_;
};

// Packs B [k, n] (row-major uint8 or int8) with its zero point: zb_count 0 (none), 1 (per
// tensor) or n (per column), of B's type; panels split over the pool (may be null). Needs
// Available(). Errors: sizes that overflow, out of memory.
Result<PackedB> Pack(const void* b, bool b_signed, int64_t k, int64_t n, const void* zb, int64_t zb_count,
                     ThreadPool* pool = nullptr);

// A [rows, k] of 8-bit values, row r at a + r * lda, with its zero point: za_rows[r] when
// za_rows is not null, else za for every row.
struct AMatrix {
  const void* a = nullptr;
  bool a_signed = false;
  int64_t rows = 0, lda = 0;
  int32_t za = 0;
  const int32_t* za_rows = nullptr;
  // A already in the packed tile layout (PackTile), instead of `a`: tile t at packed + t *
  // kTileRows * kp / 4, with the row sums in packed_rowsum when B has a column offset.
  const uint32_t* packed = nullptr;
  const int32_t* packed_rowsum = nullptr;
  // With `packed`: when not null, Gemm calls produce(produce_ctx, t0, t1) to fill tiles
  // [t0, t1) of `packed` (and their row sums) before it reads them, on the thread that then
  // multiplies them where it splits by rows, concurrently for disjoint ranges: A made tile
  // by tile inside the GEMM's parallel region (a convolution's im2col), in the core's caches.
  void (*produce)(void* ctx, int64_t t0, int64_t t1) = nullptr;
  void* produce_ctx = nullptr;
  // The caller allows `a` to be read where it lies, without the packing pass, where the GEMM
  // can (unsigned A, K a multiple of 4, B without a column offset): a 1x1 conv's NHWC image.
  bool read_in_place = false;
  // With read_in_place: K is `taps` blocks of K / taps bytes (each a multiple of 4), block t
  // of row r at a + r * lda + tap_offsets[t]: a stride-1 conv's taps over a padded NHWC image
  // read where they lie (one tap's rows are lda apart). nullptr: one block at offset 0.
  const int64_t* tap_offsets = nullptr;
  int taps = 1;
};

inline constexpr int64_t kTileRows = 12;  // rows per packed A tile

// Packs one tile of A: rows[i] (i < n <= kTileRows) point at K bytes each, of the signedness
// `a_signed`, into `tile` (kTileRows * kp / 4 uint32, kp = K rounded up to 4: PackedB::kp());
// rows past n are zeros. Writes each row's sum into rowsum[i] when rowsum is not null (needed
// when B has a column offset). For callers that gather A's rows themselves (convolutions'
// im2col straight into a tile). Needs Available().
void PackTile(const uint8_t* const* rows, int n, int64_t k, int64_t kp, bool a_signed, uint32_t* tile, int32_t* rowsum);

// Bytes of scratch Gemm needs for this A and B: A's packed tiles, and its row sums when B has a
// column offset (none for an A given packed or read in place). Sizes that overflow give an error.
Result<int64_t> ScratchBytes(const AMatrix& a, const PackedB& b);

// Float output instead of int32: y[r, j] = float(C[r, j]) * scale[j] (+ bias[j]), rounded as
// a Cast to float, a Mul and an Add would (no fused multiply-add), so a fused
// DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (-> Add) gives the same bits.
struct FloatOut {
  float* y = nullptr;
  int64_t ldy = 0;
  const float* scale = nullptr;  // [n]
  const float* bias = nullptr;   // [n] or nullptr
  // With `requant`, that float then goes through QuantizeLinear(., q_scale, q_zero) (division,
  // round half to even, + zero point, NaN to 0, saturation to q_signed's type) and
  // DequantizeLinear(., dq_scale, dq_zero), and gets post_bias[j] added (when not null): a
  // static int8 transformer's quantized Linear output before its bias Add, in those nodes' float
  // operations, so their bits.
  bool requant = false, q_signed = false;
  float q_scale = 1, q_zero = 0, dq_scale = 1, dq_zero = 0;
  const float* post_bias = nullptr;  // [n] or nullptr
};

// 8-bit output instead of int32 (QLinearConv in NHWC): y[r, j] = saturate(round(float(C[r, j] +
// bias[j]) * mult[j]) + z), rounding half to even, NaN to 0, saturating to uint8 or int8: the
// float operations of the reference kernels in their order, so the bytes are theirs.
struct QuantOut {
  uint8_t* y = nullptr;  // int8 output: its bytes
  int64_t ldy = 0;
  const float* mult = nullptr;    // [n]
  const int32_t* bias = nullptr;  // [n] or nullptr
  float z = 0;
  bool y_signed = false;
  // With `skip`: a static int8 ResNet's residual sum in the same store (a fused QdqAdd of the
  // byte above, y', and the skip byte s at [r, j]): y[r, j] = saturate(round(relu?((y' -
  // add_za) * add_sa + (s - add_zb) * add_sb) / add_so) + add_zo), in QdqAdd's float
  // operations and order (src/cpu/qdq_add.cc), so the bytes of the two nodes it replaces;
  // y then has add_out_signed's type.
  const uint8_t* skip = nullptr;  // [rows, ldskip]
  int64_t ldskip = 0;
  bool skip_signed = false, add_relu = false, add_out_signed = false;
  float add_sa = 0, add_za = 0, add_sb = 0, add_so = 0, add_zo = 0;
  int32_t add_zb = 0;
  // row_group > 0: GEMM row r is row (r / row_group) * row_valid + r % row_group of y (and of
  // skip), and rows with r % row_group >= row_valid are not stored: a conv computed over its
  // padded input's full width drops the positions past the output's width.
  int64_t row_group = 0, row_valid = 0;
};

// C[rows, n] (int32, row stride ldc) = (A - za)(B - zb) mod 2^32, or with `fout` its float
// form into fout->y, or with `qout` its requantized form into qout->y (c unused). `scratch` holds at least
// ScratchBytes(a, b) bytes, 64-byte aligned. Splits the work over the pool (nullptr: this thread).
// A product's cost (rows x k x n) is not bounded by any one operand, so the run's deadline and
// terminate calls (core/run_control.h) are read every 2^20 multiply-adds of a thread's work:
// CANCELLED then, with the output partly written. Call it on the run's thread.
[[nodiscard]] Status Gemm(const AMatrix& a, const PackedB& b, int32_t* c, int64_t ldc, void* scratch, ThreadPool* pool,
                          const FloatOut* fout = nullptr, const QuantOut* qout = nullptr);

}  // namespace strata::int8gemm
