// Layout kernels: DepthToSpace, SpaceToDepth, Trilu, ReverseSequence and the
// deprecated Upsample (opsets 7-9).
#include <cmath>

#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

// Copies x viewed as `view` (same element count) transposed by `perm` into output 0 of shape `out`.
Status ViewTranspose(KernelContext& ctx, const Tensor& x, const Shape& view, const std::vector<int64_t>& perm,
                     const Shape& out) {
  const auto vs = ContiguousStrides(view);
  CopyPlan plan;
  for (int64_t p : perm) {
    plan.shape.push_back(view[p]);
    plan.src_strides.push_back(vs[p]);
  }
  plan.dst_strides = ContiguousStrides(plan.shape);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out));
  return StridedCopy(x, y, plan, ctx.pool(), ctx.node());
}

// DepthToSpace/SpaceToDepth: a 4-D input and a positive blocksize.
Result<int64_t> BlockSize(const Node& node, const Tensor& x) {
  if (x.rank() != 4) return InvalidArgument(node.Describe(), ": input must be 4-D, got ", ShapeToString(x.shape()));
  const int64_t b = node.GetInt("blocksize", 0);
  if (b <= 0) return InvalidModel(node.Describe(), ": blocksize must be positive, got ", b);
  return b;
}

Status DepthToSpace(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const int64_t b, BlockSize(node, *x));
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  int64_t bb = 0, oh = 0, ow = 0;
  if (__builtin_mul_overflow(b, b, &bb) || __builtin_mul_overflow(h, b, &oh) || __builtin_mul_overflow(w, b, &ow))
    return InvalidArgument(node.Describe(), ": blocksize ", b, " is too large for input ", ShapeToString(x->shape()));
  if (c % bb != 0)
    return InvalidArgument(node.Describe(), ": channels ", c, " are not divisible by blocksize^2 = ", bb);
  const std::string mode = node.opset >= 11 ? node.GetString("mode", "DCR") : "DCR";
  const int64_t oc = c / bb;
  const Shape out{n, oc, oh, ow};
  if (mode == "DCR") return ViewTranspose(ctx, *x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out);
  if (mode == "CRD") return ViewTranspose(ctx, *x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
  return InvalidArgument(node.Describe(), ": unknown mode '", mode, "' (expected DCR or CRD)");
}

Status SpaceToDepth(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const int64_t b, BlockSize(node, *x));
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  if (h % b != 0 || w % b != 0)
    return InvalidArgument(node.Describe(), ": spatial dims ", h, "x", w, " are not divisible by blocksize ", b);
  int64_t oc = 0;  // a blocksize beyond empty spatial dims still has to keep c * b * b in range
  if (__builtin_mul_overflow(c, b, &oc) || __builtin_mul_overflow(oc, b, &oc))
    return InvalidArgument(node.Describe(), ": blocksize ", b, " is too large for input ", ShapeToString(x->shape()));
  return ViewTranspose(ctx, *x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, oc, h / b, w / b});
}

Status Trilu(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  if (x->rank() < 2) return InvalidArgument(node.Describe(), ": input must have rank >= 2, got ", x->rank());
  int64_t k = 0;
  if (const Tensor* kt = ctx.input(1); kt && kt->valid()) {
    ASSIGN_OR_RETURN(k, ReadScalarInt(*kt, node, "k"));
  }
  const bool upper = node.GetInt("upper", 1) != 0;
  const int64_t rows = x->dim(x->rank() - 2), cols = x->dim(x->rank() - 1);
  const int64_t mats = rows * cols == 0 ? 0 : x->num_elements() / (rows * cols);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchAny(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    T* d = y->mutable_data<T>();
    ParallelRange(ctx.pool(), mats * rows, cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = r % rows;
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? j - i >= k : j - i <= k;
          d[r * cols + j] = keep ? s[r * cols + j] : T{};
        }
      }
    });
  });
  return ok ? Status::Ok() : UnsupportedType(node, x->dtype());
}

Status ReverseSequence(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* lt, RequireInput(ctx, 1, "sequence_lens"));
  if (x->rank() < 2) return InvalidArgument(node.Describe(), ": input must have rank >= 2, got ", x->rank());
  const int64_t time_axis = node.GetInt("time_axis", 0), batch_axis = node.GetInt("batch_axis", 1);
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)))
    return InvalidModel(node.Describe(), ": time_axis/batch_axis must be 0/1 or 1/0, got ", time_axis, "/", batch_axis);
  ASSIGN_OR_RETURN(auto lens, ReadInts(*lt, node, "sequence_lens"));
  const int64_t batch = x->dim(batch_axis), steps = x->dim(time_axis);
  if (static_cast<int64_t>(lens.size()) != batch)
    return InvalidArgument(node.Describe(), ": sequence_lens has ", lens.size(), " entries for batch size ", batch);
  for (int64_t l : lens)
    if (l < 0 || l > steps)
      return InvalidArgument(node.Describe(), ": sequence length ", l, " is outside [0, ", steps, "]");
  const int64_t inner = x->num_elements() / std::max<int64_t>(1, batch * steps);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  // Offset of (batch b, step t) blocks of `inner` elements.
  auto off = [&](int64_t b, int64_t t) { return (time_axis == 0 ? t * batch + b : b * steps + t) * inner; };
  bool ok = DispatchBySize(x->dtype(), [&]<typename T>() {
    const T* s = x->data<T>();
    T* d = y->mutable_data<T>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t src_t = t < lens[b] ? lens[b] - 1 - t : t;
        std::copy(s + off(b, src_t), s + off(b, src_t) + inner, d + off(b, t));
      }
  });
  return ok ? Status::Ok() : UnsupportedType(node, x->dtype());
}

template <typename T>
void UpsampleLinear(const Tensor& x, Tensor* y, const std::vector<float>& scales, ThreadPool* pool) {
  const Shape& in = x.shape();
  const Shape& out = y->shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  const auto cs = ContiguousStrides(in);
  // Per axis and output coordinate: the two source offsets and the weight of the second.
  std::vector<std::vector<int64_t>> lo(rank), hi(rank);
  std::vector<std::vector<float>> wt(rank);
  std::vector<int64_t> interp;  // axes that actually interpolate
  for (int64_t a = 0; a < rank; ++a) {
    lo[a].resize(out[a]);
    hi[a].resize(out[a]);
    wt[a].resize(out[a]);
    for (int64_t i = 0; i < out[a]; ++i) {
      const float pos = static_cast<float>(i) / scales[a];
      int64_t i0 = std::min<int64_t>(static_cast<int64_t>(pos), in[a] - 1);
      int64_t i1 = std::min<int64_t>(i0 + 1, in[a] - 1);
      lo[a][i] = i0 * cs[a];
      hi[a][i] = i1 * cs[a];
      wt[a][i] = i1 == i0 ? 0.0f : pos - static_cast<float>(i0);
    }
    if (scales[a] != 1.0f) interp.push_back(a);
  }
  const T* s = x.data<T>();
  T* d = y->mutable_data<T>();
  const int64_t n = y->num_elements();
  const int64_t corners = int64_t{1} << interp.size();
  ParallelRange(pool, n, corners * 2, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(rank);
    for (int64_t o = b; o < e; ++o) {
      int64_t rem = o, base = 0;
      for (int64_t a = rank - 1; a >= 0; --a) {
        idx[a] = rem % out[a];
        rem /= out[a];
      }
      for (int64_t a = 0; a < rank; ++a)
        if (scales[a] == 1.0f) base += lo[a][idx[a]];
      double acc = 0;
      for (int64_t c = 0; c < corners; ++c) {
        int64_t offset = base;
        double w = 1;
        for (size_t q = 0; q < interp.size(); ++q) {
          const int64_t a = interp[q], i = idx[a];
          const bool upper = (c >> q) & 1;
          offset += upper ? hi[a][i] : lo[a][i];
          w *= upper ? wt[a][i] : 1.0f - wt[a][i];
        }
        if (w != 0) acc += w * static_cast<double>(static_cast<float>(s[offset]));
      }
      if constexpr (std::is_same_v<T, double>) {
        d[o] = acc;
      } else {
        d[o] = T(static_cast<float>(acc));
      }
    }
  });
}

Status Upsample(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<float> scales;
  if (node.opset < 9) {
    scales = node.GetFloats("scales");
  } else {
    ASSIGN_OR_RETURN(const Tensor* st, RequireInput(ctx, 1, "scales"));
    if (st->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": scales must be float32, got ", DataTypeName(st->dtype()));
    scales.assign(st->data<float>(), st->data<float>() + st->num_elements());
  }
  if (static_cast<int64_t>(scales.size()) != rank)
    return InvalidArgument(node.Describe(), ": scales has ", scales.size(), " entries for input rank ", rank);
  Shape out(rank);
  for (int64_t a = 0; a < rank; ++a) {
    if (!(scales[a] >= 1.0f) || !std::isfinite(scales[a]))
      return InvalidArgument(node.Describe(), ": scale ", scales[a], " on axis ", a, " must be finite and >= 1");
    const double d = std::floor(static_cast<double>(x->dim(a)) * scales[a]);
    if (d >= 0x1p62)  // beyond any tensor, and the int64 conversion would be undefined
      return InvalidArgument(node.Describe(), ": scale ", scales[a], " on axis ", a, " gives a size of ", d);
    out[a] = static_cast<int64_t>(d);
  }
  const std::string mode = node.GetString("mode", "nearest");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  if (y->num_elements() == 0) return Status::Ok();
  if (mode == "nearest") {
    std::vector<std::vector<int64_t>> maps(rank);
    const auto cs = ContiguousStrides(x->shape());
    for (int64_t a = 0; a < rank; ++a) {
      maps[a].resize(out[a]);
      for (int64_t i = 0; i < out[a]; ++i)
        maps[a][i] = std::min<int64_t>(static_cast<int64_t>(static_cast<float>(i) / scales[a]), x->dim(a) - 1) * cs[a];
    }
    return AxisMapCopy(*x, y, maps, ctx.pool(), node);
  }
  if (mode != "linear" && mode != "bilinear")
    return InvalidArgument(node.Describe(), ": unknown mode '", mode, "' (expected nearest or linear)");
  switch (x->dtype()) {
    case DataType::kFloat:
      UpsampleLinear<float>(*x, y, scales, ctx.pool());
      break;
    case DataType::kDouble:
      UpsampleLinear<double>(*x, y, scales, ctx.pool());
      break;
    case DataType::kFloat16:
      UpsampleLinear<Float16>(*x, y, scales, ctx.pool());
      break;
    case DataType::kBFloat16:
      UpsampleLinear<BFloat16>(*x, y, scales, ctx.pool());
      break;
    default:
      return Unsupported(node.Describe(), ": linear mode needs a float input, got ", DataTypeName(x->dtype()));
  }
  return Status::Ok();
}

}  // namespace

void RegisterLayoutKernels(KernelRegistry& r) {
  RegisterVersions(r, "DepthToSpace", {1, 11, 13}, StatelessFactory(DepthToSpace));
  RegisterVersions(r, "SpaceToDepth", {1, 13}, StatelessFactory(SpaceToDepth));
  RegisterVersions(r, "Trilu", {14}, StatelessFactory(Trilu));
  RegisterVersions(r, "ReverseSequence", {10}, StatelessFactory(ReverseSequence));
  RegisterVersions(r, "Upsample", {7, 9}, StatelessFactory(Upsample), 9);
}

}  // namespace strata::tensorops
