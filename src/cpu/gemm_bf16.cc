// bf16 GEMM: CPU checks, packing, the AVX512_BF16 micro-kernel and the blocked,
// threaded driver for a run-time fp32 A times a prepacked B (see gemm_bf16.h).
// The file is compiled for baseline x86-64; only the functions inside the target
// pragma use AVX-512, and they are reached only after Bf16GemmAvailable().
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernel_stop.h"
#include "cpu/bf16_simd.h"
#include "cpu/bf16_target.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/simd_clamp.h"
#include "cpu/transformer_kernels.h"
#include "plugin/cpu_features.h"

namespace strata {

namespace {

std::atomic<bool> g_disabled_for_testing{false};

// Cache blocking. A K chunk of 192 pairs keeps one B panel chunk (24 KiB) plus one A
// tile chunk (9 KiB) in L1; blocks of 96 rows x 128 columns give 2-core machines
// enough independent items even for the M = 128 products of transformers.
constexpr int64_t kKcPairs = 192;
constexpr int64_t kMc = 96;
constexpr int64_t kNc = 128;
constexpr int64_t kMaxNc = 512;  // widest item (RunGemmBf16)
// Largest A (as pair rows) RunGemmBf16 rounds once for all its column blocks; a bigger one is
// rounded per item (a row block at a time, as it is read).
constexpr int64_t kMaxSharedPairsBytes = int64_t{4} << 20;
// On AMX an item whose A rows, packed for the whole K, take at most this many bytes runs K in
// one pass (bf16_internal::AmxRowsGemm) instead of K chunks with C in an fp32 scratch.
// strata_kernel_bench, 1 thread, min / median CPU ms of 7 alternating runs, chunks vs whole
// K: 1x1 56^2 64->256 0.53/0.57 vs 0.34/0.36, 14^2 256->1024 0.20/0.23 vs 0.14/0.20, 14^2
// 1024->256 0.16/0.18 vs 0.14/0.14, MatMul 512^3 0.45/0.64 vs 0.34/0.36, 196x256x1024 cold B
// 0.23/0.24 vs 0.19/0.21; K = 3072 (96 rows: 590 KiB) min 1.13 vs 1.20, so it keeps chunks.
constexpr int64_t kAmxWholeKBytes = 512 * 1024;

Result<std::shared_ptr<Buffer>> AllocWords(int64_t words, const char* what) {
  if (words < 0 || words > (int64_t{1} << 40)) return InvalidArgument("bf16 pack: ", what, " is too large");
  auto r = DefaultAllocator()->Allocate(static_cast<size_t>(std::max<int64_t>(words, 1)) * sizeof(uint32_t));
  if (!r.ok()) return r.status();
  std::memset(r.value()->data(), 0, static_cast<size_t>(std::max<int64_t>(words, 1)) * sizeof(uint32_t));
  return std::move(r).value();
}

inline uint32_t Pair(float lo, float hi) {
  return static_cast<uint32_t>(FloatToBf16(lo)) | (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
}

}  // namespace

bool Bf16GemmAvailable() {
  if (g_disabled_for_testing.load(std::memory_order_relaxed)) return false;
  // The environment and the CPU are read once per process: the GEMMs ask on every call
  // (through AmxAvailable), and two getenv scans per call showed in bf16 profiles.
  static const bool available = [] {
    if (const char* force = std::getenv("STRATA_FORCE_ISA")) {
      const std::string f = force;
      if (f == "avx2" || f == "scalar") return false;
    }
    if (const char* off = std::getenv("STRATA_CPU_DISABLE")) {
      for (const std::string& item : plugin::SplitList(off))
        if (item == "avx512_bf16") return false;
    }
    return plugin::CpuSupports("avx512f") && plugin::CpuSupports("avx512bw") && plugin::CpuSupports("avx512vl") &&
           plugin::CpuSupports("avx512_bf16");
  }();
  return available;
}

bool Bf16NodeSelected(const Node& node) {
  const char* list = std::getenv("STRATA_BF16_NODES");
  if (!list || !*list) return true;
  for (const std::string& item : plugin::SplitList(list))
    if (!item.empty() && node.name.compare(0, item.size(), item) == 0) return true;
  return false;
}

bool Bf16SplitRowsEnabled() {
  const char* v = std::getenv("STRATA_BF16_SPLIT");
  return !v || std::string(v) != "0";
}

void SetBf16DisabledForTesting(bool disabled) { g_disabled_for_testing.store(disabled); }

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even; overflow rounds to inf
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

Result<PackedBf16A> PackBf16A(const float* a, int64_t M, int64_t K) {
  if (M < 0 || K < 0) return InvalidArgument("bf16 pack: negative A dimensions M=", M, " K=", K);
  PackedBf16A p;
  p.M = M;
  p.K = K;
  p.kp = (K + 1) / 2;
  p.tiles = (M + kBf16MR - 1) / kBf16MR;
  ASSIGN_OR_RETURN(p.buf, AllocWords(p.tiles * p.kp * kBf16MR, "A"));
  uint32_t* dst = static_cast<uint32_t*>(p.buf->data());
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * K;
    uint32_t* tile = dst + (m / kBf16MR) * p.kp * kBf16MR + m % kBf16MR;
    for (int64_t kp = 0; kp < p.kp; ++kp) {
      float lo = row[2 * kp], hi = 2 * kp + 1 < K ? row[2 * kp + 1] : 0.0f;
      tile[kp * kBf16MR] = Pair(lo, hi);
    }
  }
  return p;
}

// ---------------------------------------------------------------------------- AVX-512
STRATA_BF16_TARGET_BEGIN

namespace {

using bf16_internal::LaneMask;
using bf16_internal::PairsFrom;

// How the micro-kernel finds A's pairs: a 12-row tile ([kpc][12]), R rows of pairs a_rs
// apart (what the GEMM drivers pack, with no transposing scatter; the pair broadcasts then
// address the rows from a few base registers), or R row pointers (indirect A, read in
// place; a_rs is the pair offset into each row).
enum class ALayout { kTile, kRows, kPointers };

// Stores a tile's rows of up to 32 columns: + C (accumulate), then with an epilogue + bias
// (per column, or the row's), + residual, clamp.
struct TileStore {
  __mmask16 m0, m1;
  const Bf16Epilogue* ep;
  __m512 cb0, cb1, lo, hi;
  TileStore(int64_t ncols, const Bf16Epilogue* ep, const float* col_bias)
      : m0(LaneMask(ncols)),
        m1(LaneMask(ncols - 16)),
        ep(ep),
        cb0(col_bias ? _mm512_maskz_loadu_ps(m0, col_bias) : _mm512_setzero_ps()),
        cb1(col_bias ? _mm512_maskz_loadu_ps(m1, col_bias + 16) : _mm512_setzero_ps()),
        lo(_mm512_set1_ps(ep ? ep->min : 0.0f)),
        hi(_mm512_set1_ps(ep ? ep->max : 0.0f)) {}
  // row_bias: this row's bias (per-row bias), or null; res: this row's residual, or null.
  void Row(__m512 v0, __m512 v1, float* cr, bool accumulate, const float* row_bias, const float* res) const {
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    if (ep) {
      __m512 bias0 = cb0, bias1 = cb1;
      if (row_bias) bias0 = bias1 = _mm512_set1_ps(*row_bias);
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
      if (res) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + 16));
      }
      v0 = simd::Activate(v0, lo, hi, ep->kind);
      v1 = simd::Activate(v1, lo, hi, ep->kind);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
};

// C tile of R rows x up to 32 columns: the K loop keeps 2R zmm accumulators in registers.
// pf: the first pf_rows pair rows of it (32 pairs, two cache lines each) are prefetched,
// one row per K step: the B chunk the block runs next (BlockAny).
template <int R, ALayout kLayout>
void Micro(const void* a_src, int64_t a_rs, const uint32_t* b, int64_t kpc, float* c, int64_t ldc, int64_t ncols,
           bool accumulate, const Bf16Epilogue* ep, const float* row_bias, const float* col_bias, const float* res,
           int64_t ldr, const uint32_t* pf, int64_t pf_rows) {
  const uint32_t* a = static_cast<const uint32_t*>(a_src);
  const uint32_t* rp[R];
  if constexpr (kLayout == ALayout::kPointers) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) rp[r] = static_cast<const uint32_t* const*>(a_src)[r] + a_rs;
  }
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kpc; ++k) {
    if (k < pf_rows) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kBf16NR), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kBf16NR + 16), _MM_HINT_T0);
    }
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + k * kBf16NR));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + k * kBf16NR + 16));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint32_t pair = kLayout == ALayout::kPointers ? rp[r][k]
                            : kLayout == ALayout::kRows   ? a[r * a_rs + k]
                                                          : a[k * kBf16MR + r];
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  const TileStore st(ncols, ep, col_bias);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    st.Row(acc0[r], acc1[r], c + r * ldc, accumulate, row_bias ? row_bias + r : nullptr, res ? res + r * ldr : nullptr);
}

// One row against np <= kRowPanels adjacent B panels (b_stride apart) at once. A lone row
// in Micro<1> is one chain of dependent vdpbf16ps per accumulator, bound by their latency
// (the batch-1 classifier of a CNN: resnet50's 1 x 2048 x 1000 took 0.18 ms, 23 GFLOP/s);
// here 2 * np independent chains share each broadcast. Each column's sums run in the same
// order as in Micro, so the results are the same.
constexpr int kRowPanels = 4;
template <ALayout kLayout>
void MicroRowPanels(const void* a_src, int64_t a_rs, const uint32_t* b, int64_t b_stride, int np, int64_t kpc, float* c,
                    int64_t ncols, bool accumulate, const Bf16Epilogue* ep, const float* row_bias,
                    const float* col_bias, const float* res) {
  const uint32_t* a = kLayout == ALayout::kPointers ? *static_cast<const uint32_t* const*>(a_src) + a_rs
                                                    : static_cast<const uint32_t*>(a_src);
  const int64_t a_step = kLayout == ALayout::kTile ? kBf16MR : 1;
  __m512 acc0[kRowPanels], acc1[kRowPanels];
#pragma GCC unroll 4
  for (int q = 0; q < kRowPanels; ++q) acc0[q] = acc1[q] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kpc; ++k) {
    const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[k * a_step])));
#pragma GCC unroll 4
    for (int q = 0; q < kRowPanels; ++q) {
      if (q >= np) break;
      const uint32_t* bq = b + q * b_stride + k * kBf16NR;
      acc0[q] = _mm512_dpbf16_ps(acc0[q], av, reinterpret_cast<__m512bh>(_mm512_loadu_si512(bq)));
      acc1[q] = _mm512_dpbf16_ps(acc1[q], av, reinterpret_cast<__m512bh>(_mm512_loadu_si512(bq + 16)));
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < kRowPanels; ++q) {
    if (q >= np) break;
    const int64_t off = q * kBf16NR;
    const TileStore st(std::min<int64_t>(kBf16NR, ncols - off), ep, col_bias ? col_bias + off : nullptr);
    st.Row(acc0[q], acc1[q], c + off, accumulate, row_bias, res ? res + off : nullptr);
  }
}

using MicroFn = void (*)(const void*, int64_t, const uint32_t*, int64_t, float*, int64_t, int64_t, bool,
                         const Bf16Epilogue*, const float*, const float*, const float*, int64_t, const uint32_t*,
                         int64_t);
template <ALayout L>
constexpr MicroFn kMicro[kBf16MR + 1] = {nullptr,      Micro<1, L>,  Micro<2, L>, Micro<3, L>, Micro<4, L>,
                                         Micro<5, L>,  Micro<6, L>,  Micro<7, L>, Micro<8, L>, Micro<9, L>,
                                         Micro<10, L>, Micro<11, L>, Micro<12, L>};

// The row tiles of a block: ceil(rows / 12) tiles, as even as possible when balanced
// (49 rows: 10+10+10+10+9), else 12 rows each and the rest last. A tile of few rows is
// bound by vdpbf16ps latency, not throughput (a 1-row tile takes about half the time of a
// 12-row one), so an even split saves up to a tile's worth per block.
struct TileSplit {
  TileSplit(int64_t rows, bool balanced)
      : rows(rows),
        tiles((rows + kBf16MR - 1) / kBf16MR),
        base(balanced && tiles > 0 ? rows / tiles : kBf16MR),
        extra(balanced && tiles > 0 ? rows % tiles : 0) {}
  int64_t start(int64_t t) const { return t * base + std::min(t, extra); }
  int64_t count(int64_t t) const { return std::min(base + (t < extra ? 1 : 0), rows - start(t)); }
  int64_t rows, tiles, base, extra;
};

// Rows of pairs in the A pack are padded to a multiple of 16 pairs: whole-vector stores.
inline int64_t RowPairs(int64_t kpc) { return (kpc + 15) / 16 * 16; }

// Per-thread buffers reused by every product a thread works on: the fp32 fill tile, the
// indirect A's row pointers and the packed A tiles of one row block. Sized on first use
// and by PrepareBf16ThreadScratch (a pool worker's start) for the usual shapes.
thread_local std::vector<float> t_fill_scratch;
thread_local std::vector<const uint32_t*> t_row_ptrs;
thread_local std::vector<uint32_t> t_apack;
thread_local std::vector<float> t_amx_c;            // AMX: an item's fp32 sums (AmxBlockItem, BlockRows)
thread_local std::vector<uint32_t> t_shared_pairs;  // a product's whole A as pair rows (RunGemmBf16)

// Zeroes what an AMX pass reads past an A pack's data: pairs [kpc, ldp) of rows [0, rows)
// and all of rows [rows, rows16).
void ZeroAmxPad(uint32_t* a, int64_t rows, int64_t rows16, int64_t kpc, int64_t ldp) {
  if (kpc < ldp)
    for (int64_t i = 0; i < rows; ++i)
      std::memset(a + i * ldp + kpc, 0, static_cast<size_t>(ldp - kpc) * sizeof(uint32_t));
  std::memset(a + rows * ldp, 0, static_cast<size_t>((rows16 - rows) * ldp) * sizeof(uint32_t));
}

// Sizes the calling thread's buffers for the largest item (kMc rows, kMaxNc columns, a K
// chunk, 49 segments) the first time it works on a product, so a thread's later, larger
// items do not grow them mid-run: a thread that first gets a small item (the calling thread
// has no PrepareBf16ThreadScratch) would otherwise allocate when it gets a big one.
void ReserveThreadScratch() {
  constexpr int64_t kMaxTiles = (kMc + kBf16MR - 1) / kBf16MR, kMaxSegs = 49;
  if (t_apack.capacity() >= static_cast<size_t>(kMaxTiles * RowPairs(kKcPairs) * kBf16MR)) return;
  t_fill_scratch.reserve(static_cast<size_t>(kBf16MR * 2 * kKcPairs));
  t_row_ptrs.reserve(static_cast<size_t>(kMaxTiles * kMaxSegs * kBf16MR));
  t_apack.reserve(static_cast<size_t>(kMaxTiles * RowPairs(kKcPairs) * kBf16MR));
  if (bf16_internal::AmxAvailable()) t_amx_c.reserve(static_cast<size_t>(kMc * kMaxNc));
}

// Rounds `rows` fp32 rows of kvalid floats (row stride lda) to bf16 pair rows ldp apart
// (pairs past the data zero); rows [rows, kBf16MR) of the tile are zeroed.
void PackRows(const float* a, int64_t lda, int64_t rows, int64_t kvalid, int64_t ldp, uint32_t* dst) {
  block_bf16::RoundRows(a, lda, rows, kvalid, dst, ldp);
  if (rows < kBf16MR) std::memset(dst + rows * ldp, 0, static_cast<size_t>((kBf16MR - rows) * ldp) * sizeof(uint32_t));
}

// Where GemmBf16* read A from: an fp32 matrix, or a gather callback.
struct ASource {
  const float* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  Bf16RowsFn fill = nullptr;
  Bf16PairRowsFn pair_fill = nullptr;  // fill and pair_fill share fill_ctx
  const void* fill_ctx = nullptr;
  const Bf16IndirectA* indirect = nullptr;
  // A already rounded to bf16 pair rows (row r at pairs + r * ldp, pairs [kp, ldp) zero):
  // a plain fp32 A that RunGemmBf16 rounded once for all its column blocks.
  const uint32_t* pairs = nullptr;
  int64_t ldp = 0;
};

// Packs rows [m0, m0 + rows) and K pairs [kp0, kp0 + kpc) of A: pair rows of RowPairs(kpc)
// words, row i of the block at dst + i * RowPairs(kpc) whatever its tile, or for trans_a
// tiles of [kpc][12] (kpc * 12 apart). Missing rows and the odd-K tail are zero.
void PackATiles(const ASource& src, int64_t K, int64_t m0, const TileSplit& split, int64_t kp0, int64_t kpc,
                uint32_t* dst) {
  const float* a = src.a;
  const int64_t lda = src.lda;
  const int64_t tiles = split.tiles;
  const int64_t kvalid = std::min<int64_t>(K - 2 * kp0, 2 * kpc), ldp = RowPairs(kpc);
  if (src.pair_fill) {
    // Already bf16: written straight into the pack. Rows past `rows` are never read (the
    // micro-kernel for a partial tile reads only its rows).
    for (int64_t t = 0; t < tiles; ++t)
      src.pair_fill(src.fill_ctx, m0 + split.start(t), split.count(t), kp0, kpc, dst + split.start(t) * ldp, ldp);
    return;
  }
  if (src.fill) {
    // One tile at a time through an fp32 scratch that stays in L1 (12 x 384 floats).
    std::vector<float>& scratch = t_fill_scratch;
    scratch.resize(static_cast<size_t>(kBf16MR * 2 * kKcPairs));
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t r = split.count(t);
      src.fill(src.fill_ctx, m0 + split.start(t), r, 2 * kp0, kvalid, scratch.data(), 2 * kKcPairs);
      PackRows(scratch.data(), 2 * kKcPairs, r, kvalid, ldp, dst + split.start(t) * ldp);
    }
    return;
  }
  if (src.trans_a) {
    std::memset(dst, 0, static_cast<size_t>(tiles * kpc * kBf16MR) * sizeof(uint32_t));
    // A is [K, M]: 12 consecutive rows of one K pair are contiguous in memory.
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t mt = m0 + split.start(t), r = split.count(t);
      const __mmask16 mask = LaneMask(r);
      uint32_t* tile = dst + t * kpc * kBf16MR;
      for (int64_t kp = 0; kp < kpc; ++kp) {
        const int64_t k = 2 * (kp0 + kp);
        __m512 lo = _mm512_maskz_loadu_ps(mask, a + k * lda + mt);
        __m512 hi = k + 1 < K ? _mm512_maskz_loadu_ps(mask, a + (k + 1) * lda + mt) : _mm512_setzero_ps();
        // Tiles are 12 wide: store 12 lanes (the next pair's slots are written after).
        _mm512_mask_storeu_epi32(tile + kp * kBf16MR, static_cast<__mmask16>(0x0FFF), PairsFrom(lo, hi));
      }
    }
    return;
  }
  // A is [M, K]: a row's consecutive floats are already (k, k+1) pairs.
  for (int64_t t = 0; t < tiles; ++t)
    PackRows(a + (m0 + split.start(t)) * lda + 2 * kp0, lda, split.count(t), kvalid, ldp, dst + split.start(t) * ldp);
}

// Block with A in any layout (see Micro): kTile and kPointers tiles a_stride uint32 (or
// pointers) apart; kRows rows a_rs apart, a tile at its first row (a_stride unused).
void BlockAny(ALayout layout, const void* a, int64_t a_stride, int64_t a_rs, const TileSplit& split, const uint32_t* b,
              int64_t b_stride, int64_t n_cols, int64_t kpc, float* c, int64_t ldc, bool accumulate,
              const Bf16Epilogue* ep, int64_t m0, int64_t n0) {
  const int64_t panels = (n_cols + kBf16NR - 1) / kBf16NR, tiles = split.tiles;
  const MicroFn* micro = layout == ALayout::kPointers ? kMicro<ALayout::kPointers>
                         : layout == ALayout::kRows   ? kMicro<ALayout::kRows>
                                                      : kMicro<ALayout::kTile>;
  const auto tile = [&](int64_t t) -> const void* {
    if (layout == ALayout::kPointers) return static_cast<const uint32_t* const*>(a) + t * a_stride;
    if (layout == ALayout::kRows) return static_cast<const uint32_t*>(a) + split.start(t) * a_rs;
    return static_cast<const uint32_t*>(a) + t * a_stride;
  };
  // Panel-outer: one B panel chunk stays in L1 while every A tile streams past it. With few
  // tiles per panel B is read nearly as fast as it is multiplied, and in a model whose
  // weights exceed the L3 (resnet50: ~50 MB of bf16) it comes from DRAM: the tiles of a
  // panel then prefetch the chunk the block runs next, spread over them, so its misses
  // overlap this panel's FMAs. After the last panel that is the next K chunk of panel 0
  // (what the drivers run next), unless this is the last K chunk (ep set). With many tiles
  // the hardware prefetcher keeps up and the extra loads only cost issue slots.
  constexpr int64_t kPrefetchMaxTiles = 6;
  // The epilogue's operands for rows from r0 and panel p.
  const auto row_bias_at = [&](int64_t r0) -> const float* {
    return ep && ep->bias && ep->bias_per_row ? ep->bias + m0 + r0 : nullptr;
  };
  const auto col_bias_at = [&](int64_t p) -> const float* {
    return ep && ep->bias && !ep->bias_per_row ? ep->bias + n0 + p * kBf16NR : nullptr;
  };
  const auto res_at = [&](int64_t r0, int64_t p) -> const float* {
    return ep && ep->residual ? ep->residual + (m0 + r0) * ep->ldr + n0 + p * kBf16NR : nullptr;
  };
  if (tiles == 1 && split.count(0) == 1 && panels > 1) {
    const auto row = layout == ALayout::kPointers ? MicroRowPanels<ALayout::kPointers>
                     : layout == ALayout::kRows   ? MicroRowPanels<ALayout::kRows>
                                                  : MicroRowPanels<ALayout::kTile>;
    const int64_t r0 = split.start(0);
    for (int64_t p = 0; p < panels; p += kRowPanels) {
      const int np = static_cast<int>(std::min<int64_t>(kRowPanels, panels - p));
      row(tile(0), a_rs, b + p * b_stride, b_stride, np, kpc, c + r0 * ldc + p * kBf16NR, n_cols - p * kBf16NR,
          accumulate, ep, row_bias_at(r0), col_bias_at(p), res_at(r0, p));
    }
    return;
  }
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t cols = std::min<int64_t>(kBf16NR, n_cols - p * kBf16NR);
    const float* col_bias = col_bias_at(p);
    const uint32_t* next = tiles > kPrefetchMaxTiles ? nullptr
                           : p + 1 < panels          ? b + (p + 1) * b_stride
                           : ep                      ? nullptr
                                                     : b + kpc * kBf16NR;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t rows = split.count(t), r0 = split.start(t);
      const float* row_bias = row_bias_at(r0);
      const float* res = res_at(r0, p);
      const int64_t pf0 = kpc * t / tiles, pf1 = next ? kpc * (t + 1) / tiles : pf0;
      micro[rows](tile(t), a_rs, b + p * b_stride, kpc, c + r0 * ldc + p * kBf16NR, ldc, cols, accumulate, ep, row_bias,
                  col_bias, res, ep ? ep->ldr : 0, next ? next + pf0 * kBf16NR : nullptr, pf1 - pf0);
    }
  }
}

}  // namespace

namespace bf16_internal {

void Block(const uint32_t* a, int64_t a_stride, int64_t m_rows, const uint32_t* b, int64_t b_stride, int64_t n_cols,
           int64_t kpc, float* c, int64_t ldc, bool accumulate, const Bf16Epilogue* ep, int64_t m0, int64_t n0) {
  BlockAny(ALayout::kTile, a, a_stride, 0, TileSplit(m_rows, /*balanced=*/false), b, b_stride, n_cols, kpc, c, ldc,
           accumulate, ep, m0, n0);
}

void PackPairs32(const float* lo, const float* hi, int n, uint32_t* dst) {
  for (int h = 0; h < 2; ++h) {
    const __mmask16 mask = LaneMask(n - 16 * h);
    __m512 vlo = _mm512_maskz_loadu_ps(mask, lo + 16 * h);
    __m512 vhi = hi ? _mm512_maskz_loadu_ps(mask, hi + 16 * h) : _mm512_setzero_ps();
    _mm512_storeu_si512(dst + 16 * h, PairsFrom(vlo, vhi));
  }
}

void BlockRows(const uint32_t* a, int64_t a_rs, int64_t m_rows, const uint32_t* b, int64_t b_stride, int64_t n_cols,
               int64_t kpc, float* c, int64_t ldc, bool accumulate, const Bf16Epilogue* ep, int64_t m0, int64_t n0) {
  if (AmxAvailable()) {
    // The chunk's rows are copied into whole 16 x 16-pair tiles (zero rows and pairs past
    // the ends), multiplied into the fp32 scratch and merged into C. B holds zero pair rows
    // up to its kps, so the step past kpc reads zeros (or, before the last chunk, rows the
    // zero pad multiplies).
    // Columns go in pieces of at most kMaxNc, so the scratch C stays within its reserve.
    ReserveThreadScratch();
    const int64_t rows16 = (m_rows + 15) / 16 * 16, ldp = RowPairs(kpc);
    std::vector<uint32_t>& apack = t_apack;
    apack.resize(static_cast<size_t>(rows16 * ldp));
    for (int64_t i = 0; i < m_rows; ++i)
      std::memcpy(apack.data() + i * ldp, a + i * a_rs, static_cast<size_t>(kpc) * sizeof(uint32_t));
    ZeroAmxPad(apack.data(), m_rows, rows16, kpc, ldp);
    Bf16Epilogue merge = ep ? *ep : Bf16Epilogue{};
    merge.accumulate = accumulate;
    std::vector<float>& cs = t_amx_c;
    for (int64_t j0 = 0; j0 < n_cols; j0 += kMaxNc) {
      const int64_t cols = std::min(kMaxNc, n_cols - j0), panels = (cols + kBf16NR - 1) / kBf16NR;
      cs.resize(static_cast<size_t>(rows16 * panels * kBf16NR));
      AmxBlock(apack.data(), ldp, rows16, b + j0 / kBf16NR * b_stride, b_stride, panels, ldp / 16, cs.data(),
               panels * kBf16NR, false);
      AmxEpilogue(cs.data(), panels * kBf16NR, m_rows, cols, c + j0, ldc, merge, m0, n0 + j0);
    }
    return;
  }
  // Balanced: a 7x7 map's 49 rows as 10+10+10+10+9, not 4 x 12 and a latency-bound 1-row
  // tile (mobilenet_v2 bf16 without AMX: Micro<1> was 4% of a run). Each row's sums run
  // in the same order whatever its tile, so the split does not change the results.
  BlockAny(ALayout::kRows, a, /*a_stride=*/0, a_rs, TileSplit(m_rows, /*balanced=*/true), b, b_stride, n_cols, kpc, c,
           ldc, accumulate, ep, m0, n0);
}

void PairRowsProduct(const uint32_t* a, int64_t ldp, int64_t m, const PackedBf16B& b, int64_t n0, int64_t cols,
                     float* c, int64_t ldc, const Bf16Epilogue& ep, int64_t m0) {
  if (ldp % 16 == 0 && ldp >= b.kps && AmxAvailable()) {
    AmxRowsGemm(a, ldp, m, b, n0, cols, c, ldc, ep, m0);
    return;
  }
  // Row blocks of even size (196 rows: 66 + 65 + 65, not 96 + 96 + 4), so no block ends
  // in a tile of a few rows.
  const int64_t blocks = (m + kMc - 1) / kMc;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t r0 = m * i / blocks, rows = m * (i + 1) / blocks - r0;
    for (int64_t kp0 = 0; kp0 < b.kp; kp0 += kKcPairs) {
      const int64_t kpc = std::min(kKcPairs, b.kp - kp0);
      const bool last = kp0 + kpc == b.kp;
      BlockRows(a + r0 * ldp + kp0, ldp, rows, b.panel(n0 / kBf16NR) + kp0 * kBf16NR, b.panel_stride(), cols, kpc,
                c + r0 * ldc, ldc, kp0 > 0 || ep.accumulate, last ? &ep : nullptr, m0 + r0, n0);
    }
  }
}

}  // namespace bf16_internal

namespace {

// The indirect A's row pointers of an item, made once per item: [tile][segment][12 rows]
// in the calling thread's buffer.
const std::vector<const uint32_t*>& RowPointers(const Bf16IndirectA& ia, int64_t m0, const TileSplit& split) {
  const int64_t per_tile = ia.segs * kBf16MR;
  std::vector<const uint32_t*>& ptrs = t_row_ptrs;
  ptrs.resize(static_cast<size_t>(split.tiles * per_tile));
  for (int64_t t = 0; t < split.tiles; ++t)
    ia.rows(ia.ctx, m0 + split.start(t), split.count(t), ptrs.data() + t * per_tile);
  return ptrs;
}

// One item with an indirect A: the row pointers of each tile are made once, then K runs
// segment by segment (a segment longer than kKcPairs in kKcPairs pieces).
void IndirectBlockItem(const Bf16IndirectA& ia, const PackedBf16B& b, float* c, int64_t ldc, const Bf16Epilogue& ep,
                       int64_t m0, int64_t n0, const TileSplit& split, int64_t cols) {
  const int64_t per_tile = ia.segs * kBf16MR;
  const std::vector<const uint32_t*>& ptrs = RowPointers(ia, m0, split);
  for (int64_t s = 0; s < ia.segs; ++s)
    for (int64_t q0 = 0; q0 < ia.seg_pairs; q0 += kKcPairs) {
      const int64_t qc = std::min(kKcPairs, ia.seg_pairs - q0);
      const bool first = s == 0 && q0 == 0, last = s + 1 == ia.segs && q0 + qc == ia.seg_pairs;
      BlockAny(ALayout::kPointers, ptrs.data() + s * kBf16MR, per_tile, q0, split,
               b.panel(n0 / kBf16NR) + (s * ia.seg_pairs + q0) * kBf16NR, b.panel_stride(), cols, qc, c + m0 * ldc + n0,
               ldc, !first || ep.accumulate, last ? &ep : nullptr, m0, n0);
    }
}

// One item with A packed per K chunk (fp32 A rounded, or gathered rows).
void PackedBlockItem(int64_t K, const ASource& src, const PackedBf16B& b, float* c, int64_t ldc, const Bf16Epilogue& ep,
                     int64_t m0, int64_t n0, const TileSplit& split, int64_t cols) {
  std::vector<uint32_t>& apack = t_apack;
  apack.resize(static_cast<size_t>(split.tiles * RowPairs(kKcPairs) * kBf16MR));
  for (int64_t kp0 = 0; kp0 < b.kp; kp0 += kKcPairs) {
    const int64_t kpc = std::min(kKcPairs, b.kp - kp0);
    PackATiles(src, K, m0, split, kp0, kpc, apack.data());
    const bool last = kp0 + kpc == b.kp;
    // trans_a packs [kpc][12] tiles; the other sources pair rows.
    const int64_t a_rs = src.trans_a && !src.fill && !src.pair_fill ? 0 : RowPairs(kpc);
    BlockAny(a_rs ? ALayout::kRows : ALayout::kTile, apack.data(), a_rs ? 0 : kpc * kBf16MR, a_rs, split,
             b.panel(n0 / kBf16NR) + kp0 * kBf16NR, b.panel_stride(), cols, kpc, c + m0 * ldc + n0, ldc,
             kp0 > 0 || ep.accumulate, last ? &ep : nullptr, m0, n0);
  }
}

// Whether the items of this product run on AMX tiles (decided once per product, so its sums
// do not change with the blocking or thread count). An indirect A must come in whole 16-pair
// steps (AmxTakesSegments); a transposed fp32 A packs [kpc][12] tiles, which AMX does not read.
bool AmxItems(const ASource& src) {
  if (!bf16_internal::AmxAvailable()) return false;
  if (src.indirect) return bf16_internal::AmxTakesSegments(src.indirect->seg_pairs);
  return !(src.trans_a && !src.fill && !src.pair_fill);
}

// An item on AMX tiles: per K chunk, A is packed into rows of pairs (zero-padded to whole
// 16-row, 16-pair tiles) and multiplied into an fp32 scratch C, which takes the epilogue
// after the last chunk.
void AmxBlockItem(int64_t K, const ASource& src, const PackedBf16B& b, float* c, int64_t ldc, const Bf16Epilogue& ep,
                  int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
  const int64_t rows16 = (rows + 15) / 16 * 16, panels = (cols + kBf16NR - 1) / kBf16NR, ldcs = panels * kBf16NR;
  const TileSplit split(rows, /*balanced=*/false);  // tile t is rows [12t, 12t + 12): one row stride
  std::vector<uint32_t>& apack = t_apack;
  if (const int64_t ldp = RowPairs(b.kp);
      !src.indirect && !src.fill && rows16 * ldp * static_cast<int64_t>(sizeof(uint32_t)) <= kAmxWholeKBytes) {
    // The whole K at once: the tiles sum it without C round trips, and the epilogue goes
    // straight from an L1 scratch into C (the fp32 fill's scratch holds one K chunk only).
    // Rows past `rows` are never loaded (AmxRowsGemm configures shorter tiles), so only the
    // pad pairs of a pair source need zeros.
    apack.resize(static_cast<size_t>(std::max(rows16, split.tiles * kBf16MR) * ldp));
    PackATiles(src, K, m0, split, 0, b.kp, apack.data());
    if (src.pair_fill) ZeroAmxPad(apack.data(), rows, rows, b.kp, ldp);
    bf16_internal::AmxRowsGemm(apack.data(), ldp, rows, b, n0, cols, c + m0 * ldc + n0, ldc, ep, m0);
    return;
  }
  apack.resize(static_cast<size_t>(std::max(rows16, split.tiles * kBf16MR) * RowPairs(kKcPairs)));
  std::vector<float>& cs = t_amx_c;
  cs.resize(static_cast<size_t>(rows16 * ldcs));
  const uint32_t* b0 = b.panel(n0 / kBf16NR);
  bool first = true;
  if (src.indirect) {
    const Bf16IndirectA& ia = *src.indirect;
    const int64_t per_tile = ia.segs * kBf16MR;
    const std::vector<const uint32_t*>& ptrs = RowPointers(ia, m0, split);
    for (int64_t s = 0; s < ia.segs; ++s)
      for (int64_t q0 = 0; q0 < ia.seg_pairs; q0 += kKcPairs) {
        const int64_t qc = std::min(kKcPairs, ia.seg_pairs - q0);  // a multiple of 16 (AmxItems)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(apack.data() + i * qc, ptrs[(i / kBf16MR) * per_tile + s * kBf16MR + i % kBf16MR] + q0,
                      static_cast<size_t>(qc) * sizeof(uint32_t));
        ZeroAmxPad(apack.data(), rows, rows16, qc, qc);
        bf16_internal::AmxBlock(apack.data(), qc, rows16, b0 + (s * ia.seg_pairs + q0) * kBf16NR, b.panel_stride(),
                                panels, qc / 16, cs.data(), ldcs, !first);
        first = false;
      }
  } else {
    for (int64_t kp0 = 0; kp0 < b.kp; kp0 += kKcPairs) {
      const int64_t kpc = std::min(kKcPairs, b.kp - kp0), ldp = RowPairs(kpc);
      PackATiles(src, K, m0, split, kp0, kpc, apack.data());
      // A pair source need not write pairs past kpc; the fp32 sources wrote zero pairs.
      ZeroAmxPad(apack.data(), rows, rows16, src.pair_fill ? kpc : ldp, ldp);
      // B holds zero pair rows up to kps (a multiple of 16), so the last chunk's step past
      // kp reads zeros.
      bf16_internal::AmxBlock(apack.data(), ldp, rows16, b0 + kp0 * kBf16NR, b.panel_stride(), panels, ldp / 16,
                              cs.data(), ldcs, !first);
      first = false;
    }
  }
  bf16_internal::AmxEpilogue(cs.data(), ldcs, rows, cols, c + m0 * ldc + n0, ldc, ep, m0, n0);
}

// Rows [m0, m0 + rows) (rows <= kMc) x columns [n0, n0 + nc) of C.
void GemmBlockItem(int64_t N, int64_t K, const ASource& src, bool amx, const PackedBf16B& b, float* c, int64_t ldc,
                   const Bf16Epilogue& ep, int64_t m0, int64_t rows, int64_t n0, int64_t nc) {
  const int64_t cols = std::min(nc, N - n0);
  const TileSplit split(rows, /*balanced=*/true);
  ReserveThreadScratch();
  if (src.pairs) {
    // ldp = b.kps, so on AMX the tiles read the rows in place.
    bf16_internal::PairRowsProduct(src.pairs + m0 * src.ldp, src.ldp, rows, b, n0, cols, c + m0 * ldc + n0, ldc, ep,
                                   m0);
  } else if (amx) {
    AmxBlockItem(K, src, b, c, ldc, ep, m0, rows, n0, cols);
  } else if (src.indirect) {
    IndirectBlockItem(*src.indirect, b, c, ldc, ep, m0, n0, split, cols);
  } else {
    PackedBlockItem(K, src, b, c, ldc, ep, m0, n0, split, cols);
  }
  // GELU while the block is still in L2.
  if (ep.gelu != Bf16Epilogue::Gelu::kNone)
    for (int64_t i = 0; i < rows; ++i)
      cpu::GeluInPlace(c + (m0 + i) * ldc + n0, cols, ep.gelu == Bf16Epilogue::Gelu::kTanh);
}

}  // namespace

STRATA_BF16_TARGET_END
// ---------------------------------------------------------------------------- driver

namespace {

// How the items of a product are run: mb row blocks x nb column blocks, in `groups` pool
// chunks of equal item counts.
struct BlockPlan {
  int64_t mb, items, groups;
};

// The pool hands out chunks of items dynamically; when the items do not divide evenly
// between the threads, one thread finishes a whole item (or a chunk of them) after the
// other. resnet18's 56x56 convs had 33 items of 96 rows, which the pool (at most 4 chunks
// per thread) ran as chunks of 5,5,5,5,5,5,3: one thread did 18 items, the other 15, so
// 2 threads were at most 1.83x faster than 1. Here the row blocks are made a little
// smaller until the items split into `groups` equal groups, `groups` a multiple of the
// thread count (up to 4 per thread, so a thread delayed by the scheduler still leaves work
// for the others): 33 -> 40 blocks of 78-79 rows in 8 groups of 5.
BlockPlan PlanBlocks(int64_t M, int64_t mb, int64_t nb, int64_t threads) {
  if (threads <= 1) return {mb, mb * nb, 1};
  const int64_t max_groups = 4 * threads;
  for (int64_t cand = mb; cand < mb + max_groups; ++cand) {
    if (M / cand < kBf16MR) break;  // blocks under one tile: not worth it
    const int64_t items = cand * nb;
    const int64_t groups = items >= max_groups ? max_groups : items / threads * threads;
    if (groups > 0 && items % groups == 0) return {cand, items, groups};
  }
  return {mb, mb * nb, std::min(mb * nb, max_groups)};
}

Status RunGemmBf16(const Node& node, int64_t M, const ASource& src, const PackedBf16B& b, float* c, int64_t ldc,
                   const Bf16Epilogue& ep, ThreadPool* pool) {
  const int64_t N = b.N, K = b.K;
  if (!Bf16GemmAvailable())
    return Unsupported(node.Describe(), ": bf16 GEMM needs a CPU with avx512_bf16 (or it was disabled)");
  if (M < 0) return InvalidArgument(node.Describe(), ": bf16 GEMM: negative M=", M);
  if (src.indirect && 2 * src.indirect->segs * src.indirect->seg_pairs != K)
    return InvalidArgument(node.Describe(), ": bf16 GEMM: indirect A has ", src.indirect->segs, " segments of ",
                           src.indirect->seg_pairs, " pairs, but B has K=", K);
  if (ldc < N || (!src.fill && !src.pair_fill && !src.indirect && src.lda < (src.trans_a ? M : K)) ||
      (ep.residual && ep.ldr < N))
    return InvalidArgument(node.Describe(), ": bf16 GEMM: row strides lda=", src.lda, " ldc=", ldc, " ldr=", ep.ldr,
                           " too small for M=", M, " N=", N, " K=", K);
  // C holds partial sums between K blocks, so R must be separate memory (accumulate instead).
  if (ep.residual && ep.residual == c)
    return InvalidArgument(node.Describe(), ": bf16 GEMM: the residual may not alias C (use accumulate)");
  if (M == 0 || N == 0) return Status::Ok();
  if (K == 0) {
    // Empty sum: the output is the epilogue applied to zero (or to C when accumulating).
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        float v = (ep.accumulate ? c[m * ldc + n] : 0.0f) + (ep.bias ? ep.bias[ep.bias_per_row ? m : n] : 0.0f);
        if (ep.residual) v += ep.residual[m * ep.ldr + n];
        c[m * ldc + n] = std::min(std::max(v, ep.min), ep.max);
      }
      if (ep.gelu != Bf16Epilogue::Gelu::kNone) cpu::GeluInPlace(c + m * ldc, N, ep.gelu == Bf16Epilogue::Gelu::kTanh);
    }
    return Status::Ok();
  }
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t mb = (M + kMc - 1) / kMc;
  // An item spans as many columns as it can (up to 512: B's K chunk for them, 384 KiB,
  // still fits in L2), so each A block is gathered and rounded once per 512 columns, not
  // once per 128; columns are split finer only to give every thread about 4 items (1x1
  // 14x14 256->1024 at 1 thread used to round its A 8 times).
  int64_t nc = std::min<int64_t>((N + kBf16NR - 1) / kBf16NR * kBf16NR, kMaxNc);
  while (threads > 1 && nc > kNc && mb * ((N + nc - 1) / nc) < 4 * threads)
    nc = std::max<int64_t>(kNc, nc / 2 / kBf16NR * kBf16NR);
  const int64_t nb = (N + nc - 1) / nc;
  const bool parallel = threads > 1 && mb * nb > 1 && M * N * K > (int64_t{1} << 17);
  const BlockPlan plan = PlanBlocks(M, mb, nb, parallel ? threads : 1);
  // Row block i is rows [M*i/mb, M*(i+1)/mb): all blocks within one row of each other, so
  // no short last block (3136 rows: 33 x 95-96, not 32 x 96 + 64; 196: 98 + 98, not
  // 96 + 96 + 4, whose 4-row tile is latency-bound).
  const bool amx = AmxItems(src);
  // A plain fp32 A that several column blocks read is rounded to bf16 pair rows once, over
  // the pool, and every item reads its rows in place; item by item it was rounded once per
  // column block (BERT's 128 x 3072 FFN input for 768 columns: 6 times at 2 threads). The
  // rows live in the calling thread's buffer, kept for its next products.
  ASource item_src = src;
  const int64_t ldp = RowPairs(b.kp);
  if (src.a && !src.trans_a && nb > 1 && M * ldp * static_cast<int64_t>(sizeof(uint32_t)) <= kMaxSharedPairsBytes) {
    std::vector<uint32_t>& shared = t_shared_pairs;
    shared.resize(static_cast<size_t>(M * ldp));
    const auto round = [&](int64_t r0, int64_t r1) {
      block_bf16::RoundRows(src.a + r0 * src.lda, src.lda, r1 - r0, K, shared.data() + r0 * ldp, ldp);
    };
    if (parallel) {
      pool->Run(threads, 1, [&](int64_t t0, int64_t t1) { round(M * t0 / threads, M * t1 / threads); });
    } else {
      round(0, M);
    }
    item_src.pairs = shared.data();
    item_src.ldp = ldp;
  }
  // A product's cost is not bounded by any one operand (a conv's K is its kernel's size):
  // the run's deadline and terminate calls are checked between items.
  KernelStop stop(node);
  const int64_t item_work = (M / plan.mb + 1) * nc * K;
  const auto item_range = [&](int64_t begin, int64_t end) {
    int64_t pending = 0;
    for (int64_t item = begin; item < end; ++item) {
      if (!stop.Continue(pending, item_work)) return;
      const int64_t ib = item / nb, m0 = M * ib / plan.mb;
      GemmBlockItem(N, K, item_src, amx, b, c, ldc, ep, m0, M * (ib + 1) / plan.mb - m0, (item % nb) * nc, nc);
    }
  };
  if (parallel) {
    // One pool chunk per group of items, groups of equal size.
    pool->Run(plan.groups, 1, [&](int64_t gb, int64_t ge) {
      item_range(plan.items * gb / plan.groups, plan.items * ge / plan.groups);
    });
  } else {
    item_range(0, plan.items);
  }
  return stop.status();
}

}  // namespace

Status GemmBf16(const Node& node, int64_t M, const float* a, int64_t lda, bool trans_a, const PackedBf16B& b, float* c,
                int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool) {
  ASource src;
  src.a = a;
  src.lda = lda;
  src.trans_a = trans_a;
  return RunGemmBf16(node, M, src, b, c, ldc, ep, pool);
}

Status GemmBf16Gathered(const Node& node, int64_t M, Bf16RowsFn fill, const void* fill_ctx, const PackedBf16B& b,
                        float* c, int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool) {
  if (!fill) return InvalidArgument(node.Describe(), ": bf16 GEMM: no A source");
  ASource src;
  src.fill = fill;
  src.fill_ctx = fill_ctx;
  return RunGemmBf16(node, M, src, b, c, ldc, ep, pool);
}

Status GemmBf16GatheredPairs(const Node& node, int64_t M, Bf16PairRowsFn fill, const void* fill_ctx,
                             const PackedBf16B& b, float* c, int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool) {
  if (!fill) return InvalidArgument(node.Describe(), ": bf16 GEMM: no A source");
  ASource src;
  src.pair_fill = fill;
  src.fill_ctx = fill_ctx;
  return RunGemmBf16(node, M, src, b, c, ldc, ep, pool);
}

Status GemmBf16Indirect(const Node& node, int64_t M, const Bf16IndirectA& a, const PackedBf16B& b, float* c,
                        int64_t ldc, const Bf16Epilogue& ep, ThreadPool* pool) {
  if (!a.rows || a.segs <= 0 || a.seg_pairs <= 0)
    return InvalidArgument(node.Describe(), ": bf16 GEMM: indirect A without rows or segments");
  ASource src;
  src.indirect = &a;
  return RunGemmBf16(node, M, src, b, c, ldc, ep, pool);
}

void PrepareBf16ThreadScratch() {
  if (Bf16GemmAvailable()) ReserveThreadScratch();
}

}  // namespace strata
