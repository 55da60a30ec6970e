// Small-M fp32 matrix products against constant weights: Y[m, N] = clamp(A[m, K] . B + bias)
// for m <= kGemvMaxRows (batch-1 fully-connected layers, recurrent steps).
//
// B is prepacked once (at session creation) into column panels of kGemvPanel outputs,
// each stored [K][kGemvPanel], so the inner loop streams contiguous memory with several
// independent accumulators. The last panel is only as wide as its columns rounded up to
// 16 (a classifier's N = 10 would otherwise stream 6x the bytes it needs; only it is
// narrow, so N a multiple of kGemvPanel keeps the uniform layout the LSTM relies on).
// The panels are split across the pool.
//
// On AVX-512, one-row products whose A is at least a quarter zeros (ReLU outputs: about
// half of a batch-1 MLP's hidden activations) read only the weight rows of A's nonzeros: the
// product is bound by the weight bytes read, so rows not read are time saved. The skipped
// terms are exactly +-0 (only the order of the other additions changes) as long as every
// weight is finite, which Pack checks (0 * inf is NaN); otherwise every row is read.
// ISA (AVX-512F, AVX2+FMA, or baseline) is chosen at run time from the CPU's features.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/status.h"
#include "core/threadpool.h"
#include "cpu/sgemm.h"

namespace strata {

constexpr int64_t kGemvPanel = 64;
constexpr int64_t kGemvMaxRows = 4;

class GemvWeights {
 public:
  GemvWeights() = default;
  // `b` is [K, N] row-major, or [N, K] when b_is_nk; every weight is multiplied by alpha.
  // `bias` (N floats, may be null) is added to each output row. kInvalidArgument for
  // negative or overflowing dimensions, kOutOfMemory when memory runs out.
  // With a pool, a large matrix's panels are packed by its threads.
  static Result<GemvWeights> Pack(const float* b, int64_t k, int64_t n, bool b_is_nk, float alpha, const float* bias,
                                  ThreadPool* pool = nullptr);
  // The same, B read through `b`: a [N, K] B still in the model file is read one panel's
  // rows at a time (sgemm::WeightRows), never loaded whole; a [K, N] one is loaded first.
  // Also kIOError (naming the tensor and the file) when that read fails.
  static Result<GemvWeights> Pack(const sgemm::WeightRows& b, int64_t k, int64_t n, bool b_is_nk, float alpha,
                                  const float* bias, ThreadPool* pool = nullptr);
  // B given by rows: column j is the first k floats of row rows[j] of `src` (row stride ldb
  // >= k), or zeros where rows[j] < 0. Packs straight from `src` when the columns are a
  // permutation of its rows (the fused LSTM's gate interleave), with no reordered copy.
  static Result<GemvWeights> PackRows(const float* src, int64_t ldb, int64_t k, int64_t n, const int64_t* rows,
                                      const float* bias, ThreadPool* pool = nullptr);
  // The same from rows row0 + rows[j] of a weight of rows `ldb` floats long, read through
  // `src`: one still in the model file is read a block of consecutive rows at a time into a
  // small buffer and every column in the block packed from it, so the weight itself never
  // becomes resident (no payload buffer to allocate, fill and free at session creation).
  // Also kInvalidArgument when the weight is too small for the rows named, kIOError when a
  // read fails.
  static Result<GemvWeights> PackRows(const sgemm::WeightRows& src, int64_t row0, int64_t ldb, int64_t k, int64_t n,
                                      const int64_t* rows, const float* bias, ThreadPool* pool = nullptr);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return panels_; }
  bool empty() const { return n_ == 0; }
  // Panel p starts here; its rows are panel_width(p) floats apart (columns past N are zero).
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kGemvPanel; }
  // kGemvPanel, except for a last panel of fewer columns: those rounded up to 16.
  int64_t panel_width(int64_t p) const { return p + 1 < panels_ ? kGemvPanel : tail_width_; }
  const float* bias() const { return bias_.get(); }  // panels * kGemvPanel floats, zero-padded
  // Every packed weight is finite, so a zero in A may skip its row (see above).
  bool all_finite() const { return all_finite_; }
  // Element (kk, j) of the packed (alpha-scaled) B.
  float at(int64_t kk, int64_t j) const {
    const int64_t p = j / kGemvPanel;
    return panel(p)[kk * panel_width(p) + j % kGemvPanel];
  }

 private:
  struct FreeDeleter {
    // > 0: an AllocateLargePages block of this length (see Pack). No initializer: it would
    // make the deleter not default-constructible inside the incomplete class; unique_ptr
    // value-initializes it to 0.
    size_t mapped;
    void operator()(float* p) const;
  };
  // Storage for K x N with the bias (N floats, may be null) copied in; data not initialized.
  static Result<GemvWeights> Allocate(int64_t k, int64_t n, const float* bias);

  int64_t k_ = 0, n_ = 0, panels_ = 0, tail_width_ = kGemvPanel;
  bool all_finite_ = false;
  std::unique_ptr<float[], FreeDeleter> data_;
  std::unique_ptr<float[], FreeDeleter> bias_;
};

// Y rows r < m (row stride ldy) = clamp(A row r (stride lda) . B + bias, lo, hi).
// Requires 1 <= m <= kGemvMaxRows. Splits the panels across `pool` (may be null) when the
// product is big enough to pay for a parallel region.
void Gemv(const float* a, int64_t lda, int64_t m, const GemvWeights& w, float* y, int64_t ldy, float lo, float hi,
          ThreadPool* pool);
// Panels [p0, p1) only, on the calling thread.
void GemvPanels(const float* a, int64_t lda, int64_t m, const GemvWeights& w, float* y, int64_t ldy, float lo, float hi,
                int64_t p0, int64_t p1);

// Sparse one-row GEMVs (A with many zeros) list A's nonzeros in a per-thread buffer; this
// makes the calling thread's buffer for K up to kGemvPreparedK now, so a pool worker (which
// runs it at session creation, KernelRegistry::thread_init) does not allocate in a later
// run on its first sparse GEMV. Larger K grows the buffer once on first use.
inline constexpr int64_t kGemvPreparedK = 16384;
void PrepareGemvThreadScratch();

// "avx512", "avx2" or "portable": the variant Gemv runs on this CPU (STRATA_FORCE_ISA caps it).
const char* GemvIsaName();

}  // namespace strata
