// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare) and
// ArgMax/ArgMin. Einsum is registered from here too (cpu/reduce_einsum.cc).
//
// Axes come from the `axes` attribute before opset 18 (13 for ReduceSum) and from the
// optional second input since. Empty axes reduce everything unless noop_with_empty_axes
// is set. Reducing an empty set yields the op's identity per the spec: 0 for sums,
// 1 for Prod, -inf (or the lowest value) for Max, +inf (or the highest) for Min,
// -inf for LogSum/LogSumExp and NaN for Mean of floats.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "cpu/int_wrap.h"
#include "cpu/register.h"

namespace strata {

void RegisterEinsumKernels(KernelRegistry& r);  // cpu/reduce_einsum.cc

namespace {

enum class Op { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Accumulator: double for floats, 64-bit integers (wrapping like numpy) otherwise.
template <typename T>
using RAcc = std::conditional_t<kIsFloat<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// Integer accumulation wraps (two's complement, as numpy's int64) through WrapAdd/WrapMul
// (cpu/int_wrap.h); floats add and multiply as usual.

template <typename T>
RAcc<T> Load(const T& v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<RAcc<T>>(v);
}

// Converts an accumulator or a double result back to T; integers saturate (NaN -> 0)
// so that e.g. ReduceLogSum of an all-zero int tensor does not invoke undefined behaviour.
template <typename T, typename V>
T Store(V v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<V>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<V>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
RAcc<T> Lowest() {
  if constexpr (kIsFloat<T>)
    return -std::numeric_limits<double>::infinity();
  else
    return static_cast<RAcc<T>>(std::numeric_limits<T>::lowest());
}
template <typename T>
RAcc<T> Highest() {
  if constexpr (kIsFloat<T>)
    return std::numeric_limits<double>::infinity();
  else
    return static_cast<RAcc<T>>(std::numeric_limits<T>::max());
}

// Reduces one group whose elements are x[base + offs[k]] (or x[base + k] when contiguous).
template <typename T>
T ReduceGroup(Op op, const T* x, int64_t base, const std::vector<int64_t>* offs, int64_t count) {
  using A = RAcc<T>;
  auto at = [&](int64_t k) -> A { return Load(x[base + (offs ? (*offs)[k] : k)]); };
  switch (op) {
    case Op::kSum:
    case Op::kMean: {
      A s = 0;
      for (int64_t k = 0; k < count; ++k) s = WrapAdd(s, at(k));
      if (op == Op::kSum) return Store<T>(s);
      if constexpr (kIsFloat<T>) {
        return Store<T>(s / static_cast<double>(count));  // 0/0 = NaN for an empty set
      } else {
        return Store<T>(count ? s / static_cast<A>(count) : A(0));
      }
    }
    case Op::kSumSquare: {
      A s = 0;
      for (int64_t k = 0; k < count; ++k) s = WrapAdd(s, WrapMul(at(k), at(k)));
      return Store<T>(s);
    }
    case Op::kL1: {
      A s = 0;
      for (int64_t k = 0; k < count; ++k) {
        A v = at(k);
        if constexpr (std::is_signed_v<A>) v = v < 0 ? WrapNeg(v) : v;  // |INT64_MIN| wraps to itself
        s = WrapAdd(s, v);
      }
      return Store<T>(s);
    }
    case Op::kL2: {
      A s = 0;
      for (int64_t k = 0; k < count; ++k) s = WrapAdd(s, WrapMul(at(k), at(k)));
      return Store<T>(std::sqrt(static_cast<double>(s)));
    }
    case Op::kProd: {
      A s = 1;
      for (int64_t k = 0; k < count; ++k) s = WrapMul(s, at(k));
      return Store<T>(s);
    }
    case Op::kMax: {
      A m = Lowest<T>();
      for (int64_t k = 0; k < count; ++k) {
        A v = at(k);
        if (v > m || v != v) m = v;  // NaN propagates
        if (m != m) break;
      }
      return Store<T>(m);
    }
    case Op::kMin: {
      A m = Highest<T>();
      for (int64_t k = 0; k < count; ++k) {
        A v = at(k);
        if (v < m || v != v) m = v;
        if (m != m) break;
      }
      return Store<T>(m);
    }
    case Op::kLogSum: {
      double s = 0;
      for (int64_t k = 0; k < count; ++k) s += static_cast<double>(at(k));
      return Store<T>(std::log(s));
    }
    case Op::kLogSumExp: {
      // Subtract the max for stability; an empty set or all -inf gives -inf.
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < count; ++k) m = std::max(m, static_cast<double>(at(k)));
      if (!std::isfinite(m)) return Store<T>(m);
      double s = 0;
      for (int64_t k = 0; k < count; ++k) s += std::exp(static_cast<double>(at(k)) - m);
      return Store<T>(m + std::log(s));
    }
  }
  return T{};
}

// Reads the reduction axes (attribute or input per opset) and validates them.
// Returns an empty vector with *noop set when the op is an identity.
Result<std::vector<bool>> ResolveAxes(const KernelContext& ctx, bool axes_from_input, int64_t rank, bool* noop) {
  const Node& node = ctx.node();
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (const Tensor* a = ctx.input(1)) {
      if (a->dtype() != DataType::kInt64 || a->rank() > 1)
        return InvalidArgument(node.Describe(), ": axes input must be a 1-D int64 tensor, got ",
                               DataTypeName(a->dtype()), ShapeToString(a->shape()));
      axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->num_elements());
    }
  } else {
    axes = node.GetInts("axes");
  }
  std::vector<bool> reduced(rank, false);
  *noop = false;
  if (axes.empty()) {
    if (node.GetInt("noop_with_empty_axes", 0) != 0) {
      *noop = true;
      return reduced;
    }
    std::fill(reduced.begin(), reduced.end(), true);
    return reduced;
  }
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t na, NormalizeAxis(a, rank, node));
    if (reduced[na]) return InvalidArgument(node.Describe(), ": axis ", a, " is repeated in axes");
    reduced[na] = true;
  }
  return reduced;
}

Status ReduceCompute(KernelContext& ctx, Op op, bool axes_from_input) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": required input 0 (data) is missing");
  const int64_t rank = static_cast<int64_t>(x->rank());
  bool noop = false;
  ASSIGN_OR_RETURN(std::vector<bool> reduced, ResolveAxes(ctx, axes_from_input, rank, &noop));
  if (noop) {
    ctx.SetOutput(0, Value(*x));
    return Status::Ok();
  }
  const bool keepdims = node.GetInt("keepdims", 1) != 0;
  Shape out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out_shape.push_back(x->dim(d));
    else if (keepdims)
      out_shape.push_back(1);
  }
  // Coalesce runs of adjacent dims with the same status into (size, reduced) blocks.
  std::vector<std::pair<int64_t, bool>> blocks;
  for (int64_t d = 0; d < rank; ++d) {
    if (x->dim(d) == 1) continue;  // size-1 dims never matter
    if (!blocks.empty() && blocks.back().second == reduced[d])
      blocks.back().first *= x->dim(d);
    else
      blocks.push_back({x->dim(d), reduced[d]});
  }
  // Strides of each block in the input.
  const int64_t nb = static_cast<int64_t>(blocks.size());
  std::vector<int64_t> stride(nb, 1);
  for (int64_t b = nb - 1; b > 0; --b) stride[b - 1] = stride[b] * blocks[b].first;
  int64_t count = 1, outputs = 1;
  for (const auto& b : blocks) (b.second ? count : outputs) *= b.first;
  if (x->num_elements() == 0) {
    count = 1;
    outputs = 1;
    for (int64_t d = 0; d < rank; ++d) (reduced[d] ? count : outputs) *= x->dim(d);
  }
  // Offsets of the reduced elements relative to a group's base, unless the only reduced
  // block is innermost (then groups are contiguous).
  int64_t reduced_blocks = 0;
  for (const auto& b : blocks) reduced_blocks += b.second ? 1 : 0;
  const bool contiguous = reduced_blocks == 0 || (reduced_blocks == 1 && blocks.back().second);
  std::vector<int64_t> offs;
  if (!contiguous && x->num_elements() > 0) {
    offs.reserve(static_cast<size_t>(count));
    offs.push_back(0);
    for (int64_t b = nb - 1; b >= 0; --b) {
      if (!blocks[b].second) continue;
      const size_t cur = offs.size();
      for (int64_t i = 1; i < blocks[b].first; ++i)
        for (size_t j = 0; j < cur; ++j) offs.push_back(offs[j] + i * stride[b]);
    }
    // Sort so the inner loop walks memory forwards.
    std::sort(offs.begin(), offs.end());
  }
  std::vector<int64_t> kept_sizes, kept_strides;
  for (int64_t b = 0; b < nb; ++b)
    if (!blocks[b].second) {
      kept_sizes.push_back(blocks[b].first);
      kept_strides.push_back(stride[b]);
    }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  bool ok = DispatchNumeric(x->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      return;
    } else {
      const T* xp = x->data<T>();
      T* yp = y->mutable_data<T>();
      const std::vector<int64_t>* po = contiguous ? nullptr : &offs;
      const int64_t group_count = x->num_elements() == 0 ? 0 : count;
      auto run = [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          int64_t base = 0, rem = o;
          for (size_t k = kept_sizes.size(); k-- > 0;) {
            base += (rem % kept_sizes[k]) * kept_strides[k];
            rem /= kept_sizes[k];
          }
          yp[o] = ReduceGroup<T>(op, xp, base, po, group_count);
        }
      };
      if (ctx.pool())
        ctx.pool()->ParallelFor(outputs, std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)), run);
      else
        run(0, outputs);
    }
  });
  if (!ok || x->dtype() == DataType::kBool)
    return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(x->dtype()));
  return Status::Ok();
}

// ---------------------------------------------------------------- ArgMax / ArgMin

Status ArgCompute(KernelContext& ctx, bool is_max) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": required input 0 (data) is missing");
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": input must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  const bool keepdims = node.GetInt("keepdims", 1) != 0;
  const bool last = node.opset >= 12 && node.GetInt("select_last_index", 0) != 0;
  const int64_t n = x->dim(axis);
  const int64_t inner = NumElements(Shape(x->shape().begin() + axis + 1, x->shape().end()));
  const int64_t outer = NumElements(Shape(x->shape().begin(), x->shape().begin() + axis));
  Shape out_shape = x->shape();
  if (keepdims)
    out_shape[axis] = 1;
  else
    out_shape.erase(out_shape.begin() + axis);
  if (n == 0 && outer * inner > 0)
    return InvalidArgument(node.Describe(), ": cannot take ", node.op_type, " over axis ", axis, " of size 0 (shape ",
                           ShapeToString(x->shape()), ")");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, out_shape));
  int64_t* yp = y->mutable_data<int64_t>();
  bool ok = DispatchNumeric(x->dtype(), [&]<typename T>() {
    using A = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
    const T* xp = x->data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* p = xp + o * n * inner + i;
        A best = static_cast<A>(p[0]);
        int64_t arg = 0;
        for (int64_t k = 1; k < n; ++k) {
          A v = static_cast<A>(p[k * inner]);
          bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
          if (better) {
            best = v;
            arg = k;
          }
        }
        yp[o * inner + i] = arg;
      }
  });
  if (!ok) return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(x->dtype()));
  return Status::Ok();
}

const std::vector<DataType> kReduceTypes = {
    DataType::kFloat,  DataType::kDouble, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32, DataType::kInt64,
    DataType::kUInt32, DataType::kUInt64, DataType::kInt8,    DataType::kUInt8,    DataType::kInt16, DataType::kUInt16};

void RegVersions(KernelRegistry& r, const char* op, const std::vector<int>& versions,
                 const std::function<KernelFactory(int since)>& make) {
  for (size_t i = 0; i < versions.size(); ++i) {
    KernelDef d;
    d.op_type = op;
    d.since_version = versions[i];
    d.end_version = i + 1 < versions.size() ? versions[i + 1] - 1 : INT_MAX;
    d.types = kReduceTypes;
    d.factory = make(versions[i]);
    r.Register(std::move(d));
  }
}

void RegReduce(KernelRegistry& r, const char* name, Op op, int axes_input_since) {
  std::vector<int> versions = {1, 11, 13};
  if (axes_input_since == 18) versions.push_back(18);
  if (op == Op::kMax || op == Op::kMin) versions = {1, 11, 12, 13, 18};
  RegVersions(r, name, versions, [op, axes_input_since](int since) -> KernelFactory {
    const bool from_input = since >= axes_input_since;
    return [op, from_input](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return MakeFnKernel([op, from_input](KernelContext& ctx) { return ReduceCompute(ctx, op, from_input); });
    };
  });
}

}  // namespace

void RegisterReduceKernels(KernelRegistry& r) {
  RegReduce(r, "ReduceSum", Op::kSum, 13);
  RegReduce(r, "ReduceMean", Op::kMean, 18);
  RegReduce(r, "ReduceMax", Op::kMax, 18);
  RegReduce(r, "ReduceMin", Op::kMin, 18);
  RegReduce(r, "ReduceProd", Op::kProd, 18);
  RegReduce(r, "ReduceL1", Op::kL1, 18);
  RegReduce(r, "ReduceL2", Op::kL2, 18);
  RegReduce(r, "ReduceLogSum", Op::kLogSum, 18);
  RegReduce(r, "ReduceLogSumExp", Op::kLogSumExp, 18);
  RegReduce(r, "ReduceSumSquare", Op::kSumSquare, 18);
  for (bool is_max : {true, false}) {
    RegVersions(r, is_max ? "ArgMax" : "ArgMin", {1, 11, 12, 13}, [is_max](int) -> KernelFactory {
      return [is_max](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
        return MakeFnKernel([is_max](KernelContext& ctx) { return ArgCompute(ctx, is_max); });
      };
    });
  }
  RegisterEinsumKernels(r);
}

}  // namespace strata
