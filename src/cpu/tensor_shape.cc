// Shape-only kernels (Reshape, Flatten, Squeeze, Unsqueeze, Identity alias their input
// buffer) and small generators (Shape, Size, ConstantOfShape, Range, EyeLike).
#include <cmath>
#include <limits>

#include "cpu/int_wrap.h"
#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

Status Reshape(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  Shape req;  // inline: Reshape runs on every step of attention models
  if (node.opset < 5) {
    if (!node.HasAttr("shape")) return InvalidModel(node.Describe(), ": missing the 'shape' attribute");
    req = node.GetInts("shape");
  } else {
    ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "shape"));
    if (s->rank() != 1)
      return InvalidArgument(node.Describe(), ": shape input must be 1-D, got ", ShapeToString(s->shape()));
    RETURN_IF_ERROR(ReadIntsInto(*s, node, "shape", &req));
  }
  const bool allowzero = node.opset >= 14 && node.GetInt("allowzero", 0) != 0;
  ASSIGN_OR_RETURN(Shape out, ResolveReshape(x->shape(), req, allowzero, node));
  ctx.SetOutput(0, Value(x->Reshaped(std::move(out))));
  return Status::Ok();
}

Status Flatten(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  int64_t axis = node.GetInt("axis", 1);
  if (axis < -rank || axis > rank)
    return InvalidArgument(node.Describe(), ": axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= x->dim(i);
  ctx.SetOutput(0, Value(x->Reshaped({a, b})));
  return Status::Ok();
}

Result<std::vector<int64_t>> AxesFromAttrOrInput(KernelContext& ctx, int input_since, bool* given) {
  const Node& node = ctx.node();
  *given = false;
  if (node.opset < input_since) {
    if (!node.HasAttr("axes")) return std::vector<int64_t>{};
    *given = true;
    return node.GetInts("axes");
  }
  const Tensor* a = ctx.input(1);
  if (!a || !a->valid()) return std::vector<int64_t>{};
  if (a->rank() > 1) return InvalidArgument(node.Describe(), ": axes must be 1-D, got ", ShapeToString(a->shape()));
  *given = true;
  return ReadInts(*a, node, "axes");
}

Status Squeeze(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  bool given = false;
  ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, 13, &given));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<bool> drop(rank, false);
  if (!given || axes.empty()) {  // no (or empty) axes: drop every unit dimension
    for (int64_t i = 0; i < rank; ++i) drop[i] = x->dim(i) == 1;
  } else {
    ASSIGN_OR_RETURN(auto norm, NormalizeAxes(axes, rank, node));
    for (int64_t a : norm) {
      if (x->dim(a) != 1)
        return InvalidArgument(node.Describe(), ": cannot squeeze axis ", a, " of size ", x->dim(a), " in shape ",
                               ShapeToString(x->shape()));
      drop[a] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(x->dim(i));
  ctx.SetOutput(0, Value(x->Reshaped(std::move(out))));
  return Status::Ok();
}

Status Unsqueeze(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  bool given = false;
  ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, 13, &given));
  if (!given || axes.empty()) return InvalidArgument(node.Describe(), ": axes are required");
  const int64_t out_rank = static_cast<int64_t>(x->rank() + axes.size());
  ASSIGN_OR_RETURN(auto norm, NormalizeAxes(axes, out_rank, node));
  std::vector<bool> ins(out_rank, false);
  for (int64_t a : norm) ins[a] = true;
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(ins[i] ? 1 : x->dim(j++));
  ctx.SetOutput(0, Value(x->Reshaped(std::move(out))));
  return Status::Ok();
}

Status Identity(KernelContext& ctx) {
  const Value& v = ctx.input_value(0);
  if (v.empty()) return InvalidArgument(ctx.node().Describe(), ": missing required input 0 (input)");
  ctx.SetOutput(0, v);  // tensors, sequences and optionals all pass through by reference
  return Status::Ok();
}

Status ShapeOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  int64_t start = 0, end = rank;
  if (node.opset >= 15) {
    start = node.GetInt("start", 0);
    end = node.GetInt("end", rank);
  }
  // Out-of-range start/end are clamped, as the spec says.
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  int64_t n = std::max<int64_t>(0, end - start);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, {n}));
  for (int64_t i = 0; i < n; ++i) y->mutable_data<int64_t>()[i] = x->dim(start + i);
  return Status::Ok();
}

Status SizeOp(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, {}));
  *y->mutable_data<int64_t>() = x->num_elements();
  return Status::Ok();
}

Status ConstantOfShape(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 0, "input"));
  if (s->rank() != 1)
    return InvalidArgument(node.Describe(), ": input must be a 1-D shape, got ", ShapeToString(s->shape()));
  ASSIGN_OR_RETURN(auto shape, ReadInts(*s, node, "input"));
  for (int64_t d : shape)
    if (d < 0) return InvalidArgument(node.Describe(), ": negative dimension in shape ", ShapeToString(shape));
  const Attribute* va = node.FindAttr("value");
  Tensor value = Tensor::Scalar<float>(0.0f);
  if (va) {
    if (va->type != Attribute::Type::kTensor || va->t.num_elements() != 1)
      return InvalidModel(node.Describe(), ": 'value' must be a one-element tensor");
    value = va->t;
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, value.dtype(), shape));
  bool ok = DispatchBySize(value.dtype(), [&]<typename T>() {
    const T v = *value.data<T>();
    T* p = y->mutable_data<T>();
    std::fill(p, p + y->num_elements(), v);
  });
  return ok ? Status::Ok() : UnsupportedType(node, value.dtype());
}

Status RangeOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* start, RequireInput(ctx, 0, "start"));
  ASSIGN_OR_RETURN(const Tensor* limit, RequireInput(ctx, 1, "limit"));
  ASSIGN_OR_RETURN(const Tensor* delta, RequireInput(ctx, 2, "delta"));
  for (const Tensor* t : {start, limit, delta}) {
    if (t->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": start, limit and delta must be scalars, got ",
                             ShapeToString(t->shape()));
    if (t->dtype() != start->dtype())
      return InvalidArgument(node.Describe(), ": start, limit and delta must share one type");
  }
  Status st;
  bool ok = DispatchNumeric(start->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      st = UnsupportedType(node, start->dtype());
    } else {
      using Acc = std::conditional_t<std::is_integral_v<T> || std::is_same_v<T, double>, T, float>;
      const Acc s0 = static_cast<Acc>(*start->data<T>()), l0 = static_cast<Acc>(*limit->data<T>()),
                d0 = static_cast<Acc>(*delta->data<T>());
      const double s = static_cast<double>(s0), l = static_cast<double>(l0), d = static_cast<double>(d0);
      if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
        st = InvalidArgument(node.Describe(), ": delta must be non-zero and start/limit/delta finite");
        return;
      }
      // Integers count exactly: in double, start and limit near 2^63 round to one value, and
      // in int64 limit - start can overflow. 128 bits hold the difference of any two int64
      // or uint64 values.
      double count = 0;
      if constexpr (std::is_integral_v<T>) {
        const __int128 diff = static_cast<__int128>(l0) - static_cast<__int128>(s0), step = d0;
        if (diff != 0 && (diff > 0) == (step > 0))  // ceil(diff / step), both of one sign
          count = static_cast<double>((diff + step + (step > 0 ? -1 : 1)) / step);
      } else {
        count = std::ceil((l - s) / d);
      }
      if (count > static_cast<double>(int64_t{1} << 40)) {
        st = InvalidArgument(node.Describe(), ": range of ", count, " elements is too large");
        return;
      }
      const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;  // count may be far below INT64_MIN
      auto y = ctx.AllocateOutput(0, start->dtype(), {n});
      if (!y.ok()) {
        st = y.status();
        return;
      }
      T* p = (*y)->mutable_data<T>();
      // Repeated addition in the type's own arithmetic, like the ONNX reference. Integers
      // wrap: the step past the last element may leave the type (start near its maximum).
      Acc v = s0;
      for (int64_t i = 0; i < n; ++i, v = WrapAdd(v, d0)) p[i] = static_cast<T>(v);
    }
  });
  if (!ok) return UnsupportedType(node, start->dtype());
  return st;
}

Status EyeLike(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  if (x->rank() != 2) return InvalidArgument(node.Describe(), ": input must be 2-D, got ", ShapeToString(x->shape()));
  DataType dt = x->dtype();
  if (node.HasAttr("dtype")) dt = static_cast<DataType>(node.GetInt("dtype", 1));
  if (dt == DataType::kString || DataTypeSize(dt) == 0 || dt == DataType::kComplex64 || dt == DataType::kComplex128)
    return UnsupportedType(node, dt);
  const int64_t k = node.GetInt("k", 0);
  ASSIGN_OR_RETURN(Tensor * y, AllocateZeros(ctx, 0, dt, x->shape()));
  const int64_t rows = x->dim(0), cols = x->dim(1);
  DispatchNumeric(dt, [&]<typename T>() {
    T* p = y->mutable_data<T>();
    T one;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      one = T(1.0f);
    } else {
      one = static_cast<T>(1);
    }
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) p[i * cols + j] = one;
    }
  });
  return Status::Ok();
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& r) {
  RegisterVersions(r, "Reshape", {1, 5, 13, 14}, StatelessFactory(Reshape));
  RegisterVersions(r, "Flatten", {1, 9, 11, 13}, StatelessFactory(Flatten));
  RegisterVersions(r, "Squeeze", {1, 11, 13}, StatelessFactory(Squeeze));
  RegisterVersions(r, "Unsqueeze", {1, 11, 13}, StatelessFactory(Unsqueeze));
  RegisterVersions(r, "Identity", {1, 13, 14, 16}, StatelessFactory(Identity));
  RegisterVersions(r, "Shape", {1, 13, 15}, StatelessFactory(ShapeOp));
  RegisterVersions(r, "Size", {1, 13}, StatelessFactory(SizeOp));
  RegisterVersions(r, "ConstantOfShape", {9}, StatelessFactory(ConstantOfShape));
  RegisterVersions(r, "Range", {11}, StatelessFactory(RangeOp));
  RegisterVersions(r, "EyeLike", {9}, StatelessFactory(EyeLike));
}

}  // namespace strata::tensorops
