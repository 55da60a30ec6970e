// Optimised fp32 LSTM.
//
// Per direction:
//   1. The input projection for all timesteps is one GEMM up front:
//      XW[T*B, 4H] = X[T*B, I] . W^T + (Wb + Rb).
//   2. Each timestep adds h[B, H] . R^T with R^T kept in a prepacked, column-blocked
//      layout (made once in the factory when W/R are constants), then applies the gate
//      math in place with vectorised sigmoid/tanh.
// Packed layout: for column block cb of kBlock outputs, packed[(cb*K + k)*kBlock + j]
// = M[cb*kBlock + j, k], zero-padded, so the GEMV streams memory strictly forwards and
// keeps kBlock/16 independent accumulators in registers.
//
// ISA: AVX-512 intrinsics chosen at run time with __builtin_cpu_supports; otherwise
// the portable loops, compiled once for AVX2+FMA (via target attributes and
// always_inline bodies) and once for baseline x86-64. Nothing in this file requires
// compiling the whole translation unit with -mavx512f.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "cpu/rnn_common.h"
#include "cpu/rnn_lstm_fused.h"
#include "cpu/rnn_simd_avx512.h"
#include "cpu/simd_clamp.h"

// GCC 12's AVX-512 headers use deliberately undefined vectors as pass-through operands
// and warn about them once inlined; the values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace strata {
namespace {

using rnn::Activation;
using rnn::Attrs;
using rnn::Cell;
using rnn::Inputs;

constexpr int64_t kBlock = 128;

struct Packed {
  int64_t n = 0, k = 0, np = 0;  // logical outputs, reduction length, padded outputs
  std::vector<float> data;
};

// Packs M[n, k] (row-major, e.g. one direction of W or R) into the blocked layout.
Packed Pack(const float* m, int64_t n, int64_t k) {
  Packed p;
  p.n = n;
  p.k = k;
  p.np = (n + kBlock - 1) / kBlock * kBlock;
  p.data.assign(static_cast<size_t>(p.np * k), 0.0f);
  for (int64_t cb = 0; cb < p.np / kBlock; ++cb)
    for (int64_t kk = 0; kk < k; ++kk) {
      float* dst = p.data.data() + (cb * k + kk) * kBlock;
      for (int64_t j = 0; j < kBlock; ++j) {
        const int64_t row = cb * kBlock + j;
        dst[j] = row < n ? m[row * k + kk] : 0.0f;
      }
    }
  return p;
}

// ---------------------------------------------------------------- GEMM: C[m, np] += A[m, K] . P

__attribute__((always_inline)) inline void GemmPortableBody(const float* a, int64_t lda, int64_t m, const Packed& p,
                                                            float* c, int64_t ldc) {
  const int64_t K = p.k;
  for (int64_t cb = 0; cb < p.np / kBlock; ++cb) {
    const float* pb = p.data.data() + cb * K * kBlock;
    for (int64_t row = 0; row < m; ++row) {
      float acc[kBlock];
      float* cr = c + row * ldc + cb * kBlock;
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = cr[j];
      const float* ar = a + row * lda;
      for (int64_t kk = 0; kk < K; ++kk) {
        const float av = ar[kk];
        const float* pk = pb + kk * kBlock;
        for (int64_t j = 0; j < kBlock; ++j) acc[j] += av * pk[j];
      }
      for (int64_t j = 0; j < kBlock; ++j) cr[j] = acc[j];
    }
  }
}

void GemmPortable(const float* a, int64_t lda, int64_t m, const Packed& p, float* c, int64_t ldc, bool) {
  GemmPortableBody(a, lda, m, p, c, ldc);
}
__attribute__((target("avx2,fma"))) void GemmAvx2(const float* a, int64_t lda, int64_t m, const Packed& p, float* c,
                                                  int64_t ldc, bool) {
  GemmPortableBody(a, lda, m, p, c, ldc);
}

// One row, a full 128-wide block: 8 accumulators hide the FMA latency. `backwards` walks
// k in reverse (see GemmAvx512).
__attribute__((target("avx512f"))) inline void GemvBlock512(const float* a, const float* pb, int64_t K, float* cr,
                                                            bool backwards) {
  __m512 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_loadu_ps(cr + 16 * j);
  for (int64_t i = 0; i < K; ++i) {
    const int64_t kk = backwards ? K - 1 - i : i;
    const __m512 av = _mm512_set1_ps(a[kk]);
    const float* pk = pb + kk * kBlock;
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_fmadd_ps(av, _mm512_loadu_ps(pk + 16 * j), acc[j]);
  }
  for (int j = 0; j < 8; ++j) _mm512_storeu_ps(cr + 16 * j, acc[j]);
}

// Up to 4 rows x 64 columns: each packed vector load feeds MR FMAs.
template <int MR>
__attribute__((target("avx512f"))) inline void GemmTile512(const float* a, int64_t lda, const float* pb, int64_t K,
                                                           float* c, int64_t ldc) {
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_loadu_ps(c + r * ldc + 16 * j);
  for (int64_t kk = 0; kk < K; ++kk) {
    const float* pk = pb + kk * kBlock;
    __m512 bv[4];
    for (int j = 0; j < 4; ++j) bv[j] = _mm512_loadu_ps(pk + 16 * j);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(c + r * ldc + 16 * j, acc[r][j]);
}

// `backwards` reverses the order in which the packed matrix is read. The recurrent
// step alternates it: a matrix about the size of L2 (R is 1 MiB at H = 256) read in a
// cycle misses on every line under LRU, whereas a back-and-forth sweep starts on the
// lines the previous step touched last, which are still cached.
__attribute__((target("avx512f"))) void GemmAvx512(const float* a, int64_t lda, int64_t m, const Packed& p, float* c,
                                                   int64_t ldc, bool backwards) {
  const int64_t K = p.k, nblocks = p.np / kBlock;
  for (int64_t i = 0; i < nblocks; ++i) {
    const int64_t cb = backwards ? nblocks - 1 - i : i;
    const float* pb = p.data.data() + cb * K * kBlock;
    if (m == 1) {
      GemvBlock512(a, pb, K, c + cb * kBlock, backwards);
      continue;
    }
    for (int64_t half = 0; half < 2; ++half) {
      // The packed block is [K][128]; a 64-wide half starts 64 floats in with the same row stride.
      const float* ph = pb + half * 64;
      float* ch = c + cb * kBlock + half * 64;
      int64_t row = 0;
      for (; row + 4 <= m; row += 4) GemmTile512<4>(a + row * lda, lda, ph, K, ch + row * ldc, ldc);
      switch (m - row) {
        case 3:
          GemmTile512<3>(a + row * lda, lda, ph, K, ch + row * ldc, ldc);
          break;
        case 2:
          GemmTile512<2>(a + row * lda, lda, ph, K, ch + row * ldc, ldc);
          break;
        case 1:
          GemmTile512<1>(a + row * lda, lda, ph, K, ch + row * ldc, ldc);
          break;
        default:
          break;
      }
    }
  }
}

// ---------------------------------------------------------------- gate math

struct GateParams {
  int64_t hidden = 0;
  const float* peep = nullptr;  // [Pi, Po, Pf] or null
  float clip = 0;
  bool input_forget = false;
  const Activation* act = nullptr;  // f, g, h
};

// Generic (any activation) gate math; gates = [i, o, f, c] pre-activations.
void GatesGeneric(float* gates, const GateParams& gp, float* c, float* h) {
  const int64_t H = gp.hidden;
  auto clipv = [&](float v) { return gp.clip > 0 ? std::min(gp.clip, std::max(-gp.clip, v)) : v; };
  for (int64_t j = 0; j < H; ++j) {
    const float cp = c[j];
    const float ig = gp.act[0].Apply(clipv(gates[j] + (gp.peep ? gp.peep[j] * cp : 0.0f)));
    const float fg = gp.input_forget
                         ? 1.0f - ig
                         : gp.act[0].Apply(clipv(gates[2 * H + j] + (gp.peep ? gp.peep[2 * H + j] * cp : 0)));
    const float cg = gp.act[1].Apply(clipv(gates[3 * H + j]));
    const float cn = fg * cp + ig * cg;
    const float og = gp.act[0].Apply(clipv(gates[H + j] + (gp.peep ? gp.peep[H + j] * cn : 0.0f)));
    c[j] = cn;
    h[j] = og * gp.act[2].Apply(cn);
  }
}

using rnn_simd::Sigmoid512;
using rnn_simd::Tanh512;

// Default activations (Sigmoid, Tanh, Tanh), 16 hidden units at a time.
__attribute__((target("avx512f"))) void GatesAvx512(float* gates, const GateParams& gp, float* c, float* h) {
  const int64_t H = gp.hidden;
  const bool clip = gp.clip > 0;
  const __m512 hi = _mm512_set1_ps(gp.clip), lo = _mm512_set1_ps(-gp.clip), one = _mm512_set1_ps(1.0f);
  auto clipv = [&](__m512 v) __attribute__((target("avx512f"))) { return clip ? simd::Clamp(v, lo, hi) : v; };
  for (int64_t j = 0; j < H; j += 16) {
    const __mmask16 m = H - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (H - j)) - 1);
    const __m512 cp = _mm512_maskz_loadu_ps(m, c + j);
    __m512 gi = _mm512_maskz_loadu_ps(m, gates + j);
    __m512 go = _mm512_maskz_loadu_ps(m, gates + H + j);
    __m512 gf = _mm512_maskz_loadu_ps(m, gates + 2 * H + j);
    const __m512 gc = _mm512_maskz_loadu_ps(m, gates + 3 * H + j);
    if (gp.peep) {
      gi = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, gp.peep + j), cp, gi);
      gf = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, gp.peep + 2 * H + j), cp, gf);
    }
    const __m512 ig = Sigmoid512(clipv(gi));
    const __m512 fg = gp.input_forget ? _mm512_sub_ps(one, ig) : Sigmoid512(clipv(gf));
    const __m512 cg = Tanh512(clipv(gc));
    const __m512 cn = _mm512_fmadd_ps(fg, cp, _mm512_mul_ps(ig, cg));
    if (gp.peep) go = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, gp.peep + H + j), cn, go);
    const __m512 og = Sigmoid512(clipv(go));
    _mm512_mask_storeu_ps(c + j, m, cn);
    _mm512_mask_storeu_ps(h + j, m, _mm512_mul_ps(og, Tanh512(cn)));
  }
}

// C[m, np] += A[m, K] . P; the last argument only changes the order P is read in.
using GemmFn = void (*)(const float*, int64_t, int64_t, const Packed&, float*, int64_t, bool);

struct Isa {
  GemmFn gemm;
  bool avx512;
  const char* name;
};

const Isa& SelectIsa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    // STRATA_FORCE_ISA=avx2|scalar caps the choice (to test the fallbacks on AVX-512 hosts).
    const char* env = std::getenv("STRATA_FORCE_ISA");
    const std::string force = env ? env : "";
    if (force != "avx2" && force != "scalar" && __builtin_cpu_supports("avx512f"))
      return Isa{GemmAvx512, true, "avx512"};
    if (force != "scalar" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa{GemmAvx2, false, "avx2"};
    return Isa{GemmPortable, false, "portable"};
  }();
  return isa;
}

bool IsDefaultActs(const Activation* a) {
  return a[0].kind == Activation::Kind::kSigmoid && a[1].kind == Activation::Kind::kTanh &&
         a[2].kind == Activation::Kind::kTanh;
}

class FastLstmKernel final : public OpKernel, public PacksConstantInputs {
 public:
  FastLstmKernel(Attrs attrs, std::vector<Packed> w, std::vector<Packed> r, std::vector<lstm_fused::DirWeights> fused)
      : attrs_(std::move(attrs)), w_(std::move(w)), r_(std::move(r)), fused_(std::move(fused)) {}

  // The fused path holds W, R and Wb + Rb in its own panels (GetInputs checks the run's
  // shapes against W/R, so it is always taken once built). The blocked path still reads B.
  std::vector<size_t> PackedConstantInputs() const override {
    if (fused_.empty()) return {};
    return {1, 2, 3};
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(Inputs in, rnn::GetInputs(ctx, attrs_));
    if (in.x->dtype() != DataType::kFloat) return rnn::ReferenceCompute(ctx, Cell::kLstm);
    const int64_t T = in.seq, B = in.batch, I = in.input, H = in.hidden, D = in.dirs;
    if (!fused_.empty() && fused_[0].r.k() == H && fused_[0].w.k() == I) return ComputeFused(ctx, in);
    // Weights that are not constants are packed per run.
    std::vector<Packed> wl, rl;
    const std::vector<Packed>* w = &w_;
    const std::vector<Packed>* r = &r_;
    if (w_.empty() || w_[0].n != 4 * H || w_[0].k != I) {
      for (int64_t d = 0; d < D; ++d) wl.push_back(Pack(in.w->data<float>() + d * 4 * H * I, 4 * H, I));
      w = &wl;
    }
    if (r_.empty() || r_[0].n != 4 * H || r_[0].k != H) {
      for (int64_t d = 0; d < D; ++d) rl.push_back(Pack(in.r->data<float>() + d * 4 * H * H, 4 * H, H));
      r = &rl;
    }
    const int64_t np = (*w)[0].np;
    Tensor* y = nullptr;
    Tensor* yh = nullptr;
    Tensor* yc = nullptr;
    if (ctx.output_requested(0)) {
      ASSIGN_OR_RETURN(y, ctx.AllocateOutput(0, DataType::kFloat, rnn::YShape(in, attrs_.layout)));
      // Only padded timesteps (sequence_lens < seq) leave entries unwritten.
      bool padded = false;
      for (int64_t l : in.lens) padded = padded || l < in.seq;
      if (padded && y->byte_size()) std::memset(y->raw_mutable_data(), 0, y->byte_size());
    }
    if (ctx.output_requested(1)) {
      ASSIGN_OR_RETURN(yh, ctx.AllocateOutput(1, DataType::kFloat, rnn::StateShape(in, attrs_.layout)));
    }
    if (ctx.num_outputs() > 2 && ctx.output_requested(2)) {
      ASSIGN_OR_RETURN(yc, ctx.AllocateOutput(2, DataType::kFloat, rnn::StateShape(in, attrs_.layout)));
    }
    if (H == 0) return Status::Ok();  // every output is empty
    const Isa& isa = SelectIsa();
    std::vector<Status> errors(static_cast<size_t>(D));
    KernelStop stop(node);
    auto run_dir = [&](int64_t d) {
      const bool reverse = D == 2 ? d == 1 : attrs_.reverse;
      const Activation* act = &attrs_.acts[d * 3];
      GateParams gp;
      gp.hidden = H;
      gp.peep = in.p ? in.p->data<float>() + d * 3 * H : nullptr;
      gp.clip = attrs_.clip;
      gp.input_forget = attrs_.input_forget;
      gp.act = act;
      const bool vector_gates = isa.avx512 && IsDefaultActs(act);
      // XW = bias + X . W^T for all timesteps, rows in X's own order.
      std::vector<float> xw(static_cast<size_t>(T * B * np), 0.0f);
      if (in.b) {
        const float* bd = in.b->data<float>() + d * 8 * H;
        std::vector<float> bsum(static_cast<size_t>(np), 0.0f);
        for (int64_t k = 0; k < 4 * H; ++k) bsum[k] = bd[k] + bd[4 * H + k];
        for (int64_t row = 0; row < T * B; ++row) std::memcpy(&xw[row * np], bsum.data(), np * sizeof(float));
      }
      if (T * B > 0) isa.gemm(in.x->data<float>(), I, T * B, (*w)[d], xw.data(), np, false);
      std::vector<float> h(static_cast<size_t>(B * H), 0.0f), c(static_cast<size_t>(B * H), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t so = rnn::StateOffset(d, b, in, attrs_.layout);
        if (in.init_h) std::memcpy(&h[b * H], in.init_h->data<float>() + so, H * sizeof(float));
        if (in.init_c) std::memcpy(&c[b * H], in.init_c->data<float>() + so, H * sizeof(float));
      }
      int64_t max_len = 0;
      for (int64_t b = 0; b < B; ++b) max_len = std::max(max_len, in.lens[b]);
      int64_t pending = 0;
      for (int64_t s = 0; s < T; ++s) {
        if (!stop.Continue(pending, B * 4 * H * (H + 1))) return;
        const int64_t t = reverse ? T - 1 - s : s;
        if (t >= max_len) continue;  // no batch entry is active at this timestep
        // Accumulate h . R^T straight into this timestep's XW rows (each is used once):
        // rows t*B..t*B+B-1 for layout 0, b*T+t (stride T rows) for layout 1.
        float* gates = &xw[rnn::XRow(t, 0, in, attrs_.layout) * np];
        const int64_t ldg = attrs_.layout == 0 ? np : T * np;
        isa.gemm(h.data(), H, B, (*r)[d], gates, ldg, (s & 1) != 0);
        for (int64_t b = 0; b < B; ++b) {
          if (t >= in.lens[b]) continue;  // padding: state carries over, Y stays 0
          if (vector_gates)
            GatesAvx512(gates + b * ldg, gp, &c[b * H], &h[b * H]);
          else
            GatesGeneric(gates + b * ldg, gp, &c[b * H], &h[b * H]);
          if (y)
            std::memcpy(y->mutable_data<float>() + rnn::YOffset(t, d, b, in, attrs_.layout), &h[b * H],
                        H * sizeof(float));
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        const int64_t so = rnn::StateOffset(d, b, in, attrs_.layout);
        if (yh) std::memcpy(yh->mutable_data<float>() + so, &h[b * H], H * sizeof(float));
        if (yc) std::memcpy(yc->mutable_data<float>() + so, &c[b * H], H * sizeof(float));
      }
    };
    // The two directions are independent.
    if (ctx.pool() && D > 1)
      ctx.pool()->ParallelFor(D, 1, [&](int64_t b, int64_t e) {
        for (int64_t d = b; d < e; ++d) run_dir(d);
      });
    else
      for (int64_t d = 0; d < D; ++d) run_dir(d);
    return stop.status();
  }

 private:
  // Constant weights with the default activations on AVX-512: the fused path.
  Status ComputeFused(KernelContext& ctx, const Inputs& in) const {
    float* out[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 0; i < 3; ++i) {
      if (i >= ctx.num_outputs() || !ctx.output_requested(i)) continue;
      Shape shape = i == 0 ? rnn::YShape(in, attrs_.layout) : rnn::StateShape(in, attrs_.layout);
      ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i, DataType::kFloat, std::move(shape)));
      out[i] = t->mutable_data<float>();
      // Y entries of padded timesteps are never written.
      bool padded = false;
      for (int64_t l : in.lens) padded = padded || l < in.seq;
      if (i == 0 && padded && t->byte_size()) std::memset(t->raw_mutable_data(), 0, t->byte_size());
    }
    if (in.hidden == 0) return Status::Ok();
    const int64_t D = in.dirs;
    std::vector<Status> errors(static_cast<size_t>(D));
    // Steps times weights, which no one input bounds: the steps check the run's limits.
    KernelStop stop(ctx.node());
    auto run = [&](int64_t b, int64_t e) {
      for (int64_t d = b; d < e; ++d)
        errors[d] = lstm_fused::RunDirection(ctx.node(), in, attrs_, d, fused_[d], out[0], out[1], out[2], ctx.pool(),
                                             ctx.allocator(), &stop);
    };
    // Two directions are independent: one per thread (each then runs single-threaded).
    if (ctx.pool() && D > 1)
      ctx.pool()->Run(D, 1, run);
    else
      run(0, D);
    for (const Status& st : errors) RETURN_IF_ERROR(st);
    return stop.status();
  }

  Attrs attrs_;
  std::vector<Packed> w_, r_;                  // prepacked per direction when W/R are constants
  std::vector<lstm_fused::DirWeights> fused_;  // per direction, when the fused path applies
};

Result<std::unique_ptr<OpKernel>> MakeFastLstm(const KernelInit& init) {
  ASSIGN_OR_RETURN(Attrs attrs, rnn::ParseAttrs(init.node, Cell::kLstm));
  std::vector<Packed> w, r;
  const Tensor* wc = init.constant_input(1);
  const Tensor* rc = init.constant_input(2);
  // Prepack only well-formed float constants; anything else is validated (and packed) per run.
  if (wc && rc && wc->dtype() == DataType::kFloat && rc->dtype() == DataType::kFloat && wc->rank() == 3 &&
      rc->rank() == 3 && wc->dim(0) == attrs.num_directions && rc->dim(0) == attrs.num_directions &&
      rc->dim(1) == 4 * rc->dim(2) && wc->dim(1) == rc->dim(1) &&
      (attrs.hidden_size < 0 || attrs.hidden_size == rc->dim(2))) {
    const int64_t H = rc->dim(2), I = wc->dim(2);
    const Tensor* bc = init.constant_input(3);
    const bool bias_ok = !init.has_input(3) || (bc && bc->dtype() == DataType::kFloat && bc->rank() == 2 &&
                                                bc->dim(0) == attrs.num_directions && bc->dim(1) == 8 * H);
    bool default_acts = true;
    for (int64_t d = 0; d < attrs.num_directions; ++d) default_acts = default_acts && IsDefaultActs(&attrs.acts[d * 3]);
    if (bias_ok && default_acts && lstm_fused::Available()) {
      std::vector<lstm_fused::DirWeights> fused;
      for (int64_t d = 0; d < attrs.num_directions; ++d) {
        auto fw = lstm_fused::Pack(sgemm::WeightRows::Of(*wc), sgemm::WeightRows::Of(*rc), d,
                                   bc ? bc->data<float>() + d * 8 * H : nullptr, H, I);
        if (!fw.ok()) return MakeStatus(fw.status().code(), init.node.Describe(), ": ", fw.status().message());
        fused.push_back(std::move(fw).value());
      }
      return std::unique_ptr<OpKernel>(
          std::make_unique<FastLstmKernel>(std::move(attrs), std::move(w), std::move(r), std::move(fused)));
    }
    for (int64_t d = 0; d < attrs.num_directions; ++d) {
      w.push_back(Pack(wc->data<float>() + d * 4 * H * I, 4 * H, I));
      r.push_back(Pack(rc->data<float>() + d * 4 * H * H, 4 * H, H));
    }
  }
  return std::unique_ptr<OpKernel>(std::make_unique<FastLstmKernel>(std::move(attrs), std::move(w), std::move(r),
                                                                    std::vector<lstm_fused::DirWeights>{}));
}

}  // namespace

void RegisterFastLstmKernels(KernelRegistry& r) {
  const std::vector<int> versions = {1, 7, 14};
  for (size_t i = 0; i < versions.size(); ++i) {
    KernelDef d;
    d.op_type = "LSTM";
    d.since_version = versions[i];
    d.end_version = i + 1 < versions.size() ? versions[i + 1] - 1 : INT_MAX;
    d.types = {DataType::kFloat};
    d.reference = false;
    d.impl = SelectIsa().name;
    d.factory = MakeFastLstm;
    r.Register(std::move(d));
  }
}

}  // namespace strata
