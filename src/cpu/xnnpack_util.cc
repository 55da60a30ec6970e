#include "cpu/xnnpack_util.h"

#include <immintrin.h>
#include <pthreadpool.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/large_pages.h"
#include "plugin/cpu_features.h"

namespace strata {

namespace {

// XNNPACK's aligned blocks (packed weights, made once per operator at session creation)
// come from AllocateLargePages when large: huge pages faulted in at once, instead of 4 KiB
// faults under XNNPACK's zero-fill, which on a VM cost more than the packing (resnet18 at
// 2 threads). A header just below the returned pointer records how to free the block.
struct BlockHeader {
  void* base;
  size_t mapped;  // 0: aligned_alloc
};

void* XnnAlignedAllocate(void*, size_t alignment, size_t size) {
  const size_t align = std::max<size_t>(alignment, 64);
  // The header needs its own aligned slot in front of the data.
  const size_t front = (sizeof(BlockHeader) + align - 1) / align * align;
  if (size > SIZE_MAX - front - align) return nullptr;
  const size_t total = (front + size + align - 1) / align * align;
  size_t mapped = 0;
  void* base = nullptr;
  if (total >= kLargePagesMinBytes && align <= 4096) base = AllocateLargePages(total, &mapped);
  if (!base) {
    mapped = 0;
    base = std::aligned_alloc(align, total);
    if (!base) return nullptr;
  }
  char* data = static_cast<char*>(base) + front;
  const BlockHeader h{base, mapped};
  std::memcpy(data - sizeof(BlockHeader), &h, sizeof(BlockHeader));
  return data;
}

void XnnAlignedDeallocate(void*, void* p) {
  if (!p) return;
  BlockHeader h;
  std::memcpy(&h, static_cast<char*>(p) - sizeof(BlockHeader), sizeof(BlockHeader));
  if (h.mapped)
    FreeLargePages(h.base, h.mapped);
  else
    std::free(h.base);
}

void* XnnAllocate(void*, size_t size) { return std::malloc(size); }
void* XnnReallocate(void*, void* p, size_t size) { return std::realloc(p, size); }
void XnnDeallocate(void*, void* p) { std::free(p); }

}  // namespace

Status EnsureXnnpackInitialized() {
  static const xnn_allocator allocator{nullptr,       XnnAllocate,        XnnReallocate,
                                       XnnDeallocate, XnnAlignedAllocate, XnnAlignedDeallocate};
  static const xnn_status status = xnn_initialize(&allocator);
  if (status != xnn_status_success) return Unsupported("XNNPACK could not be initialized: ", XnnStatusName(status));
  return Status::Ok();
}

const char* XnnStatusName(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "success";
    case xnn_status_uninitialized:
      return "uninitialized";
    case xnn_status_invalid_parameter:
      return "invalid parameter";
    case xnn_status_invalid_state:
      return "invalid state";
    case xnn_status_unsupported_parameter:
      return "unsupported parameter";
    case xnn_status_unsupported_hardware:
      return "unsupported hardware";
    case xnn_status_out_of_memory:
      return "out of memory";
  }
  return "unknown status";
}

Result<FusedActivation> ParseNhwcConvActivation(const Node& node) {
  const std::string kind = node.GetString("activation", "");
  if (kind != "Silu" && kind != "HardSwish") return ParseFusedActivation(node);
  FusedActivation act;
  act.kind = kind == "Silu" ? ActKind::kSilu : ActKind::kHardSwish;
  return act;
}

Result<FusedActivation> ParseFusedActivation(const Node& node) {
  FusedActivation act;
  if (!node.HasAttr("activation")) return act;
  std::string kind = node.GetString("activation", "");
  if (kind == "Relu") {
    act.min = 0.0f;
  } else if (kind == "Clip") {
    act.min = node.GetFloat("activation_min", act.min);
    act.max = node.GetFloat("activation_max", act.max);
  } else {
    return InvalidModel(node.Describe(), ": unsupported fused activation '", kind, "' (expected Relu or Clip)");
  }
  if (std::isnan(act.min) || std::isnan(act.max) || act.min > act.max)
    return InvalidModel(node.Describe(), ": fused activation range [", act.min, ", ", act.max, "] is empty");
  return act;
}

namespace {
constexpr int64_t kBlock = 32;

// out[j * rows + i] = in[i * cols + j] for one rows x cols matrix, restricted to column block [cb, ce).
void TransposeCols(const float* in, float* out, int64_t rows, int64_t cols, int64_t cb, int64_t ce) {
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    int64_t i1 = std::min(rows, i0 + kBlock);
    for (int64_t j0 = cb; j0 < ce; j0 += kBlock) {
      int64_t j1 = std::min(ce, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) out[j * rows + i] = in[i * cols + j];
    }
  }
}

void TransposeBatched(const float* in, float* out, int64_t n, int64_t rows, int64_t cols, ThreadPool* pool) {
  // Work items are (batch, column block) pairs so that batch 1 still splits across threads.
  int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t bi = t / col_blocks, cb = (t % col_blocks) * kBlock;
      TransposeCols(in + bi * rows * cols, out + bi * rows * cols, rows, cols, cb, std::min(cols, cb + kBlock));
    }
  };
  int64_t items = n * col_blocks;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows * kBlock));
  if (pool && items * rows * kBlock > 65536) {
    pool->ParallelFor(items, grain, body);
  } else {
    body(0, items);
  }
}
// 3-channel (RGB) planes interleaved into pixels, 16 pixels per step: two permutes per
// output vector pick the R and G lanes, then the B lanes. Column transposes of 3 rows are
// scalar moves (mobilenet_v2's 224x224 input: 3.3% of a bf16 run at 1 thread).
__attribute__((target("avx512f"))) void InterleaveRgb(const float* in, float* out, int64_t hw, int64_t p0, int64_t p1) {
  alignas(64) int32_t idx_rg[3][16], idx_b[3][16];
  for (int v = 0; v < 3; ++v)
    for (int l = 0; l < 16; ++l) {
      const int q = 16 * v + l, px = q / 3, ch = q % 3;
      idx_rg[v][l] = ch == 1 ? 16 + px : px;  // R from the first operand, G from the second
      idx_b[v][l] = ch == 2 ? 16 + px : l;    // B from the second operand, else keep the lane
    }
  __m512i rg[3], b[3];
  for (int v = 0; v < 3; ++v) {
    rg[v] = _mm512_load_si512(idx_rg[v]);
    b[v] = _mm512_load_si512(idx_b[v]);
  }
  int64_t p = p0;
  for (; p + 16 <= p1; p += 16) {
    const __m512 r = _mm512_loadu_ps(in + p), g = _mm512_loadu_ps(in + hw + p), bl = _mm512_loadu_ps(in + 2 * hw + p);
    for (int v = 0; v < 3; ++v)
      _mm512_storeu_ps(out + 3 * p + 16 * v, _mm512_permutex2var_ps(_mm512_permutex2var_ps(r, rg[v], g), b[v], bl));
  }
  for (; p < p1; ++p)
    for (int ch = 0; ch < 3; ++ch) out[3 * p + ch] = in[ch * hw + p];
}

bool HasAvx512f() {
  static const bool has = plugin::CpuSupports("avx512f");
  return has;
}

}  // namespace

void TransposeNchwToNhwc(const float* in, float* out, int64_t n, int64_t c, int64_t hw, ThreadPool* pool) {
  if (c == 3 && HasAvx512f()) {
    // Pixel chunks of whole images' planes; batch 1 still splits across threads.
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (hw + kChunk - 1) / kChunk, items = n * chunks;
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t img = t / chunks, p0 = (t % chunks) * kChunk;
        InterleaveRgb(in + img * 3 * hw, out + img * 3 * hw, hw, p0, std::min(hw, p0 + kChunk));
      }
    };
    // Split from 64 Ki floats, as TransposeBatched (one 224x224 RGB image is 150 Ki floats:
    // counting pixels, it stayed on one thread).
    if (pool && items > 1 && n * c * hw > 65536) {
      pool->ParallelFor(items, 1, body);
    } else {
      body(0, items);
    }
    return;
  }
  TransposeBatched(in, out, n, c, hw, pool);
}
void TransposeNhwcToNchw(const float* in, float* out, int64_t n, int64_t c, int64_t hw, ThreadPool* pool) {
  TransposeBatched(in, out, n, hw, c, pool);
}

Result<Tensor> AllocateScratch(int64_t floats, Allocator* alloc, const Node& node) {
  auto r = Tensor::Allocate(DataType::kFloat, {std::max<int64_t>(floats, 1)}, alloc);
  if (!r.ok()) return MakeStatus(r.status().code(), node.Describe(), ": scratch buffer: ", r.status().message());
  return std::move(r).value();
}

}  // namespace strata

namespace strata {

void ParkXnnWorkers(pthreadpool_t tp) {
  const size_t threads = tp ? pthreadpool_get_threads_count(tp) : 0;
  if (threads <= 1) return;
  // One item per thread so that every worker takes the command, and with it the flag
  // that makes its next wait a futex sleep instead of a spin.
  pthreadpool_parallelize_1d(
      tp, [](void*, size_t) {}, nullptr, threads, PTHREADPOOL_FLAG_YIELD_WORKERS);
}

Status XnnOperatorCache::Prepare(const Key& key, CreateFn create, const Node& node, const char* what) {
  RETURN_IF_ERROR(EnsureXnnpackInitialized());
  std::lock_guard<std::mutex> lock(mu_);
  xnn_operator_t op = nullptr;
  xnn_status s = create(&op);
  if (s != xnn_status_success)
    return Unsupported(node.Describe(), ": XNNPACK ", what, " rejected the parameters: ", XnnStatusName(s));
  op_.reset(op);
  key_ = key;
  return Status::Ok();
}

Status XnnOperatorCache::Run(const Key& key, CreateFn create, SetupFn setup, pthreadpool_t tp, const Node& node,
                             const char* what) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!op_ || key_ != key) {
    if (has_rejected_ && rejected_key_ == key)
      return Unsupported(node.Describe(), ": XNNPACK ", what, " rejected these parameters before");
    RETURN_IF_ERROR(EnsureXnnpackInitialized());
    xnn_operator_t op = nullptr;
    xnn_status s = create(&op);
    if (s != xnn_status_success) {
      has_rejected_ = true;
      rejected_key_ = key;
      return Unsupported(node.Describe(), ": XNNPACK ", what, " rejected the parameters: ", XnnStatusName(s));
    }
    op_.reset(op);
    key_ = key;
  }
  xnn_status s = setup(op_.get());
  if (s == xnn_status_success) {
    if (tp && timed_runs_ < kTimedRuns) {
      const auto t0 = std::chrono::steady_clock::now();
      s = xnn_run_operator(op_.get(), nullptr);
      const int64_t ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      fastest_inline_ns_ = std::min(fastest_inline_ns_, ns);
      ++timed_runs_;
    } else if (tp && fastest_inline_ns_ > kMinPoolNs) {
      s = xnn_run_operator(op_.get(), tp);
      ParkXnnWorkers(tp);
    } else {
      s = xnn_run_operator(op_.get(), nullptr);
    }
  }
  if (s != xnn_status_success) return RuntimeError(node.Describe(), ": XNNPACK ", what, " failed: ", XnnStatusName(s));
  return Status::Ok();
}

}  // namespace strata
