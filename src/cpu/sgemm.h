// strata's own fp32 SGEMM for AVX-512F (Zen 4/5, Skylake-SP and later): the kernel
// behind MatMul, Gemm and the NHWC convolutions.
//
//   C[M,N] = alpha * A[M,K] x B[K,N]  (+ C if accumulate)  (+ bias[N])  then clamp
//
// B is packed once (constant weights at session creation) into the micro-kernel's
// 32-column panel layout; A is read row-major with any row stride and packed per cache
// block internally. Work is split over M blocks x N panels on the session pool.
//
// Everything here needs AVX-512F at run time: callers must check Available() and keep
// their existing path otherwise. The file set compiles for baseline x86-64; only the
// micro-kernels carry target attributes.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "core/status.h"
#include "core/threadpool.h"
#include "cpu/act_kind.h"

namespace strata {
class Tensor;
class ScratchPages;
}  // namespace strata

namespace strata::sgemm {

// Column-panel width of the micro-kernel (two zmm registers of fp32).
inline constexpr int64_t kPanelWidth = 32;

struct WeightRows;

// B[K,N] (or B^T when trans_b: the source is [N,K]) packed into ceil(N/32) panels, each
// [K][32] floats contiguous (the last panel zero-padded), 64-byte aligned.
class PackedB {
 public:
  PackedB() = default;
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  // Panel p: K rows of 32 floats.
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kPanelWidth; }
  // The same, writable: for producers that compute B straight into the packed layout after
  // Reserve (the Winograd weight transform). They must write every float of each panel,
  // the zero padding of the last one included.
  float* mutable_panel(int64_t p) { return data_.get() + p * k_ * kPanelWidth; }
  // Bytes held (for memory accounting).
  int64_t bytes() const { return capacity_ * static_cast<int64_t>(sizeof(float)); }
  // Sizes the storage for a later PackBInto of K x N, which then reuses it without
  // allocating (scratch made at session creation). Errors as PackB's.
  Status Reserve(int64_t k, int64_t n) { return Reserve("PackedB::Reserve", k, n); }

 private:
  friend Status PackBInto(const float* b, int64_t k, int64_t n, int64_t ldb, bool trans_b, PackedB* out,
                          ThreadPool* pool);
  friend Result<PackedB> PackConvWeights(const WeightRows& w, int64_t m, int64_t c, int64_t taps, ThreadPool* pool);
  friend Result<PackedB> PackB(const WeightRows& b, int64_t k, int64_t n, ThreadPool* pool);
  friend Status ScaleRowsInto(const PackedB& b, const float* row_scale, PackedB* out);
  // Sizes the storage for K x N (reused when large enough); `fn` names the caller in errors.
  Status Reserve(const char* fn, int64_t k, int64_t n);
  struct Free {
    // > 0: an AllocateLargePages block of this length, else aligned_alloc memory. No
    // initializer (see GemvWeights::FreeDeleter); unique_ptr value-initializes it to 0.
    size_t mapped;
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
  int64_t capacity_ = 0;  // floats allocated (reused by PackBInto when large enough)
  int64_t k_ = 0, n_ = 0;
};

// out = b with row k scaled by row_scale[k] (K floats): B' = diag(s) B, in b's packed
// layout, reusing out's storage when it is large enough. A conv whose input is X * s per
// channel (a squeeze-excitation scale) runs on B' instead of a pass over X. Errors as
// Reserve; kUnsupported without AVX-512F.
Status ScaleRowsInto(const PackedB& b, const float* row_scale, PackedB* out);

// Packs B (row stride ldb: N for [K,N], K for trans_b's [N,K]; ldb = 0 means dense).
// Errors: negative sizes, a null pointer with a non-empty matrix, a stride below the
// row width, or a size that overflows; kOutOfMemory when the allocation fails.
// With a pool (the session's, at creation), a large B's panels are packed by its threads.
Result<PackedB> PackB(const float* b, int64_t k, int64_t n, bool trans_b, int64_t ldb = 0, ThreadPool* pool = nullptr);
// Same, reusing out's storage when it is large enough (scratch packing of run-time B).
Status PackBInto(const float* b, int64_t k, int64_t n, int64_t ldb, bool trans_b, PackedB* out,
                 ThreadPool* pool = nullptr);

// A convolution weight W[M][C][taps] (OIHW with taps = KH*KW) packed as B^T in im2col order:
// K = taps * C with k = t * C + c, N = M. Reorders and packs in one pass (no [M][taps][C]
// intermediate). Errors as PackB.
Result<PackedB> PackConvWeights(const float* w, int64_t m, int64_t c, int64_t taps, ThreadPool* pool = nullptr);

// Where a packer reads a constant float weight whose rows are contiguous: in memory, or,
// for a payload still in the model file (Tensor::on_disk, core/deferred_payload.h), a block
// of rows at a time into a scratch block of the packer's (Tensor::ReadBytes). The payload is
// then never read into memory of its own, which at session creation cost the kernel zeroing
// fresh pages for it and a copy the packer read back from DRAM (resnet18: ~12% and ~15% of
// its creation). Of(w) picks the form.
struct WeightRows {
  const float* data = nullptr;   // the whole weight, when resident
  const Tensor* file = nullptr;  // else: read from here
  static WeightRows Of(const Tensor& w);
  // Rows [r0, r0 + n) of `row_floats` floats each: a pointer into `data`, or the rows read into
  // dst (n * row_floats floats). Errors (a failed read) name the tensor and the file.
  Result<const float*> Rows(int64_t r0, int64_t n, int64_t row_floats, float* dst) const;
};

// One packer thread's reads of a WeightRows. Rows of a resident weight come back in place;
// rows of one on disk are read into a scratch block of the reader's (ScratchPages, which the
// session's creation recycles from packer to packer), allocated on the first read, so a
// resident weight costs no scratch at all.
class RowReader {
 public:
  // max_floats: the most floats one Rows call returns; who: the packer, for errors.
  RowReader(const WeightRows& w, int64_t max_floats, const char* who);
  ~RowReader();
  RowReader(const RowReader&) = delete;
  RowReader& operator=(const RowReader&) = delete;
  // Rows [r0, r0 + n) of row_floats floats each (n * row_floats <= max_floats; n == 0 reads
  // nothing). Errors: no scratch memory, a block over max_floats, a failed read (naming the
  // tensor and the file).
  Result<const float*> Rows(int64_t r0, int64_t n, int64_t row_floats);

 private:
  WeightRows w_;
  int64_t max_floats_;
  const char* who_;
  std::unique_ptr<ScratchPages> scratch_;
};
// PackConvWeights reading W through `w` (a block of one panel's 32 rows at a time when it is
// on disk). Packs exactly as from memory.
Result<PackedB> PackConvWeights(const WeightRows& w, int64_t m, int64_t c, int64_t taps, ThreadPool* pool = nullptr);
// PackB of a dense B [K, N] (not transposed) read through `b` (blocks of whole rows, every
// panel's share of them copied while they are in L2, when it is on disk). Packs exactly as
// from memory.
Result<PackedB> PackB(const WeightRows& b, int64_t k, int64_t n, ThreadPool* pool = nullptr);

// Runs pack(p0, p1) over panels [0, panels), split between the pool's threads when the
// matrix holds at least min_floats floats (creation-time weight packing: below that, waking
// the workers costs more than it saves). Shared with GemvWeights::Pack.
template <typename F>
void ForPanels(int64_t panels, int64_t floats, int64_t min_floats, ThreadPool* pool, F&& pack) {
  if (!pool || pool->num_threads() < 2 || panels < 2 || floats < min_floats) return pack(0, panels);
  pool->Run(panels, 1, pack);
}

// Columns [n0, n0 + cols) of a transposed source into one panel of K rows x `width` floats
// (width a multiple of 16, cols <= width; the missing columns are zeros), with AVX-512
// transposes where available. B(k, n) sits at b[n * ldb + (k % c) * taps + k / c], K = c *
// taps: with taps = 1 (c = K) that is plain B^T [N, K]; with taps > 1 a conv weight
// [M][C][taps] read in im2col order (k = t * C + c). Shared with GemvWeights::Pack.
// stream: store whole cache lines non-temporally (weights of many MiB, not read again soon:
// a plain store first reads each fresh line from DRAM); the function fences them.
void PackTransposedPanel(const float* b, int64_t ldb, int64_t c, int64_t taps, int64_t n0, int64_t cols, int64_t width,
                         float* panel, bool stream = false);
// The same transpose into columns [0, cols) of `dst` (row stride `width`, cols <= width)
// only: other columns are neither written nor zeroed.
void PackTransposedColumns(const float* b, int64_t ldb, int64_t c, int64_t taps, int64_t n0, int64_t cols,
                           int64_t width, float* dst, bool stream = false);
// Packed weights at least this large are written with non-temporal stores.
inline constexpr int64_t kStreamPackBytes = int64_t{4} << 20;

struct Epilogue {
  const float* bias = nullptr;                          // per-N bias, added after the product (nullptr: none)
  float min = -std::numeric_limits<float>::infinity();  // clamp (Relu: min = 0; Clip)
  float max = std::numeric_limits<float>::infinity();
  bool accumulate = false;  // C += product (C is read); otherwise C is overwritten
  float alpha = 1.0f;       // scales the product only (not C, not bias): Gemm's alpha
  // Residual R[M,N] (row stride ldr >= N) added with the bias, before the clamp: a Conv
  // followed by Add(+Relu) in one pass over C. Must not overlap C (C holds partial sums
  // between K blocks); use accumulate for an in-place residual.
  const float* residual = nullptr;
  int64_t ldr = 0;
  // SiLU or HardSwish applied before the clamp (after bias and residual).
  ActKind kind = ActKind::kClamp;
};

// True when Gemm reads A in place for this B (see Gemm below) rather than packing it: a
// caller that would otherwise rewrite A can then rewrite B more cheaply.
bool ReadsAInPlace(const PackedB& b);

// C[M,N] = alpha * A[M,K] (row stride lda >= K) x B + epilogue; C row stride ldc >= N.
// K and N come from b. With N <= 128 and 16 <= K <= kMaxIndirectK, A is read in place
// by the indirect kernel; otherwise it is packed per cache block. Parallel over the pool
// (nullptr or 1 thread: caller thread); tiny products stay on one thread. Results are
// bit-identical for any thread count. K == 0 gives C = bias (or C + bias when
// accumulating), clamped.
// Errors (InvalidArgument) for negative m, strides too small, null pointers with work to do.
Status Gemm(int64_t m, const float* a, int64_t lda, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
            ThreadPool* pool);

// A supplied by the caller instead of a matrix in memory: fill(ctx, row0, rows, k0, kc,
// dst, ld) writes A[row0 + r][k0 + j] into dst[r * ld + j] for r < rows (<= 12), j < kc
// (<= 256). The driver calls it per micro-tile and K block, so the rows land in L1 just
// before they are packed: an implicit-GEMM convolution gathers its im2col rows this way
// without materialising the [M, K] matrix. fill may run concurrently on pool threads.
struct ASource {
  using FillFn = void (*)(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld);
  FillFn fill = nullptr;
  const void* ctx = nullptr;
};

// C[M,N] = alpha * A x B + epilogue with A from `a` (see ASource); otherwise as Gemm. For B
// of at most 4 panels and K <= 1024 each row tile is gathered over the whole K (fill called
// per kKc-wide block) and read in place, as Gemm reads A for such B; else gathered and
// packed per K block.
Status GemmGathered(int64_t m, const ASource& a, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
                    ThreadPool* pool);

// A given by pointers instead of values: row r of A is `taps` segments of `seg`
// contiguous floats, K = taps * seg. rows(ctx, row0, rows, dst) writes the segment
// starts of rows [row0, row0 + rows) (rows <= kIndirectRows) as dst[t * kIndirectRows + r].
// An implicit-GEMM convolution points (output pixel, kernel tap) at that input pixel's C
// channels, or at a row of zeros in the padding: the micro-kernel then broadcasts A
// straight from the input, with no gather and no packing. Whole K per tile (no K
// blocking): meant for K <= kMaxIndirectK (each whole-K B panel stays in L2), e.g. 3x3
// convs, where packing A was a large share of the time. rows may run concurrently.
inline constexpr int64_t kIndirectRows = 12;
// Largest K the indirect kernel is used for: a B panel of K x 32 floats (576 KiB at 4608,
// resnet's 3x3 512-channel convs) still fits the 1 MiB L2 next to the A rows.
inline constexpr int64_t kMaxIndirectK = 4608;
struct IndirectA {
  using RowsFn = void (*)(const void* ctx, int64_t row0, int64_t rows, const float** dst);
  RowsFn rows = nullptr;
  const void* ctx = nullptr;
  int64_t taps = 0, seg = 0;
};

// C[M,N] = alpha * A x B + epilogue with A from `a` (see IndirectA; b.k() must equal
// taps * seg); otherwise as Gemm, bit-identical for any thread count.
Status GemmIndirect(int64_t m, const IndirectA& a, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
                    ThreadPool* pool);

// Run-time B (e.g. attention Q*K^T): packs B into a per-thread scratch buffer, then Gemm.
// ldb is B's row stride: >= N for [K,N], >= K for trans_b's [N,K].
Status GemmUnpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    bool trans_b, float* c, int64_t ldc, const Epilogue& ep, ThreadPool* pool);
// Same, packing B into the caller's `scratch` (e.g. one per task, reserved at session
// creation) instead of the calling thread's.
Status GemmUnpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    bool trans_b, float* c, int64_t ldc, const Epilogue& ep, ThreadPool* pool, PackedB* scratch);

// Makes the calling thread's fixed-size scratch (the A block, the gather tile, a pointer
// table for up to a 7x7 conv's taps) now rather than on its first product: pool workers
// run this at session creation (KernelRegistry::thread_init), so that a worker which sat
// out the warm-up runs does not allocate in a later one.
void PrepareThreadScratch();

// True when the CPU and OS support AVX-512F (checked once). STRATA_SGEMM=0 in the
// environment turns the kernel off (A/B comparisons, bisecting).
bool Available();

}  // namespace strata::sgemm
