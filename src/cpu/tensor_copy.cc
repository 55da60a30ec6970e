// Copy kernels expressed as strided copies: Transpose, Concat, Split, Slice, Expand,
// Tile, Pad, and the broadcasting Where.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "cpu/float_to_int.h"
#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

Status Transpose(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  // Read in place into inline storage: Transpose runs on every step of attention models.
  const Attribute* perm_attr = node.FindAttr("perm");
  Shape perm;
  if (perm_attr && perm_attr->type == Attribute::Type::kInts)
    perm.assign(perm_attr->ints.begin(), perm_attr->ints.end());
  if (!perm_attr) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    return InvalidArgument(node.Describe(), ": perm ", ShapeToString(perm), " does not match input rank ", rank);
  SmallVector<char, 16> seen(static_cast<size_t>(rank), 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return InvalidArgument(node.Describe(), ": perm ", ShapeToString(perm), " is not a permutation of 0..", rank - 1);
    seen[p] = true;
  }
  const auto in_strides = ContiguousStrides(x->shape());
  CopyPlan plan;
  for (int64_t p : perm) {
    plan.shape.push_back(x->dim(p));
    plan.src_strides.push_back(in_strides[p]);
  }
  plan.dst_strides = ContiguousStrides(plan.shape);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), plan.shape));
  return StridedCopy(*x, y, plan, ctx.pool(), node);
}

Status Concat(KernelContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.num_inputs() == 0) return InvalidArgument(node.Describe(), ": needs at least one input");
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, "inputs"));
    ins.push_back(t);
  }
  const Tensor& first = *ins[0];
  const int64_t rank = static_cast<int64_t>(first.rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": cannot concatenate scalars");
  if (node.opset >= 4 && !node.HasAttr("axis")) return InvalidModel(node.Describe(), ": missing the 'axis' attribute");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 1), rank, node));
  Shape out = first.shape();
  out[axis] = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& t = *ins[i];
    bool ok = t.dtype() == first.dtype() && static_cast<int64_t>(t.rank()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || t.dim(d) == first.dim(d);
    if (!ok)
      return InvalidArgument(node.Describe(), ": input ", i, " ", DataTypeName(t.dtype()), ShapeToString(t.shape()),
                             " does not match input 0 ", DataTypeName(first.dtype()), ShapeToString(first.shape()),
                             " outside axis ", axis);
    out[axis] += t.dim(axis);
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, first.dtype(), out));
  if (y->num_elements() == 0) return Status::Ok();
  // Each output row (an index over the axes before `axis`) is the inputs' rows back to back.
  // With many rows (an NHWC channel concat: one per pixel, each input a short segment) one
  // pass over the output rows copies every input's segment in turn: as one strided copy
  // per input, each input was a parallel region of its own, and 2 threads ran DenseNet's
  // concats slower than 1 (4.5 vs 3.7 ms per run). Few rows (axis 0) keep the per-input
  // copies, which split each large block over the pool.
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= out[d];
  const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
  if (first.dtype() != DataType::kString && rows >= 8 * threads) {
    const int64_t es = static_cast<int64_t>(DataTypeSize(first.dtype()));
    int64_t unit = es;  // bytes per index along axis
    for (int64_t d = axis + 1; d < rank; ++d) unit *= out[d];
    const int64_t row_bytes = out[axis] * unit;
    auto* dst = static_cast<char*>(y->raw_mutable_data());
    ParallelRange(ctx.pool(), rows, row_bytes, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        char* d = dst + r * row_bytes;
        for (const Tensor* t : ins) {
          const int64_t seg = t->dim(axis) * unit;
          if (seg == 0) continue;
          std::memcpy(d, static_cast<const char*>(t->raw_data()) + r * seg, static_cast<size_t>(seg));
          d += seg;
        }
      }
    });
    return Status::Ok();
  }
  const auto out_strides = ContiguousStrides(out);
  int64_t offset = 0;
  for (const Tensor* t : ins) {
    CopyPlan plan{t->shape(), out_strides, ContiguousStrides(t->shape()), offset * out_strides[axis], 0};
    RETURN_IF_ERROR(StridedCopy(*t, y, plan, ctx.pool(), node));
    offset += t->dim(axis);
  }
  return Status::Ok();
}

Status Split(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  const int64_t dim = x->dim(axis);
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> sizes;
  const Tensor* split_in = (node.opset >= 13 || node.opset == 1) ? ctx.input(1) : nullptr;
  if (split_in && split_in->valid()) {
    ASSIGN_OR_RETURN(sizes, ReadInts(*split_in, node, "split"));
  } else if (node.opset < 13 && node.HasAttr("split")) {
    sizes = node.GetInts("split");
  } else if (node.opset >= 18 && node.HasAttr("num_outputs")) {
    const int64_t k = node.GetInt("num_outputs", n);
    if (k != n || k <= 0)
      return InvalidModel(node.Describe(), ": num_outputs ", k, " but the node has ", n, " outputs");
    const int64_t chunk = (dim + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
  } else {
    if (n == 0 || dim % n != 0)
      return InvalidArgument(node.Describe(), ": dimension ", dim, " of axis ", axis, " cannot be split evenly into ",
                             n, " outputs");
    sizes.assign(n, dim / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n)
    return InvalidArgument(node.Describe(), ": split has ", sizes.size(), " entries but the node has ", n, " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return InvalidArgument(node.Describe(), ": negative split size ", s);
    if (__builtin_add_overflow(total, s, &total))  // sizes near INT64_MAX
      return InvalidArgument(node.Describe(), ": split sizes ", ShapeToString(sizes), " overflow int64 but axis ", axis,
                             " has size ", dim);
  }
  if (total != dim)
    return InvalidArgument(node.Describe(), ": split sizes ", ShapeToString(sizes), " sum to ", total, " but axis ",
                           axis, " has size ", dim);
  const auto in_strides = ContiguousStrides(x->shape());
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    Shape s = x->shape();
    s[axis] = sizes[i];
    if (ctx.output_requested(i)) {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(i, x->dtype(), s));
      CopyPlan plan{s, ContiguousStrides(s), in_strides, 0, offset * in_strides[axis]};
      RETURN_IF_ERROR(StridedCopy(*x, y, plan, ctx.pool(), node));
    }
    offset += sizes[i];
  }
  return Status::Ok();
}

Status Slice(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (node.opset < 10) {
    starts = node.GetInts("starts");
    ends = node.GetInts("ends");
    has_axes = node.HasAttr("axes");
    axes = node.GetInts("axes");
  } else {
    ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "starts"));
    ASSIGN_OR_RETURN(const Tensor* e, RequireInput(ctx, 2, "ends"));
    ASSIGN_OR_RETURN(starts, ReadInts(*s, node, "starts"));
    ASSIGN_OR_RETURN(ends, ReadInts(*e, node, "ends"));
    if (const Tensor* a = ctx.input(3); a && a->valid()) {
      has_axes = true;
      ASSIGN_OR_RETURN(axes, ReadInts(*a, node, "axes"));
    }
    if (const Tensor* st = ctx.input(4); st && st->valid()) {
      ASSIGN_OR_RETURN(steps, ReadInts(*st, node, "steps"));
    }
  }
  if (!has_axes)
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return InvalidArgument(node.Describe(), ": starts, ends, axes and steps must have the same length (", starts.size(),
                           ", ", ends.size(), ", ", axes.size(), ", ", steps.size(), ")");
  ASSIGN_OR_RETURN(auto norm_axes, NormalizeAxes(axes, rank, node));
  const auto in_strides = ContiguousStrides(x->shape());
  CopyPlan plan;
  plan.shape = x->shape();
  plan.src_strides = in_strides;
  for (size_t i = 0; i < norm_axes.size(); ++i) {
    const int64_t a = norm_axes[i], d = x->dim(a), step = steps[i];
    if (step == 0) return InvalidArgument(node.Describe(), ": step for axis ", a, " is 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -d ? 0 : s + d;  // avoid overflow for INT64_MIN
    if (e < 0) e = e < -d ? -1 : e + d;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? 1 + (e - s - 1) / step : 0;
    } else {
      // Not std::clamp: for d == 0 the bounds cross (-1 < 0).
      s = std::min<int64_t>(std::max<int64_t>(s, 0), d - 1);
      e = std::min<int64_t>(std::max<int64_t>(e, -1), d - 1);
      // (s - e - step - 1) could overflow when step is near INT64_MIN; divide first.
      count = s > e ? 1 + (s - e - 1) / (step == std::numeric_limits<int64_t>::min() ? s - e : -step) : 0;
    }
    plan.shape[a] = count;
    if (count > 0) {
      plan.src_off += s * in_strides[a];
      plan.src_strides[a] = in_strides[a] * (count > 1 ? step : 1);
    }
  }
  plan.dst_strides = ContiguousStrides(plan.shape);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), plan.shape));
  return StridedCopy(*x, y, plan, ctx.pool(), node);
}

// Source strides for broadcasting `in` (right-aligned) to `out`: 0 on broadcast dims.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  const auto cs = ContiguousStrides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

Status Expand(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "shape"));
  if (s->rank() != 1) return InvalidArgument(node.Describe(), ": shape must be 1-D, got ", ShapeToString(s->shape()));
  ASSIGN_OR_RETURN(auto shape, ReadInts(*s, node, "shape"));
  for (int64_t d : shape)
    if (d < 0) return InvalidArgument(node.Describe(), ": negative dimension in shape ", ShapeToString(shape));
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(x->shape(), shape, node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  CopyPlan plan{out, ContiguousStrides(out), BroadcastStrides(x->shape(), out), 0, 0};
  return StridedCopy(*x, y, plan, ctx.pool(), node);
}

Status Tile(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> repeats(rank, 1);
  if (node.opset < 6) {  // Tile-1: scalar `tiles` along scalar `axis`
    ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 1, "tiles"));
    ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 2, "axis"));
    ASSIGN_OR_RETURN(int64_t tiles, ReadScalarInt(*t, node, "tiles"));
    ASSIGN_OR_RETURN(int64_t axis, ReadScalarInt(*a, node, "axis"));
    ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, rank, node));
    repeats[axis] = tiles;
  } else {
    ASSIGN_OR_RETURN(const Tensor* rt, RequireInput(ctx, 1, "repeats"));
    ASSIGN_OR_RETURN(repeats, ReadInts(*rt, node, "repeats"));
    if (rt->rank() != 1 || static_cast<int64_t>(repeats.size()) != rank)
      return InvalidArgument(node.Describe(), ": repeats ", ShapeToString(repeats),
                             " must be 1-D with one entry per input dimension (rank ", rank, ")");
  }
  // Output viewed as [r0, d0, r1, d1, ...]: repeat dims have source stride 0.
  CopyPlan plan;
  Shape out;
  const auto cs = ContiguousStrides(x->shape());
  for (int64_t i = 0; i < rank; ++i) {
    if (repeats[i] < 0) return InvalidArgument(node.Describe(), ": negative repeat ", repeats[i]);
    plan.shape.push_back(repeats[i]);
    plan.shape.push_back(x->dim(i));
    plan.src_strides.push_back(0);
    plan.src_strides.push_back(cs[i]);
    int64_t d = 0;
    if (__builtin_mul_overflow(repeats[i], x->dim(i), &d))
      return InvalidArgument(node.Describe(), ": repeats ", ShapeToString(repeats), " times input shape ",
                             ShapeToString(x->shape()), " overflows int64 on axis ", i);
    out.push_back(d);
  }
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(out, node.Describe() + " output"));
  (void)n;
  plan.dst_strides = ContiguousStrides(plan.shape);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  return StridedCopy(*x, y, plan, ctx.pool(), node);
}

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
constexpr std::pair<const char*, PadMode> kPadModes[] = {{"constant", PadMode::kConstant},
                                                         {"reflect", PadMode::kReflect},
                                                         {"edge", PadMode::kEdge},
                                                         {"wrap", PadMode::kWrap}};

// Maps an output coordinate along one axis to a source coordinate for the non-constant
// pad modes; d > 0.
int64_t PadSource(int64_t i, int64_t d, PadMode mode) {
  if (mode == PadMode::kReflect) {  // mirror without repeating the edge: periodic with 2(d-1)
    if (d == 1) return 0;
    const int64_t period = 2 * (d - 1);
    int64_t m = i % period;
    if (m < 0) m += period;
    return m < d ? m : period - m;
  }
  if (mode == PadMode::kEdge) return std::clamp<int64_t>(i, 0, d - 1);
  // kWrap (kConstant never reaches here)
  int64_t m = i % d;
  return m < 0 ? m + d : m;
}

Status Pad(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> pads;
  const Tensor* cval = nullptr;
  float attr_value = 0.0f;
  if (node.opset < 11) {
    pads = node.GetInts(node.opset < 2 ? "paddings" : "pads");
    attr_value = node.GetFloat("value", 0.0f);
  } else {
    ASSIGN_OR_RETURN(const Tensor* p, RequireInput(ctx, 1, "pads"));
    ASSIGN_OR_RETURN(pads, ReadInts(*p, node, "pads"));
    cval = ctx.input(2);
    if (cval && !cval->valid()) cval = nullptr;
    if (cval && (cval->dtype() != x->dtype() || cval->num_elements() != 1))
      return InvalidArgument(node.Describe(), ": constant_value must be a one-element ", DataTypeName(x->dtype()),
                             " tensor");
  }
  std::vector<int64_t> axes;
  if (node.opset >= 18 && ctx.input(3) && ctx.input(3)->valid()) {
    ASSIGN_OR_RETURN(auto raw, ReadInts(*ctx.input(3), node, "axes"));
    ASSIGN_OR_RETURN(axes, NormalizeAxes(raw, rank, node));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * na)
    return InvalidArgument(node.Describe(), ": pads has ", pads.size(), " entries, expected ", 2 * na);
  // Far beyond any tensor's size: keeps dim + pads and the source-coordinate arithmetic below
  // (i - before, -before) inside int64.
  constexpr int64_t kMaxPad = int64_t{1} << 62;
  for (int64_t p : pads)
    if (p > kMaxPad || p < -kMaxPad)
      return InvalidArgument(node.Describe(), ": pads value ", p, " is out of range (at most 2^62 either way)");
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  for (int64_t i = 0; i < na; ++i) {
    before[axes[i]] = pads[i];
    after[axes[i]] = pads[i + na];
  }
  const std::string mode_s = node.GetString("mode", "constant");
  PadMode mode = PadMode::kConstant;
  bool known = false;
  for (const auto& [name, m] : kPadModes) {
    if (mode_s == name && (m != PadMode::kWrap || node.opset >= 19)) {
      mode = m;
      known = true;
    }
  }
  if (!known) return InvalidArgument(node.Describe(), ": unsupported pad mode '", mode_s, "'");
  Shape out(rank);
  for (int64_t a = 0; a < rank; ++a) {
    if (__builtin_add_overflow(x->dim(a), before[a], &out[a]) || __builtin_add_overflow(out[a], after[a], &out[a]))
      return InvalidArgument(node.Describe(), ": pads ", ShapeToString(pads), " overflow int64 on axis ", a);
    if (out[a] < 0)
      return InvalidArgument(node.Describe(), ": pads ", ShapeToString(pads), " give a negative size on axis ", a);
    if (mode != PadMode::kConstant && x->dim(a) == 0 && out[a] > 0)
      return InvalidArgument(node.Describe(), ": cannot ", mode_s, "-pad axis ", a, " of size 0");
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  if (y->num_elements() == 0) return Status::Ok();
  if (mode != PadMode::kConstant) {
    std::vector<std::vector<int64_t>> maps(rank);
    const auto cs = ContiguousStrides(x->shape());
    for (int64_t a = 0; a < rank; ++a) {
      maps[a].resize(out[a]);
      for (int64_t i = 0; i < out[a]; ++i) maps[a][i] = PadSource(i - before[a], x->dim(a), mode) * cs[a];
    }
    return AxisMapCopy(*x, y, maps, ctx.pool(), node);
  }
  // Constant: fill, then copy the overlap of the input (pads may be negative = crop).
  Status st;
  bool ok = DispatchAny(x->dtype(), [&]<typename T>() {
    T v{};
    if (cval) {
      v = *cval->data<T>();
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      v = T(attr_value);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      v = FloatToInt<T>(attr_value);  // opset < 11 Pad's float `value` on an integer tensor
    } else if constexpr (!std::is_same_v<T, std::string>) {
      v = static_cast<T>(attr_value);
    }
    T* p = y->mutable_data<T>();
    std::fill(p, p + y->num_elements(), v);
  });
  if (!ok) return UnsupportedType(node, x->dtype());
  CopyPlan plan;
  plan.dst_strides = ContiguousStrides(out);
  plan.src_strides = ContiguousStrides(x->shape());
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t src_begin = std::max<int64_t>(0, -before[a]);
    const int64_t src_end = std::min<int64_t>(x->dim(a), out[a] - before[a]);
    plan.shape.push_back(std::max<int64_t>(0, src_end - src_begin));
    plan.src_off += src_begin * plan.src_strides[a];
    plan.dst_off += (src_begin + before[a]) * plan.dst_strides[a];
  }
  return StridedCopy(*x, y, plan, ctx.pool(), node);
}

Status Where(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, 0, "condition"));
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
  ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 2, "Y"));
  if (c->dtype() != DataType::kBool)
    return InvalidArgument(node.Describe(), ": condition must be bool, got ", DataTypeName(c->dtype()));
  if (x->dtype() != y->dtype())
    return InvalidArgument(node.Describe(), ": X (", DataTypeName(x->dtype()), ") and Y (", DataTypeName(y->dtype()),
                           ") must have the same type");
  ASSIGN_OR_RETURN(Shape s1, BroadcastShapes(c->shape(), x->shape(), node));
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(s1, y->shape(), node));
  ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(0, x->dtype(), out));
  const int64_t n = z->num_elements();
  if (n == 0) return Status::Ok();
  const auto sc = BroadcastStrides(c->shape(), out), sx = BroadcastStrides(x->shape(), out),
             sy = BroadcastStrides(y->shape(), out);
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t inner = rank ? out[rank - 1] : 1;
  const int64_t ic = rank ? sc[rank - 1] : 0, ix = rank ? sx[rank - 1] : 0, iy = rank ? sy[rank - 1] : 0;
  const bool* cp = c->data<bool>();
  bool ok = DispatchBySize(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    const T* yp = y->data<T>();
    T* zp = z->mutable_data<T>();
    ParallelRange(ctx.pool(), n / inner, inner, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        int64_t rem = o, oc = 0, ox = 0, oy = 0;
        for (int64_t a = rank - 2; a >= 0; --a) {
          const int64_t i = rem % out[a];
          rem /= out[a];
          oc += i * sc[a];
          ox += i * sx[a];
          oy += i * sy[a];
        }
        T* d = zp + o * inner;
        for (int64_t j = 0; j < inner; ++j) d[j] = cp[oc + j * ic] ? xp[ox + j * ix] : yp[oy + j * iy];
      }
    });
  });
  return ok ? Status::Ok() : UnsupportedType(node, x->dtype());
}

}  // namespace

void RegisterCopyKernels(KernelRegistry& r) {
  RegisterVersions(r, "Transpose", {1, 13}, StatelessFactory(Transpose));
  RegisterVersions(r, "Concat", {1, 4, 11, 13}, StatelessFactory(Concat));
  RegisterVersions(r, "Split", {1, 2, 11, 13, 18}, StatelessFactory(Split));
  RegisterVersions(r, "Slice", {1, 10, 11, 13}, StatelessFactory(Slice));
  RegisterVersions(r, "Expand", {8, 13}, StatelessFactory(Expand));
  RegisterVersions(r, "Tile", {1, 6, 13}, StatelessFactory(Tile));
  RegisterVersions(r, "Pad", {1, 2, 11, 13, 18, 19}, StatelessFactory(Pad));
  RegisterVersions(r, "Where", {9, 16}, StatelessFactory(Where));
}

}  // namespace strata::tensorops
