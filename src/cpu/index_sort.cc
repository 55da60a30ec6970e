// Ordering kernels: TopK (stable for ties: the lower index wins), Unique (all four
// outputs, sorted or first-occurrence order, optional axis) and CumSum.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "cpu/int_wrap.h"
#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Comparable key of a value: halves widen to float, everything else stays as is.
template <typename T>
auto Key(const T& v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Strict total order on keys in which NaN sorts after every number and NaN == NaN, so
// sorting never sees an inconsistent comparator.
template <typename K>
inline int Compare(const K& a, const K& b) {
  if constexpr (std::is_floating_point_v<K>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

// TopK of lines [b, e) (line = o * inner + i) of s [outer, dim, inner]. Each line's (key,
// index) pairs are gathered contiguously (a strided axis is read once; I: a 32-bit index
// where dim allows, halving the pairs), then ordered: a heap for a few of many (k <= dim /
// 64: O(dim log k)), a selection and a sort of the k chosen otherwise (O(dim + k log k)).
// The order is total (the index breaks ties), so both give the same k pairs in the same
// order. A heap over a large k, reading the keys through the index, took 96 s for k = 2^25
// of 2^26 floats; this takes a few seconds.
template <typename T, typename I>
void TopKLines(const T* s, int64_t dim, int64_t inner, int64_t k, bool largest, int64_t b, int64_t e, T* vd,
               int64_t* id) {
  using K = decltype(Key(T{}));
  struct Item {
    K key;
    I index;
  };
  std::vector<Item> items(static_cast<size_t>(dim));
  auto before = [largest](const Item& a, const Item& c) {
    const int r = Compare(a.key, c.key);
    if (r != 0) return largest ? r > 0 : r < 0;
    return a.index < c.index;
  };
  for (int64_t line = b; line < e; ++line) {
    const int64_t o = line / inner, i = line % inner;
    const T* base = s + o * dim * inner + i;
    for (int64_t j = 0; j < dim; ++j) items[j] = {Key(base[j * inner]), static_cast<I>(j)};
    const auto first = items.begin(), kth = first + k, last = items.end();
    if (k * 64 <= dim) {
      std::partial_sort(first, kth, last, before);
    } else {
      if (k < dim) std::nth_element(first, kth - 1, last, before);
      std::sort(first, kth, before);
    }
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dst = (o * k + j) * inner + i, src = static_cast<int64_t>(items[j].index);
      vd[dst] = base[src * inner];
      id[dst] = src;
    }
  }
}

Status TopK(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": input must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", -1), rank, node));
  int64_t k;
  if (node.opset < 10) {
    if (!node.HasAttr("k")) return InvalidModel(node.Describe(), ": missing the 'k' attribute");
    k = node.GetInt("k", 0);
  } else {
    ASSIGN_OR_RETURN(const Tensor* kt, RequireInput(ctx, 1, "K"));
    ASSIGN_OR_RETURN(k, ReadScalarInt(*kt, node, "K"));
  }
  const int64_t dim = x->dim(axis);
  if (k < 0 || k > dim)
    return InvalidArgument(node.Describe(), ": k = ", k, " is outside [0, ", dim, "] for axis ", axis, " of ",
                           ShapeToString(x->shape()));
  const bool largest = node.opset < 11 || node.GetInt("largest", 1) != 0;
  Shape out = x->shape();
  out[axis] = k;
  ASSIGN_OR_RETURN(Tensor * vals, ctx.AllocateOutput(0, x->dtype(), out));
  ASSIGN_OR_RETURN(Tensor * inds, ctx.AllocateOutput(1, DataType::kInt64, out));
  const AxisSplit split = SplitAtAxis(x->shape(), axis);
  const int64_t outer = split.outer, inner = split.inner;
  Status st;
  bool ok = DispatchNumeric(x->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      st = UnsupportedType(node, x->dtype());
    } else {
      const T* s = x->data<T>();
      T* vd = vals->mutable_data<T>();
      int64_t* id = inds->mutable_data<int64_t>();
      ParallelRange(ctx.pool(), outer * inner, dim * 8, [&](int64_t b, int64_t e) {
        if (dim <= int64_t{UINT32_MAX}) {
          TopKLines<T, uint32_t>(s, dim, inner, k, largest, b, e, vd, id);
        } else {
          TopKLines<T, int64_t>(s, dim, inner, k, largest, b, e, vd, id);
        }
      });
    }
  });
  if (!ok) return UnsupportedType(node, x->dtype());
  return st;
}

Status Unique(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  const bool sorted = node.GetInt("sorted", 1) != 0;
  const bool has_axis = node.HasAttr("axis");
  ASSIGN_OR_RETURN(const AxisSplit split, SplitAtOptionalAxis(node, *x));
  const int64_t axis = split.axis, outer = split.outer, inner = split.inner, dim = split.dim;
  std::vector<int64_t> first, inverse(dim), counts;
  std::vector<int64_t> order(dim);
  std::iota(order.begin(), order.end(), 0);
  bool ok = DispatchAny(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    // Lexicographic comparison of slices a and c along the axis.
    auto cmp = [&](int64_t a, int64_t c) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const int r = Compare(Key(s[(o * dim + a) * inner + i]), Key(s[(o * dim + c) * inner + i]));
          if (r != 0) return r;
        }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return cmp(a, c) < 0; });
    // Groups of equal slices; stable sort puts each group's first occurrence first.
    std::vector<int64_t> group_of(dim);
    for (int64_t j = 0; j < dim; ++j) {
      if (j == 0 || cmp(order[j - 1], order[j]) != 0) {
        first.push_back(order[j]);
        counts.push_back(0);
      }
      group_of[order[j]] = static_cast<int64_t>(first.size()) - 1;
      ++counts.back();
    }
    std::vector<int64_t> rank_of(first.size());
    std::iota(rank_of.begin(), rank_of.end(), 0);
    if (!sorted) {
      std::vector<int64_t> g(first.size());
      std::iota(g.begin(), g.end(), 0);
      std::sort(g.begin(), g.end(), [&](int64_t a, int64_t c) { return first[a] < first[c]; });
      std::vector<int64_t> f2, c2;
      for (size_t j = 0; j < g.size(); ++j) {
        rank_of[g[j]] = static_cast<int64_t>(j);
        f2.push_back(first[g[j]]);
        c2.push_back(counts[g[j]]);
      }
      first.swap(f2);
      counts.swap(c2);
    }
    for (int64_t j = 0; j < dim; ++j) inverse[j] = rank_of[group_of[j]];
  });
  if (!ok) return UnsupportedType(node, x->dtype());
  const int64_t u = static_cast<int64_t>(first.size());
  Shape yshape{u};
  if (has_axis) {
    yshape = x->shape();
    yshape[axis] = u;
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), yshape));
  DispatchBySize(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    T* d = y->mutable_data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < u; ++j) {
        const T* from = s + (o * dim + first[j]) * inner;
        std::copy(from, from + inner, d + (o * u + j) * inner);
      }
  });
  auto put = [&](size_t i, const std::vector<int64_t>& v) -> Status {
    if (!ctx.output_requested(i) || i >= ctx.num_outputs()) return Status::Ok();
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i, DataType::kInt64, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t->mutable_data<int64_t>());
    return Status::Ok();
  };
  RETURN_IF_ERROR(put(1, first));
  RETURN_IF_ERROR(put(2, inverse));
  return put(3, counts);
}

Status CumSum(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "x"));
  ASSIGN_OR_RETURN(const Tensor* at, RequireInput(ctx, 1, "axis"));
  ASSIGN_OR_RETURN(int64_t axis, ReadScalarInt(*at, node, "axis"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": input must have rank >= 1");
  ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, rank, node));
  const bool exclusive = node.GetInt("exclusive", 0) != 0, reverse = node.GetInt("reverse", 0) != 0;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  const int64_t dim = x->dim(axis);
  const AxisSplit split = SplitAtAxis(x->shape(), axis);
  const int64_t outer = split.outer, inner = split.inner;
  Status st;
  bool ok = DispatchNumeric(x->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      st = UnsupportedType(node, x->dtype());
    } else {
      using Acc = std::conditional_t<kIsHalf<T>, float, T>;
      const T* s = x->data<T>();
      T* d = y->mutable_data<T>();
      ParallelRange(ctx.pool(), outer * inner, dim, [&](int64_t b, int64_t e) {
        for (int64_t line = b; line < e; ++line) {
          const int64_t o = line / inner, i = line % inner;
          Acc acc{};
          for (int64_t j = 0; j < dim; ++j) {
            const int64_t jj = reverse ? dim - 1 - j : j;
            const int64_t p = (o * dim + jj) * inner + i;
            const Acc v = static_cast<Acc>(s[p]);
            if (!exclusive) acc = WrapAdd(acc, v);  // integers wrap (cpu/int_wrap.h)
            d[p] = static_cast<T>(acc);
            if (exclusive) acc = WrapAdd(acc, v);
          }
        }
      });
    }
  });
  if (!ok) return UnsupportedType(node, x->dtype());
  return st;
}

}  // namespace

void RegisterSortKernels(KernelRegistry& r) {
  RegisterVersions(r, "TopK", {1, 10, 11}, StatelessFactory(TopK));
  RegisterVersions(r, "Unique", {11}, StatelessFactory(Unique));
  RegisterVersions(r, "CumSum", {11, 14}, StatelessFactory(CumSum));
}

}  // namespace strata::tensorops
