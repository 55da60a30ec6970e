// SGEMM driver: argument checks, cache blocking and the split over the pool (B packing: sgemm_pack.cc).
// Loop nest per task (rows [i0, i0+mc) x panels [p0, p1)):
//   for each K block (kKc):  pack A block -> for each B panel -> for each row tile (<= 12 rows): micro-kernel
// The B panel slice (32 KiB) stays in L1 across the tiles of the M block; the packed A
// block stays in L2 across panels (indirect A: see RunIndirectTask). Each C element is
// computed by the same sequence of FMAs whatever the split or row tiling, so results do not
// depend on the thread count.
#include "cpu/sgemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/kernel_stop.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/sgemm_internal.h"
#include "plugin/cpu_features.h"

namespace strata::sgemm {

using internal::kKc;
using internal::kMc;
using internal::kMr;

namespace {

// 64-byte aligned float storage; nullptr when the allocation fails.
float* AllocFloats(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  return static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
}

// Products below this many FLOPs stay on the calling thread: waking the pool costs more.
constexpr double kMinParallelFlops = 4.0e6;
// Keeps a thread's scratch packed B from pinning more than this after a huge product.
constexpr int64_t kMaxRetainedScratchFloats = int64_t{16} << 20;

// A per-thread buffer of `floats` floats, allocated on first use (nullptr if that fails);
// Tag tells the buffers apart.
template <typename Tag>
float* ThreadFloats(int64_t floats) {
  struct Buf {
    float* p = nullptr;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (!buf.p) buf.p = AllocFloats(floats);
  return buf.p;
}

// The per-thread A block buffer (kMc x kKc).
struct ABlockTag {};
float* ThreadABuffer() { return ThreadFloats<ABlockTag>(kMc * kKc); }

// C = (accumulate ? C : 0) + bias (+ residual), activated: the whole product when K == 0.
void EpilogueOnly(int64_t m, int64_t n, float* c, int64_t ldc, const Epilogue& ep) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float* res = ep.residual ? ep.residual + i * ep.ldr : nullptr;
    for (int64_t j = 0; j < n; ++j) {
      float v = (ep.accumulate ? row[j] : 0.0f) + (ep.bias ? ep.bias[j] : 0.0f) + (res ? res[j] : 0.0f);
      row[j] = std::min(std::max(ActivateScalar(v, ep.kind), ep.min), ep.max);
    }
  }
}

// A read from memory: rows packed straight from the matrix.
struct DirectA {
  const float* a;
  int64_t lda;
  void Pack(int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst) const {
    internal::PackAAvx512(a + row0 * lda + k0, lda, rows, kc, dst);
  }
};

// IndirectA rows of a DirectA matrix: each row is one segment.
void MatrixRows(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
  const DirectA& d = *static_cast<const DirectA*>(ctx);
  for (int64_t r = 0; r < rows; ++r) dst[r] = d.a + (row0 + r) * d.lda;
}

// When Gemm reads A in place instead of packing it: B of at most this many panels (a
// packed A tile would serve only 1-4 of them, too few to repay packing it) and K of at
// least this much (shorter rows leave the per-tile pointer setup exposed). 1x1 NHWC convs
// at 1 thread, min CPU ms packed -> in place: 56x56 256->64 0.650 -> 0.613, 28x28
// 512->128 0.593 -> 0.521, 112x112 32->16 0.196 -> 0.156, 56x56 144->24 0.200 -> 0.154,
// 14x14 576->96 0.117 -> 0.107. With more panels it was a tie on resnet's 1x1 convs.
constexpr int64_t kMaxInPlacePanels = 4, kMinInPlaceK = 16;

// A from a caller's fill callback: one tile is gathered into an L1-sized row-major
// scratch, then packed.
struct GatheredA {
  const ASource* src;
  float* scratch;  // kMr x kKc
  void Pack(int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst) const {
    src->fill(src->ctx, row0, rows, k0, kc, scratch, kc);
    internal::PackAAvx512(scratch, kc, rows, kc, dst);
  }
};

// Row tiles of an M block of mrows <= kMc rows: starts[0..n] (n returned, starts[n] =
// mrows). The fewest tiles of at most kMr rows, their heights differing by at most one
// (49 rows: 10+10+10+10+9, not 12+12+12+6+7; 100: 12+8x11, not 8x12+4): a tile of few
// rows has too few accumulators to cover the FMA latency and reloads B for little work.
// Row tiling does not change any C element's sequence of FMAs.
constexpr int kMaxTiles = kMc / kMr;
int TileStarts(int64_t mrows, int64_t* starts) {
  const int64_t n = (mrows + kMr - 1) / kMr, base = mrows / n, taller = mrows % n;
  for (int64_t t = 0, ir = 0; t <= n; ++t) {
    starts[t] = ir;
    ir += base + (t < taller);
  }
  return static_cast<int>(n);
}

// Rows of each of `blocks` M blocks (a multiple of kMr, at most kMc) that spread m's row
// tiles evenly over them: 220 rows in 2 blocks are 120 + 100, not 204 + 16.
int64_t EvenBlockRows(int64_t m, int64_t blocks) {
  const int64_t tiles = (m + kMr - 1) / kMr;
  return std::min(kMc, (tiles + blocks - 1) / blocks * kMr);
}

// Rows [i0, i0 + mrows) x panels [p0, p1), all of K. Returns false when the A buffer
// could not be allocated.
template <typename ASrc>
bool RunTask(int64_t i0, int64_t mrows, int64_t p0, int64_t p1, const ASrc& a, const PackedB& b, float* c, int64_t ldc,
             const Epilogue& ep) {
  float* abuf = ThreadABuffer();
  if (!abuf) return false;
  const int64_t K = b.k(), N = b.n();
  const bool clamp = ep.min > -INFINITY || ep.max < INFINITY || ep.kind != ActKind::kClamp;
  int64_t tile_start[kMaxTiles + 1];
  const int ntiles = TileStarts(mrows, tile_start);
  for (int64_t pc = 0; pc < K; pc += kKc) {
    const int64_t kc = std::min(kKc, K - pc);
    const bool last = pc + kc == K;
    for (int t = 0; t < ntiles; ++t)
      a.Pack(i0 + tile_start[t], tile_start[t + 1] - tile_start[t], pc, kc, abuf + t * kc * kMr);
    internal::TileEpilogue te;
    te.alpha = ep.alpha;
    te.load_c = pc > 0 || ep.accumulate;
    te.clamp = last && clamp;
    te.min = ep.min;
    te.max = ep.max;
    te.kind = ep.kind;
    te.ldr = ep.ldr;
    for (int64_t p = p0; p < p1; ++p) {
      const int cols = static_cast<int>(std::min(kPanelWidth, N - p * kPanelWidth));
      const float* bp = b.panel(p) + pc * kPanelWidth;
      // The slice after this one: the next panel's, or the first panel's of the next K block.
      const float* next = p + 1 < p1 ? b.panel(p + 1) + pc * kPanelWidth
                          : !last    ? b.panel(p0) + (pc + kc) * kPanelWidth
                                     : nullptr;
      te.bias = last && ep.bias ? ep.bias + p * kPanelWidth : nullptr;
      for (int t = 0; t < ntiles; ++t) {
        const int64_t ir = tile_start[t];
        // Only the first tile streams this slice from memory; the others find it in L1/L2.
        te.next_b = t == 0 ? next : nullptr;
        te.residual = last && ep.residual ? ep.residual + (i0 + ir) * ep.ldr + p * kPanelWidth : nullptr;
        internal::TileAvx512(static_cast<int>(tile_start[t + 1] - ir), cols, kc, abuf + t * kc * kMr, bp,
                             c + (i0 + ir) * ldc + p * kPanelWidth, ldc, te);
      }
    }
  }
  return true;
}

// The per-thread pointer table of an IndirectA tile (taps x kMr), grown on demand;
// nullptr when the allocation fails.
const float** ThreadPointerTable(int64_t entries) {
  struct Buf {
    const float** p = nullptr;
    int64_t cap = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (entries > buf.cap) {
    std::free(buf.p);
    buf.p = static_cast<const float**>(std::malloc(static_cast<size_t>(entries) * sizeof(const float*)));
    buf.cap = buf.p ? entries : 0;
  }
  return buf.p;
}

// Above this many bytes of B in a task's panels, RunIndirectTask runs panel by panel
// (each whole-K panel read once from L3/DRAM, then from L2 by every row tile) instead of
// tile by tile (B re-streamed from L3 per tile): resnet's 7x7 3x3 512->512 conv has 9.4 MB
// of B for 5 row tiles. Below it B stays in L2 across tiles and the tile-outer order keeps
// each tile's A rows in L1 across panels.
constexpr int64_t kMaxTileOuterBBytes = 512 * 1024;
// Largest whole-K panel (K = 2560) whose successor a panel-outer task prefetches while its
// tiles run: two of them and the A rows still fit the 1 MiB L2 (resnet's 14x14 3x3 convs,
// K = 2304; not the 7x7 stage's K = 4608, 576 KiB).
constexpr int64_t kMaxPrefetchPanelBytes = 320 * 1024;

// RunTask for IndirectA over the whole K (no packing, so nothing to reuse across K
// blocks): per row tile its pointer table, then the task's panels; or, past
// kMaxTileOuterBBytes of B, every tile's pointer table first and the panels outermost.
bool RunIndirectTask(int64_t i0, int64_t mrows, int64_t p0, int64_t p1, const IndirectA& a, const PackedB& b, float* c,
                     int64_t ldc, const Epilogue& ep) {
  const int64_t N = b.n(), table = a.taps * kMr;
  int64_t tile_start[kMaxTiles + 1];
  const int ntiles = TileStarts(mrows, tile_start);
  const int64_t panel_bytes = b.k() * kPanelWidth * static_cast<int64_t>(sizeof(float));
  const bool panel_outer = ntiles > 1 && (p1 - p0) * panel_bytes > kMaxTileOuterBBytes;
  const float** ptrs = ThreadPointerTable(table * (panel_outer ? ntiles : 1));
  if (!ptrs) return false;
  internal::TileEpilogue te;
  te.alpha = ep.alpha;
  te.load_c = ep.accumulate;
  te.clamp = ep.min > -INFINITY || ep.max < INFINITY || ep.kind != ActKind::kClamp;
  te.min = ep.min;
  te.max = ep.max;
  te.kind = ep.kind;
  te.ldr = ep.ldr;
  auto tile = [&](int t, int64_t p, const float** tp) {
    const int64_t row0 = i0 + tile_start[t];
    const int cols = static_cast<int>(std::min(kPanelWidth, N - p * kPanelWidth));
    te.bias = ep.bias ? ep.bias + p * kPanelWidth : nullptr;
    te.residual = ep.residual ? ep.residual + row0 * ep.ldr + p * kPanelWidth : nullptr;
    // The task's first tile reads each panel from L3/DRAM (tile-outer: the later tiles find B
    // in L2; panel-outer: the panel's later tiles do); it fetches the next panel meanwhile,
    // in panel-outer order only while two panels fit the L2 beside A.
    te.next_b =
        t == 0 && p + 1 < p1 && (!panel_outer || panel_bytes <= kMaxPrefetchPanelBytes) ? b.panel(p + 1) : nullptr;
    internal::TileIndirectAvx512(static_cast<int>(tile_start[t + 1] - tile_start[t]), cols, a.taps, a.seg, tp,
                                 b.panel(p), c + row0 * ldc + p * kPanelWidth, ldc, te);
  };
  if (panel_outer) {
    for (int t = 0; t < ntiles; ++t)
      a.rows(a.ctx, i0 + tile_start[t], tile_start[t + 1] - tile_start[t], ptrs + t * table);
    for (int64_t p = p0; p < p1; ++p)
      for (int t = 0; t < ntiles; ++t) tile(t, p, ptrs + t * table);
  } else if (p1 - p0 == 2 && p1 * kPanelWidth >= N && N > kPanelWidth) {
    // Exactly the last two panels, 33-64 columns (N = 64: resnet's stem and 56x56 stage):
    // each row tile as two halves of <= kWideRows rows across both panels.
    const int cols = static_cast<int>(N - p0 * kPanelWidth);
    for (int t = 0; t < ntiles; ++t) {
      const int64_t row0 = i0 + tile_start[t];
      const int rows = static_cast<int>(tile_start[t + 1] - tile_start[t]), upper = (rows + 1) / 2;
      a.rows(a.ctx, row0, rows, ptrs);
      for (int h = 0, r0 = 0; h < 2 && r0 < rows; ++h, r0 = upper) {
        const int hr = h == 0 ? upper : rows - upper;
        te.bias = ep.bias ? ep.bias + p0 * kPanelWidth : nullptr;
        te.residual = ep.residual ? ep.residual + (row0 + r0) * ep.ldr + p0 * kPanelWidth : nullptr;
        internal::TileIndirectWideAvx512(hr, cols, a.taps, a.seg, ptrs + r0, b.panel(p0), b.panel(p0 + 1),
                                         c + (row0 + r0) * ldc + p0 * kPanelWidth, ldc, te);
      }
    }
  } else {
    for (int t = 0; t < ntiles; ++t) {
      a.rows(a.ctx, i0 + tile_start[t], tile_start[t + 1] - tile_start[t], ptrs);
      for (int64_t p = p0; p < p1; ++p) tile(t, p, ptrs);
    }
  }
  return true;
}

// How Drive cuts a product over `threads` > 1: tasks are (M block) x (chunk of per_chunk
// panels); with several chunks, one work item runs a chunk over every M block. The M blocks split m's row tiles evenly
// (block b: tiles [b * tiles / m_blocks, (b + 1) * tiles / m_blocks)), so no block is a short remainder: 3136 rows in
// 18 blocks of 14-15 tiles, not 17 of 180 rows + 76, which left one thread 104 rows more.
struct Split {
  int64_t m_blocks, tiles, n_chunks, per_chunk;
  int64_t BlockStart(int64_t b, int64_t m) const { return std::min(m, b * tiles / m_blocks * kMr); }
  // Work items: the N chunks (each over every M block) when there are several, else the M blocks.
  int64_t Items() const { return n_chunks > 1 ? n_chunks : m_blocks; }
  // Item t's M blocks [*b0, *b1) and panels [*p0, *p1) of `panels`.
  void Item(int64_t t, int64_t panels, int64_t* b0, int64_t* b1, int64_t* p0, int64_t* p1) const {
    const bool by_n = n_chunks > 1;
    *b0 = by_n ? 0 : t;
    *b1 = by_n ? m_blocks : t + 1;
    *p0 = by_n ? t * per_chunk : 0;
    *p1 = std::min(panels, *p0 + per_chunk);
  }
};

// packs_a: whether each task packs (or gathers) its rows of A; indirect A reads them in place.
Split PlanSplit(int64_t m, int64_t panels, int64_t threads, bool packs_a) {
  const int64_t tiles = (m + kMr - 1) / kMr, min_blocks = (m + kMc - 1) / kMc;
  // N chunks: each thread streams only its part of B but packs the whole A block, which
  // pays off when B dominates (few rows) or when the packed tile is reused over many panels
  // (>= 8 per thread: N >= 512 on 2 threads). Packed A: one chunk per thread. Indirect A
  // (nothing packed twice): two per thread, so that a thread which starts late (woken from
  // sleep, preempted) hands its second chunk to the other instead of everyone waiting for it.
  const int64_t want_chunks = packs_a ? threads : 2 * threads;
  const int64_t n_chunks = std::min(panels, want_chunks), per_chunk = (panels + n_chunks - 1) / n_chunks;
  const Split by_n{min_blocks, tiles, (panels + per_chunk - 1) / per_chunk, per_chunk};
  if (tiles < 4 * threads && panels > 1) return by_n;
  // Otherwise M blocks only, so each thread packs (or gathers) only its own rows of A. The
  // block count is rounded up to a multiple of the thread count, so that every thread gets
  // the same number of blocks; past 4 per thread (the pool runs at most that many chunks per
  // thread and merges consecutive items), to a multiple of 4 * threads, so merged chunks
  // stay equal too.
  int64_t blocks = (min_blocks + threads - 1) / threads * threads;
  if (blocks > 4 * threads) blocks = (blocks + 4 * threads - 1) / (4 * threads) * (4 * threads);
  blocks = std::min(blocks, tiles);
  // Whole tiles cannot always be spread evenly (17 tiles on 2 threads: 9 and 8); past 5%
  // of idle time, wide products take the N split instead, and so do products whose A is
  // read in place (no packing to duplicate) when their busiest thread does less that way
  // (3x3 14x14 256->256 on 2 threads: 9 + 8 row tiles, or 2 x 2 + 2 x 2 panels).
  const int64_t busiest = std::min(m, (tiles + threads - 1) / threads * kMr);
  if (busiest * threads * 20 > m * 21) {
    if (panels >= 8 * threads) return by_n;
    if (!packs_a && m * ((panels + threads - 1) / threads) < busiest * panels) return by_n;
  }
  return {blocks, tiles, 1, panels};
}

// Checks shared by Gemm and GemmGathered; sets *done when nothing is left to compute.
Status CheckProduct(const char* fn, int64_t m, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
                    bool* done) {
  *done = true;
  const int64_t N = b.n(), K = b.k();
  if (m < 0) return InvalidArgument("sgemm::", fn, ": negative M=", m);
  if (m == 0 || N == 0) return Status::Ok();
  if (ldc < N) return InvalidArgument("sgemm::", fn, ": C row stride ", ldc, " is below N=", N);
  if (!c) return InvalidArgument("sgemm::", fn, ": C is null for a ", m, "x", N, " product");
  if (std::isnan(ep.min) || std::isnan(ep.max) || ep.min > ep.max)
    return InvalidArgument("sgemm::", fn, ": clamp range [", ep.min, ", ", ep.max, "] is empty");
  if (ep.residual && ep.ldr < N)
    return InvalidArgument("sgemm::", fn, ": residual row stride ", ep.ldr, " is below N=", N);
  // C holds partial sums between K blocks, so R must be separate memory.
  if (ep.residual && ep.residual == c) return InvalidArgument("sgemm::", fn, ": the residual may not alias C");
  if (K == 0) {
    EpilogueOnly(m, N, c, ldc, ep);
    return Status::Ok();
  }
  *done = false;
  return Status::Ok();
}

// The split over the pool, shared by all A sources: task(i0, rows, p0, p1) computes rows
// [i0, i0 + rows) x panels [p0, p1) and returns false when it could not get its scratch.
template <typename Task>
Status Drive(int64_t m, const PackedB& b, ThreadPool* pool, bool packs_a, const Task& task) {
  const int64_t panels = b.panels();
  const int64_t threads = pool ? pool->num_threads() : 1;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(b.n()) * static_cast<double>(b.k());
  std::atomic<bool> oom{false};
  // A product's cost (M x N x K) is not bounded by any one operand (a conv's K is its
  // kernel's size: a 512 x 512 kernel over a padded 1024 x 1024 image is 2^38 multiply-adds):
  // the run's deadline and terminate calls are checked before the tasks (every 2^20
  // multiply-adds of a thread's tasks).
  KernelStop stop;
  const int64_t work_per_row_panel = kPanelWidth * b.k();
  if (threads <= 1 || flops < kMinParallelFlops) {
    const int64_t mc = EvenBlockRows(m, (m + kMc - 1) / kMc);
    int64_t pending = 0;
    for (int64_t i0 = 0; i0 < m && !oom; i0 += mc) {
      const int64_t rows = std::min(mc, m - i0);
      if (!stop.Continue(pending, rows * panels * work_per_row_panel)) break;
      if (!task(i0, rows, int64_t{0}, panels)) oom = true;
    }
  } else {
    const Split sp = PlanSplit(m, panels, threads, packs_a);
    // With N chunks, one work item is a chunk over all M blocks: its B panels are read from
    // memory by the first block and from L2 by the others where they fit (196 x 1024 x 512 on
    // 2 threads: 512 KiB per chunk), instead of by (block, chunk) tasks that may run on the
    // other core.
    // Items go to CPUs the same way every call: a conv's M blocks then run on the CPU that
    // wrote those rows of its input in the previous layer, so they are read from that core's
    // own L2 (resnet18 at 2 threads 9.75-10.05 vs 10.0-10.16 ms median with dynamic chunks,
    // resnet50 22.9-23.1 vs 23.4-23.9; alternating processes).
    ParallelRangeByCpu(pool, sp.Items(), 1, [&](int64_t begin, int64_t end) {
      int64_t pending = 0;
      for (int64_t t = begin; t < end; ++t) {
        int64_t b0, b1, p0, pe;
        sp.Item(t, panels, &b0, &b1, &p0, &pe);
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t i0 = sp.BlockStart(b, m), rows = sp.BlockStart(b + 1, m) - i0;
          if (!stop.Continue(pending, rows * (pe - p0) * work_per_row_panel)) return;
          if (!task(i0, rows, p0, pe)) oom = true;
        }
      }
    });
  }
  if (oom) return MakeStatus(StatusCode::kOutOfMemory, "sgemm: cannot allocate the A packing buffer");
  return stop.status();
}

// The per-thread row-major tile scratch of GatheredA (kMr x kKc).
struct GatherTileTag {};
float* ThreadGatherBuffer() { return ThreadFloats<GatherTileTag>(kMr * kKc); }

// Widest K whose gathered rows are read in place (GemmGathered): the tile's kMr rows
// (48 KiB) and four whole-K B panels (512 KiB, RunIndirectTask's tile-outer bound) stay in
// L2 together.
constexpr int64_t kMaxGatheredInPlaceK = 1024;

// The per-thread row-major rows of one gathered tile read in place (kMr x kMaxGatheredInPlaceK).
struct GatherRowsTag {};
float* ThreadGatherRows() { return ThreadFloats<GatherRowsTag>(kMr * kMaxGatheredInPlaceK); }

// IndirectA rows of a gathered A: the tile's rows filled over the whole K into the thread's
// rows buffer (kKc columns per fill call, as ASource promises), one segment each. The
// pointers stay valid until the next tile's call: RunIndirectTask uses them before it
// asks for the next tile's whenever B is within kMaxTileOuterBBytes.
struct GatheredRows {
  const ASource* src;
  int64_t k;
  static void Rows(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
    const GatheredRows& g = *static_cast<const GatheredRows*>(ctx);
    float* buf = ThreadGatherRows();
    for (int64_t k0 = 0; k0 < g.k; k0 += kKc)
      g.src->fill(g.src->ctx, row0, rows, k0, std::min(kKc, g.k - k0), buf + k0, g.k);
    for (int64_t r = 0; r < rows; ++r) dst[r] = buf + r * g.k;
  }
};

}  // namespace

bool Available() {
  static const bool available = [] {
    const char* env = std::getenv("STRATA_SGEMM");
    if (env && std::strcmp(env, "0") == 0) return false;
    return plugin::CpuSupports("avx512f");
  }();
  return available;
}

bool ReadsAInPlace(const PackedB& b) {
  return b.panels() <= kMaxInPlacePanels && b.k() >= kMinInPlaceK && b.k() <= kMaxIndirectK;
}

Status Gemm(int64_t m, const float* a, int64_t lda, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
            ThreadPool* pool) {
  bool done = false;
  RETURN_IF_ERROR(CheckProduct("Gemm", m, b, c, ldc, ep, &done));
  if (done) return Status::Ok();
  const int64_t K = b.k();
  if (lda < K) return InvalidArgument("sgemm::Gemm: A row stride ", lda, " is below K=", K);
  if (!a) return InvalidArgument("sgemm::Gemm: A is null for a ", m, "x", K, " operand");
  if (!Available()) return Unsupported("sgemm::Gemm: this CPU lacks AVX-512F");
  const DirectA direct{a, lda};
  if (ReadsAInPlace(b)) {
    // Few panels reuse a packed A tile too little to repay the packing: broadcast A
    // straight from its rows (one segment of K floats per row).
    const IndirectA ia{MatrixRows, &direct, 1, K};
    return Drive(m, b, pool, false, [&](int64_t i0, int64_t rows, int64_t p0, int64_t p1) {
      return RunIndirectTask(i0, rows, p0, p1, ia, b, c, ldc, ep);
    });
  }
  return Drive(m, b, pool, true, [&](int64_t i0, int64_t rows, int64_t p0, int64_t p1) {
    return RunTask(i0, rows, p0, p1, direct, b, c, ldc, ep);
  });
}

Status GemmGathered(int64_t m, const ASource& a, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
                    ThreadPool* pool) {
  bool done = false;
  RETURN_IF_ERROR(CheckProduct("GemmGathered", m, b, c, ldc, ep, &done));
  if (done) return Status::Ok();
  if (!a.fill) return InvalidArgument("sgemm::GemmGathered: no A fill callback for a ", m, "x", b.k(), " operand");
  if (!Available()) return Unsupported("sgemm::GemmGathered: this CPU lacks AVX-512F");
  // Few panels and a short K: the tile's rows are gathered once over the whole K and read
  // in place, as Gemm reads a matrix for such B, instead of gathered, then packed per K
  // block. densenet121's 1x1 convs on normalised concatenations (N = 128), their sum per run
  // at 1 thread: 14.1-14.7 -> 13.3-13.9 ms; efficientnet_b0 at 2 threads (its
  // squeeze-excitation projections, conv_nhwc_scale.cc) 5.7-6.0 -> 5.0-5.1 ms per run.
  if (ReadsAInPlace(b) && b.k() <= kMaxGatheredInPlaceK &&
      b.panels() * b.k() * kPanelWidth * static_cast<int64_t>(sizeof(float)) <= kMaxTileOuterBBytes) {
    const GatheredRows rows{&a, b.k()};
    const IndirectA ia{GatheredRows::Rows, &rows, 1, b.k()};
    return Drive(m, b, pool, false, [&](int64_t i0, int64_t mrows, int64_t p0, int64_t p1) {
      return ThreadGatherRows() && RunIndirectTask(i0, mrows, p0, p1, ia, b, c, ldc, ep);
    });
  }
  return Drive(m, b, pool, true, [&](int64_t i0, int64_t rows, int64_t p0, int64_t p1) {
    float* scratch = ThreadGatherBuffer();
    return scratch && RunTask(i0, rows, p0, p1, GatheredA{&a, scratch}, b, c, ldc, ep);
  });
}

Status GemmIndirect(int64_t m, const IndirectA& a, const PackedB& b, float* c, int64_t ldc, const Epilogue& ep,
                    ThreadPool* pool) {
  static_assert(kIndirectRows == kMr, "pointer tables are laid out per micro-tile");
  bool done = false;
  RETURN_IF_ERROR(CheckProduct("GemmIndirect", m, b, c, ldc, ep, &done));
  if (done) return Status::Ok();
  if (!a.rows) return InvalidArgument("sgemm::GemmIndirect: no A pointer callback for a ", m, "x", b.k(), " operand");
  if (a.taps <= 0 || a.seg <= 0 || internal::MulOverflows(a.taps, a.seg) || a.taps * a.seg != b.k())
    return InvalidArgument("sgemm::GemmIndirect: ", a.taps, " segments of ", a.seg, " floats do not make K=", b.k());
  if (!Available()) return Unsupported("sgemm::GemmIndirect: this CPU lacks AVX-512F");
  return Drive(m, b, pool, false, [&](int64_t i0, int64_t rows, int64_t p0, int64_t p1) {
    return RunIndirectTask(i0, rows, p0, p1, a, b, c, ldc, ep);
  });
}

Status GemmUnpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    bool trans_b, float* c, int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  if (m < 0 || n < 0 || k < 0) return InvalidArgument("sgemm::GemmUnpacked: negative size M=", m, " N=", n, " K=", k);
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {
    // No B to pack: Gemm with an empty K x N operand checks C and applies the epilogue.
    PackedB empty;
    RETURN_IF_ERROR(PackBInto(nullptr, 0, n, 0, false, &empty));
    return Gemm(m, a, lda, empty, c, ldc, ep, pool);
  }
  thread_local PackedB scratch;
  Status st = GemmUnpacked(m, n, k, a, lda, b, ldb, trans_b, c, ldc, ep, pool, &scratch);
  if (scratch.bytes() > kMaxRetainedScratchFloats * 4) scratch = PackedB();
  return st;
}

Status GemmUnpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    bool trans_b, float* c, int64_t ldc, const Epilogue& ep, ThreadPool* pool, PackedB* scratch) {
  if (m < 0 || n < 0 || k < 0) return InvalidArgument("sgemm::GemmUnpacked: negative size M=", m, " N=", n, " K=", k);
  if (m == 0 || n == 0) return Status::Ok();
  if (!scratch) return InvalidArgument("sgemm::GemmUnpacked: no scratch");
  RETURN_IF_ERROR(PackBInto(b, k, n, ldb, trans_b, scratch));
  return Gemm(m, a, lda, *scratch, c, ldc, ep, pool);
}

void PrepareThreadScratch() {
  if (!Available()) return;
  ThreadABuffer();
  ThreadGatherBuffer();
  ThreadGatherRows();
  // A 7x7 conv's taps for one tile, or a 3x3 conv's for a whole M block (panel-outer order).
  ThreadPointerTable(std::max<int64_t>(49, 9 * kMaxTiles) * kMr);
}

}  // namespace strata::sgemm
