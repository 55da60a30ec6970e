// Tensor/shape/index kernels: registration entry point and the shared data-movement
// helpers (strided copy with coalescing, memcpy inner runs and tiled transposes).
#include <algorithm>
#include <type_traits>

#include "cpu/register.h"
#include "cpu/tensor_kernels.h"

namespace strata {
namespace tensorops {

void RegisterVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int> versions,
                      const KernelFactory& factory, int last_end, std::vector<DataType> types, int type_input) {
  std::vector<int> v(versions);
  for (size_t i = 0; i < v.size(); ++i) {
    KernelDef d;
    d.op_type = op;
    d.since_version = v[i];
    d.end_version = i + 1 < v.size() ? v[i + 1] - 1 : last_end;
    d.types = types;
    d.type_input = type_input;
    d.factory = factory;
    r.Register(std::move(d));
  }
}

Result<const Tensor*> RequireInput(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (!t || !t->valid()) return InvalidArgument(ctx.node().Describe(), ": missing required input ", i, " (", what, ")");
  return t;
}

AxisSplit SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisSplit s;
  s.axis = axis;
  for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) {
    if (a == axis) {
      s.dim = shape[a];
    } else {
      (a < axis ? s.outer : s.inner) *= shape[a];
    }
  }
  return s;
}

Result<AxisSplit> SplitAtOptionalAxis(const Node& node, const Tensor& x) {
  if (!node.HasAttr("axis")) return AxisSplit{.axis = 0, .outer = 1, .dim = x.num_elements(), .inner = 1};
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), static_cast<int64_t>(x.rank()), node));
  return SplitAtAxis(x.shape(), axis);
}

Result<std::vector<int64_t>> IntsAttrOfLength(const Node& node, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = node.HasAttr(name) ? node.GetInts(name) : std::vector<int64_t>(n, dflt);
  if (v.size() != n) return InvalidModel(node.Describe(), ": ", name, " has ", v.size(), " values, expected ", n);
  return v;
}

Result<std::vector<int64_t>> ReadInts(const Tensor& t, const Node& node, const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kInt64) {
    if (!out.empty()) std::memcpy(out.data(), t.data<int64_t>(), out.size() * sizeof(int64_t));
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* p = t.data<int32_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else {
    return InvalidArgument(node.Describe(), ": ", what, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  }
  return out;
}

Status ReadIntsInto(const Tensor& t, const Node& node, const char* what, Shape* out) {
  const size_t n = static_cast<size_t>(t.num_elements());
  if (t.dtype() == DataType::kInt64) {
    out->assign(t.data<int64_t>(), t.data<int64_t>() + n);
  } else if (t.dtype() == DataType::kInt32) {
    out->assign(t.data<int32_t>(), t.data<int32_t>() + n);
  } else {
    return InvalidArgument(node.Describe(), ": ", what, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  }
  return Status::Ok();
}

Result<int64_t> ReadScalarInt(const Tensor& t, const Node& node, const char* what) {
  if (t.num_elements() != 1)
    return InvalidArgument(node.Describe(), ": ", what, " must be a scalar, got shape ", ShapeToString(t.shape()));
  ASSIGN_OR_RETURN(auto v, ReadInts(t, node, what));
  return v[0];
}

Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, const Node& node) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return InvalidArgument(node.Describe(), ": axis ", a, " is out of range for rank ", rank);
    int64_t n = a < 0 ? a + rank : a;
    if (seen[n]) return InvalidArgument(node.Describe(), ": axis ", a, " is repeated");
    seen[n] = true;
    out.push_back(n);
  }
  return out;
}

Shape ContiguousStrides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

Result<Tensor*> AllocateZeros(KernelContext& ctx, size_t i, DataType dt, Shape shape) {
  ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(i, dt, std::move(shape)));
  if (dt != DataType::kString && t->byte_size() > 0) std::memset(t->raw_mutable_data(), 0, t->byte_size());
  return t;
}

Status UnsupportedType(const Node& node, DataType dt) {
  return Unsupported(node.Describe(), ": element type ", DataTypeName(dt), " is not supported");
}

void ParallelRange(ThreadPool* pool, int64_t n, int64_t cost_per_item, ThreadPool::RangeRef fn) {
  if (n <= 0) return;
  constexpr int64_t kMinWork = 1 << 15;  // below this, thread hand-off costs more than it saves
  cost_per_item = std::max<int64_t>(1, cost_per_item);
  if (!pool || pool->num_threads() <= 1 || n * cost_per_item < 2 * kMinWork) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(n, std::max<int64_t>(1, kMinWork / cost_per_item), fn);
}

namespace {

template <typename T>
inline void CopyRun(T* dst, int64_t ds, const T* src, int64_t ss, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (ds == 1 && ss == 1) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[i * ss];
}

// Walks the outer dims of a plan (all but `skip` axes) from linear index `begin`.
struct OuterWalker {
  Shape dims, ds, ss, idx;
  int64_t doff = 0, soff = 0;
  void Seek(int64_t linear, int64_t dbase, int64_t sbase) {
    idx.assign(dims.size(), 0);
    doff = dbase;
    soff = sbase;
    for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
      idx[k] = linear % dims[k];
      linear /= dims[k];
      doff += idx[k] * ds[k];
      soff += idx[k] * ss[k];
    }
  }
  void Next() {
    for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
      doff += ds[k];
      soff += ss[k];
      if (++idx[k] < dims[k]) return;
      doff -= ds[k] * dims[k];
      soff -= ss[k] * dims[k];
      idx[k] = 0;
    }
  }
};

template <typename T>
void StridedCopyT(T* dst, const T* src, const CopyPlan& p, ThreadPool* pool) {
  // Drop unit dims, then merge neighbours that are contiguous in both source and destination.
  Shape sh, ds, ss;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    if (p.shape[i] == 0) return;
    if (p.shape[i] == 1) continue;
    if (!sh.empty() && ds.back() == p.dst_strides[i] * p.shape[i] && ss.back() == p.src_strides[i] * p.shape[i]) {
      sh.back() *= p.shape[i];
      ds.back() = p.dst_strides[i];
      ss.back() = p.src_strides[i];
      continue;
    }
    sh.push_back(p.shape[i]);
    ds.push_back(p.dst_strides[i]);
    ss.push_back(p.src_strides[i]);
  }
  if (sh.empty()) {
    dst[p.dst_off] = src[p.src_off];
    return;
  }
  const int64_t rank = static_cast<int64_t>(sh.size());
  const int64_t inner = sh.back(), ids = ds.back(), iss = ss.back();

  // Transpose-like: the innermost destination run is strided in the source but another
  // axis is contiguous there. Copy 32x32 tiles so both sides stay in cache.
  int64_t k = -1;
  if (iss != 1 && ids == 1 && inner >= 8) {
    for (int64_t a = 0; a < rank - 1; ++a)
      if (ss[a] == 1 && sh[a] >= 8) k = a;
  }
  if (k >= 0) {
    constexpr int64_t kTile = 32;
    OuterWalker proto;
    for (int64_t a = 0; a < rank - 1; ++a) {
      if (a == k) continue;
      proto.dims.push_back(sh[a]);
      proto.ds.push_back(ds[a]);
      proto.ss.push_back(ss[a]);
    }
    int64_t outer = NumElements(proto.dims);
    int64_t tiles_k = (sh[k] + kTile - 1) / kTile;
    const int64_t kd = ds[k], ks = ss[k], kn = sh[k];
    ParallelRange(pool, outer * tiles_k, kTile * inner, [&](int64_t b, int64_t e) {
      OuterWalker w = proto;
      for (int64_t t = b; t < e; ++t) {
        w.Seek(t / tiles_k, p.dst_off, p.src_off);
        int64_t a0 = (t % tiles_k) * kTile, a1 = std::min(kn, a0 + kTile);
        for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
          int64_t j1 = std::min(inner, j0 + kTile);
          for (int64_t a = a0; a < a1; ++a) {
            T* d = dst + w.doff + a * kd;
            const T* s = src + w.soff + a * ks;
            for (int64_t j = j0; j < j1; ++j) d[j] = s[j * iss];
          }
        }
      }
    });
    return;
  }

  OuterWalker proto;
  proto.dims.assign(sh.begin(), sh.end() - 1);
  proto.ds.assign(ds.begin(), ds.end() - 1);
  proto.ss.assign(ss.begin(), ss.end() - 1);
  int64_t outer = NumElements(proto.dims);
  ParallelRange(pool, outer, inner, [&](int64_t b, int64_t e) {
    OuterWalker w = proto;
    w.Seek(b, p.dst_off, p.src_off);
    for (int64_t o = b; o < e; ++o) {
      CopyRun(dst + w.doff, ids, src + w.soff, iss, inner);
      w.Next();
    }
  });
}

}  // namespace

Status StridedCopy(const Tensor& src, Tensor* dst, const CopyPlan& plan, ThreadPool* pool, const Node& node) {
  if (src.dtype() != dst->dtype())
    return InternalError(node.Describe(), ": strided copy between ", DataTypeName(src.dtype()), " and ",
                         DataTypeName(dst->dtype()));
  bool ok = DispatchBySize(src.dtype(),
                           [&]<typename T>() { StridedCopyT<T>(dst->mutable_data<T>(), src.data<T>(), plan, pool); });
  return ok ? Status::Ok() : UnsupportedType(node, src.dtype());
}

Status AxisMapCopy(const Tensor& src, Tensor* dst, const std::vector<std::vector<int64_t>>& maps, ThreadPool* pool,
                   const Node& node) {
  const Shape& out = dst->shape();
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t n = dst->num_elements();
  if (n == 0) return Status::Ok();
  if (rank == 0) {
    bool ok = DispatchBySize(src.dtype(), [&]<typename T>() { *dst->mutable_data<T>() = *src.data<T>(); });
    return ok ? Status::Ok() : UnsupportedType(node, src.dtype());
  }
  const int64_t inner = out[rank - 1];
  bool ok = DispatchBySize(src.dtype(), [&]<typename T>() {
    const T* s = src.data<T>();
    T* d = dst->mutable_data<T>();
    const auto& m = maps[rank - 1];
    ParallelRange(pool, n / inner, inner, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        int64_t rem = o, base = 0;
        for (int64_t a = rank - 2; a >= 0; --a) {
          base += maps[a][rem % out[a]];
          rem /= out[a];
        }
        T* row = d + o * inner;
        for (int64_t j = 0; j < inner; ++j) row[j] = s[base + m[j]];
      }
    });
  });
  return ok ? Status::Ok() : UnsupportedType(node, src.dtype());
}

}  // namespace tensorops

void RegisterTensorKernels(KernelRegistry& r) {
  tensorops::RegisterShapeKernels(r);
  tensorops::RegisterCopyKernels(r);
  tensorops::RegisterLayoutKernels(r);
  tensorops::RegisterGatherKernels(r);
  tensorops::RegisterSortKernels(r);
  tensorops::RegisterCastKernels(r);
}

}  // namespace strata
