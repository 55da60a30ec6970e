// ONNX Runtime's QOperator-format contrib ops (domain com.microsoft), which its quantizer writes
// with quant_format=QOperator and ONNX Model Zoo's int8 CNNs use next to QLinearConv:
//
//   QLinearAdd / QLinearMul(A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale,
//                           C_zero_point?)
//     C = saturate(round((A_scale * (A - A_zp)) op (B_scale * (B - B_zp))) / C_scale) + C_zp)
//     with numpy broadcasting; A, B and C of one 8-bit type T; absent zero points are 0.
//   QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point), attribute
//     channels_last: y = saturate(round(x_scale * mean(X - x_zp) / y_scale) + y_zp) over the
//     spatial dims of [N, C, ...] (or [N, ..., C]), y [N, C, 1, ...] (or [N, 1, ..., C]).
//
// Per element the float operations are those of the unfused DequantizeLinear -> Add/Mul ->
// QuantizeLinear graph (round half to even, NaN to 0), as strata.internal QdqAdd does; the
// pool sums the integers exactly and scales once. Scales and zero points are scalars.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/kernel.h"
#include "cpu/broadcast.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/quantize_common.h"

namespace strata {
namespace {

using cpu::BroadcastPlan;
using cpu::ForEachRow;
using cpu::kParallelGrain;
using cpu::MakeBroadcastPlan;

// Input i, a scalar scale, or a scalar zero point of type `t` (absent: 0 when `optional`).
// Errors name the node and the input.
Status CheckScaleInput(const KernelContext& ctx, size_t i, const char* what) {
  RETURN_IF_ERROR(CheckScalar(ctx.input(i), ctx.node(), what));
  return CheckScale(ctx.input(i), ctx.node(), what);
}
Status CheckZeroPointInput(const KernelContext& ctx, size_t i, const char* what, DataType t, bool optional) {
  if (optional && !ctx.input(i)) return Status::Ok();
  RETURN_IF_ERROR(CheckScalar(ctx.input(i), ctx.node(), what));
  return CheckZeroPoint(ctx.input(i), t, 1, ctx.node(), what);
}

int32_t ScalarZeroPoint(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.input(i);
  return t ? LoadQ(*t, 0) : 0;
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
  RETURN_IF_ERROR(CheckScaleInput(ctx, 1, "A_scale"));
  RETURN_IF_ERROR(CheckZeroPointInput(ctx, 2, "A_zero_point", t, true));
  RETURN_IF_ERROR(CheckScaleInput(ctx, 4, "B_scale"));
  RETURN_IF_ERROR(CheckZeroPointInput(ctx, 5, "B_zero_point", t, true));
  RETURN_IF_ERROR(CheckScaleInput(ctx, 6, "C_scale"));
  RETURN_IF_ERROR(CheckZeroPointInput(ctx, 7, "C_zero_point", t, true));
  const float sa = LoadScale(*ctx.input(1), 0), sb = LoadScale(*ctx.input(4), 0), sc = LoadScale(*ctx.input(6), 0);
  const int32_t za = ScalarZeroPoint(ctx, 2), zb = ScalarZeroPoint(ctx, 5);
  const float zc = static_cast<float>(ScalarZeroPoint(ctx, 7));
  ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({a->shape(), b->shape()}, node));
  ASSIGN_OR_RETURN(Tensor * c, ctx.AllocateOutput(0, t, plan.out_shape));
  if (plan.out_size == 0) return Status::Ok();
  const int64_t inner = plan.inner(), sa_in = plan.inner_stride(0), sb_in = plan.inner_stride(1);
  const auto body = [&](int64_t r0, int64_t r1) {
    ForEachRow(plan, r0, r1, [&](const int64_t* offs, int64_t out) {
      for (int64_t j = 0; j < inner; ++j) {
        const float va = static_cast<float>(LoadQ(*a, offs[0] + j * sa_in) - za) * sa;
        const float vb = static_cast<float>(LoadQ(*b, offs[1] + j * sb_in) - zb) * sb;
        const float v = kMul ? va * vb : va + vb;
        StoreQ(*c, out + j, Saturate(std::nearbyint(v / sc) + zc, t));
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

Status QLinearGlobalAveragePool(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input X is required");
  if (!IsQuant8(x->dtype()))
    return InvalidArgument(node.Describe(), ": X must be uint8 or int8, got ", DataTypeName(x->dtype()));
  if (x->rank() < 3)
    return InvalidArgument(node.Describe(), ": X must be [N, C, spatial...] (or channels last), got shape ",
                           ShapeToString(x->shape()));
  const int64_t channels_last = node.GetInt("channels_last", 0);
  if (channels_last != 0 && channels_last != 1)
    return InvalidArgument(node.Describe(), ": channels_last must be 0 or 1, got ", channels_last);
  const DataType t = x->dtype();
  RETURN_IF_ERROR(CheckScaleInput(ctx, 1, "x_scale"));
  RETURN_IF_ERROR(CheckZeroPointInput(ctx, 2, "x_zero_point", t, false));
  RETURN_IF_ERROR(CheckScaleInput(ctx, 3, "y_scale"));
  RETURN_IF_ERROR(CheckZeroPointInput(ctx, 4, "y_zero_point", t, false));
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
  const int32_t zx = LoadQ(*ctx.input(2), 0);
  const float zy = static_cast<float>(LoadQ(*ctx.input(4), 0));
  // x_scale / y_scale / count applied once to the exact integer sum, in double: the float
  // dequantize-mean-quantize chain would round at each step.
  const double scale = static_cast<double>(LoadScale(*ctx.input(1), 0)) /
                       static_cast<double>(LoadScale(*ctx.input(3), 0)) / static_cast<double>(count);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      int64_t acc = 0;
      for (int64_t p = 0; p < count; ++p)
        acc += LoadQ(*x, channels_last ? (n * count + p) * C + c : (n * C + c) * count + p) - zx;
      const double v = std::nearbyint(static_cast<double>(acc) * scale) + zy;
      StoreQ(*y, n * C + c, Saturate(static_cast<float>(v), t));
    }
  return Status::Ok();
}

KernelDef MsDef(const char* op, Status (*fn)(KernelContext&)) {
  KernelDef d = UntypedFnDef(op, 1, fn, INT_MAX);
  d.domain = "com.microsoft";
  return d;
}

}  // namespace

void RegisterQLinearContribKernels(KernelRegistry& r) {
  r.Register(MsDef("QLinearAdd", QLinearBinary<false>));
  r.Register(MsDef("QLinearMul", QLinearBinary<true>));
  r.Register(MsDef("QLinearGlobalAveragePool", QLinearGlobalAveragePool));
}

}  // namespace strata
