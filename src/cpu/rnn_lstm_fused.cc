// Fused AVX-512 LSTM direction; see rnn_lstm_fused.h for the weight layout.
//
// Threading of the recurrent steps: the panels of a step are cut into a few chunks, and
// each participant (the caller plus the pool workers that join) owns a fixed, contiguous
// run of them, so from step to step every thread reads the same part of R and keeps it in
// its own L2 (half of R at hidden 256 is 512 KiB: it fits, the whole 1 MiB does not). A
// step's chunks are claimed from one atomic word, owner first; a participant that is done
// with its own chunks takes any chunk still unclaimed (its owner is late or preempted),
// so no one waits for a particular thread and the caller alone can always finish the
// sequence. Whoever completes the last chunk of a step publishes the next step, with its
// own chunk of it already claimed.
#include "cpu/rnn_lstm_fused.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/rnn_simd_avx512.h"
#include "cpu/simd_clamp.h"
#include "cpu/xnnpack_util.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata {
namespace lstm_fused {
namespace {

using rnn_simd::Sigmoid512;
using rnn_simd::Tanh512;
constexpr int64_t P = kGemvPanel;

struct GateArgs {
  const float* peep = nullptr;  // [Pi, Po, Pf] of this direction, or null
  int64_t hidden = 0;
  float clip = 0;
  bool input_forget = false;
};

// One panel of one batch row for one step: gates = xw + h_prev . R_panel, then the cell
// update for the panel's units. c is updated in place; h_next and y (if any) get h.
__attribute__((target("avx512f"))) void StepPanel(const float* h_prev, const float* rp, int64_t H, const float* xw,
                                                  float* c, float* h_next, float* y, int64_t units, const GateArgs& ga,
                                                  int64_t u0) {
  __m512 e[4], o[4];
  for (int j = 0; j < 4; ++j) {
    e[j] = _mm512_load_ps(xw + 16 * j);
    o[j] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 2 <= H; k += 2) {
    const __m512 a0 = _mm512_set1_ps(h_prev[k]), a1 = _mm512_set1_ps(h_prev[k + 1]);
    const float* pk = rp + k * P;
    for (int j = 0; j < 4; ++j) e[j] = _mm512_fmadd_ps(a0, _mm512_load_ps(pk + 16 * j), e[j]);
    for (int j = 0; j < 4; ++j) o[j] = _mm512_fmadd_ps(a1, _mm512_load_ps(pk + P + 16 * j), o[j]);
  }
  if (k < H) {
    const __m512 a0 = _mm512_set1_ps(h_prev[k]);
    for (int j = 0; j < 4; ++j) e[j] = _mm512_fmadd_ps(a0, _mm512_load_ps(rp + k * P + 16 * j), e[j]);
  }
  const __mmask16 m = units >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << units) - 1);
  __m512 gi = _mm512_add_ps(e[0], o[0]), go = _mm512_add_ps(e[1], o[1]);
  __m512 gf = _mm512_add_ps(e[2], o[2]);
  const __m512 gc = _mm512_add_ps(e[3], o[3]);
  const __m512 cp = _mm512_maskz_loadu_ps(m, c);
  if (ga.peep) {
    gi = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ga.peep + u0), cp, gi);
    gf = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ga.peep + 2 * ga.hidden + u0), cp, gf);
  }
  const bool clip = ga.clip > 0;
  const __m512 hi = _mm512_set1_ps(ga.clip), lo = _mm512_set1_ps(-ga.clip);
  auto clipv = [&](__m512 v) __attribute__((target("avx512f"))) { return clip ? simd::Clamp(v, lo, hi) : v; };
  const __m512 ig = Sigmoid512(clipv(gi));
  const __m512 fg = ga.input_forget ? _mm512_sub_ps(_mm512_set1_ps(1.0f), ig) : Sigmoid512(clipv(gf));
  const __m512 cg = Tanh512(clipv(gc));
  const __m512 cn = _mm512_fmadd_ps(fg, cp, _mm512_mul_ps(ig, cg));
  if (ga.peep) go = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ga.peep + ga.hidden + u0), cn, go);
  const __m512 hn = _mm512_mul_ps(Sigmoid512(clipv(go)), Tanh512(cn));
  _mm512_mask_storeu_ps(c, m, cn);
  _mm512_mask_storeu_ps(h_next, m, hn);
  if (y) _mm512_mask_storeu_ps(y, m, hn);
}

// Shared state of one direction's recurrent loop.
struct Loop {
  const rnn::Inputs* in = nullptr;
  int64_t layout = 0, d = 0, steps = 0, panels = 0, hp = 0;  // hp: padded hidden (row stride of h/c)
  bool reverse = false;
  const GemvWeights* r = nullptr;
  const float* xw = nullptr;  // [T*B rows in X order][panels * P]
  float* h = nullptr;         // [2][B][hp], double-buffered by step parity
  float* c = nullptr;         // [B][hp]
  float* y = nullptr;
  GateArgs ga;
  int64_t parts = 1, chunks = 1;  // participants; chunks per step (<= kMaxChunks)
  // Checked by whoever publishes a step: the publications are ordered by `state`, so
  // `pending` needs no atomics. A stop publishes step `steps`, which ends every participant.
  KernelStop* stop = nullptr;
  int64_t step_work = 0, pending = 0;
  // state: step (32 bits) | claimed chunks (bit mask, 16) | completed chunks (count, 16).
  alignas(64) std::atomic<uint64_t> state{0};
};

constexpr int64_t kMaxChunks = 16;
// Chunks each participant owns per step. Two let a fast thread take over half of a slow
// one's share: with 3 threads on 2 CPUs one chunk each ran the benchmark LSTM ~25% slower.
// But each claim and completion moves the state line between cores, and at hidden 256 a
// step is only ~4 us: two participants (the common 2-thread session) own one chunk each,
// ~2-3% faster on the 2-vCPU Zen 5 VM. A late owner's whole chunk is still taken over if
// unclaimed.
int64_t ChunksPerPart(int64_t parts) { return parts == 2 ? 1 : 2; }

uint64_t PackState(uint64_t step, uint64_t claimed, uint64_t done) { return (step << 32) | (claimed << 16) | done; }

void RunPanel(const Loop& L, int64_t s, int64_t p) {
  const rnn::Inputs& in = *L.in;
  const int64_t t = L.reverse ? in.seq - 1 - s : s;
  const int64_t H = in.hidden, B = in.batch;
  const float* hprev = L.h + (s & 1) * B * L.hp;
  float* hnext = L.h + ((s + 1) & 1) * B * L.hp;
  const int64_t u0 = p * kUnits, units = std::min(kUnits, H - u0);
  for (int64_t b = 0; b < B; ++b) {
    if (t >= in.lens[b]) {  // padding: the state carries over, Y stays zero
      std::memcpy(hnext + b * L.hp + u0, hprev + b * L.hp + u0, units * sizeof(float));
      continue;
    }
    const float* xw = L.xw + rnn::XRow(t, b, in, L.layout) * L.panels * P + p * P;
    float* y = L.y ? L.y + rnn::YOffset(t, L.d, b, in, L.layout) + u0 : nullptr;
    StepPanel(hprev + b * L.hp, L.r->panel(p), H, xw, L.c + b * L.hp + u0, hnext + b * L.hp + u0, y, units, L.ga, u0);
  }
}

int64_t ChunkOwner(const Loop& L, int64_t chunk) { return chunk * L.parts / L.chunks; }

// Chunk to claim next in `claimed` (a mask), or -1: participant `me`'s own chunks first,
// then other owners' chunks from the end of the step backwards (a late owner starts at
// the front of its run, so the two rarely collide).
int64_t PickChunk(const Loop& L, int64_t me, uint64_t claimed) {
  for (int64_t k = 0; k < L.chunks; ++k)
    if (!(claimed >> k & 1) && ChunkOwner(L, k) == me) return k;
  for (int64_t k = L.chunks - 1; k >= 0; --k)
    if (!(claimed >> k & 1)) return k;
  return -1;
}

// One participant of the recurrent loop.
void Participate(Loop& L, int64_t me) {
  const uint64_t all = (uint64_t{1} << L.chunks) - 1;
  int spins = 0;
  // The chunk of step `held_step` this participant claimed when it published that step, or -1.
  int64_t held = -1, held_step = 0;
  for (;;) {
    int64_t s = 0, k = 0;
    if (held >= 0) {
      s = held_step;
      k = held;
      held = -1;
    } else {
      uint64_t st = L.state.load(std::memory_order_acquire);
      s = static_cast<int64_t>(st >> 32);
      if (s >= L.steps) return;
      const uint64_t claimed = (st >> 16) & 0xFFFF;
      if (claimed == all) {  // every chunk of this step is taken: wait for the step to complete
        _mm_pause();
        if (++spins % 2048 == 0) sched_yield();  // a chunk holder was preempted
        continue;
      }
      k = PickChunk(L, me, claimed);
      if (!L.state.compare_exchange_weak(st, st | (uint64_t{1} << (16 + k)), std::memory_order_acquire,
                                         std::memory_order_relaxed))
        continue;
    }
    spins = 0;
    const int64_t p0 = k * L.panels / L.chunks, p1 = (k + 1) * L.panels / L.chunks;
    for (int64_t p = p0; p < p1; ++p) RunPanel(L, s, p);
    // Release: this chunk's h, c and Y are published with the count. The last completion
    // has seen every other one (acquire), so all of step s is visible to step s + 1.
    const uint64_t prev = L.state.fetch_add(1, std::memory_order_acq_rel);
    if (static_cast<int64_t>(prev & 0xFFFF) + 1 == L.chunks) {
      // The publisher claims its own first chunk of the next step in the same store: one
      // fewer round trip of the state line on the step's critical path.
      uint64_t mine = 0;
      if (L.stop && !L.stop->Continue(L.pending, L.step_work)) {
        L.state.store(PackState(static_cast<uint64_t>(L.steps), 0, 0), std::memory_order_release);
        return;
      }
      if (s + 1 < L.steps) {
        held = PickChunk(L, me, 0);
        held_step = s + 1;
        mine = uint64_t{1} << held;
      }
      L.state.store(PackState(static_cast<uint64_t>(s + 1), mine, 0), std::memory_order_release);
    }
  }
}

// Single-threaded recurrence: no state word, no atomics at all. The panel order
// alternates between steps: R is about the size of L2 at hidden 256 (1 MiB), which a
// cyclic sweep would miss on every line under LRU, whereas a sweep that turns around
// starts on the panels the previous step read last, still cached.
void RunSerial(Loop& L) {
  for (int64_t s = 0; s < L.steps; ++s) {
    if (L.stop && !L.stop->Continue(L.pending, L.step_work)) return;
    if (s & 1) {
      for (int64_t p = L.panels - 1; p >= 0; --p) RunPanel(L, s, p);
    } else {
      for (int64_t p = 0; p < L.panels; ++p) RunPanel(L, s, p);
    }
  }
}

// Recurrent work per step (B * 4H * H multiply-adds) below which the steps stay on the
// calling thread: every step hands h to the other threads and back, a few cache-line
// transfers per thread. Measured on the 2-vCPU Zen 5 VM (2 layers, T 100, batch 1): hidden
// 256 (2^18, R 1 MiB per layer, streamed from L3 on one core) 2.1-2.3 ms on one thread,
// 1.1-1.2 ms on two, each keeping its half of R in its own L2; hidden 128 (2^16, R already
// in L2) 0.42 ms on one thread, 0.46 ms shared.
constexpr int64_t kParallelStepMacs = int64_t{1} << 18;
// Row tile of the input projection (GEMV kernel handles up to kGemvMaxRows rows).
constexpr int64_t kRowTile = kGemvMaxRows;

}  // namespace

bool Available() {
  static const bool ok = [] {
    __builtin_cpu_init();
    const char* env = std::getenv("STRATA_FORCE_ISA");
    const std::string force = env ? env : "";
    return force != "avx2" && force != "scalar" && __builtin_cpu_supports("avx512f");
  }();
  return ok;
}

Result<DirWeights> Pack(const sgemm::WeightRows& w, const sgemm::WeightRows& r, int64_t dir, const float* b, int64_t H,
                        int64_t I) {
  const int64_t panels = (H + kUnits - 1) / kUnits, cols = panels * P;
  // Column (p, g, u) of the packed matrices is row g*H + p*kUnits + u of W/R (none past H):
  // a row map, so both are packed straight from the constants with no reordered copies.
  std::vector<int64_t> rows(static_cast<size_t>(cols), -1);
  std::vector<float> bias(b ? static_cast<size_t>(cols) : 0, 0.0f);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t g = 0; g < 4; ++g)
      for (int64_t u = 0; u < kUnits && p * kUnits + u < H; ++u) {
        const int64_t col = p * P + g * kUnits + u, row = g * H + p * kUnits + u;
        rows[col] = row;
        if (b) bias[col] = b[row] + b[4 * H + row];
      }
  DirWeights d;
  ASSIGN_OR_RETURN(d.w, GemvWeights::PackRows(w, dir * 4 * H, I, I, cols, rows.data(), b ? bias.data() : nullptr));
  ASSIGN_OR_RETURN(d.r, GemvWeights::PackRows(r, dir * 4 * H, H, H, cols, rows.data(), nullptr));
  return d;
}

Status RunDirection(const Node& node, const rnn::Inputs& in, const rnn::Attrs& attrs, int64_t d, const DirWeights& wts,
                    float* y, float* yh, float* yc, ThreadPool* pool, Allocator* alloc, KernelStop* stop) {
  const int64_t T = in.seq, B = in.batch, I = in.input, H = in.hidden;
  const int64_t panels = wts.r.panels(), hp = panels * kUnits, cols = panels * P;
  if (wts.r.k() != H || wts.w.k() != I || wts.r.n() != cols)
    return InternalError(node.Describe(), ": packed LSTM weights do not match H=", H, " I=", I);
  if (panels > 0xFFFF) return Unsupported(node.Describe(), ": hidden_size ", H, " is too large for the fused LSTM");
  const int64_t rows = T * B;
  // Scratch: xw [rows][cols], h [2][B][hp], c [B][hp].
  ASSIGN_OR_RETURN(Tensor scratch, AllocateScratch(rows * cols + 3 * B * hp, alloc, node));
  float* xw = scratch.mutable_data<float>();
  float* h = xw + rows * cols;
  float* c = h + 2 * B * hp;
  std::fill(h, h + 3 * B * hp, 0.0f);
  // Input projection for every timestep at once: XW = X . W + (Wb + Rb).
  const float* x = in.x->data<float>();
  const float inf = std::numeric_limits<float>::infinity();
  auto project = [&](int64_t t0, int64_t t1) {
    for (int64_t tile = t0; tile < t1; ++tile) {
      const int64_t r0 = tile * kRowTile, m = std::min(kRowTile, rows - r0);
      GemvPanels(x + r0 * I, I, m, wts.w, xw + r0 * cols, cols, -inf, inf, 0, panels);
    }
  };
  const int64_t tiles = (rows + kRowTile - 1) / kRowTile;
  if (pool && pool->num_threads() > 1 && rows * I * cols >= (int64_t{1} << 17))
    pool->Run(tiles, 1, project);
  else
    project(0, tiles);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t so = rnn::StateOffset(d, b, in, attrs.layout);
    if (in.init_h) std::memcpy(h + b * hp, in.init_h->data<float>() + so, H * sizeof(float));
    if (in.init_c) std::memcpy(c + b * hp, in.init_c->data<float>() + so, H * sizeof(float));
  }
  int64_t max_len = 0;
  for (int64_t b = 0; b < B; ++b) max_len = std::max(max_len, in.lens[b]);
  Loop L;
  L.in = &in;
  L.layout = attrs.layout;
  L.d = d;
  L.reverse = in.dirs == 2 ? d == 1 : attrs.reverse;
  L.panels = panels;
  L.hp = hp;
  L.r = &wts.r;
  L.xw = xw;
  L.h = h;
  L.c = c;
  L.y = y;
  L.ga.peep = in.p ? in.p->data<float>() + d * 3 * H : nullptr;
  L.ga.hidden = H;
  L.ga.clip = attrs.clip;
  L.ga.input_forget = attrs.input_forget;
  L.stop = stop;
  L.step_work = B * 4 * H * (H + 1);
  // Steps past every sequence's end only carry the state over; a reverse direction
  // starts at t = T-1, so there all T steps run (inactive ones copy h).
  L.steps = L.reverse ? T : max_len;
  if (L.steps > 0 && panels > 0) {
    const bool parallel = pool && pool->num_threads() > 1 && panels > 1 && B * 4 * H * H >= kParallelStepMacs &&
                          L.steps < (int64_t{1} << 32);  // the step fits the state word
    if (parallel) {
      L.parts = std::min<int64_t>({pool->num_threads(), panels, kMaxChunks});
      L.chunks =
          std::min<int64_t>(panels, std::max<int64_t>(L.parts, std::min(L.parts * ChunksPerPart(L.parts), kMaxChunks)));
      pool->RunParticipants(
          L.parts,
          [](void* ctx, int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) Participate(*static_cast<Loop*>(ctx), i);
          },
          &L);
    } else {
      RunSerial(L);
    }
  }
  const float* hfinal = h + (L.steps & 1) * B * hp;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t so = rnn::StateOffset(d, b, in, attrs.layout);
    if (yh) std::memcpy(yh + so, hfinal + b * hp, H * sizeof(float));
    if (yc) std::memcpy(yc + so, c + b * hp, H * sizeof(float));
  }
  return Status::Ok();
}

}  // namespace lstm_fused
}  // namespace strata
