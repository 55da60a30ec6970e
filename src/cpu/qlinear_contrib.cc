// ONNX Runtime's QOperator-format contrib ops (domain com.microsoft), which its quantizer writes
// with quant_format=QOperator and ONNX Model Zoo's int8 CNNs use next to QLinearConv:
//
//   QLinearAdd / QLinearMul(A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale,
//                           C_zero_point?): numpy broadcasting, A, B, C of one 8-bit type.
//   QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point), channels_last.
//   QLinearAveragePool(X, x_scale, x_zero_point?, y_scale, y_zero_point?), AveragePool's
//     attributes and channels_last, 1-3 spatial dims.
//
// ONNX Runtime defines these ops, so each computes ONNX Runtime's (MLAS's) float operations in
// its order and gives its bytes (bench/compare-ort/qoperator_parity.py): Add with scale ratios
// and FMAs, Mul on the exact integer product, the global pool on the exact integer sum with
// one float scale, the average pool on float window sums with the zero point added before
// rounding. Scales and zero points are scalars; absent zero points are 0.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/broadcast.h"
#include "cpu/conv_geometry.h"
#include "cpu/quantize_common.h"

namespace strata {
namespace {

using cpu::BroadcastPlan;
using cpu::ForEachRow;
using cpu::kParallelGrain;
using cpu::MakeBroadcastPlan;

// v rounded half to even, clamped to T's range and stored as 8 bytes at y (v finite, or NaN
// already sent to 0).
template <bool kSigned>
__attribute__((target("avx2"))) inline void StoreSaturated8(__m256 v, uint8_t* y) {
  const __m256 lo = _mm256_set1_ps(kSigned ? -128.0f : 0.0f), hi = _mm256_set1_ps(kSigned ? 127.0f : 255.0f);
  v = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), lo), hi);
  const __m256i q = _mm256_cvtps_epi32(v);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), kSigned ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
}

// The channels-last average pool's window sums, 8 channels at a time: sums[j] += x_scale *
// float(x - x_zp) over the taps in order, the float operations of the scalar loop (its table
// holds those products), so the same bits. Returns how many channels it did (a multiple of 8).
constexpr int kMaxVectorTaps = 64;
template <bool kSigned>
__attribute__((target("avx2"))) int64_t WindowSumsAvx2(const uint8_t* const* taps, int ntaps, int64_t cb, float xs,
                                                       int32_t xz, float* sums) {
  const __m256 vs = _mm256_set1_ps(xs);
  const __m256i vz = _mm256_set1_epi32(xz);
  int64_t j = 0;
  for (; j + 8 <= cb; j += 8) {
    __m256 acc = _mm256_loadu_ps(sums + j);
    for (int i = 0; i < ntaps; ++i) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(taps[i] + j));
      const __m256i q = kSigned ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(vs, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, vz))));
    }
    _mm256_storeu_ps(sums + j, acc);
  }
  return j;
}

// y[j] = saturate(round(sums[j] / count / ys + yz)) for 8 channels at a time, the scalar
// loop's operations (Saturate: round half to even, NaN to 0, clamp). Returns the channels done.
template <bool kSigned>
__attribute__((target("avx2"))) int64_t StoreMeansAvx2(const float* sums, int64_t cb, float count, float ys, float yz,
                                                       uint8_t* y) {
  const __m256 vc = _mm256_set1_ps(count), vys = _mm256_set1_ps(ys), vyz = _mm256_set1_ps(yz);
  int64_t j = 0;
  for (; j + 8 <= cb; j += 8) {
    const __m256 v = _mm256_add_ps(_mm256_div_ps(_mm256_div_ps(_mm256_loadu_ps(sums + j), vc), vys), vyz);
    // Saturate's NaN -> 0 (round keeps NaN; and-ing with the ordered mask zeroes it).
    StoreSaturated8<kSigned>(_mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)), y + j);
  }
  return j;
}

// QLinearAdd's row y[j] = saturate(round(fma(a[j], ra, fma(b[j], rb, f)))) (kGeneral), or with
// one input constant over the row: fma(b[j], rb, f) (kAConst) or fma(a[j], ra, f) (kBConst).
enum AddRow { kGeneral, kAConst, kBConst };
inline float AddValue(AddRow mode, float a, float b, float ra, float rb, float f) {
  if (mode == kAConst) return std::fma(b, rb, f);
  if (mode == kBConst) return std::fma(a, ra, f);
  return std::fma(a, ra, std::fma(b, rb, f));
}

// 8 bytes of T as floats.
template <typename T>
__attribute__((target("avx2,fma"))) inline __m256 Load8(const T* p) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(std::is_same_v<T, int8_t> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes));
}

// The same row 8 values at a time with AVX2 + FMA (std::fma above is a libm call in the
// baseline build): the same float operations, rounded half to even and clamped before the
// conversion, so the same bytes. ra, rb and f must be finite (Saturate sends NaN to 0).
template <typename T>
__attribute__((target("avx2,fma"))) int64_t AddRowAvx2(AddRow mode, const T* a, const T* b, T* y, int64_t n, float ra,
                                                       float rb, float f) {
  const __m256 vra = _mm256_set1_ps(ra), vrb = _mm256_set1_ps(rb), vf = _mm256_set1_ps(f);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v;
    if (mode == kAConst) {
      v = _mm256_fmadd_ps(Load8(b + j), vrb, vf);
    } else if (mode == kBConst) {
      v = _mm256_fmadd_ps(Load8(a + j), vra, vf);
    } else {
      v = _mm256_fmadd_ps(Load8(a + j), vra, _mm256_fmadd_ps(Load8(b + j), vrb, vf));
    }
    StoreSaturated8<std::is_same_v<T, int8_t>>(v, reinterpret_cast<uint8_t*>(y + j));
  }
  return j;
}

bool HasAvx2Fma() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}

template <bool kMul>
Status QLinearBinary(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  if (!a || !b) return InvalidArgument(node.Describe(), ": inputs A and B are required");
  if (!IsQuant8(a->dtype()) || b->dtype() != a->dtype())
    return InvalidArgument(node.Describe(), ": A and B must both be uint8 or both int8, got ", DataTypeName(a->dtype()),
                           " and ", DataTypeName(b->dtype()));
  const DataType t = a->dtype();
  RETURN_IF_ERROR(CheckScalarScale(ctx, 1, "A_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 2, "A_zero_point", t, true));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 4, "B_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 5, "B_zero_point", t, true));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 6, "C_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 7, "C_zero_point", t, true));
  const float sa = LoadScale(*ctx.input(1), 0), sb = LoadScale(*ctx.input(4), 0), sc = LoadScale(*ctx.input(6), 0);
  const int32_t za = ScalarZeroPoint(ctx, 2), zb = ScalarZeroPoint(ctx, 5), zc = ScalarZeroPoint(ctx, 7);
  ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({a->shape(), b->shape()}, node));
  ASSIGN_OR_RETURN(Tensor * c, ctx.AllocateOutput(0, t, plan.out_shape));
  if (plan.out_size == 0) return Status::Ok();
  const int64_t inner = plan.inner(), sa_in = plan.inner_stride(0), sb_in = plan.inner_stride(1);
  // ONNX Runtime's float operations (MLAS), so the same bytes. Mul: the exact integer product
  // of the centred values, times sa * sb / sc, plus zc. Add: fixed = zc - (ra * za + rb * zb)
  // with ra = sa / sc, rb = sb / sc, then fma(a, ra, fma(b, rb, fixed)); an input constant over
  // a row (a scalar or broadcast span, A first) joins the fixed part as a product and a sum.
  const float ratio = sa * sb / sc, ra = sa / sc, rb = sb / sc;
  const float fixed = static_cast<float>(zc) - std::fma(ra, static_cast<float>(za), rb * static_cast<float>(zb));
  const bool a_const = sa_in == 0 || inner == 1, b_const = !a_const && sb_in == 0;
  const bool vector = !kMul && HasAvx2Fma() && std::isfinite(ra) && std::isfinite(rb);
  const auto body = [&](int64_t r0, int64_t r1) {
    ForEachRow(plan, r0, r1, [&](const int64_t* offs, int64_t out) {
      if (kMul) {
        for (int64_t j = 0; j < inner; ++j) {
          const int32_t p = (LoadQ(*a, offs[0] + j * sa_in) - za) * (LoadQ(*b, offs[1] + j * sb_in) - zb);
          StoreQ(*c, out + j, Saturate(static_cast<float>(p) * ratio + static_cast<float>(zc), t));
        }
        return;
      }
      const AddRow mode = a_const ? kAConst : b_const ? kBConst : kGeneral;
      float f = fixed;
      if (a_const) f = fixed + static_cast<float>(LoadQ(*a, offs[0])) * ra;
      if (b_const) f = fixed + static_cast<float>(LoadQ(*b, offs[1])) * rb;
      int64_t j = 0;
      // Contiguous rows (the inputs' inner strides 1, or 0 for the constant one) on AVX2.
      if (vector && (a_const || sa_in == 1) && (b_const || sb_in == 1) && std::isfinite(f)) {
        const auto* pa = static_cast<const uint8_t*>(a->raw_data()) + offs[0];
        const auto* pb = static_cast<const uint8_t*>(b->raw_data()) + offs[1];
        auto* pc = static_cast<uint8_t*>(c->raw_mutable_data()) + out;
        j = t == DataType::kUInt8
                ? AddRowAvx2(mode, pa, pb, pc, inner, ra, rb, f)
                : AddRowAvx2(mode, reinterpret_cast<const int8_t*>(pa), reinterpret_cast<const int8_t*>(pb),
                             reinterpret_cast<int8_t*>(pc), inner, ra, rb, f);
      }
      for (; j < inner; ++j) {
        const float qa = static_cast<float>(LoadQ(*a, offs[0] + j * sa_in));
        const float qb = static_cast<float>(LoadQ(*b, offs[1] + j * sb_in));
        StoreQ(*c, out + j, Saturate(AddValue(mode, qa, qb, ra, rb, f), t));
      }
    });
  };
  if (ctx.pool() && plan.out_size >= 4 * kParallelGrain) {
    ctx.pool()->ParallelFor(plan.rows(), std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, inner)), body);
  } else {
    body(0, plan.rows());
  }
  return Status::Ok();
}

// GlobalMeans on the typed bytes of X.
template <typename T>
void GlobalMeansT(const T* x, int64_t N, int64_t C, int64_t count, bool channels_last, float scale, int32_t xz,
                  int32_t yz, DataType t, uint8_t* y) {
  const auto store = [&](int64_t i, int64_t acc) {
    const float v = static_cast<float>(acc - static_cast<int64_t>(xz) * count) * scale;
    y[i] = static_cast<uint8_t>(Saturate(std::nearbyint(v) + static_cast<float>(yz), t));
  };
  for (int64_t n = 0; n < N; ++n) {
    if (!channels_last) {
      for (int64_t c = 0; c < C; ++c) {
        const T* p = x + (n * C + c) * count;
        int64_t acc = 0;
        for (int64_t i = 0; i < count; ++i) acc += p[i];
        store(n * C + c, acc);
      }
      continue;
    }
    // Channels last: the sums of a block of channels side by side, position by position.
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      const int64_t cb = std::min<int64_t>(64, C - c0);
      int64_t acc[64] = {};
      for (int64_t p = 0; p < count; ++p) {
        const T* row = x + (n * count + p) * C + c0;
        for (int64_t j = 0; j < cb; ++j) acc[j] += row[j];
      }
      for (int64_t j = 0; j < cb; ++j) store(n * C + c0 + j, acc[j]);
    }
  }
}

// y[n, c] = the mean of X's `count` positions of plane (n, c), as ONNX Runtime's global
// average pool computes it (MLAS): the exact integer sum minus count * x_zp, times the float
// scale x_scale / (y_scale * count), rounded half to even, plus y_zp, saturated.
void GlobalMeans(const Tensor& x, int64_t N, int64_t C, int64_t count, bool channels_last, float xscale, int32_t xz,
                 float yscale, int32_t yz, Tensor* y) {
  const float scale = xscale / (yscale * static_cast<float>(count));
  auto* yb = static_cast<uint8_t*>(y->raw_mutable_data());
  if (x.dtype() == DataType::kUInt8) {
    GlobalMeansT(x.data<uint8_t>(), N, C, count, channels_last, scale, xz, yz, x.dtype(), yb);
  } else {
    GlobalMeansT(x.data<int8_t>(), N, C, count, channels_last, scale, xz, yz, x.dtype(), yb);
  }
}

// The pools' inputs: X 8-bit of rank >= 3 (at most `max_rank`), channels_last 0 or 1, scalar
// x_scale / y_scale and zero points of X's type (absent allowed when `zp_optional`). Returns
// channels_last.
Result<bool> CheckPoolInputs(KernelContext& ctx, size_t max_rank, bool zp_optional) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input X is required");
  if (!IsQuant8(x->dtype()))
    return InvalidArgument(node.Describe(), ": X must be uint8 or int8, got ", DataTypeName(x->dtype()));
  if (x->rank() < 3 || x->rank() > max_rank)
    return InvalidArgument(node.Describe(), ": X must be [N, C, spatial...] (or channels last) with ",
                           max_rank > 5 ? "1 or more" : "1 to 3", " spatial dims, got shape ",
                           ShapeToString(x->shape()));
  const int64_t channels_last = node.GetInt("channels_last", 0);
  if (channels_last != 0 && channels_last != 1)
    return InvalidArgument(node.Describe(), ": channels_last must be 0 or 1, got ", channels_last);
  const DataType t = x->dtype();
  RETURN_IF_ERROR(CheckScalarScale(ctx, 1, "x_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 2, "x_zero_point", t, zp_optional));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 3, "y_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 4, "y_zero_point", t, zp_optional));
  return channels_last != 0;
}

Status QLinearGlobalAveragePool(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const bool channels_last, CheckPoolInputs(ctx, SIZE_MAX, false));
  const Tensor* x = ctx.input(0);
  const DataType t = x->dtype();
  const Shape& xs = x->shape();
  const size_t cdim = channels_last ? xs.size() - 1 : 1;
  const int64_t N = xs[0], C = xs[cdim];
  int64_t count = 1;
  Shape ys = xs;
  for (size_t d = 1; d < xs.size(); ++d) {
    if (d == cdim) continue;
    count *= xs[d];
    ys[d] = 1;
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, t, ys));
  if (N * C == 0) return Status::Ok();
  if (count == 0)
    return InvalidArgument(node.Describe(), ": X ", ShapeToString(xs), " has no spatial positions to average");
  GlobalMeans(*x, N, C, count, channels_last, LoadScale(*ctx.input(1), 0), LoadQ(*ctx.input(2), 0),
              LoadScale(*ctx.input(3), 0), LoadQ(*ctx.input(4), 0), y);
  return Status::Ok();
}

// QLinearAveragePool (attributes kernel_shape, strides, pads, auto_pad, ceil_mode,
// count_include_pad, channels_last over 1-3 spatial dims), as ONNX Runtime computes it: X
// dequantized in float, each window's sum in float (rows, then columns), divided by the
// window's count of input positions (count_include_pad: the kernel's size), and y =
// saturate(round(mean / y_scale + y_zp)): the zero point added before rounding. A window
// covering the whole image without padding takes the global mean's integer path, as there.
Status QLinearAveragePool(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const bool channels_last, CheckPoolInputs(ctx, 5, true));
  const Tensor* x = ctx.input(0);
  const DataType t = x->dtype();
  const Shape& xs = x->shape();
  const size_t sr = xs.size() - 2, cdim = channels_last ? xs.size() - 1 : 1;
  Shape spatial;
  for (size_t d = 0; d < sr; ++d) spatial.push_back(xs[channels_last ? 1 + d : 2 + d]);
  const std::vector<int64_t>* ks = FindInts(node, "kernel_shape");
  if (!ks) return InvalidModel(node.Describe(), ": attribute kernel_shape is required");
  const Shape kernel(*ks);
  for (int64_t k : kernel)
    if (k <= 0) return InvalidModel(node.Describe(), ": kernel_shape ", ShapeToString(kernel), " must be positive");
  ASSIGN_OR_RETURN(SpatialGeometry g,
                   ComputeWindowGeometry(node, spatial, kernel, node.GetInt("ceil_mode", 0) != 0, false));
  for (size_t d = 0; d < sr; ++d)
    if (g.pad_begin[d] >= kernel[d] || g.pad_end[d] >= kernel[d])
      return InvalidModel(node.Describe(), ": pads must be smaller than the kernel ", ShapeToString(kernel));
  const int64_t N = xs[0], C = xs[cdim];
  Shape ys{N};
  if (!channels_last) ys.push_back(C);
  ys.insert(ys.end(), g.out.begin(), g.out.end());
  if (channels_last) ys.push_back(C);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, t, ys));
  if (y->num_elements() == 0) return Status::Ok();
  const float xscale = LoadScale(*ctx.input(1), 0), yscale = LoadScale(*ctx.input(3), 0);
  const int32_t xz = ZeroPointAt(ctx.input(2), 0), yz = ZeroPointAt(ctx.input(4), 0);
  bool global = true;
  for (size_t d = 0; d < sr; ++d)
    global = global && kernel[d] == spatial[d] && g.pad_begin[d] == 0 && g.pad_end[d] == 0;
  if (global) {
    GlobalMeans(*x, N, C, g.InSize(), channels_last, xscale, xz, yscale, yz, y);
    return Status::Ok();
  }
  // 1-3 spatial dims as 3 ([D, H, W], leading dims 1).
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
  for (size_t d = 0; d < sr; ++d) {
    const size_t e = 3 - sr + d;
    in[e] = g.in[d];
    out[e] = g.out[d];
    k[e] = kernel[d];
    st[e] = g.strides[d];
    pb[e] = g.pad_begin[d];
  }
  const bool include_pad = node.GetInt("count_include_pad", 0) != 0;
  const int64_t in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2];
  // Each byte's dequantized value, as ONNX Runtime computes it (x_scale * (x - x_zp) in float).
  float deq[256];
  for (int b = 0; b < 256; ++b)
    deq[b] = xscale * static_cast<float>((t == DataType::kInt8 ? static_cast<int8_t>(b) : b) - xz);
  const auto* xb = static_cast<const uint8_t*>(x->raw_data());
  auto* yb = static_cast<uint8_t*>(y->raw_mutable_data());
  // Work item: (n, one channel) in NCHW, (n, a block of up to 64 channels) channels last, whose
  // window sums run side by side in the same order per channel.
  const int64_t blocks = channels_last ? (C + 63) / 64 : C, pstride = channels_last ? C : 1;
  const auto count_of = [&](int64_t d0, int64_t h0, int64_t w0) {
    if (include_pad) return k[0] * k[1] * k[2];
    const auto span = [](int64_t b, int64_t kk, int64_t n) { return std::min(b + kk, n) - std::max<int64_t>(b, 0); };
    return span(d0, k[0], in[0]) * span(h0, k[1], in[1]) * span(w0, k[2], in[2]);
  };
  // One NCHW plane, an output row's windows at a time (up to 256 columns): their sums side by
  // side, each still taking its window's taps in order (rows, then columns; taps outside the
  // image skipped), so one float chain per output as above, but independent chains in flight.
  // A window is up to the whole padded image (10^12 taps for a 1024 x 1024 window over a
  // 1024 x 1024 image): the run's limits are read every 2^20 taps of a task (NCHW: per
  // kernel column over a row of up to 256 outputs; channels last: per output).
  KernelStop stop(node);
  const auto PlaneRows = [&](const uint8_t* xin, uint8_t* yout, int64_t& pending) {
    float row_sums[256];
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        const int64_t d0 = od * st[0] - pb[0], h0 = oh * st[1] - pb[1];
        const int64_t d1 = std::min(d0 + k[0], in[0]), h1 = std::min(h0 + k[1], in[1]);
        for (int64_t ow0 = 0; ow0 < out[2]; ow0 += 256) {
          const int64_t nw = std::min<int64_t>(256, out[2] - ow0);
          std::fill(row_sums, row_sums + nw, 0.0f);
          for (int64_t id = std::max<int64_t>(d0, 0); id < d1; ++id)
            for (int64_t ih = std::max<int64_t>(h0, 0); ih < h1; ++ih) {
              const uint8_t* row = xin + (id * in[1] + ih) * in[2];
              // Only the taps some column's window has inside the row: a kernel far wider than
              // the image (its pads just under it) made this loop run over ~k empty taps.
              const int64_t kx0 = std::max<int64_t>(0, pb[2] - (ow0 + nw - 1) * st[2]);
              const int64_t kx1 = std::min<int64_t>(k[2], in[2] + pb[2] - ow0 * st[2]);
              for (int64_t kx = kx0; kx < kx1; ++kx) {
                if (!stop.Continue(pending, nw)) return;
                // Columns j whose tap kx lies inside the row: 0 <= (ow0 + j) * s - pad + kx < W.
                const int64_t lo = pb[2] - kx, hi = in[2] - 1 + pb[2] - kx;
                const int64_t jlo = std::max<int64_t>(0, (lo <= 0 ? 0 : (lo + st[2] - 1) / st[2]) - ow0);
                const int64_t jhi = std::min<int64_t>(nw, (hi < 0 ? -1 : hi / st[2]) - ow0 + 1);
                const uint8_t* tap = row + ow0 * st[2] - pb[2] + kx;
                for (int64_t j = jlo; j < jhi; ++j) row_sums[j] += deq[tap[j * st[2]]];
              }
            }
          uint8_t* py = yout + (od * out[1] + oh) * out[2] + ow0;
          for (int64_t j = 0; j < nw; ++j) {
            const float mean = row_sums[j] / static_cast<float>(count_of(d0, h0, (ow0 + j) * st[2] - pb[2]));
            py[j] = static_cast<uint8_t>(Saturate(mean / yscale + static_cast<float>(yz), t));
          }
        }
      }
  };
  // Channels last on AVX2: a window's taps listed, then 8 channels at a time over them.
  const bool vector_taps = channels_last && HasAvx2Fma() && k[0] * k[1] * k[2] <= kMaxVectorTaps;
  // Channels last: work item (n, channel block of up to 64, output row (od, oh)), the block's
  // window sums side by side, each in the same order. NCHW: work item (n, c), PlaneRows.
  const int64_t rows = channels_last ? out[0] * out[1] : 1;
  const auto body = [&](int64_t i0, int64_t i1) {
    float sums[64];
    int64_t pending = 0;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / (blocks * rows), blk = item / rows % blocks, r = item % rows;
      const int64_t c0 = channels_last ? blk * 64 : blk, cb = channels_last ? std::min<int64_t>(64, C - c0) : 1;
      const uint8_t* xin = channels_last ? xb + n * in_size * C + c0 : xb + (n * C + c0) * in_size;
      uint8_t* yout = channels_last ? yb + n * out_size * C + c0 : yb + (n * C + c0) * out_size;
      if (!channels_last) {
        PlaneRows(xin, yout, pending);
        if (stop.stopped()) return;
        continue;
      }
      const int64_t od = r / out[1], oh = r % out[1];
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        const int64_t d0 = od * st[0] - pb[0], h0 = oh * st[1] - pb[1], w0 = ow * st[2] - pb[2];
        const int64_t d1 = std::min(d0 + k[0], in[0]), h1 = std::min(h0 + k[1], in[1]), w1 = std::min(w0 + k[2], in[2]);
        const auto span = [](int64_t b, int64_t e) { return std::max<int64_t>(1, e - std::max<int64_t>(b, 0)); };
        if (!stop.Continue(pending, span(d0, d1) * span(h0, h1) * span(w0, w1) * cb)) return;
        std::fill(sums, sums + cb, 0.0f);
        const uint8_t* window[kMaxVectorTaps];
        int ntaps = 0;
        for (int64_t id = std::max<int64_t>(d0, 0); id < d1; ++id)
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < h1; ++ih)
            for (int64_t iw = std::max<int64_t>(w0, 0); iw < w1; ++iw) {
              const uint8_t* px = xin + ((id * in[1] + ih) * in[2] + iw) * pstride;
              if (vector_taps) {  // at most k[0] k[1] k[2] <= kMaxVectorTaps taps
                window[ntaps++] = px;
                continue;
              }
              for (int64_t j = 0; j < cb; ++j) sums[j] += deq[px[j]];
            }
        if (ntaps > 0) {
          const int64_t done = t == DataType::kInt8 ? WindowSumsAvx2<true>(window, ntaps, cb, xscale, xz, sums)
                                                    : WindowSumsAvx2<false>(window, ntaps, cb, xscale, xz, sums);
          for (int i = 0; i < ntaps; ++i)
            for (int64_t j = done; j < cb; ++j) sums[j] += deq[window[i][j]];
        }
        const int64_t count = count_of(d0, h0, w0);
        uint8_t* py = yout + ((od * out[1] + oh) * out[2] + ow) * pstride;
        int64_t j0 = 0;
        if (vector_taps) {
          const float fc = static_cast<float>(count), fz = static_cast<float>(yz);
          j0 = t == DataType::kInt8 ? StoreMeansAvx2<true>(sums, cb, fc, yscale, fz, py)
                                    : StoreMeansAvx2<false>(sums, cb, fc, yscale, fz, py);
        }
        for (int64_t j = j0; j < cb; ++j) {
          const float mean = sums[j] / static_cast<float>(count);
          py[j] = static_cast<uint8_t>(Saturate(mean / yscale + static_cast<float>(yz), t));
        }
      }
    }
  };
  const int64_t items = N * blocks * rows;
  const int64_t taps = N * C * out_size * std::max<int64_t>(1, k[0] * k[1] * k[2]);
  if (ctx.pool() && taps >= 4 * kParallelGrain) {
    ctx.pool()->ParallelFor(items, std::max<int64_t>(1, items * kParallelGrain / taps), body);
  } else {
    body(0, items);
  }
  return stop.status();
}

}  // namespace

void RegisterQLinearContribKernels(KernelRegistry& r) {
  r.Register(ContribDef("QLinearAdd", QLinearBinary<false>));
  r.Register(ContribDef("QLinearMul", QLinearBinary<true>));
  r.Register(ContribDef("QLinearGlobalAveragePool", QLinearGlobalAveragePool));
  r.Register(ContribDef("QLinearAveragePool", QLinearAveragePool));
}

}  // namespace strata
