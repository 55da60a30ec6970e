// ONNX Runtime's QOperator-format contrib ops (domain com.microsoft) whose output byte depends
// on one input byte at a time, run through a 256-entry table per input as ONNX Runtime does:
//
//   QLinearSigmoid / QLinearLeakyRelu(X, X_scale, X_zero_point?, Y_scale, Y_zero_point?)
//     y = saturate(round(f(X_scale * (x - X_zp)) / Y_scale) + Y_zp), f sigmoid or
//     v >= 0 ? v : alpha * v (attribute alpha, default 0.01).
//   QLinearConcat(Y_scale, Y_zero_point, X1, X1_scale, X1_zero_point, X2, ...), attribute axis:
//     the inputs' values requantized to Y's scale and zero point, concatenated along axis; an
//     input whose scale and zero point are Y's is copied.
//   QLinearWhere(condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale,
//                z_zero_point): Where over the requantized X and Y, numpy broadcasting.
//
// Each table entry is the op on the dequantized value in float, quantized like QuantizeLinear
// (division by the scale, round half to even, zero point, saturation): ONNX Runtime's
// QlinearBuildLookupTable. Scales and zero points are scalars; absent zero points are 0.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/kernel.h"
#include "core/threadpool.h"
#include "cpu/broadcast.h"
#include "cpu/quantize_common.h"

namespace strata {
namespace {

using cpu::BroadcastPlan;
using cpu::ForEachRow;
using cpu::kParallelGrain;
using cpu::MakeBroadcastPlan;

using Table = std::array<uint8_t, 256>;

// table[b] for every byte b of an 8-bit type t (an int8 byte read as signed).
template <typename F>
void BuildTable(DataType t, float xs, int32_t xz, float ys, int32_t yz, const F& f, Table* table) {
  for (int b = 0; b < 256; ++b) {
    const int32_t x = t == DataType::kInt8 ? static_cast<int8_t>(b) : b;
    const float v = f(xs * static_cast<float>(x - xz));
    (*table)[static_cast<size_t>(b)] =
        static_cast<uint8_t>(Saturate(std::nearbyint(v / ys) + static_cast<float>(yz), t));
  }
}

// y[i] = table[x[i]] over n bytes, split over the pool when large.
void ApplyTable(const uint8_t* x, uint8_t* y, int64_t n, const Table& table, ThreadPool* pool) {
  const auto body = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = table[x[i]];
  };
  if (pool && n >= 4 * kParallelGrain) {
    pool->ParallelFor(n, kParallelGrain, body);
  } else {
    body(0, n);
  }
}

template <bool kLeaky>
Status QLinearUnary(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input X is required");
  if (!IsQuant8(x->dtype()))
    return InvalidArgument(node.Describe(), ": X must be uint8 or int8, got ", DataTypeName(x->dtype()));
  const DataType t = x->dtype();
  RETURN_IF_ERROR(CheckScalarScale(ctx, 1, "X_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 2, "X_zero_point", t, true));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 3, "Y_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 4, "Y_zero_point", t, true));
  const float alpha = node.GetFloat("alpha", 0.01f);
  Table table;
  const float xs = LoadScale(*ctx.input(1), 0), ys = LoadScale(*ctx.input(3), 0);
  const int32_t xz = ScalarZeroPoint(ctx, 2), yz = ScalarZeroPoint(ctx, 4);
  if (kLeaky) {
    BuildTable(
        t, xs, xz, ys, yz, [alpha](float v) { return v >= 0 ? v : alpha * v; }, &table);
  } else {
    BuildTable(
        t, xs, xz, ys, yz, [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, &table);
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, t, x->shape()));
  ApplyTable(static_cast<const uint8_t*>(x->raw_data()), static_cast<uint8_t*>(y->raw_mutable_data()),
             x->num_elements(), table, ctx.pool());
  return Status::Ok();
}

// The table that requantizes bytes of scale xs, zero point xz to ys, yz (identity when equal).
void RequantTable(DataType t, float xs, int32_t xz, float ys, int32_t yz, Table* table) {
  BuildTable(
      t, xs, xz, ys, yz, [](float v) { return v; }, table);
}

Status QLinearConcat(KernelContext& ctx) {
  const Node& node = ctx.node();
  const size_t n_in = ctx.num_inputs();
  if (n_in < 5 || (n_in - 2) % 3 != 0)
    return InvalidArgument(node.Describe(),
                           ": needs Y_scale, Y_zero_point and one or more (X, X_scale, "
                           "X_zero_point) triples, got ",
                           n_in, " inputs");
  RETURN_IF_ERROR(CheckScalarScale(ctx, 0, "Y_scale"));
  if (!ctx.input(1) || !IsQuant8(ctx.input(1)->dtype()))
    return InvalidArgument(node.Describe(), ": Y_zero_point must be a uint8 or int8 scalar");
  const DataType t = ctx.input(1)->dtype();
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 1, "Y_zero_point", t, false));
  const size_t count = (n_in - 2) / 3;
  const Tensor* first = ctx.input(2);
  if (!first) return InvalidArgument(node.Describe(), ": input 1 of the concatenation is missing");
  const int64_t rank = static_cast<int64_t>(first->rank());
  int64_t axis = node.GetInt("axis", INT64_MIN);
  if (axis == INT64_MIN) return InvalidArgument(node.Describe(), ": attribute axis is required");
  if (rank == 0 || axis < -rank || axis >= rank)
    return InvalidArgument(node.Describe(), ": axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  Shape out = first->shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t k = 0; k < count; ++k) {
    const std::string i = std::to_string(k + 1);
    const Tensor* x = ctx.input(2 + 3 * k);
    if (!x) return InvalidArgument(node.Describe(), ": input ", i, " of the concatenation is missing");
    if (x->dtype() != t)
      return InvalidArgument(node.Describe(), ": input ", i, " is ", DataTypeName(x->dtype()),
                             ", Y_zero_point's type is ", DataTypeName(t));
    RETURN_IF_ERROR(CheckScalarScale(ctx, 3 + 3 * k, "X_scale of input " + i));
    RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 4 + 3 * k, "X_zero_point of input " + i, t, false));
    bool same = static_cast<int64_t>(x->rank()) == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || x->dim(static_cast<size_t>(d)) == out[d];
    if (!same)
      return InvalidArgument(node.Describe(), ": input ", i, " has shape ", ShapeToString(x->shape()),
                             ", which does not match input 1's ", ShapeToString(first->shape()), " off axis ", axis);
    out[static_cast<size_t>(axis)] += x->dim(static_cast<size_t>(axis));
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, t, out));
  if (y->num_elements() == 0) return Status::Ok();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out[d];
  const int64_t row = out[static_cast<size_t>(axis)] * inner;  // bytes per outer index in y
  const float ys = LoadScale(*ctx.input(0), 0);
  const int32_t yz = LoadQ(*ctx.input(1), 0);
  auto* yb = static_cast<uint8_t*>(y->raw_mutable_data());
  int64_t offset = 0;
  for (size_t k = 0; k < count; ++k) {
    const Tensor& x = *ctx.input(2 + 3 * k);
    const int64_t span = x.dim(static_cast<size_t>(axis)) * inner;
    const float xs = LoadScale(*ctx.input(3 + 3 * k), 0);
    const int32_t xz = LoadQ(*ctx.input(4 + 3 * k), 0);
    const auto* xb = static_cast<const uint8_t*>(x.raw_data());
    // Copied when the input already has Y's scale and zero point (a float ==, as ONNX Runtime).
    const bool copy = xs == ys && xz == yz;
    Table table;
    if (!copy) RequantTable(t, xs, xz, ys, yz, &table);
    for (int64_t o = 0; span > 0 && o < outer; ++o) {
      uint8_t* dst = yb + o * row + offset;
      if (copy) {
        std::memcpy(dst, xb + o * span, static_cast<size_t>(span));
      } else {
        ApplyTable(xb + o * span, dst, span, table, nullptr);
      }
    }
    offset += span;
  }
  return Status::Ok();
}

Status QLinearWhere(KernelContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.num_inputs() != 9)
    return InvalidArgument(node.Describe(),
                           ": needs 9 inputs (condition, X, x_scale, x_zero_point, Y, y_scale, "
                           "y_zero_point, z_scale, z_zero_point), got ",
                           ctx.num_inputs());
  const Tensor* c = ctx.input(0);
  const Tensor* x = ctx.input(1);
  const Tensor* yv = ctx.input(4);
  if (!c || c->dtype() != DataType::kBool) return InvalidArgument(node.Describe(), ": condition must be a bool tensor");
  if (!x || !yv || !IsQuant8(x->dtype()) || yv->dtype() != x->dtype())
    return InvalidArgument(node.Describe(), ": X and Y must both be uint8 or both int8");
  const DataType t = x->dtype();
  RETURN_IF_ERROR(CheckScalarScale(ctx, 2, "x_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 3, "x_zero_point", t, false));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 5, "y_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 6, "y_zero_point", t, false));
  RETURN_IF_ERROR(CheckScalarScale(ctx, 7, "z_scale"));
  RETURN_IF_ERROR(CheckScalarZeroPoint(ctx, 8, "z_zero_point", t, false));
  const float zs = LoadScale(*ctx.input(7), 0);
  const int32_t zz = LoadQ(*ctx.input(8), 0);
  Table tx, ty;
  RequantTable(t, LoadScale(*ctx.input(2), 0), LoadQ(*ctx.input(3), 0), zs, zz, &tx);
  RequantTable(t, LoadScale(*ctx.input(5), 0), LoadQ(*ctx.input(6), 0), zs, zz, &ty);
  ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBroadcastPlan({c->shape(), x->shape(), yv->shape()}, node));
  ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(0, t, plan.out_shape));
  if (plan.out_size == 0) return Status::Ok();
  const bool* cb = c->data<bool>();
  const auto* xb = static_cast<const uint8_t*>(x->raw_data());
  const auto* yb = static_cast<const uint8_t*>(yv->raw_data());
  auto* zb = static_cast<uint8_t*>(z->raw_mutable_data());
  const int64_t inner = plan.inner(), s0 = plan.inner_stride(0), s1 = plan.inner_stride(1), s2 = plan.inner_stride(2);
  const auto body = [&](int64_t r0, int64_t r1) {
    ForEachRow(plan, r0, r1, [&](const int64_t* offs, int64_t o) {
      for (int64_t j = 0; j < inner; ++j)
        zb[o + j] = cb[offs[0] + j * s0] ? tx[xb[offs[1] + j * s1]] : ty[yb[offs[2] + j * s2]];
    });
  };
  if (ctx.pool() && plan.out_size >= 4 * kParallelGrain) {
    ctx.pool()->ParallelFor(plan.rows(), std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, inner)), body);
  } else {
    body(0, plan.rows());
  }
  return Status::Ok();
}

}  // namespace

void RegisterQLinearLookupKernels(KernelRegistry& r) {
  r.Register(ContribDef("QLinearSigmoid", QLinearUnary<false>));
  r.Register(ContribDef("QLinearLeakyRelu", QLinearUnary<true>));
  r.Register(ContribDef("QLinearConcat", QLinearConcat));
  r.Register(ContribDef("QLinearWhere", QLinearWhere));
}

}  // namespace strata
