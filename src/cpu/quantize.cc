// Quantization ops: QuantizeLinear, DequantizeLinear (opsets 10, 13) and DynamicQuantizeLinear,
// with the helpers of quantize_common.h. The integer-arithmetic ops live in int_matmul.cc
// (MatMulInteger, QLinearMatMul) and int_conv.cc (ConvInteger, QLinearConv); this file
// registers them all.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/kernel.h"
#include "core/threadpool.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/quantize_common.h"
#include "cpu/register.h"

namespace strata {

Status CheckScale(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": input '", what, "' is missing");
  if (t->dtype() != DataType::kFloat && t->dtype() != DataType::kFloat16 && t->dtype() != DataType::kDouble)
    return InvalidArgument(node.Describe(), ": '", what, "' must be float, got ", DataTypeName(t->dtype()));
  return Status::Ok();
}

Status CheckScalar(const Tensor* t, const Node& node, const char* what) {
  if (!t || t->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": ", what, " must be a scalar, got ",
                           t ? ShapeToString(t->shape()) : std::string("nothing"));
  return Status::Ok();
}

Status CheckScalarScale(const KernelContext& ctx, size_t i, const std::string& what) {
  RETURN_IF_ERROR(CheckScalar(ctx.input(i), ctx.node(), what.c_str()));
  return CheckScale(ctx.input(i), ctx.node(), what.c_str());
}

Status CheckScalarZeroPoint(const KernelContext& ctx, size_t i, const std::string& what, DataType t, bool optional) {
  if (optional && !ctx.input(i)) return Status::Ok();
  RETURN_IF_ERROR(CheckScalar(ctx.input(i), ctx.node(), what.c_str()));
  return CheckZeroPoint(ctx.input(i), t, 1, ctx.node(), what.c_str());
}

KernelDef ContribDef(const char* op, Status (*fn)(KernelContext&)) {
  KernelDef d = UntypedFnDef(op, 1, fn, INT_MAX);
  d.domain = "com.microsoft";
  return d;
}

Status CheckZeroPoint(const Tensor* zp, DataType input_dtype, int64_t len, const Node& node, const char* what) {
  if (!zp || zp->num_elements() == 0) return Status::Ok();
  if (zp->dtype() != input_dtype)
    return InvalidArgument(node.Describe(), ": ", what, " dtype ", DataTypeName(zp->dtype()),
                           " differs from its input's ", DataTypeName(input_dtype));
  if (zp->num_elements() != 1 && zp->num_elements() != len)
    return InvalidArgument(node.Describe(), ": ", what, " must be a scalar or have ", len, " values, got shape ",
                           ShapeToString(zp->shape()));
  return Status::Ok();
}

Result<Tensor> AllocateIntScratch(DataType dt, int64_t n, Allocator* alloc, const Node& node) {
  auto r = Tensor::Allocate(dt, {std::max<int64_t>(n, 1)}, alloc);
  if (!r.ok()) return MakeStatus(r.status().code(), node.Describe(), ": scratch buffer: ", r.status().message());
  return std::move(r).value();
}

namespace {

// Per-tensor or per-axis parameters: scale/zero point tensors must be scalars or 1-D
// of length x.shape[axis]. Returns the stride structure for indexing.
struct AxisParams {
  int64_t count = 1;     // 1: per tensor
  int64_t inner = 1;     // elements after the axis
  int64_t axis_len = 1;  // x's length along the axis
  int64_t block = 0;     // opset 21 blocked quantization: elements per scale along the axis
};

// The scale (and zero point) index of x's element i.
inline int64_t ScaleIndex(const AxisParams& p, int64_t i) {
  if (p.count == 1) return 0;
  if (p.block == 0) return (i / p.inner) % p.count;
  const int64_t a = (i / p.inner) % p.axis_len, outer = i / (p.inner * p.axis_len);
  const int64_t blocks = (p.axis_len + p.block - 1) / p.block;
  return (outer * blocks + a / p.block) * p.inner + i % p.inner;
}

Result<AxisParams> ResolveAxis(const Tensor& x, const Tensor& scale, const Tensor* zp, const Node& node) {
  AxisParams p;
  const int64_t block = node.opset >= 21 ? node.GetInt("block_size", 0) : 0;
  if (block < 0) return InvalidModel(node.Describe(), ": block_size must be >= 0, got ", block);
  if (block > 0) {
    // Blocked: scale has x's shape but for the axis, which holds ceil(len / block_size) blocks.
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 1), static_cast<int64_t>(x.rank()), node));
    Shape want = x.shape();
    want[static_cast<size_t>(axis)] = (x.dim(axis) + block - 1) / block;
    if (scale.shape() != want)
      return InvalidArgument(node.Describe(), ": with block_size ", block, " along axis ", axis,
                             " the scale must have ", "shape ", ShapeToString(want), ", got ",
                             ShapeToString(scale.shape()));
    if (zp && zp->shape() != scale.shape())
      return InvalidArgument(node.Describe(), ": zero point shape ", ShapeToString(zp->shape()),
                             " differs from scale shape ", ShapeToString(scale.shape()));
    p.count = scale.num_elements() == 1 ? 1 : scale.num_elements();
    p.block = block;
    p.axis_len = x.dim(axis);
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
    return p;
  }
  if (scale.num_elements() == 1 && scale.rank() <= 1) {
    if (zp && zp->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": zero point must be a scalar when the scale is a scalar");
    return p;
  }
  if (scale.rank() != 1) return InvalidArgument(node.Describe(), ": scale must be a scalar or 1-D");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 1), static_cast<int64_t>(x.rank()), node));
  if (scale.dim(0) != x.dim(axis))
    return InvalidArgument(node.Describe(), ": scale has ", scale.dim(0), " values but axis ", axis, " has size ",
                           x.dim(axis));
  if (zp && zp->shape() != scale.shape())
    return InvalidArgument(node.Describe(), ": zero point shape ", ShapeToString(zp->shape()),
                           " differs from scale shape ", ShapeToString(scale.shape()));
  p.count = scale.dim(0);
  p.axis_len = x.dim(axis);
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  return p;
}

// DynamicQuantizeLinear's two passes on AVX-512F, the same bits as the plain loops below: the
// range's min/max (with 0, as std::min/max keep their first argument on ties) and NaN check,
// then q = Saturate(nearbyint(x / scale) + zp) with the division, the rounding (half to even),
// NaN -> 0 and the clamp done as Saturate does them.
#define STRATA_AVX512_DQL __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
STRATA_AVX512_DQL bool RangeAvx512(const float* in, int64_t n, float* mn, float* mx) {
  __m512 vmin = _mm512_setzero_ps(), vmax = _mm512_setzero_ps();
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    vmin = _mm512_min_ps(vmin, v);
    vmax = _mm512_max_ps(vmax, v);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, in + i);  // zeros past the end: 0 is in the range anyway
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    vmin = _mm512_min_ps(vmin, v);
    vmax = _mm512_max_ps(vmax, v);
  }
  if (nan) return false;
  const float lo = _mm512_reduce_min_ps(vmin), hi = _mm512_reduce_max_ps(vmax);
  *mn = lo < 0 ? lo : 0.0f;
  *mx = hi > 0 ? hi : 0.0f;
  return true;
}
// Also QuantizeLinear's per-tensor float path: out_signed saturates to int8 instead of uint8
// (the low byte of the int32 is the int8's two's complement).
STRATA_AVX512_DQL void QuantizeAvx512(const float* in, int64_t n, float scale, float zp, uint8_t* q,
                                      bool out_signed = false) {
  const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp), zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(out_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(out_signed ? 127.0f : 255.0f);
  // Blocks of 64: the four clamped vectors narrowed by the pack instructions (exact: the values
  // are already in the type's range) into one 64-byte store instead of four vpmovdb stores
  // (narrowing stores are slow on AMD's cores). The packs interleave 128-bit lanes: dword 4k + j
  // of the result holds vector j's elements 4k..4k+3; the permute puts them in order.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i r[4];
    for (int k = 0; k < 4; ++k) {
      __m512 v = _mm512_div_ps(_mm512_loadu_ps(in + i + 16 * k), vs);
      v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
      v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zero);  // NaN -> 0, as Saturate
      r[k] = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
    }
    const __m512i w0 = _mm512_packs_epi32(r[0], r[1]), w1 = _mm512_packs_epi32(r[2], r[3]);
    const __m512i b = out_signed ? _mm512_packs_epi16(w0, w1) : _mm512_packus_epi16(w0, w1);
    _mm512_storeu_si512(q + i, _mm512_permutexvar_epi32(order, b));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, in + i), vs);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zero);  // NaN -> 0, as Saturate
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, _mm512_cvtps_epi32(v));
  }
}
// DequantizeLinear's per-tensor 8-bit path: float(q - zp) * scale, as the plain loop (q - zp
// is exact in int32 and in float).
STRATA_AVX512_DQL void DequantizeAvx512(const uint8_t* q, bool in_signed, int64_t n, float scale, int32_t zp,
                                        float* out) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512i vz = _mm512_set1_epi32(zp);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m128i b = _mm_maskz_loadu_epi8(m, q + i);
    const __m512i v = in_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v, vz)), vs));
  }
}
// Runs body(b, e) over [0, n) in parts of 16K values over the pool from 64K values (each value
// is computed alone: any split gives the same bits).
template <typename F>
void SplitValues(ThreadPool* pool, int64_t n, const F& body) {
  constexpr int64_t kPart = 16384;
  if (!pool || n < 4 * kPart) {
    body(0, n);
    return;
  }
  // Fixed per-CPU regions: a thread reads what its CPU wrote before (see qdq_add.cc).
  ParallelRangeByCpu(pool, (n + kPart - 1) / kPart, 1,
                     [&](int64_t p0, int64_t p1) { body(p0 * kPart, std::min(n, p1 * kPart)); });
}
}  // namespace

bool HasAvx512Bw() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return ok;
}

namespace {

Status QuantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  if (!x) return InvalidArgument(node.Describe(), ": input x is missing");
  RETURN_IF_ERROR(CheckScale(scale, node, "y_scale"));
  if (x->dtype() != DataType::kFloat && x->dtype() != DataType::kInt32 && x->dtype() != DataType::kFloat16 &&
      x->dtype() != DataType::kDouble)
    return InvalidArgument(node.Describe(), ": x must be float or int32, got ", DataTypeName(x->dtype()));
  DataType out_t = zp ? zp->dtype() : DataType::kUInt8;
  if (const int64_t want = node.opset >= 21 ? node.GetInt("output_dtype", 0) : 0; want != 0) {
    // ONNX TensorProto types: 2 uint8, 3 int8.
    const DataType asked = want == 2 ? DataType::kUInt8 : want == 3 ? DataType::kInt8 : DataType::kUndefined;
    if (asked == DataType::kUndefined)
      return Unsupported(node.Describe(), ": output_dtype ", want, " is not supported (uint8 = 2 and int8 = 3 are)");
    if (zp && zp->dtype() != asked)
      return InvalidModel(node.Describe(), ": output_dtype ", want, " differs from y_zero_point's type ",
                          DataTypeName(zp->dtype()));
    out_t = asked;
  }
  if (!IsQuant8(out_t))
    return InvalidArgument(node.Describe(), ": y_zero_point must be uint8 or int8, got ", DataTypeName(out_t));
  ASSIGN_OR_RETURN(AxisParams ap, ResolveAxis(*x, *scale, zp, node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out_t, x->shape()));
  const int64_t n = x->num_elements();
  if (ap.count == 1 && x->dtype() == DataType::kFloat && HasAvx512Bw()) {
    const float s = LoadScale(*scale, 0), z = static_cast<float>(zp ? LoadQ(*zp, 0) : 0);
    const bool s8 = out_t == DataType::kInt8;
    uint8_t* q = s8 ? reinterpret_cast<uint8_t*>(y->mutable_data<int8_t>()) : y->mutable_data<uint8_t>();
    const float* in = x->data<float>();
    SplitValues(ctx.pool(), n, [&](int64_t b, int64_t e) { QuantizeAvx512(in + b, e - b, s, z, q + b, s8); });
    return Status::Ok();
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ScaleIndex(ap, i);
    const float s = LoadScale(*scale, c);
    float v = 0;
    if (x->dtype() == DataType::kInt32) {
      v = static_cast<float>(x->data<int32_t>()[i]);
    } else {
      v = LoadScale(*x, i);
    }
    const int32_t z = zp ? LoadQ(*zp, c) : 0;
    StoreQ(*y, i, Saturate(std::nearbyint(v / s) + static_cast<float>(z), out_t));
  }
  return Status::Ok();
}

Status DequantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  if (!x) return InvalidArgument(node.Describe(), ": input x is missing");
  RETURN_IF_ERROR(CheckScale(scale, node, "x_scale"));
  if (!IsQuant8(x->dtype()) && x->dtype() != DataType::kInt32)
    return InvalidArgument(node.Describe(), ": x must be uint8, int8 or int32, got ", DataTypeName(x->dtype()));
  if (zp && zp->dtype() != x->dtype())
    return InvalidArgument(node.Describe(), ": x_zero_point dtype ", DataTypeName(zp->dtype()),
                           " differs from x dtype ", DataTypeName(x->dtype()));
  ASSIGN_OR_RETURN(AxisParams ap, ResolveAxis(*x, *scale, zp, node));
  const int64_t n = x->num_elements();
  if (node.opset >= 19 && scale->dtype() == DataType::kFloat16) {
    // Since opset 19 y has x_scale's type: float16 scales give a float16 y.
    ASSIGN_OR_RETURN(Tensor * y16, ctx.AllocateOutput(0, DataType::kFloat16, x->shape()));
    Float16* out16 = y16->mutable_data<Float16>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = ScaleIndex(ap, i);
      const int32_t z = zp ? LoadQ(*zp, c) : 0;
      out16[i] = Float16(static_cast<float>(static_cast<int64_t>(LoadQ(*x, i)) - z) * LoadScale(*scale, c));
    }
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  float* out = y->mutable_data<float>();
  if (ap.count == 1 && IsQuant8(x->dtype()) && HasAvx512Bw()) {
    const float s = LoadScale(*scale, 0);
    const int32_t z = zp ? LoadQ(*zp, 0) : 0;
    const bool s8 = x->dtype() == DataType::kInt8;
    const auto* q = static_cast<const uint8_t*>(x->raw_data());
    SplitValues(ctx.pool(), n, [&](int64_t b, int64_t e) { DequantizeAvx512(q + b, s8, e - b, s, z, out + b); });
    return Status::Ok();
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ScaleIndex(ap, i);
    const int32_t z = zp ? LoadQ(*zp, c) : 0;
    out[i] = static_cast<float>(static_cast<int64_t>(LoadQ(*x, i)) - z) * LoadScale(*scale, c);
  }
  return Status::Ok();
}

Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kFloat) return InvalidArgument(node.Describe(), ": x must be a float tensor");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kUInt8, x->shape()));
  float scale = 0;
  int32_t zp = 0;
  RETURN_IF_ERROR(DynamicQuantizeU8(node, x->data<float>(), x->num_elements(), y->mutable_data<uint8_t>(), &scale, &zp,
                                    ctx.pool()));
  ASSIGN_OR_RETURN(Tensor * ys, ctx.AllocateOutput(1, DataType::kFloat, {}));
  ys->mutable_data<float>()[0] = scale;
  ASSIGN_OR_RETURN(Tensor * yz, ctx.AllocateOutput(2, DataType::kUInt8, {}));
  yz->mutable_data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return Status::Ok();
}

}  // namespace

Status DynamicQuantizeU8(const Node& node, const float* in, int64_t n, uint8_t* q, float* scale_out, int32_t* zp_out,
                         ThreadPool* pool) {
  const bool simd = HasAvx512Bw();
  // Large tensors in parts over the pool (min/max and the per-value rounding are exact, so
  // the bits do not depend on the split).
  const int parts =
      simd && pool && pool->num_threads() > 1 && n >= (int64_t{1} << 16) ? std::min(pool->num_threads(), 64) : 1;
  const int64_t chunk = (n / parts + 15) / 16 * 16;
  // Part p: [begin, end) of x, whole vectors but for the last part's tail.
  const auto bounds = [&](int64_t p) {
    return std::pair<int64_t, int64_t>{std::min(n, p * chunk), p + 1 == parts ? n : std::min(n, (p + 1) * chunk)};
  };
  float mn = 0, mx = 0;  // the range always includes 0
  if (simd) {
    float pmn[64], pmx[64];
    bool pok[64];
    const auto range = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const auto [b, e] = bounds(p);
        pok[p] = RangeAvx512(in + b, e - b, &pmn[p], &pmx[p]);
      }
    };
    if (parts > 1) {
      pool->Run(parts, 1, range);
    } else {
      range(0, 1);
    }
    for (int p = 0; p < parts; ++p) {
      if (!pok[p]) return InvalidArgument(node.Describe(), ": x contains NaN");
      mn = std::min(mn, pmn[p]);
      mx = std::max(mx, pmx[p]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) return InvalidArgument(node.Describe(), ": x contains NaN");
      mn = std::min(mn, in[i]);
      mx = std::max(mx, in[i]);
    }
  }
  const float scale = (mx - mn) / 255.0f;
  const int32_t zp = scale == 0 ? 0 : Saturate(std::nearbyint(0.0f - mn / scale), DataType::kUInt8);
  if (scale == 0) {
    std::fill(q, q + n, static_cast<uint8_t>(zp));
  } else if (simd) {
    const auto quant = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const auto [b, e] = bounds(p);
        QuantizeAvx512(in + b, e - b, scale, static_cast<float>(zp), q + b);
      }
    };
    if (parts > 1) {
      pool->Run(parts, 1, quant);
    } else {
      quant(0, 1);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      q[i] = static_cast<uint8_t>(Saturate(std::nearbyint(in[i] / scale) + static_cast<float>(zp), DataType::kUInt8));
  }
  *scale_out = scale;
  *zp_out = zp;
  return Status::Ok();
}

void RegisterQuantizeKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("QuantizeLinear", 10, QuantizeLinear, 12));
  r.Register(UntypedFnDef("QuantizeLinear", 13, QuantizeLinear, INT_MAX));
  r.Register(UntypedFnDef("DequantizeLinear", 10, DequantizeLinear, 12));
  r.Register(UntypedFnDef("DequantizeLinear", 13, DequantizeLinear, INT_MAX));
  r.Register(UntypedFnDef("DynamicQuantizeLinear", 11, DynamicQuantizeLinear, INT_MAX));
  RegisterIntMatMulKernels(r);
  RegisterIntConvKernels(r);
  RegisterQdqAddKernels(r);
  RegisterQLinearContribKernels(r);
  RegisterQLinearLookupKernels(r);
  RegisterQGemmKernels(r);
}

}  // namespace strata
