// B packing for the SGEMM (sgemm.h): constant weights once at session creation, run-time
// B per call (GemmUnpacked). Packed storage of 64 KiB and more is AllocateLargePages memory
// (2 MiB pages faulted in by one call): on a VM, faulting a fresh 4 KiB-paged buffer during
// the copy cost more than the copy itself.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/first_error.h"
#include "core/large_pages.h"
#include "core/tensor.h"
#include "cpu/sgemm.h"
#include "cpu/sgemm_internal.h"
#include "cpu/sgemm_transpose.h"

// GCC 12's AVX-512 headers pass deliberately undefined vectors through; never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata::sgemm {

namespace {

// Writes columns [0, cols) of every packed row and nothing else (PackTransposedColumns).
void PackTransposedColumnsScalar(const float* b, int64_t ldb, int64_t c, int64_t taps, int64_t n0, int64_t cols,
                                 int64_t width, float* panel, bool /*stream*/) {
  const int64_t k = c * taps;
  for (int64_t j = 0; j < cols; ++j) {
    const float* src = b + (n0 + j) * ldb;
    float* dst = panel + j;
    if (taps == 1) {
      for (int64_t kk = 0; kk < k; ++kk) dst[kk * width] = src[kk];
      continue;
    }
    for (int64_t i = 0; i < c; ++i)
      for (int64_t t = 0; t < taps; ++t) dst[(t * c + i) * width] = src[i * taps + t];
  }
}

// Row of the packed panel that holds flattened source element q = i * taps + t.
inline int64_t PackedRow(int64_t q, int64_t c, int64_t taps) { return taps == 1 ? q : (q % taps) * c + q / taps; }

// PackTransposedColumnsScalar with 16x16 in-register transposes: 16 source rows (output columns)
// x 16 consecutive source elements become 16 packed rows of 16 columns, each stored as one
// 64-byte vector, instead of 256 scalar stores 128 bytes apart (the scalar loop was a
// fifth of resnet50's creation).
// Masked stores: a group of fewer than 16 columns leaves its neighbours alone, so a caller
// can fill one panel from several sources (GemvWeights::PackRows).
__attribute__((target("avx512f"))) void PackTransposedColumnsAvx512(const float* b, int64_t ldb, int64_t c,
                                                                    int64_t taps, int64_t n0, int64_t cols,
                                                                    int64_t width, float* panel, bool stream) {
  const int64_t k = c * taps, k16 = k / 16 * 16;
  // Full 16-column groups are whole cache lines when the panel and its row stride are.
  stream = stream && reinterpret_cast<uintptr_t>(panel) % 64 == 0 && width % 16 == 0;
  for (int64_t jh = 0; jh < cols; jh += 16) {
    const int64_t jn = std::min<int64_t>(16, cols - jh);
    const __mmask16 mask = static_cast<__mmask16>((1u << jn) - 1);
    const float* src = b + (n0 + jh) * ldb;
    for (int64_t q0 = 0; q0 < k16; q0 += 16) {
      __m512 r[16];
      for (int64_t j = 0; j < 16; ++j) r[j] = j < jn ? _mm512_loadu_ps(src + j * ldb + q0) : _mm512_setzero_ps();
      internal::Transpose16x16(r);
      // Plain stores for full groups: masked stores are much slower on AMD cores.
      if (jn == 16 && stream)
        for (int64_t q = 0; q < 16; ++q) _mm512_stream_ps(panel + PackedRow(q0 + q, c, taps) * width + jh, r[q]);
      else if (jn == 16)
        for (int64_t q = 0; q < 16; ++q) _mm512_storeu_ps(panel + PackedRow(q0 + q, c, taps) * width + jh, r[q]);
      else
        for (int64_t q = 0; q < 16; ++q)
          _mm512_mask_storeu_ps(panel + PackedRow(q0 + q, c, taps) * width + jh, mask, r[q]);
    }
    for (int64_t j = 0; j < jn; ++j)
      for (int64_t q = k16; q < k; ++q) panel[PackedRow(q, c, taps) * width + jh + j] = src[j * ldb + q];
  }
  // Non-temporal stores are weakly ordered: fenced before the pool's join publishes the panel.
  if (stream) _mm_sfence();
}

// Available() rather than a plain CPU check, so STRATA_SGEMM=0 also exercises the scalar
// packers (the load_pack tests run both ways).
bool HasAvx512() { return Available(); }

}  // namespace

void PackTransposedColumns(const float* b, int64_t ldb, int64_t c, int64_t taps, int64_t n0, int64_t cols,
                           int64_t width, float* dst, bool stream) {
  (HasAvx512() ? PackTransposedColumnsAvx512 : PackTransposedColumnsScalar)(b, ldb, c, taps, n0, cols, width, dst,
                                                                            stream);
}

void PackTransposedPanel(const float* b, int64_t ldb, int64_t c, int64_t taps, int64_t n0, int64_t cols, int64_t width,
                         float* panel, bool stream) {
  // The last panel's missing columns are zeros (the kernels read the whole width).
  if (cols < width) std::fill(panel, panel + c * taps * width, 0.0f);
  PackTransposedColumns(b, ldb, c, taps, n0, cols, width, panel, stream && cols == width);
}

void PackedB::Free::operator()(float* p) const {
  if (mapped)
    FreeLargePages(p, mapped);
  else
    std::free(p);
}

Status PackedB::Reserve(const char* fn, int64_t k, int64_t n) {
  if (k < 0 || n < 0) return InvalidArgument("sgemm::", fn, ": negative size K=", k, " N=", n);
  const int64_t panels = (n + kPanelWidth - 1) / kPanelWidth;
  if (internal::MulOverflows(panels * kPanelWidth, std::max<int64_t>(k, 1)))
    return InvalidArgument("sgemm::", fn, ": K=", k, " x N=", n, " is too large");
  const int64_t floats = panels * kPanelWidth * k;
  if (floats > capacity_) {
    data_.reset();
    capacity_ = 0;
    k_ = n_ = 0;
    const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
    float* p = nullptr;
    size_t mapped = 0;
    // zeroed = false: every packer writes the whole of its panels (aligned_alloc memory, the
    // fallback, is not zeroed either).
    if (bytes >= kLargePagesMinBytes) p = static_cast<float*>(AllocateLargePages(bytes, &mapped, /*zeroed=*/false));
    if (!p) {
      mapped = 0;
      p = static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
    }
    if (!p) return MakeStatus(StatusCode::kOutOfMemory, "sgemm::", fn, ": cannot allocate ", floats * 4, " bytes");
    data_ = std::unique_ptr<float, Free>(p, Free{mapped});
    capacity_ = floats;
  }
  k_ = k;
  n_ = n;
  return Status::Ok();
}

namespace {
__attribute__((target("avx512f"))) void ScaleRowsAvx512(const float* src, const float* scale, int64_t k, int64_t panels,
                                                        float* dst) {
  for (int64_t p = 0; p < panels; ++p) {
    const float* sp = src + p * k * kPanelWidth;
    float* dp = dst + p * k * kPanelWidth;
    for (int64_t r = 0; r < k; ++r) {
      const __m512 s = _mm512_set1_ps(scale[r]);
      _mm512_store_ps(dp + r * kPanelWidth, _mm512_mul_ps(_mm512_load_ps(sp + r * kPanelWidth), s));
      _mm512_store_ps(dp + r * kPanelWidth + 16, _mm512_mul_ps(_mm512_load_ps(sp + r * kPanelWidth + 16), s));
    }
  }
}
}  // namespace

Status ScaleRowsInto(const PackedB& b, const float* row_scale, PackedB* out) {
  if (!out || (!row_scale && b.k() > 0)) return InvalidArgument("sgemm::ScaleRowsInto: null scale or output");
  if (!Available()) return Unsupported("sgemm::ScaleRowsInto: this CPU lacks AVX-512F");
  RETURN_IF_ERROR(out->Reserve("ScaleRowsInto", b.k(), b.n()));
  // Padding columns are zeros in b and stay zeros (0 * s); a non-finite s makes them NaN,
  // but the micro-kernels never store columns past N.
  if (b.k() > 0 && b.panels() > 0) ScaleRowsAvx512(b.panel(0), row_scale, b.k(), b.panels(), out->mutable_panel(0));
  return Status::Ok();
}

namespace {

// B and conv weights are packed by the pool from 2^20 floats (4 MiB) up: on the Xeon VM
// splitting from 2^18 up made resnet50's creation slower, 62 -> 69 ms, its many 1 MiB 1x1
// convs each paying a worker wake-up; from 2^20 up, 65-68 -> 59-63 ms, and bert's 238-266
// -> 215-243 ms.
constexpr int64_t kParallelPackFloats = int64_t{1} << 20;

// Rows [0, rows) of columns [0, cols) of a row-major source (row stride ld) into a panel's
// rows, kPanelWidth floats each, the columns past cols zeroed: a non-transposed B's share of
// a panel, from memory (PackBInto) or from a block read from the file (PackB(WeightRows)).
void CopyPanelRows(const float* src, int64_t ld, int64_t rows, int64_t cols, float* panel) {
  if (cols == kPanelWidth) {
    // A constant-size copy compiles to a few vector moves instead of a memcpy call per row.
    for (int64_t kk = 0; kk < rows; ++kk)
      std::memcpy(panel + kk * kPanelWidth, src + kk * ld, kPanelWidth * sizeof(float));
    return;
  }
  for (int64_t kk = 0; kk < rows; ++kk) {
    float* row = panel + kk * kPanelWidth;
    std::memcpy(row, src + kk * ld, static_cast<size_t>(cols) * sizeof(float));
    std::fill(row + cols, row + kPanelWidth, 0.0f);
  }
}

}  // namespace

Status PackBInto(const float* b, int64_t k, int64_t n, int64_t ldb, bool trans_b, PackedB* out, ThreadPool* pool) {
  if (!out) return InvalidArgument("sgemm::PackB: no output PackedB");
  if (k < 0 || n < 0) return InvalidArgument("sgemm::PackB: negative size K=", k, " N=", n);
  const int64_t width = trans_b ? k : n;
  if (ldb == 0) ldb = width;
  if (ldb < width)
    return InvalidArgument("sgemm::PackB: row stride ", ldb, " is below the row width ", width,
                           trans_b ? " (B^T is [N,K])" : " (B is [K,N])");
  if (k > 0 && n > 0 && !b) return InvalidArgument("sgemm::PackB: B is null for a ", k, "x", n, " matrix");
  RETURN_IF_ERROR(out->Reserve("PackB", k, n));
  float* dst = out->data_.get();
  ForPanels(out->panels(), k * n, kParallelPackFloats, pool, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* panel = dst + p * k * kPanelWidth;
      const int64_t n0 = p * kPanelWidth, cols = std::min(kPanelWidth, n - n0);
      if (trans_b) {
        PackTransposedPanel(b, ldb, k, 1, n0, cols, kPanelWidth, panel);
      } else {
        CopyPanelRows(b + n0, ldb, k, cols, panel);
      }
    }
  });
  return Status::Ok();
}

Result<PackedB> PackB(const float* b, int64_t k, int64_t n, bool trans_b, int64_t ldb, ThreadPool* pool) {
  PackedB out;
  RETURN_IF_ERROR(PackBInto(b, k, n, ldb, trans_b, &out, pool));
  return out;
}

Result<PackedB> PackConvWeights(const float* w, int64_t m, int64_t c, int64_t taps, ThreadPool* pool) {
  WeightRows rows;
  rows.data = w;
  return PackConvWeights(rows, m, c, taps, pool);
}

WeightRows WeightRows::Of(const Tensor& w) {
  WeightRows r;
  if (w.on_disk()) {
    r.file = &w;
  } else {
    r.data = w.data<float>();
  }
  return r;
}

Result<const float*> WeightRows::Rows(int64_t r0, int64_t n, int64_t row_floats, float* dst) const {
  if (!file) return data + r0 * row_floats;
  const size_t row_bytes = static_cast<size_t>(row_floats) * sizeof(float);
  RETURN_IF_ERROR(file->ReadBytes(static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(n) * row_bytes, dst));
  return static_cast<const float*>(dst);
}

RowReader::RowReader(const WeightRows& w, int64_t max_floats, const char* who)
    : w_(w), max_floats_(max_floats), who_(who) {}

RowReader::~RowReader() = default;

Result<const float*> RowReader::Rows(int64_t r0, int64_t n, int64_t row_floats) {
  if (n < 0 || row_floats < 0 || internal::MulOverflows(n, row_floats) || n * row_floats > max_floats_)
    return InvalidArgument(who_, ": a block of ", n, " rows of ", row_floats, " floats is over the reader's ",
                           max_floats_);
  if (!w_.file) return w_.data + r0 * row_floats;
  if (n == 0) return static_cast<const float*>(nullptr);
  if (!scratch_) scratch_ = std::make_unique<ScratchPages>(static_cast<size_t>(max_floats_) * sizeof(float));
  if (!scratch_->data()) return MakeStatus(StatusCode::kOutOfMemory, who_, ": no scratch memory to read a weight");
  return w_.Rows(r0, n, row_floats, static_cast<float*>(scratch_->data()));
}

Result<PackedB> PackConvWeights(const WeightRows& w, int64_t m, int64_t c, int64_t taps, ThreadPool* pool) {
  if (m < 0 || c < 0 || taps < 0)
    return InvalidArgument("sgemm::PackConvWeights: negative size M=", m, " C=", c, " taps=", taps);
  if (c > 0 && internal::MulOverflows(c, taps))
    return InvalidArgument("sgemm::PackConvWeights: C=", c, " x taps=", taps, " is too large");
  const int64_t k = c * taps;
  if (k > 0 && m > 0 && !w.data && !w.file)
    return InvalidArgument("sgemm::PackConvWeights: W is null for M=", m, " K=", k);
  if (w.file && w.file->num_elements() != m * k)
    return InvalidArgument("sgemm::PackConvWeights: W has ", w.file->num_elements(), " elements, not M=", m,
                           " x K=", k);
  PackedB out;
  RETURN_IF_ERROR(out.Reserve("PackConvWeights", k, m));
  if (k == 0 || m == 0) return out;
  FirstError first;
  const bool stream = k * m * static_cast<int64_t>(sizeof(float)) >= kStreamPackBytes;
  ForPanels(out.panels(), k * m, kParallelPackFloats, pool, [&](int64_t p0, int64_t p1) {
    first.Set([&]() -> Status {
      // One panel's rows at a time: they stay in L2 for the transpose that follows.
      RowReader reader(w, kPanelWidth * k, "sgemm::PackConvWeights");
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kPanelWidth, cols = std::min(kPanelWidth, m - n0);
        ASSIGN_OR_RETURN(const float* rows, reader.Rows(n0, cols, k));
        PackTransposedPanel(rows, k, c, taps, 0, cols, kPanelWidth, out.data_.get() + p * k * kPanelWidth, stream);
      }
      return Status::Ok();
    }());
  });
  RETURN_IF_ERROR(first.Take());
  return out;
}

namespace {

// Rows of B per block read from the file by PackB(WeightRows): about 512 KiB, so a block
// stays in L2 while its rows are copied into every panel.
constexpr int64_t kStreamBlockBytes = 512 * 1024;

}  // namespace

Result<PackedB> PackB(const WeightRows& b, int64_t k, int64_t n, ThreadPool* pool) {
  if (!b.file) return PackB(b.data, k, n, /*trans_b=*/false, 0, pool);
  if (k < 0 || n < 0) return InvalidArgument("sgemm::PackB: negative size K=", k, " N=", n);
  if (internal::MulOverflows(k, n) || b.file->num_elements() != k * n)
    return InvalidArgument("sgemm::PackB: B has ", b.file->num_elements(), " elements, not K=", k, " x N=", n);
  PackedB out;
  RETURN_IF_ERROR(out.Reserve("PackB", k, n));
  if (k == 0 || n == 0) return out;
  const int64_t rows = std::clamp<int64_t>(kStreamBlockBytes / (n * static_cast<int64_t>(sizeof(float))), 1, k);
  const int64_t blocks = (k + rows - 1) / rows, panels = out.panels();
  float* dst = out.data_.get();
  FirstError first;
  auto run = [&](int64_t b0, int64_t b1) {
    first.Set([&]() -> Status {
      RowReader reader(b, rows * n, "sgemm::PackB");
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t k0 = blk * rows, kn = std::min(rows, k - k0);
        ASSIGN_OR_RETURN(const float* src, reader.Rows(k0, kn, n));
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t n0 = p * kPanelWidth;
          CopyPanelRows(src + n0, n, kn, std::min(kPanelWidth, n - n0), dst + p * k * kPanelWidth + k0 * kPanelWidth);
        }
      }
      return Status::Ok();
    }());
  };
  ForPanels(blocks, k * n, kParallelPackFloats, pool, run);  // row blocks here, not panels
  RETURN_IF_ERROR(first.Take());
  return out;
}

}  // namespace strata::sgemm
