// Grouped NhwcConv with groups of 4 or 8 channels (see conv_nhwc_grouped.h).
//
// The output channels are cut into 16-channel vectors ("tiles"), each spanning 16 / G whole
// groups of G = cig = cog channels. Groups are laid out in order on both sides, so a tile's
// input channels are the same 16 channels as its outputs: one vector load per pixel and tap.
// Output lane l (group l / G, output o = l % G) needs input channel j of its own group for
// j = 0..G-1; vpermilps spreads channel j of every 4-channel 128-bit lane over that lane,
// which for G = 4 is exactly that; for G = 8, vshuff32x4 first puts each group's channels
// 0-3 (or 4-7) into both of its 128-bit lanes. Each spread vector times a weight vector
// holding w[oc0 + l][j] in lane l is one FMA with every lane used: G FMAs per pixel and tap
// for 16 output channels, where broadcasting each input channel into a masked FMA took 16,
// using only G of their lanes (RegNetY-400MF's groups of 8, 1 thread: 0.29 vs 0.50 ms on
// its 112x112 stride-2 conv; XNNPACK, one GEMM per group: 0.38). No lane ever reads another
// group's input, so an Inf or NaN stays in its group, as in the reference conv.
//
// Output pixels go in blocks of 8, then 4, along a row where all of their taps lie inside
// the row (each tap's weight vectors loaded once per block, independent accumulators); the
// pixels whose window reaches into the horizontal padding go one at a time over their
// in-bounds taps, and kernel rows in the vertical padding are skipped (null row pointers).
#include "cpu/conv_nhwc_grouped.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "core/constant_release.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/sgemm.h"
#include "cpu/simd_clamp.h"

namespace strata {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

constexpr int kLanes = 16;
// Widest group the per-group SGEMM takes (MakeNhwcGroupedGemmConv).
constexpr int64_t kMaxGemmGroup = 64;

// What one output row needs, fixed per conv and input shape.
struct RowGeom {
  int64_t c = 0, m = 0;  // X and Y pixel strides (C and M channels; C == M)
  int64_t kh = 0, kw = 0, in_w = 0, out_w = 0, sw = 1, dw = 1, pad_left = 0;
  float lo = 0, hi = 0;
  ActKind kind = ActKind::kClamp;  // before the clamp
};

// kP output pixels of the tile at channel c0 (lanes `lanes`: the last tile may be partial),
// the first one's window starting at input column ix0, over kernel columns [kx0, kx1),
// which lie inside the row for every pixel. w: the tile's weights [KH * KW][kG][16]; y: the
// first pixel's output at channel c0.
template <int kP, int kG>
STRATA_AVX512 void Block(const RowGeom& g, int64_t c0, __mmask16 lanes, const float* w, const float* bias,
                         const float* const* rows, int64_t ix0, int64_t kx0, int64_t kx1, float* y) {
  // One accumulator per pixel is kP independent FMA chains; fewer than 4 pixels would wait
  // on the FMA latency, so their products go round kChains accumulators per pixel.
  constexpr int kChains = kP >= 4 ? 1 : 4;
  __m512 acc[kP][kChains];
  for (int p = 0; p < kP; ++p) {
    acc[p][0] = _mm512_loadu_ps(bias);
    for (int q = 1; q < kChains; ++q) acc[p][q] = _mm512_setzero_ps();
  }
  const int64_t step = g.sw * g.c;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const float* r = rows[ky];
    if (!r) continue;
    for (int64_t kx = kx0; kx < kx1; ++kx) {
      const float* x = r + (ix0 + kx * g.dw) * g.c + c0;
      const float* wt = w + (ky * g.kw + kx) * kG * kLanes;
      __m512 wv[kG];
      for (int j = 0; j < kG; ++j) wv[j] = _mm512_loadu_ps(wt + j * kLanes);
      for (int p = 0; p < kP; ++p) {
        // Channel j of each group spread over the group's lanes, each spread consumed at once
        // (computing all of them first spilled the accumulators).
        const __m512 v = _mm512_maskz_loadu_ps(lanes, x + p * step);
        __m512* a = acc[p];
        if constexpr (kG == 4) {
          a[0] = _mm512_fmadd_ps(_mm512_permute_ps(v, 0x00), wv[0], a[0]);
          a[1 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(v, 0x55), wv[1], a[1 % kChains]);
          a[2 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(v, 0xAA), wv[2], a[2 % kChains]);
          a[3 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(v, 0xFF), wv[3], a[3 % kChains]);
        } else {
          const __m512 lo4 = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 2, 0, 0));
          a[0] = _mm512_fmadd_ps(_mm512_permute_ps(lo4, 0x00), wv[0], a[0]);
          a[1 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(lo4, 0x55), wv[1], a[1 % kChains]);
          a[2 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(lo4, 0xAA), wv[2], a[2 % kChains]);
          a[3 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(lo4, 0xFF), wv[3], a[3 % kChains]);
          const __m512 hi4 = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 3, 1, 1));
          a[0] = _mm512_fmadd_ps(_mm512_permute_ps(hi4, 0x00), wv[4], a[0]);
          a[1 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(hi4, 0x55), wv[5], a[1 % kChains]);
          a[2 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(hi4, 0xAA), wv[6], a[2 % kChains]);
          a[3 % kChains] = _mm512_fmadd_ps(_mm512_permute_ps(hi4, 0xFF), wv[7], a[3 % kChains]);
        }
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int p = 0; p < kP; ++p) {
    __m512 sum = acc[p][0];
    if constexpr (kChains == 4)
      sum = _mm512_add_ps(_mm512_add_ps(sum, acc[p][1]), _mm512_add_ps(acc[p][2], acc[p][3]));
    _mm512_mask_storeu_ps(y + p * g.m, lanes, simd::Activate(sum, lo, hi, g.kind));
  }
}

// Tiles [t0, t1) of one output row. rows[ky]: the input row of kernel row ky, or null.
// Each pixel block runs all of its tiles before the next block: a block's input windows and
// the tiles' weights stay in L1 (sweeping the whole row per tile re-read 3 input rows,
// 64 KiB on RegNet's 112-pixel rows, from L2 for every tile).
template <int kG>
void Row(const RowGeom& g, const float* w, const float* bias, int64_t t0, int64_t t1, const float* const* rows,
         float* y) {
  // Columns whose taps all lie inside the row: ox * sw - pad_left >= 0 and
  // ox * sw - pad_left + (kw - 1) * dw < in_w.
  const int64_t ox_lo = std::min(g.out_w, (g.pad_left + g.sw - 1) / g.sw);
  const int64_t last = g.in_w - 1 - (g.kw - 1) * g.dw + g.pad_left;  // largest interior ox * sw
  const int64_t ox_hi = last < 0 ? ox_lo : std::clamp(last / g.sw + 1, ox_lo, g.out_w);
  const int64_t wstride = g.kh * g.kw * kG * kLanes;
  // kP pixels from ox, over kernel columns [kx0, kx1), for every tile.
  const auto tiles = [&](auto pixels, int64_t ox, int64_t kx0, int64_t kx1) {
    constexpr int kP = decltype(pixels)::value;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c0 = t * kLanes, n = std::min<int64_t>(kLanes, g.m - c0);
      const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
      Block<kP, kG>(g, c0, lanes, w + t * wstride, bias + c0, rows, ox * g.sw - g.pad_left, kx0, kx1,
                    y + ox * g.m + c0);
    }
  };
  using One = std::integral_constant<int, 1>;
  const auto edge = [&](int64_t ox) {
    int64_t kx0, kx1;
    TapRange(ox * g.sw - g.pad_left, g.dw, g.kw, g.in_w, &kx0, &kx1);
    tiles(One{}, ox, kx0, kx1);
  };
  int64_t ox = 0;
  for (; ox < ox_lo; ++ox) edge(ox);
  for (; ox + 8 <= ox_hi; ox += 8) tiles(std::integral_constant<int, 8>{}, ox, 0, g.kw);
  for (; ox + 4 <= ox_hi; ox += 4) tiles(std::integral_constant<int, 4>{}, ox, 0, g.kw);
  for (; ox < ox_hi; ++ox) tiles(One{}, ox, 0, g.kw);
  for (; ox < g.out_w; ++ox) edge(ox);
}

class NhwcGroupedConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  const char* ImplName() const override { return "nhwc-grouped"; }
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }

  NhwcGroupedConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act),
        m_(w.dim(0)),
        g_(w.dim(1)),
        kh_(w.dim(2)),
        kw_(w.dim(3)) {
    const int64_t ntiles = (m_ + kLanes - 1) / kLanes, taps = kh_ * kw_;
    weights_.assign(static_cast<size_t>(ntiles * taps * g_ * kLanes), 0.0f);
    bias_.assign(static_cast<size_t>(ntiles * kLanes), 0.0f);
    if (b) std::copy(b->data<float>(), b->data<float>() + m_, bias_.begin());
    // [tile][tap][j][lane] = W[oc = tile * 16 + lane][j][tap]; OIHW W is [M][G][KH][KW].
    const float* src = w.data<float>();
    for (int64_t oc = 0; oc < m_; ++oc) {
      float* wt = weights_.data() + (oc / kLanes) * taps * g_ * kLanes + oc % kLanes;
      for (int64_t j = 0; j < g_; ++j)
        for (int64_t tap = 0; tap < taps; ++tap) wt[(tap * g_ + j) * kLanes] = src[(oc * g_ + j) * taps + tap];
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const int64_t n = xin.n, h = xin.h, w = xin.w, c = xin.c;
    const SpatialGeometry& sg = xin.shapes.geo;
    const int64_t oh = sg.out[0], ow = sg.out[1];
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, oh, ow, m_}));
    if (y->num_elements() == 0) return Status::Ok();
    const RowGeom g{c,        m_,       kh_,      kw_, w, ow, sg.strides[1], sg.dilations[1], sg.pad_begin[1],
                    act_.min, act_.max, act_.kind};
    const int64_t sh = sg.strides[0], dh = sg.dilations[0], pt = sg.pad_begin[0];
    const float* xd = x->data<float>();
    float* yd = y->mutable_data<float>();
    // Work items are (output row, chunk of tiles): small maps (7x7) have too few rows to keep
    // two threads equally busy, so their tiles are split too.
    const int64_t ntiles = (m_ + kLanes - 1) / kLanes, nrows = n * oh;
    const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    int64_t chunks = 1;
    while (threads > 1 && nrows * chunks < 8 * threads && chunks < ntiles) chunks *= 2;
    chunks = std::min(chunks, ntiles);
    auto items = [&](int64_t begin, int64_t end) {
      const float* small[17];
      std::vector<const float*> big(kh_ > 16 ? kh_ : 0);
      const float** rows = kh_ > 16 ? big.data() : small;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t row = item / chunks, chunk = item - row * chunks;
        const int64_t b = row / oh, oy = row - b * oh, iy0 = oy * sh - pt;
        for (int64_t ky = 0; ky < kh_; ++ky) {
          const int64_t iy = iy0 + ky * dh;
          rows[ky] = iy >= 0 && iy < h ? xd + ((b * h + iy) * w) * c : nullptr;
        }
        const int64_t t0 = chunk * ntiles / chunks, t1 = (chunk + 1) * ntiles / chunks;
        float* yrow = yd + row * ow * m_;
        if (g_ == 4) {
          Row<4>(g, weights_.data(), bias_.data(), t0, t1, rows, yrow);
        } else {
          Row<8>(g, weights_.data(), bias_.data(), t0, t1, rows, yrow);
        }
      }
    };
    const int64_t total = nrows * chunks;
    // ~64 KiB of output per grain: enough work to amortise a pool wake-up.
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ow * m_ / chunks));
    if (ctx.pool() && threads > 1) {
      // Row regions on fixed CPUs (as the depthwise conv's): each CPU reads the rows it wrote.
      ParallelRangeByCpu(ctx.pool(), total, grain, items);
    } else {
      items(0, total);
    }
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  int64_t m_, g_, kh_, kw_;            // output channels, channels per group, kernel size
  std::vector<float> weights_, bias_;  // [tile][KH * KW][G][16], [tile][16]
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcGroupedConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                      const FusedActivation& act) {
  const Node& node = init.node;
  if (!sgemm::Available()) return Unsupported(node.Describe(), ": the grouped NHWC kernel needs AVX-512F");
  // STRATA_GROUPED_CONV=0 leaves these to XNNPACK, for side-by-side measurements.
  if (const char* env = std::getenv("STRATA_GROUPED_CONV"); env && std::string(env) == "0")
    return Unsupported(node.Describe(), ": STRATA_GROUPED_CONV=0");
  const int64_t group = node.GetInt("group", 1);
  if (w.rank() != 4 || group <= 1 || w.dim(0) != group * w.dim(1))
    return Unsupported(node.Describe(), ": not a grouped conv with as many outputs as inputs per group");
  // Groups of 16 channels run their SGEMMs on half-width tiles, which at 1 thread lose to
  // XNNPACK's per-group GEMM (ResNeXt-50's 14x14 512-channel conv 0.22 vs 0.18 ms); from 2
  // threads on the groups spread over the pool win (0.14 vs 0.18: XNNPACK runs an operator
  // this small inline, on one thread). Wider groups are faster here at any thread count.
  const int threads = init.pool ? init.pool->num_threads() : 1;
  if (w.dim(1) % kLanes == 0 && w.dim(1) <= kMaxGemmGroup && (w.dim(1) > kLanes || threads > 1))
    return MakeNhwcGroupedGemmConv(init, w, b, act);
  if (w.dim(1) != 4 && w.dim(1) != 8)
    return Unsupported(node.Describe(), ": not a grouped conv of 4, 8 or 16-", kMaxGemmGroup,
                       " (a multiple of 16) channels per group");
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcGroupedConvKernel>(init, w, b, act));
}

}  // namespace strata
