// strata.internal QdqAdd (core/qdq_fusion.cc's FuseQdqAdd): a static int8 model's residual sum
//
//   QuantizeLinear([Relu](DequantizeLinear(a) + DequantizeLinear(b)), y_scale, y_zero_point)
//
// in one pass over the 8-bit tensors instead of five over float ones. Per element it does the
// float operations of those kernels in their order: (a - za) * sa, (b - zb) * sb, their sum,
// max with 0 for the Relu, then divide by y_scale, round half to even, add y's zero point,
// round, saturate (NaN to 0). So the bytes are the unfused graph's.
//
// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point (scalars;
// a and b of one shape, uint8 or int8 each); attribute relu (0 or 1). y has y_zero_point's type.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 intrinsic temporaries
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/kernel.h"
#include "core/layout_pass.h"
#include "core/threadpool.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/parallel_by_cpu.h"
#include "cpu/quantize_common.h"

namespace strata {
namespace {

struct AddParams {
  float sa, sb, sy, zy;
  int32_t za, zb;
  bool a_signed, b_signed, y_signed, relu;
};

#define STRATA_AVX512_QADD __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

STRATA_AVX512_QADD void QdqAddAvx512(const uint8_t* a, const uint8_t* b, int64_t n, const AddParams& p, uint8_t* y) {
  const __m512 vsa = _mm512_set1_ps(p.sa), vsb = _mm512_set1_ps(p.sb), vsy = _mm512_set1_ps(p.sy);
  const __m512 vzy = _mm512_set1_ps(p.zy), zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(p.y_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(p.y_signed ? 127.0f : 255.0f);
  const __m512i vza = _mm512_set1_epi32(p.za), vzb = _mm512_set1_epi32(p.zb);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m128i ab = _mm_maskz_loadu_epi8(m, a + i), bb = _mm_maskz_loadu_epi8(m, b + i);
    const __m512i ai = p.a_signed ? _mm512_cvtepi8_epi32(ab) : _mm512_cvtepu8_epi32(ab);
    const __m512i bi = p.b_signed ? _mm512_cvtepi8_epi32(bb) : _mm512_cvtepu8_epi32(bb);
    // Explicitly rounded products: GCC contracts a plain _mm512_mul_ps feeding _mm512_add_ps into
    // one FMA (-ffp-contract=fast), which skips a rounding of the unfused graph and changes a byte
    // now and then (QdqAdd.EveryPairOfBytesGivesTheUnfusedBytes).
    constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512 fa = _mm512_mul_round_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ai, vza)), vsa, kRn);
    const __m512 fb = _mm512_mul_round_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(bi, vzb)), vsb, kRn);
    __m512 v = _mm512_add_ps(fa, fb);
    if (p.relu) v = _mm512_max_ps(v, zero);
    v = _mm512_div_ps(v, vsy);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vzy);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zero);  // NaN -> 0, as Saturate
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(y + i, m, _mm512_cvtps_epi32(v));
  }
}

void QdqAddPlain(const uint8_t* a, const uint8_t* b, int64_t n, const AddParams& p, uint8_t* y) {
  const DataType yt = p.y_signed ? DataType::kInt8 : DataType::kUInt8;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t ai = p.a_signed ? static_cast<int8_t>(a[i]) : a[i];
    const int32_t bi = p.b_signed ? static_cast<int8_t>(b[i]) : b[i];
    float v = static_cast<float>(ai - p.za) * p.sa + static_cast<float>(bi - p.zb) * p.sb;
    if (p.relu) v = v > 0.0f ? v : 0.0f;
    y[i] = static_cast<uint8_t>(Saturate(std::nearbyint(v / p.sy) + p.zy, yt));
  }
}

Status QdqAdd(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  if (!a || !b || !IsQuant8(a->dtype()) || !IsQuant8(b->dtype()))
    return InvalidArgument(node.Describe(), ": a and b must be uint8 or int8 tensors");
  if (a->shape() != b->shape())
    return InvalidArgument(node.Describe(), ": a ", ShapeToString(a->shape()), " and b ", ShapeToString(b->shape()),
                           " must have one shape");
  static const char* kNames[] = {"a_scale", "a_zero_point", "", "b_scale", "b_zero_point", "y_scale", "y_zero_point"};
  for (size_t i : {1, 2, 4, 5, 6, 7}) RETURN_IF_ERROR(CheckScalar(ctx.input(i), node, kNames[i - 1]));
  for (size_t i : {1, 4, 6}) RETURN_IF_ERROR(CheckScale(ctx.input(i), node, kNames[i - 1]));
  if (ctx.input(2)->dtype() != a->dtype() || ctx.input(5)->dtype() != b->dtype() || !IsQuant8(ctx.input(7)->dtype()))
    return InvalidArgument(node.Describe(), ": zero points must have their tensor's 8-bit type");
  AddParams p;
  p.sa = LoadScale(*ctx.input(1), 0);
  p.sb = LoadScale(*ctx.input(4), 0);
  p.sy = LoadScale(*ctx.input(6), 0);
  p.za = LoadQ(*ctx.input(2), 0);
  p.zb = LoadQ(*ctx.input(5), 0);
  p.zy = static_cast<float>(LoadQ(*ctx.input(7), 0));
  p.a_signed = a->dtype() == DataType::kInt8;
  p.b_signed = b->dtype() == DataType::kInt8;
  p.y_signed = ctx.input(7)->dtype() == DataType::kInt8;
  p.relu = node.GetInt("relu", 0) != 0;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, ctx.input(7)->dtype(), a->shape()));
  const auto* ab = static_cast<const uint8_t*>(a->raw_data());
  const auto* bb = static_cast<const uint8_t*>(b->raw_data());
  auto* yb = static_cast<uint8_t*>(y->raw_mutable_data());
  const int64_t n = a->num_elements();
  const bool simd = HasAvx512Bw();
  auto body = [&](int64_t i0, int64_t i1) {
    if (simd) {
      QdqAddAvx512(ab + i0, bb + i0, i1 - i0, p, yb + i0);
    } else {
      QdqAddPlain(ab + i0, bb + i0, i1 - i0, p, yb + i0);
    }
  };
  // Parts of 16K values over the pool from 64K (each value alone: any split, the same bytes),
  // in fixed per-CPU regions: a thread reads the bytes its CPU's share of the convs before
  // wrote (dynamic parts had the two vCPUs read each other's writes: the sums took as long
  // on 2 threads as on 1).
  constexpr int64_t kPart = 16384;
  if (ctx.pool() && n >= 4 * kPart) {
    ParallelRangeByCpu(ctx.pool(), (n + kPart - 1) / kPart, 1,
                       [&](int64_t p0, int64_t p1) { body(p0 * kPart, std::min(n, p1 * kPart)); });
  } else if (n > 0) {
    body(0, n);
  }
  return Status::Ok();
}

}  // namespace

void RegisterQdqAddKernels(KernelRegistry& r) {
  // The only entry: the fusion makes the node (optimized sessions only); the plain loop
  // serves CPUs without AVX-512BW, with the same bytes.
  KernelDef d = UntypedFnDef(kQdqAddOp, 1, QdqAdd, INT_MAX);
  d.domain = kInternalDomain;
  d.reference = false;
  d.impl = "qdq_add";
  r.Register(d);
}

}  // namespace strata
