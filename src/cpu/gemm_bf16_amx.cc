// bf16 GEMM on Intel AMX (AMX-TILE + AMX-BF16): the tile kernel behind the bf16 GEMM
// drivers (gemm_bf16.cc) where the CPU has it. One TDPBF16PS multiplies a 16-row x
// 16-pair A tile by a 16-pair x 16-column B tile into a 16 x 16 fp32 C tile: 8192
// multiply-adds in one instruction, about 8x what vdpbf16ps does per cycle on the same
// core. The B panels PackBf16 makes are already what a B tile reads (a pair row of 32
// columns is two 64-byte tile rows side by side), so no second weight copy is needed.
//
// The file is compiled for baseline x86-64; only the code inside the target pragma uses
// AVX-512 or AMX, and it is reached only after AmxAvailable().
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "cpu/bf16_simd.h"
#include "cpu/gemm_bf16.h"
#include "cpu/simd_clamp.h"
#include "plugin/cpu_features.h"

namespace strata::bf16_internal {

namespace {

std::atomic<bool> g_amx_disabled_for_testing{false};

// Linux keeps AMX's 8 KiB tile state off until a process asks for it (the first tile
// instruction would otherwise fault with SIGILL). The permission is per process.
bool RequestAmxPermission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kXfeatureXtiledata = 18;     // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace

bool AmxAvailable() {
  if (g_amx_disabled_for_testing.load(std::memory_order_relaxed) || !Bf16GemmAvailable()) return false;
  // The environment and the CPU are read, and the tile state requested, once per process.
  static const bool ok = [] {
    if (const char* off = std::getenv("STRATA_CPU_DISABLE"))
      for (const std::string& item : plugin::SplitList(off))
        if (item == "amx_bf16" || item == "amx_tile") return false;
    return plugin::CpuSupports("amx_tile") && plugin::CpuSupports("amx_bf16") && RequestAmxPermission();
  }();
  return ok;
}

void SetAmxDisabledForTesting(bool disabled) { g_amx_disabled_for_testing.store(disabled); }

}  // namespace strata::bf16_internal

// clang-format off
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")
#endif
// clang-format on

namespace strata::bf16_internal {

namespace {

// Tiles 0-3: C (2 x 2 of 16 x 16 fp32); 4-5: A (16 rows x 16 pairs); 6-7: B (16 pairs x
// 16 columns, pair-interleaved). Every tile is 16 rows of 64 bytes.
void ConfigureTiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// Nothing to do between a tile group's steps.
struct NoSlice {
  void operator()(int64_t) const {}
};

// RT row tiles (16 rows each) x 2 column tiles of one 32-column B panel into C at out (rows
// ldo floats apart), which load_c adds to (else C starts as zeros). slice(s) runs after step
// s's products are issued (AmxRowsGemm's previous epilogue, a few rows at a time).
template <int RT, typename Slice = NoSlice>
void TileGroup(const uint32_t* a, int64_t ldp, const uint32_t* b, int64_t steps, float* out, int64_t ldo, bool load_c,
               const Slice& slice = {}) {
  const int64_t a_bytes = ldp * 4, out_bytes = ldo * 4;
  if (load_c) {
    _tile_loadd(0, out, out_bytes);
    _tile_loadd(1, out + 16, out_bytes);
    if constexpr (RT == 2) {
      _tile_loadd(2, out + 16 * ldo, out_bytes);
      _tile_loadd(3, out + 16 * ldo + 16, out_bytes);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (RT == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* bs = b + s * 16 * kBf16NR;
    _tile_loadd(6, bs, kBf16NR * 4);
    _tile_loadd(7, bs + 16, kBf16NR * 4);
    _tile_loadd(4, a + s * 16, a_bytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (RT == 2) {
      _tile_loadd(5, a + 16 * ldp + s * 16, a_bytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    slice(s);
  }
  _tile_stored(0, out, out_bytes);
  _tile_stored(1, out + 16, out_bytes);
  if constexpr (RT == 2) {
    _tile_stored(2, out + 16 * ldo, out_bytes);
    _tile_stored(3, out + 16 * ldo + 16, out_bytes);
  }
}

}  // namespace

void AmxBlock(const uint32_t* a, int64_t ldp, int64_t rows16, const uint32_t* b, int64_t b_stride, int64_t panels,
              int64_t steps, float* cs, int64_t ldcs, bool load_c) {
  ConfigureTiles();
  // Panel-outer: a panel's chunk of B (steps x 2 KiB) stays in L1 while the row tiles of A
  // stream past it from L2.
  for (int64_t p = 0; p < panels; ++p) {
    const uint32_t* bp = b + p * b_stride;
    int64_t r = 0;
    for (; r + 32 <= rows16; r += 32)
      TileGroup<2>(a + r * ldp, ldp, bp, steps, cs + r * ldcs + p * kBf16NR, ldcs, load_c);
    if (r < rows16) TileGroup<1>(a + r * ldp, ldp, bp, steps, cs + r * ldcs + p * kBf16NR, ldcs, load_c);
  }
  _tile_release();
}

namespace {

// Tiles as ConfigureTiles, but the second row of C (tiles 2-3) and A (tile 5) have r1 rows,
// the first (0-1, 4) r0: a row group of r0 + r1 < 32 rows at the end of A.
void ConfigureRowTail(int r0, int r1) {
  TileConfig cfg;
  const int rows[8] = {r0, r0, r1, r1, r0, r1, 16, 16};
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = rows[t] ? 64 : 0;  // an unused tile has neither rows nor columns
    cfg.rows[t] = static_cast<uint8_t>(rows[t]);
  }
  _tile_loadconfig(&cfg);
}

// The epilogue of a whole 32-column block (AmxRowsGemm), from cs (32 floats a row) into c:
// the bias per column (kBias) and residual (kRes) added, then the clamp (kClamp), with
// the bias in registers and no lane masks.
template <bool kBias, bool kRes, bool kClamp>
void Epilogue32(const float* cs, int64_t rows, float* c, int64_t ldc, const float* bias, const float* res, int64_t ldr,
                float min, float max) {
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if constexpr (kBias) b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + 16);
  const __m512 lo = _mm512_set1_ps(min), hi = _mm512_set1_ps(max);
  for (int64_t i = 0; i < rows; ++i) {
    __m512 v0 = _mm512_load_ps(cs + i * kBf16NR), v1 = _mm512_load_ps(cs + i * kBf16NR + 16);
    if constexpr (kBias) v0 = _mm512_add_ps(v0, b0), v1 = _mm512_add_ps(v1, b1);
    if constexpr (kRes) {
      v0 = _mm512_add_ps(v0, _mm512_loadu_ps(res + i * ldr));
      v1 = _mm512_add_ps(v1, _mm512_loadu_ps(res + i * ldr + 16));
    }
    if constexpr (kClamp) v0 = simd::Clamp(v0, lo, hi), v1 = simd::Clamp(v1, lo, hi);
    _mm512_storeu_ps(c + i * ldc, v0);
    _mm512_storeu_ps(c + i * ldc + 16, v1);
  }
}

using Epilogue32Fn = void (*)(const float*, int64_t, float*, int64_t, const float*, const float*, int64_t, float,
                              float);
// Epilogue32 for (bias, residual, clamp) as bits 2, 1, 0 of the index.
constexpr Epilogue32Fn kEpilogue32[8] = {Epilogue32<false, false, false>, Epilogue32<false, false, true>,
                                         Epilogue32<false, true, false>,  Epilogue32<false, true, true>,
                                         Epilogue32<true, false, false>,  Epilogue32<true, false, true>,
                                         Epilogue32<true, true, false>,   Epilogue32<true, true, true>};

// Fewest rows of an epilogue run between two product steps: more, shorter pieces cost
// more calls than they overlap (K = 960: two rows a step were slower than none).
constexpr int64_t kMinSliceRows = 8;

// Products of `rows` rows of A (RT = 2 above 16 rows) against one panel, into out.
template <typename Slice>
void RowGroup(int64_t rows, const uint32_t* a, int64_t ldp, const uint32_t* panel, int64_t steps, float* out,
              int64_t ldo, const Slice& slice) {
  if (rows > 16) {
    TileGroup<2>(a, ldp, panel, steps, out, ldo, false, slice);
  } else {
    TileGroup<1>(a, ldp, panel, steps, out, ldo, false, slice);
  }
}

}  // namespace

void AmxRowsGemm(const uint32_t* a, int64_t ldp, int64_t m, const PackedBf16B& b, int64_t n0, int64_t cols, float* c,
                 int64_t ldc, const Bf16Epilogue& ep, int64_t m0) {
  // The tile unit and vector code overlap only when the vector code comes in small pieces
  // between the products (the Xeon VM: a block's epilogue issued whole, before or after
  // the next block's products, cost its full time on top of them, so at K = 96-192 the
  // epilogue took about as long as the products). So each block's C goes to one of two
  // buffers, and its epilogue runs a few rows after each product step of the next block.
  // Whole 32-column blocks take Epilogue32 (bias in registers, no masks), or with nothing
  // to add or clamp go from the tiles straight into C; starting the tiles from the bias (a
  // stride-0 tile load) or the residual rows was slower than adding them.
  alignas(64) float cs[2][32 * kBf16NR];
  const int64_t steps = b.kps / 16, p0 = n0 / kBf16NR, p1 = (n0 + cols + kBf16NR - 1) / kBf16NR;
  const float inf = std::numeric_limits<float>::infinity();
  const bool clamp = ep.min != -inf || ep.max != inf;
  const bool whole_ok = !ep.accumulate && !ep.bias_per_row;
  const Epilogue32Fn epilogue = kEpilogue32[(ep.bias ? 4 : 0) | (ep.residual ? 2 : 0) | (clamp ? 1 : 0)];
  const bool direct = whole_ok && !ep.bias && !ep.residual && !clamp;
  struct Pending {
    const float* cs = nullptr;  // null: none
    int64_t rows = 0, cols = 0, r = 0, j = 0, per_step = 0;
    int64_t done = 0;  // rows whose epilogue has run
  } pending;
  // The pending block's epilogue up to row i1.
  const auto finish_rows = [&](int64_t i1) {
    const int64_t i0 = pending.done;
    i1 = std::min(i1, pending.rows);
    if (i0 >= i1) return;
    pending.done = i1;
    const int64_t r = pending.r + i0, j = pending.j;
    const float* src = pending.cs + i0 * kBf16NR;
    float* dst = c + r * ldc + j;
    if (pending.cols == kBf16NR && whole_ok) {
      epilogue(src, i1 - i0, dst, ldc, ep.bias ? ep.bias + n0 + j : nullptr,
               ep.residual ? ep.residual + (m0 + r) * ep.ldr + n0 + j : nullptr, ep.ldr, ep.min, ep.max);
    } else {
      AmxEpilogue(src, kBf16NR, i1 - i0, pending.cols, dst, ldc, ep, m0 + r, n0 + j);
    }
  };
  const auto slice = [&](int64_t) {
    if (pending.cs) finish_rows(pending.done + pending.per_step);
  };
  int buf = 0;
  // One 32-row group (rows of it; rows past them are neither loaded nor stored: a short
  // group's tiles are configured shorter) times panel p.
  const auto block = [&](int64_t r, int64_t rows, int64_t p) {
    const uint32_t* ar = a + r * ldp;
    const int64_t j = p * kBf16NR - n0, bc = std::min<int64_t>(kBf16NR, cols - j);
    const bool straight = bc == kBf16NR && direct;
    RowGroup(rows, ar, ldp, b.panel(p), steps, straight ? c + r * ldc + j : cs[buf], straight ? ldc : kBf16NR, slice);
    if (pending.cs) finish_rows(pending.rows);  // what the steps left (all of it when K = 0)
    pending = Pending{};
    if (!straight) {
      // Its epilogue in pieces of per_step rows after each step of the next block.
      const int64_t per_step = std::max<int64_t>(kMinSliceRows, (rows + steps - 1) / std::max<int64_t>(steps, 1));
      pending = Pending{cs[buf], rows, bc, r, j, per_step, 0};
      buf ^= 1;
    }
  };
  ConfigureTiles();
  // Row groups outer: a group's A stays in L1 while the panels pass. Panels outer (a
  // panel's B in L1, the groups passing) measured the same or slower (3136 rows: 1.15-1.45x).
  const int64_t full = m / 32 * 32;
  for (int64_t r = 0; r < full; r += 32)
    for (int64_t p = p0; p < p1; ++p) block(r, 32, p);
  if (full < m) {
    const int64_t rows = m - full;
    ConfigureRowTail(static_cast<int>(std::min<int64_t>(16, rows)), static_cast<int>(std::max<int64_t>(0, rows - 16)));
    for (int64_t p = p0; p < p1; ++p) block(full, rows, p);
  }
  if (pending.cs) finish_rows(pending.rows);
  _tile_release();
}

void AmxEpilogue(const float* cs, int64_t ldcs, int64_t rows, int64_t cols, float* c, int64_t ldc,
                 const Bf16Epilogue& ep, int64_t m0, int64_t n0) {
  const __m512 lo = _mm512_set1_ps(ep.min), hi = _mm512_set1_ps(ep.max);
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = cs + i * ldcs;
    float* dst = c + i * ldc;
    const float* res = ep.residual ? ep.residual + (m0 + i) * ep.ldr + n0 : nullptr;
    const __m512 row_bias = ep.bias && ep.bias_per_row ? _mm512_set1_ps(ep.bias[m0 + i]) : _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = LaneMask(cols - j);
      __m512 v = _mm512_loadu_ps(src + j);
      if (ep.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, dst + j));
      if (ep.bias) v = _mm512_add_ps(v, ep.bias_per_row ? row_bias : _mm512_maskz_loadu_ps(m, ep.bias + n0 + j));
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + j));
      v = simd::Clamp(v, lo, hi);
      _mm512_mask_storeu_ps(dst + j, m, v);
    }
  }
}

}  // namespace strata::bf16_internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
