// Winograd F(4x4, 3x3) and F(2x2, 3x3) NhwcConv (see conv_nhwc_winograd.h). Matrices from
// Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2015). F(4x4, 3x3),
// interpolation points 0, +-1, +-2 and infinity:
//   B^T = [4  0 -5  0 1 0]   G = [ 1/4     0     0]   A^T = [1 1  1 1  1 0]
//         [0 -4 -4  1 1 0]       [-1/6  -1/6  -1/6]         [0 1 -1 2 -2 0]
//         [0  4 -4 -1 1 0]       [-1/6   1/6  -1/6]         [0 1  1 4  4 0]
//         [0 -2 -1  2 1 0]       [1/24  1/12   1/6]         [0 1 -1 8 -8 1]
//         [0  2 -1 -2 1 0]       [1/24 -1/12   1/6]
//         [0  4  0 -5 0 1]       [   0     0     1]
// F(2x2, 3x3), points 0, +-1 and infinity:
//   B^T = [1  0 -1  0]   G = [  1    0    0]   A^T = [1 1  1  0]
//         [0  1  1  0]       [1/2  1/2  1/2]         [0 1 -1 -1]
//         [0 -1  1  0]       [1/2 -1/2  1/2]
//         [0  1  0 -1]       [  0    0    1]
// Y = A^T [ (G g G^T) .* (B^T d B) ] A, summed over input channels; the channel sum of each
// of the 36 (16) element-wise products is one GEMM over the tiles.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "cpu/conv_nhwc_winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/first_error.h"
#include "core/large_pages.h"
#include "cpu/conv_kernels.h"
#include "cpu/gemm_bf16.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/simd_clamp.h"

namespace strata {
namespace {

#define STRATA_AVX512 __attribute__((target("avx512f")))

// Output channels per pass over a block: the GEMM then reads its A (the transformed input)
// in place (sgemm::Gemm does for N <= 128), and the products of one pass stay small.
constexpr int64_t kChunkM = 128;
// Per-thread scratch: the transformed input of a block of tiles (36 x tiles x C for
// F(4x4, 3x3)) and its products (36 x tiles x chunk): 960 KiB, about the 1 MiB L2. Fewer, larger blocks re-read
// the transformed weights fewer times (resnet18 14x14 3x3 convs: 0.85 -> 0.72-0.78 ms with
// 768 KiB -> 960 KiB, one block instead of two).
constexpr int64_t kScratchFloats = 240 * 1024;
constexpr int64_t kMinBlockTiles = 8;
constexpr int64_t kMaxBlockTiles = 96;

float* ThreadScratch(int64_t floats) {
  struct Buf {
    std::unique_ptr<float[]> p;
    int64_t cap = 0;
  };
  thread_local Buf buf;
  if (buf.cap < floats) {
    // Uninitialised on purpose: pages a session never touches cost no memory.
    buf.p.reset(new (std::nothrow) float[static_cast<size_t>(floats)]);
    buf.cap = buf.p ? floats : 0;
  }
  return buf.p.get();
}

// Tiles per block for C input channels and a chunk of mc output channels.
int64_t MaxBlockTiles(int64_t c, int64_t mc, int64_t xis) {
  return std::min<int64_t>(kMaxBlockTiles, kScratchFloats / (xis * (c + mc)));
}

struct Geo {
  const float* x;
  int64_t h, w, c;    // input image
  int64_t oh, ow, m;  // output image
  int64_t pt, pl;     // top / left padding
  int64_t ty, tx;     // tiles per column / row
  float* y;
  const float* bias;  // [m] or nullptr
  const float* res;   // residual [n, oh, ow, m] or nullptr (may equal y)
  float lo, hi;       // clamp
  ActKind kind;       // before the clamp
};

STRATA_AVX512 inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

#define STRATA_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

// F(4x4, 3x3): 6x6 input tiles, 36 products.
struct F4 {
  static constexpr int kOut = 4, kIn = 6;
  static constexpr char kName[] = "winograd-f4x4";
  static constexpr float kG[kIn][3] = {{1.0f / 4, 0, 0},
                                       {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                       {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                       {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                       {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                       {0, 0, 1}};
  // r = B^T d for one column of six vectors.
  STRATA_AVX512_INLINE void InputRows(const __m512* d, __m512* r) {
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f);
    const __m512 d4_d2 = _mm512_sub_ps(d[4], d[2]);
    r[0] = _mm512_add_ps(_mm512_fnmadd_ps(five, d[2], _mm512_mul_ps(four, d[0])), d[4]);
    const __m512 s12 = _mm512_add_ps(d[1], d[2]), s34 = _mm512_add_ps(d[3], d[4]);
    r[1] = _mm512_fnmadd_ps(four, s12, s34);  // -4(d1 + d2) + d3 + d4
    const __m512 m12 = _mm512_sub_ps(d[1], d[2]), m43 = _mm512_sub_ps(d[4], d[3]);
    r[2] = _mm512_fmadd_ps(four, m12, m43);  // 4(d1 - d2) + d4 - d3
    const __m512 m13 = _mm512_sub_ps(d[1], d[3]);
    r[3] = _mm512_fnmadd_ps(two, m13, d4_d2);  // -2(d1 - d3) + d4 - d2
    r[4] = _mm512_fmadd_ps(two, m13, d4_d2);   // 2(d1 - d3) + d4 - d2
    r[5] = _mm512_add_ps(_mm512_fnmadd_ps(five, d[3], _mm512_mul_ps(four, d[1])), d[5]);
  }
  // o = A^T m for one column of six vectors.
  STRATA_AVX512_INLINE void OutputRows(const __m512* m, __m512* o) {
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f), eight = _mm512_set1_ps(8.0f);
    const __m512 p12 = _mm512_add_ps(m[1], m[2]), m12 = _mm512_sub_ps(m[1], m[2]);
    const __m512 p34 = _mm512_add_ps(m[3], m[4]), m34 = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], p12), p34);
    o[1] = _mm512_fmadd_ps(two, m34, m12);
    o[2] = _mm512_fmadd_ps(four, p34, p12);
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(eight, m34, m12), m[5]);
  }
};

// F(2x2, 3x3): 4x4 input tiles, 16 products; 1.8x the fp32 weight bytes instead of 4x.
struct F2 {
  static constexpr int kOut = 2, kIn = 4;
  static constexpr char kName[] = "winograd-f2x2";
  static constexpr float kG[kIn][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  STRATA_AVX512_INLINE void InputRows(const __m512* d, __m512* r) {
    r[0] = _mm512_sub_ps(d[0], d[2]);
    r[1] = _mm512_add_ps(d[1], d[2]);
    r[2] = _mm512_sub_ps(d[2], d[1]);
    r[3] = _mm512_sub_ps(d[1], d[3]);
  }
  STRATA_AVX512_INLINE void OutputRows(const __m512* m, __m512* o) {
    const __m512 m12 = _mm512_sub_ps(m[1], m[2]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm512_sub_ps(m12, m[3]);
  }
};

// Tile t's image and top-left corner (in output coordinates).
struct TilePos {
  int64_t img, oy, ox;
};
template <typename F>
inline TilePos Locate(const Geo& g, int64_t t) {
  const int64_t per_img = g.ty * g.tx, img = t / per_img, rem = t - img * per_img, tyi = rem / g.tx;
  return {img, tyi * F::kOut, (rem - tyi * g.tx) * F::kOut};
}

// V[xi][r][c] = (B^T d B)[xi] for tiles [t0, t0 + nt); plane = the xi stride in floats.
template <typename F>
STRATA_AVX512 void InputTransform(const Geo& g, int64_t t0, int64_t nt, float* v, int64_t plane) {
  constexpr int kIn = F::kIn;
  const int64_t c = g.c;
  for (int64_t r = 0; r < nt; ++r) {
    const TilePos tp = Locate<F>(g, t0 + r);
    const float* xi = g.x + tp.img * g.h * g.w * c;
    const float* src[kIn][kIn];
    for (int i = 0; i < kIn; ++i) {
      const int64_t iy = tp.oy - g.pt + i;
      for (int j = 0; j < kIn; ++j) {
        const int64_t ix = tp.ox - g.pl + j;
        src[i][j] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? xi + (iy * g.w + ix) * c : nullptr;
      }
    }
    float* dst = v + r * c;
    for (int64_t c0 = 0; c0 < c; c0 += 16) {
      const __mmask16 mk = TailMask(c - c0);
      __m512 t[kIn][kIn];  // t[i][j] = (B^T d)[i][j]
      for (int j = 0; j < kIn; ++j) {
        __m512 col[kIn], out[kIn];
        for (int i = 0; i < kIn; ++i)
          col[i] = src[i][j] ? _mm512_maskz_loadu_ps(mk, src[i][j] + c0) : _mm512_setzero_ps();
        F::InputRows(col, out);
        for (int i = 0; i < kIn; ++i) t[i][j] = out[i];
      }
      for (int i = 0; i < kIn; ++i) {
        __m512 out[kIn];
        F::InputRows(t[i], out);
        for (int j = 0; j < kIn; ++j) _mm512_mask_storeu_ps(dst + (i * kIn + j) * plane + c0, mk, out[j]);
      }
    }
  }
}

// Y = A^T m A (+ bias, residual, clamp) for tiles [t0, t0 + nt) and output channels
// [m0, m0 + mc), from M[xi][r][0..mc) (plane = the xi stride in floats).
template <typename F>
STRATA_AVX512 void OutputTransform(const Geo& g, int64_t t0, int64_t nt, int64_t m0, int64_t mc, const float* mb,
                                   int64_t plane) {
  constexpr int kIn = F::kIn, kOut = F::kOut;
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t r = 0; r < nt; ++r) {
    const TilePos tp = Locate<F>(g, t0 + r);
    const int64_t rows = std::min<int64_t>(kOut, g.oh - tp.oy), cols = std::min<int64_t>(kOut, g.ow - tp.ox);
    const int64_t base = ((tp.img * g.oh + tp.oy) * g.ow + tp.ox) * g.m + m0;
    const float* src = mb + r * mc;
    for (int64_t o0 = 0; o0 < mc; o0 += 16) {
      const __mmask16 mk = TailMask(mc - o0);
      __m512 t[kOut][kIn];  // t[i][j] = (A^T m)[i][j]
      for (int j = 0; j < kIn; ++j) {
        __m512 col[kIn], out[kOut];
        for (int i = 0; i < kIn; ++i) col[i] = _mm512_maskz_loadu_ps(mk, src + (i * kIn + j) * plane + o0);
        F::OutputRows(col, out);
        for (int i = 0; i < kOut; ++i) t[i][j] = out[i];
      }
      const __m512 bias = g.bias ? _mm512_maskz_loadu_ps(mk, g.bias + m0 + o0) : _mm512_setzero_ps();
      for (int i = 0; i < rows; ++i) {
        __m512 out[kOut];
        F::OutputRows(t[i], out);
        for (int j = 0; j < cols; ++j) {
          const int64_t at = base + (i * g.ow + j) * g.m + o0;
          __m512 val = _mm512_add_ps(out[j], bias);
          if (g.res) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(mk, g.res + at));
          val = simd::Activate(val, lo, hi, g.kind);
          _mm512_mask_storeu_ps(g.y + at, mk, val);
        }
      }
    }
  }
}

// coef[xi][k * 3 + l] = G[xi / kIn][k] * G[xi % kIn][l]: the weight transform's factors,
// computed once at compile time (a float product rounds the same there as at run time).
template <typename F>
struct TransformCoef {
  float v[F::kIn * F::kIn][9];
};
template <typename F>
constexpr TransformCoef<F> MakeTransformCoef() {
  TransformCoef<F> c{};
  for (int xi = 0; xi < F::kIn * F::kIn; ++xi)
    for (int k = 0; k < 3; ++k)
      for (int l = 0; l < 3; ++l) c.v[xi][k * 3 + l] = F::kG[xi / F::kIn][k] * F::kG[xi % F::kIn][l];
  return c;
}

// U = G g G^T for one group of 16 output channels (o .. o + live - 1 of a chunk, live <=
// 16), written straight into the packed B of every transform position: out[xi] is the
// chunk's [C] x [chunk columns] in 32-column panels. U[xi][i][o] = sum_{k,l} G[a][k] G[b][l]
// g[o][i][k][l] (xi = a * kIn + b), in float (G's fractions round to 1 ulp, below the
// transform's own error), 16 output channels per vector, gathered from W[o][i][3][3]: `base`
// points at the group's first row, rows c * 9 floats apart (16 rows' nine taps of channel i:
// with i innermost the rows' cache lines are reused by the next channel). One pass over the
// weights, with no copy: a taps-major staging copy, a separate Inf/NaN scan and a
// plane-at-a-time transform each read them again, and on a Xeon VM that memory traffic (and
// zeroing the staging pages) was a third of resnet18's session creation. Returns the lanes
// that saw an Inf or NaN weight (the panels are then incomplete garbage).
template <typename F>
STRATA_AVX512 __mmask16 TransformGroup(const float* base, int64_t c, int64_t live, int64_t o, sgemm::PackedB* out) {
  constexpr int kXi = F::kIn * F::kIn;
  static constexpr TransformCoef<F> kCoef = MakeTransformCoef<F>();
  const auto& coef = kCoef.v;
  const int64_t row = c * 9;  // floats per output channel; the gather offsets (16 rows) fit int32
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int32_t>(row)));
  const __m512i exp_bits = _mm512_set1_epi32(0x7f800000);
  __mmask16 bad = 0;
  // Columns past the chunk load as zeros and store the panel's zero padding.
  const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
  for (int64_t i = 0; i < c; ++i) {
    __m512 g[9];
    for (int k = 0; k < 9; ++k) {
      // A group of padding only (live == 0) may have no rows at all (base null).
      g[k] = live > 0 ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, rows, base + i * 9 + k, 4)
                      : _mm512_setzero_ps();
      // Inf or NaN: exponent bits all ones (AVX-512F has no fpclass)
      bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(g[k]), exp_bits), exp_bits);
    }
    const int64_t at = i * sgemm::kPanelWidth + o % sgemm::kPanelWidth;
    for (int xi = 0; xi < kXi; ++xi) {
      __m512 u = _mm512_mul_ps(_mm512_set1_ps(coef[xi][0]), g[0]);
      for (int k = 1; k < 9; ++k)
        if (coef[xi][k] != 0.0f) u = _mm512_fmadd_ps(_mm512_set1_ps(coef[xi][k]), g[k], u);
      _mm512_storeu_ps(out[xi].mutable_panel(o / sgemm::kPanelWidth) + at, u);
    }
  }
  return bad;
}

template <typename F>
class NhwcWinogradConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  static constexpr int kXi = F::kIn * F::kIn;  // transform positions, one GEMM each
  const char* ImplName() const override { return F::kName; }

  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }
  // The output may overwrite the residual: each element is read just before it is written.
  int InPlaceInput() const override { return has_residual_ ? 3 : -1; }

  NhwcWinogradConvKernel(const Node& node, const Tensor& w, const Tensor* b, const FusedActivation& act)
      : nchw_node_(OriginalNode(node, "Conv")),
        w_shape_(w.shape()),
        act_(act),
        c_(w.dim(1)),
        m_(w.dim(0)),
        mc_(std::min(m_, kChunkM)),
        has_residual_(node.inputs.size() > 3 && node.inputs[3] >= 0) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + m_);
  }

  // Transforms and packs the weights: packed_[chunk * kXi + xi], one group of 16 output
  // channels at a time, the groups split between the pool's threads. A payload still in the
  // model file (Tensor::on_disk) is read a group's rows at a time (sgemm::RowReader) and
  // transformed while they are in L2, so it is never loaded whole; a resident one is read in
  // place. *finite is false if some weight is Inf or NaN: the transforms' differences would
  // turn an infinite product into NaN where the direct conv keeps inf, so such (broken)
  // weights keep the SGEMM conv.
  Status Pack(const Tensor& w, ThreadPool* pool, bool* finite) {
    const int64_t chunks = (m_ + mc_ - 1) / mc_;
    packed_.resize(static_cast<size_t>(chunks * kXi));
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      for (int64_t xi = 0; xi < kXi; ++xi)
        RETURN_IF_ERROR(packed_[chunk * kXi + xi].Reserve(c_, std::min(mc_, m_ - chunk * mc_)));
    const int64_t per_chunk = (mc_ + sgemm::kPanelWidth - 1) / sgemm::kPanelWidth * 2;  // 16-column groups
    const int64_t groups = chunks * per_chunk;
    const sgemm::WeightRows src = sgemm::WeightRows::Of(w);
    std::atomic<bool> all_finite{true};
    FirstError first;
    auto run = [&](int64_t g0, int64_t g1) {
      first.Set([&]() -> Status {
        sgemm::RowReader reader(src, 16 * c_ * 9, "the Winograd weight transform");
        for (int64_t gi = g0; gi < g1; ++gi) {
          const int64_t chunk = gi / per_chunk, o = gi % per_chunk * 16;
          const int64_t m0 = chunk * mc_, cols = std::min(mc_, m_ - m0);
          const int64_t padded = (cols + sgemm::kPanelWidth - 1) / sgemm::kPanelWidth * sgemm::kPanelWidth;
          if (o >= padded) continue;  // the last chunk has fewer panels
          const int64_t live = std::clamp<int64_t>(cols - o, 0, 16);
          ASSIGN_OR_RETURN(const float* base, reader.Rows(m0 + std::min(o, cols), live, c_ * 9));
          if (TransformGroup<F>(base, c_, live, o, packed_.data() + chunk * kXi) != 0)
            all_finite.store(false, std::memory_order_relaxed);
        }
        return Status::Ok();
      }());
    };
    if (pool && pool->num_threads() > 1) {
      pool->Run(groups, 1, run);
    } else {
      run(0, groups);
    }
    RETURN_IF_ERROR(first.Take());
    *finite = all_finite.load();
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_));
    const SpatialGeometry& sg = xin.shapes.geo;
    const Shape out_shape = {xin.n, sg.out[0], sg.out[1], m_};
    ASSIGN_OR_RETURN(const Tensor* res, NhwcConvResidual(ctx, has_residual_, out_shape));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();
    Geo g{x->data<float>(),
          xin.h,
          xin.w,
          c_,
          sg.out[0],
          sg.out[1],
          m_,
          sg.pad_begin[0],
          sg.pad_begin[1],
          (sg.out[0] + F::kOut - 1) / F::kOut,
          (sg.out[1] + F::kOut - 1) / F::kOut,
          y->mutable_data<float>(),
          bias_.empty() ? nullptr : bias_.data(),
          res ? res->data<float>() : nullptr,
          act_.min,
          act_.max,
          act_.kind};
    // Work items: (block of tiles, chunk of output channels), block-major. Blocks are as
    // large as the scratch allows and their count makes the items a multiple of the thread
    // count (when the tiles allow), so that with few tiles (a 14x14 map at 256 channels: 16
    // tiles, two chunks) two threads split the output channels, each reading half of the
    // transformed weights, instead of each reading all of them for half the tiles. A tile's
    // result does not depend on its block (the GEMM computes every row alike), so the
    // output does not depend on the thread count.
    const int64_t tiles = xin.n * g.ty * g.tx, threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    const int64_t chunks = (m_ + mc_ - 1) / mc_, tb_max = MaxBlockTiles(c_, mc_, kXi);
    int64_t blocks = (tiles + tb_max - 1) / tb_max;
    while (blocks < tiles && (blocks * chunks) % threads != 0) ++blocks;
    const int64_t tb = (tiles + blocks - 1) / blocks;
    blocks = (tiles + tb - 1) / tb;
    const int64_t v_plane = tb * c_, m_plane = tb * mc_;
    FirstError error;
    auto fail = [&](Status st) { error.Set(std::move(st)); };
    auto run = [&](int64_t i0, int64_t i1) {
      float* v = ThreadScratch(kXi * (v_plane + m_plane));
      if (!v)
        return fail(MakeStatus(StatusCode::kOutOfMemory, node.Describe(), ": no memory for the Winograd tile scratch"));
      float* mb = v + kXi * v_plane;
      int64_t have = -1;  // the block whose input transform v holds
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t blk = item / chunks, chunk = item - blk * chunks;
        const int64_t t0 = blk * tb, nt = std::min(tb, tiles - t0), m0 = chunk * mc_, mc = std::min(mc_, m_ - m0);
        if (have != blk) InputTransform<F>(g, t0, nt, v, v_plane);
        have = blk;
        for (int xi = 0; xi < kXi; ++xi) {
          Status st = sgemm::Gemm(nt, v + xi * v_plane, c_, packed_[chunk * kXi + xi], mb + xi * m_plane, mc,
                                  sgemm::Epilogue{}, nullptr);
          if (!st.ok()) return fail(MakeStatus(st.code(), node.Describe(), ": ", st.message()));
        }
        OutputTransform<F>(g, t0, nt, m0, mc, mb, m_plane);
      }
    };
    const int64_t items = blocks * chunks;
    if (threads > 1 && items > 1) {
      ctx.pool()->Run(items, 1, run);
    } else {
      run(0, items);
    }
    return error.Take();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  FusedActivation act_;
  int64_t c_, m_, mc_;
  std::vector<sgemm::PackedB> packed_;  // [M chunk][xi]: U[xi] columns of the chunk, [C, mc]
  std::vector<float> bias_;
  bool has_residual_ = false;
};

}  // namespace

void PrepareWinogradThreadScratch() {
  if (sgemm::Available()) (void)ThreadScratch(kScratchFloats);
}

Result<std::unique_ptr<OpKernel>> MakeNhwcWinogradConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                       const FusedActivation& act) {
  const Node& node = init.node;
  auto no = [&](const char* why) { return Unsupported(node.Describe(), ": no Winograd conv: ", why); };
  // STRATA_WINOGRAD: 0 = off, 2 / 4 = F(2x2, 3x3) / F(4x4, 3x3) wherever one applies
  // (A/B comparisons, tests); unset or anything else = by map size.
  const char* env = std::getenv("STRATA_WINOGRAD");
  const std::string forced = env ? env : "";
  if (forced == "0") return no("STRATA_WINOGRAD=0");
  if (!sgemm::Available()) return no("needs AVX-512F");
  if (node.GetInt("group", 1) != 1 || w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3) return no("not a 3x3 conv");
  for (const char* attr : {"strides", "dilations"})
    if (node.HasAttr(attr))
      for (int64_t v : node.GetInts(attr))
        if (v != 1) return no("stride or dilation is not 1");
  const int64_t c = w.dim(1), m = w.dim(0);
  if (c < 16 || c > kWinogradMaxC || m < 16) return no("channel counts outside 16..512 in, >= 16 out");
  if (MaxBlockTiles(c, std::min(m, kChunkM), F4::kIn * F4::kIn) < kMinBlockTiles)
    return no("too many input channels for the scratch");
  const int64_t pixels = StaticNhwcOutputPixels(init);
  bool f2 = forced == "2";
  if (forced != "2" && forced != "4") {
    if (pixels >= 0 && pixels < kWinogradMinPixels) return no("output map too small");
    f2 = pixels >= 0 && pixels < kWinogradF4MinPixels;
    // bf16 sessions: F(2x2, 3x3) only for convs that stay fp32 there; the bf16 GEMM is
    // faster on those maps (resnet18's 14x14x256, 2 threads: 0.37 vs 0.46 ms).
    if (f2 && NhwcBf16ConvTakes(init)) return no("the bf16 GEMM takes it");
  }
  std::unique_ptr<OpKernel> kernel;
  Status st;
  bool finite = true;
  if (f2) {
    auto k = std::make_unique<NhwcWinogradConvKernel<F2>>(node, w, b, act);
    st = k->Pack(w, init.pool, &finite);
    kernel = std::move(k);
  } else {
    auto k = std::make_unique<NhwcWinogradConvKernel<F4>>(node, w, b, act);
    st = k->Pack(w, init.pool, &finite);
    kernel = std::move(k);
  }
  if (!st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
  if (!finite) return no("non-finite weights");
  return kernel;
}

}  // namespace strata
