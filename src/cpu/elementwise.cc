// Elementwise kernel family: registration entry point and the shared broadcasting
// machinery declared in cpu/broadcast.h. The kernels themselves live in
// elementwise_binary.cc, elementwise_unary.cc (math + activations) and
// elementwise_simd.cc (optimized fp32 paths).
#include <algorithm>

#include "core/kernel.h"
#include "cpu/broadcast.h"
#include "cpu/register.h"

namespace strata {
namespace cpu {

void BroadcastPlan::RowOffsets(int64_t row, int64_t* offsets) const {
  const size_t n_in = strides.size();
  for (size_t i = 0; i < n_in; ++i) offsets[i] = 0;
  for (size_t d = dims.size() - 1; d-- > 0;) {
    int64_t id = row % dims[d];
    row /= dims[d];
    for (size_t i = 0; i < n_in; ++i) offsets[i] += id * strides[i][d];
  }
}

Result<BroadcastPlan> MakeBroadcastPlan(const Shape* shapes, size_t n, const Node& node) {
  BroadcastPlan p;
  size_t rank = 0;
  for (size_t i = 0; i < n; ++i) rank = std::max(rank, shapes[i].size());
  p.out_shape.assign(rank, 1);
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = shapes[i];
    for (size_t k = 0; k < s.size(); ++k) {
      const size_t d = rank - s.size() + k;
      const int64_t v = s[k];
      if (v < 0) return InvalidArgument(node.Describe(), ": negative dimension in input shape ", ShapeToString(s));
      if (v == p.out_shape[d] || v == 1) continue;
      if (p.out_shape[d] != 1) {
        std::string all;
        for (size_t j = 0; j < n; ++j) all += (all.empty() ? "" : ", ") + ShapeToString(shapes[j]);
        return InvalidArgument(node.Describe(), ": input shapes ", all, " cannot be broadcast together");
      }
      p.out_shape[d] = v;
    }
  }
  {
    // The node's name is added only on failure (Describe() builds a string).
    Result<int64_t> size = CheckedNumElements(p.out_shape, "output");
    if (!size.ok()) return MakeStatus(size.status().code(), node.Describe(), " ", size.status().message());
    p.out_size = *size;
  }

  // Per input and output dim: true when the input is broadcast (repeated) along it.
  auto bcast = [&](size_t i, size_t d) {
    const Shape& s = shapes[i];
    if (d < rank - s.size()) return true;
    return s[d - (rank - s.size())] == 1;
  };
  // Merge runs of dims whose broadcast pattern is identical for every input; drop
  // size-1 output dims (they affect no offsets). A group is identified by its first
  // output dim (-1: the all-broadcast group of a scalar result), whose pattern it shares.
  Shape group_dim;
  auto same_pattern = [&](size_t d0, size_t d1) {
    for (size_t i = 0; i < n; ++i)
      if (bcast(i, d0) != bcast(i, d1)) return false;
    return true;
  };
  for (size_t d = 0; d < rank; ++d) {
    if (p.out_shape[d] == 1) continue;
    if (!p.dims.empty() && same_pattern(static_cast<size_t>(group_dim.back()), d)) {
      p.dims.back() *= p.out_shape[d];
    } else {
      p.dims.push_back(p.out_shape[d]);
      group_dim.push_back(static_cast<int64_t>(d));
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    group_dim.push_back(-1);
  }
  p.strides.Reset(n, p.dims.size());
  for (size_t i = 0; i < n; ++i) {
    int64_t acc = 1;
    for (size_t g = p.dims.size(); g-- > 0;) {
      if (group_dim[g] < 0 || bcast(i, static_cast<size_t>(group_dim[g]))) continue;
      p.strides[i][g] = acc;
      acc *= p.dims[g];
    }
  }
  return p;
}

Result<Shape> LegacyBroadcastShape(const Shape& a, const Shape& b, const Node& node) {
  if (node.GetInt("broadcast", 0) == 0) {
    if (a != b)
      return InvalidArgument(node.Describe(), ": input shapes ", ShapeToString(a), " and ", ShapeToString(b),
                             " differ and attribute broadcast is not set (opset < 7 requires equal shapes)");
    return b;
  }
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  // A scalar or single-element B broadcasts everywhere.
  if (rb == 0 || (NumElements(b) == 1 && !node.HasAttr("axis"))) return Shape{};
  if (rb > ra)
    return InvalidArgument(node.Describe(), ": legacy broadcast needs rank(B) <= rank(A), got ", ShapeToString(b),
                           " onto ", ShapeToString(a));
  int64_t axis = node.GetInt("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    return InvalidArgument(node.Describe(), ": legacy broadcast axis ", node.GetInt("axis", 0), " does not fit B ",
                           ShapeToString(b), " into A ", ShapeToString(a));
  Shape out(ra, 1);
  for (int64_t k = 0; k < rb; ++k) {
    if (b[k] != a[axis + k] && b[k] != 1)
      return InvalidArgument(node.Describe(), ": legacy broadcast of B ", ShapeToString(b), " onto A ",
                             ShapeToString(a), " at axis ", axis, ": dimension ", k, " mismatch");
    out[axis + k] = b[k];
  }
  return out;
}

Status CheckSameDtype(const KernelContext& ctx, size_t first, size_t last) {
  const Tensor* ref = nullptr;
  for (size_t i = first; i <= last && i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) continue;
    if (!ref) {
      ref = t;
    } else if (t->dtype() != ref->dtype()) {
      return InvalidArgument(ctx.node().Describe(), ": input ", i, " has dtype ", DataTypeName(t->dtype()),
                             " but input ", first, " has dtype ", DataTypeName(ref->dtype()));
    }
  }
  return Status::Ok();
}

Status UnsupportedDtype(const Node& node, DataType dt) {
  return Unsupported(node.Describe(), ": unsupported dtype ", DataTypeName(dt));
}

Result<const Tensor*> RequiredInput(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.input(i);
  if (!t) return InvalidArgument(ctx.node().Describe(), ": required input ", i, " is missing or not a tensor");
  return t;
}

void RegisterVersions(KernelRegistry& r, const std::string& domain, const std::string& op,
                      std::initializer_list<int> since, const std::vector<DataType>& types,
                      const KernelFactory& factory, bool reference, const std::string& impl) {
  std::vector<int> v(since);
  for (size_t i = 0; i < v.size(); ++i) {
    KernelDef d;
    d.domain = domain;
    d.op_type = op;
    d.since_version = v[i];
    d.end_version = i + 1 < v.size() ? v[i + 1] - 1 : INT_MAX;
    d.types = types;
    d.factory = factory;
    d.reference = reference;
    d.impl = impl;
    r.Register(std::move(d));
  }
}

const std::vector<DataType>& FloatTypes() {
  static const std::vector<DataType> v{DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16};
  return v;
}
const std::vector<DataType>& IntegerTypes() {
  static const std::vector<DataType> v{DataType::kInt8,  DataType::kInt16,  DataType::kInt32,  DataType::kInt64,
                                       DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
  return v;
}
const std::vector<DataType>& UnsignedTypes() {
  static const std::vector<DataType> v{DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
  return v;
}
const std::vector<DataType>& SignedNumericTypes() {
  static const std::vector<DataType> v = [] {
    std::vector<DataType> t = FloatTypes();
    for (DataType d : {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64}) t.push_back(d);
    return t;
  }();
  return v;
}
const std::vector<DataType>& NumericTypes() {
  static const std::vector<DataType> v = [] {
    std::vector<DataType> t = FloatTypes();
    for (DataType d : IntegerTypes()) t.push_back(d);
    return t;
  }();
  return v;
}
const std::vector<DataType>& BoolTypes() {
  static const std::vector<DataType> v{DataType::kBool};
  return v;
}

}  // namespace cpu

void RegisterElementwiseKernels(KernelRegistry& r) {
  cpu::RegisterBinaryKernels(r);
  cpu::RegisterUnaryKernels(r);
  cpu::RegisterActivationKernels(r);
  cpu::RegisterOptimizedKernels(r);
}

}  // namespace strata
