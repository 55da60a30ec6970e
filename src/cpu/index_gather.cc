// Index kernels: Gather, GatherElements, GatherND, ScatterND, ScatterElements (and the
// deprecated Scatter), OneHot, NonZero, Compress. Every index is range-checked before any
// memory is touched, so bad indices produce an error rather than an out-of-bounds read.
#include <algorithm>
#include <cmath>

#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

// Validates indices against a dimension and normalises negative ones.
Status NormalizeIndices(std::vector<int64_t>& idx, int64_t dim, const Node& node, const char* what) {
  for (int64_t& i : idx) {
    if (i < -dim || i >= dim)
      return InvalidArgument(node.Describe(), ": ", what, " index ", i, " is out of range for a dimension of size ",
                             dim);
    if (i < 0) i += dim;
  }
  return Status::Ok();
}

// dst[o, j, :] = src[o, sel[j], :] for src viewed as [outer, dim, inner].
Status GatherBlocks(KernelContext& ctx, const Tensor& src, Tensor* dst, int64_t outer, int64_t dim, int64_t inner,
                    const std::vector<int64_t>& sel) {
  const int64_t n = static_cast<int64_t>(sel.size());
  bool ok = DispatchBySize(src.dtype(), [&]<typename T>() {
    const T* s = src.data<T>();
    T* d = dst->mutable_data<T>();
    ParallelRange(ctx.pool(), outer * n, inner, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / n, j = t % n;
        const T* from = s + (o * dim + sel[j]) * inner;
        std::copy(from, from + inner, d + t * inner);
      }
    });
  });
  return ok ? Status::Ok() : UnsupportedType(ctx.node(), src.dtype());
}

Status Gather(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "indices"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": data must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  ASSIGN_OR_RETURN(auto idx, ReadInts(*it, node, "indices"));
  RETURN_IF_ERROR(NormalizeIndices(idx, x->dim(axis), node, "Gather"));
  Shape out(x->shape().begin(), x->shape().begin() + axis);
  out.insert(out.end(), it->shape().begin(), it->shape().end());
  out.insert(out.end(), x->shape().begin() + axis + 1, x->shape().end());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < rank; ++a) (a < axis ? outer : inner) *= a == axis ? 1 : x->dim(a);
  return GatherBlocks(ctx, *x, y, outer, x->dim(axis), inner, idx);
}

// Shared checks for the *Elements ops: same rank, indices no larger than data off-axis.
Status CheckElementsShapes(const Tensor& data, const Tensor& ind, int64_t axis, const Node& node) {
  if (ind.rank() != data.rank())
    return InvalidArgument(node.Describe(), ": indices rank ", ind.rank(), " differs from data rank ", data.rank());
  for (size_t a = 0; a < data.rank(); ++a)
    if (static_cast<int64_t>(a) != axis && ind.dim(a) > data.dim(a))
      return InvalidArgument(node.Describe(), ": indices shape ", ShapeToString(ind.shape()), " exceeds data shape ",
                             ShapeToString(data.shape()), " on axis ", a);
  return Status::Ok();
}

// For every element of `ind` (shape `is`), the data offset with the axis coordinate replaced.
std::vector<int64_t> ElementOffsets(const Shape& ds, const Shape& is, const std::vector<int64_t>& idx, int64_t axis) {
  const auto st = ContiguousStrides(ds);
  const int64_t rank = static_cast<int64_t>(is.size());
  std::vector<int64_t> offs(idx.size());
  std::vector<int64_t> c(rank, 0);
  for (size_t p = 0; p < idx.size(); ++p) {
    int64_t off = 0;
    for (int64_t a = 0; a < rank; ++a) off += (a == axis ? idx[p] : c[a]) * st[a];
    offs[p] = off;
    for (int64_t a = rank - 1; a >= 0; --a) {
      if (++c[a] < is[a]) break;
      c[a] = 0;
    }
  }
  return offs;
}

Status GatherElements(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "indices"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": data must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  RETURN_IF_ERROR(CheckElementsShapes(*x, *it, axis, node));
  ASSIGN_OR_RETURN(auto idx, ReadInts(*it, node, "indices"));
  RETURN_IF_ERROR(NormalizeIndices(idx, x->dim(axis), node, "GatherElements"));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), it->shape()));
  const auto offs = ElementOffsets(x->shape(), it->shape(), idx, axis);
  bool ok = DispatchBySize(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    T* d = y->mutable_data<T>();
    for (size_t p = 0; p < offs.size(); ++p) d[p] = s[offs[p]];
  });
  return ok ? Status::Ok() : UnsupportedType(node, x->dtype());
}

// Resolves GatherND/ScatterND index tuples to data offsets of slices.
struct NdPlan {
  std::vector<int64_t> offsets;  // one per index tuple, in element units
  int64_t slice = 1;             // elements per slice
  Shape out;                     // GatherND output shape
};

Result<NdPlan> PlanNd(const Tensor& data, const Tensor& ind, int64_t batch_dims, const Node& node) {
  const int64_t r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(ind.rank());
  if (q < 1) return InvalidArgument(node.Describe(), ": indices must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(r, q))
    return InvalidArgument(node.Describe(), ": batch_dims ", batch_dims, " must be in [0, min(data rank ", r,
                           ", indices rank ", q, "))");
  const int64_t k = ind.dim(q - 1);
  if (k < 1 || k > r - batch_dims)
    return InvalidArgument(node.Describe(), ": indices last dimension ", k, " must be in [1, ", r - batch_dims, "]");
  for (int64_t a = 0; a < batch_dims; ++a)
    if (ind.dim(a) != data.dim(a))
      return InvalidArgument(node.Describe(), ": batch dimension ", a, " differs between data ",
                             ShapeToString(data.shape()), " and indices ", ShapeToString(ind.shape()));
  ASSIGN_OR_RETURN(auto idx, ReadInts(ind, node, "indices"));
  NdPlan p;
  const auto st = ContiguousStrides(data.shape());
  for (int64_t a = batch_dims + k; a < r; ++a) p.slice *= data.dim(a);
  p.out.assign(ind.shape().begin(), ind.shape().end() - 1);
  p.out.insert(p.out.end(), data.shape().begin() + batch_dims + k, data.shape().end());
  const int64_t tuples = k ? static_cast<int64_t>(idx.size()) / k : 0;
  int64_t per_batch = 1;
  for (int64_t a = batch_dims; a < q - 1; ++a) per_batch *= ind.dim(a);
  const int64_t batch_stride = batch_dims > 0 ? st[batch_dims - 1] : 0;
  p.offsets.resize(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = idx[t * k + j];
      const int64_t d = data.dim(batch_dims + j);
      if (v < -d || v >= d)
        return InvalidArgument(node.Describe(), ": index ", v, " is out of range for data dimension ", batch_dims + j,
                               " of size ", d);
      off += (v < 0 ? v + d : v) * st[batch_dims + j];
    }
    p.offsets[t] = off;
  }
  return p;
}

Status GatherND(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "indices"));
  const int64_t batch_dims = node.opset >= 12 ? node.GetInt("batch_dims", 0) : 0;
  ASSIGN_OR_RETURN(NdPlan p, PlanNd(*x, *it, batch_dims, node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), p.out));
  bool ok = DispatchBySize(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    T* d = y->mutable_data<T>();
    ParallelRange(ctx.pool(), static_cast<int64_t>(p.offsets.size()), p.slice, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) std::copy(s + p.offsets[t], s + p.offsets[t] + p.slice, d + t * p.slice);
    });
  });
  return ok ? Status::Ok() : UnsupportedType(node, x->dtype());
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> ParseReduction(const Node& node, int since, int minmax_since) {
  const std::string r = node.opset >= since ? node.GetString("reduction", "none") : "none";
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max" && node.opset >= minmax_since) return Reduction::kMax;
  if (r == "min" && node.opset >= minmax_since) return Reduction::kMin;
  return InvalidModel(node.Describe(), ": unsupported reduction '", r, "'");
}

template <typename T>
inline void Combine(T& d, const T& u, Reduction red) {
  if constexpr (std::is_same_v<T, std::string>) {
    d = u;
  } else {
    // Halves compute in float; for bool, + and * act as or / and after the cast back.
    using A = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
    const A a = static_cast<A>(d), b = static_cast<A>(u);
    const A r = red == Reduction::kAdd   ? static_cast<A>(a + b)
                : red == Reduction::kMul ? static_cast<A>(a * b)
                : red == Reduction::kMax ? std::max(a, b)
                : red == Reduction::kMin ? std::min(a, b)
                                         : b;
    d = static_cast<T>(r);
  }
}

// Output 0 = copy of data, then fn(T* out) applies updates; strings allowed only without reduction.
template <typename Fn>
Status ScatterInto(KernelContext& ctx, const Tensor& data, const Tensor& updates, Reduction red, Fn&& fn) {
  const Node& node = ctx.node();
  if (updates.dtype() != data.dtype())
    return InvalidArgument(node.Describe(), ": updates type ", DataTypeName(updates.dtype()),
                           " differs from data type ", DataTypeName(data.dtype()));
  if (data.dtype() == DataType::kString && red != Reduction::kNone)
    return Unsupported(node.Describe(), ": reductions are not defined for strings");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, data.dtype(), data.shape()));
  CopyPlan plan{data.shape(), ContiguousStrides(data.shape()), ContiguousStrides(data.shape()), 0, 0};
  RETURN_IF_ERROR(StridedCopy(data, y, plan, ctx.pool(), node));
  bool ok = DispatchAny(data.dtype(), [&]<typename T>() { fn(y->mutable_data<T>(), updates.data<T>()); });
  return ok ? Status::Ok() : UnsupportedType(node, data.dtype());
}

Status ScatterND(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "indices"));
  ASSIGN_OR_RETURN(const Tensor* u, RequireInput(ctx, 2, "updates"));
  ASSIGN_OR_RETURN(Reduction red, ParseReduction(node, 16, 18));
  if (x->rank() == 0) return InvalidArgument(node.Describe(), ": data must have rank >= 1");
  ASSIGN_OR_RETURN(NdPlan p, PlanNd(*x, *it, 0, node));
  if (u->shape() != p.out)
    return InvalidArgument(node.Describe(), ": updates shape ", ShapeToString(u->shape()), " must be ",
                           ShapeToString(p.out));
  return ScatterInto(ctx, *x, *u, red, [&]<typename T>(T* d, const T* s) {
    for (size_t t = 0; t < p.offsets.size(); ++t)
      for (int64_t j = 0; j < p.slice; ++j) Combine(d[p.offsets[t] + j], s[t * p.slice + j], red);
  });
}

Status ScatterElements(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(const Tensor* it, RequireInput(ctx, 1, "indices"));
  ASSIGN_OR_RETURN(const Tensor* u, RequireInput(ctx, 2, "updates"));
  const bool legacy = node.op_type == "Scatter";
  ASSIGN_OR_RETURN(Reduction red, ParseReduction(node, legacy ? 1000 : 16, 18));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": data must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  RETURN_IF_ERROR(CheckElementsShapes(*x, *it, axis, node));
  if (u->shape() != it->shape())
    return InvalidArgument(node.Describe(), ": updates shape ", ShapeToString(u->shape()), " must equal indices shape ",
                           ShapeToString(it->shape()));
  ASSIGN_OR_RETURN(auto idx, ReadInts(*it, node, "indices"));
  RETURN_IF_ERROR(NormalizeIndices(idx, x->dim(axis), node, node.op_type.c_str()));
  const auto offs = ElementOffsets(x->shape(), it->shape(), idx, axis);
  return ScatterInto(ctx, *x, *u, red, [&]<typename T>(T* d, const T* s) {
    for (size_t p = 0; p < offs.size(); ++p) Combine(d[offs[p]], s[p], red);
  });
}

// Reads element i of any numeric tensor as double.
double NumberAt(const Tensor& t, int64_t i) {
  double v = 0;
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      v = static_cast<float>(t.data<T>()[i]);
    } else {
      v = static_cast<double>(t.data<T>()[i]);
    }
  });
  return v;
}

Status OneHot(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* ind, RequireInput(ctx, 0, "indices"));
  ASSIGN_OR_RETURN(const Tensor* dt, RequireInput(ctx, 1, "depth"));
  ASSIGN_OR_RETURN(const Tensor* vals, RequireInput(ctx, 2, "values"));
  for (const Tensor* t : {ind, dt})
    if (t->dtype() == DataType::kString || t->dtype() == DataType::kBool || DataTypeSize(t->dtype()) == 0 ||
        t->dtype() == DataType::kComplex64 || t->dtype() == DataType::kComplex128)
      return InvalidArgument(node.Describe(), ": indices and depth must be numeric");
  if (dt->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": depth must have one element, got shape ", ShapeToString(dt->shape()));
  if (vals->num_elements() != 2)
    return InvalidArgument(node.Describe(), ": values must have two elements [off, on], got ",
                           ShapeToString(vals->shape()));
  const double dd = NumberAt(*dt, 0);
  if (!(dd >= 1) || dd > 1e12) return InvalidArgument(node.Describe(), ": depth ", dd, " must be a positive count");
  const int64_t depth = static_cast<int64_t>(dd);
  const int64_t rank = static_cast<int64_t>(ind->rank());
  int64_t axis = node.GetInt("axis", -1);
  if (axis < -(rank + 1) || axis > rank)
    return InvalidArgument(node.Describe(), ": axis ", axis, " is out of range for output rank ", rank + 1);
  if (axis < 0) axis += rank + 1;
  Shape out = ind->shape();
  out.insert(out.begin() + axis, depth);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, vals->dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < rank; ++a) (a < axis ? outer : inner) *= ind->dim(a);
  bool ok = DispatchBySize(vals->dtype(), [&]<typename T>() {
    const T off = vals->data<T>()[0], on = vals->data<T>()[1];
    T* d = y->mutable_data<T>();
    std::fill(d, d + y->num_elements(), off);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const double fv = NumberAt(*ind, o * inner + i);
        if (!std::isfinite(fv)) continue;
        int64_t v = static_cast<int64_t>(std::clamp(fv, -1e15, 1e15));
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) d[(o * depth + v) * inner + i] = on;  // out of range: all "off"
      }
  });
  return ok ? Status::Ok() : UnsupportedType(node, vals->dtype());
}

Status NonZero(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  const int64_t n = x->num_elements();
  std::vector<int64_t> hits;
  bool ok = DispatchNumeric(x->dtype(), [&]<typename T>() {
    const T* p = x->data<T>();
    for (int64_t i = 0; i < n; ++i) {
      bool nz;
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        nz = static_cast<float>(p[i]) != 0.0f;
      } else {
        nz = p[i] != T{};
      }
      if (nz) hits.push_back(i);
    }
  });
  if (!ok) return UnsupportedType(node, x->dtype());
  // A scalar is treated as a one-element 1-D tensor (as numpy does).
  const Shape shape = x->rank() == 0 ? Shape{1} : x->shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t nnz = static_cast<int64_t>(hits.size());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, {rank, nnz}));
  int64_t* d = y->mutable_data<int64_t>();
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t rem = hits[j];
    for (int64_t a = rank - 1; a >= 0; --a) {
      d[a * nnz + j] = rem % shape[a];
      rem /= shape[a];
    }
  }
  return Status::Ok();
}

Status Compress(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, 1, "condition"));
  if (c->dtype() != DataType::kBool || c->rank() != 1)
    return InvalidArgument(node.Describe(), ": condition must be a 1-D bool tensor, got ", DataTypeName(c->dtype()),
                           ShapeToString(c->shape()));
  const bool has_axis = node.HasAttr("axis");
  ASSIGN_OR_RETURN(const AxisSplit split, SplitAtOptionalAxis(node, *x));
  const int64_t axis = split.axis, outer = split.outer, inner = split.inner, dim = split.dim;
  std::vector<int64_t> sel;
  const bool* cp = c->data<bool>();
  for (int64_t i = 0, n_elems = c->num_elements(); i < n_elems; ++i) {
    if (!cp[i]) continue;
    if (i >= dim)
      return InvalidArgument(node.Describe(), ": condition selects index ", i, " but the ",
                             has_axis ? "axis" : "flattened input", " has size ", dim);
    sel.push_back(i);
  }
  Shape out;
  if (has_axis) {
    out = x->shape();
    out[axis] = static_cast<int64_t>(sel.size());
  } else {
    out = {static_cast<int64_t>(sel.size())};
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  return GatherBlocks(ctx, *x, y, outer, dim, inner, sel);
}

}  // namespace

void RegisterGatherKernels(KernelRegistry& r) {
  RegisterVersions(r, "Gather", {1, 11, 13}, StatelessFactory(Gather));
  RegisterVersions(r, "GatherElements", {11, 13}, StatelessFactory(GatherElements));
  RegisterVersions(r, "GatherND", {11, 12, 13}, StatelessFactory(GatherND));
  RegisterVersions(r, "ScatterND", {11, 13, 16, 18}, StatelessFactory(ScatterND));
  RegisterVersions(r, "ScatterElements", {11, 13, 16, 18}, StatelessFactory(ScatterElements));
  RegisterVersions(r, "Scatter", {9}, StatelessFactory(ScatterElements), 10);
  RegisterVersions(r, "OneHot", {9, 11}, StatelessFactory(OneHot));
  RegisterVersions(r, "NonZero", {9, 13}, StatelessFactory(NonZero));
  RegisterVersions(r, "Compress", {9, 11}, StatelessFactory(Compress));
}

}  // namespace strata::tensorops
