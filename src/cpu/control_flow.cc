// If, Loop and Scan. Bodies run through the executor's SubgraphRunner, which gives
// them the calling frame as their outer scope: captured values are shared, not copied.
#include <cstring>

#include "core/caching_allocator.h"
#include "core/kernel.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"

namespace strata {

namespace {

Result<bool> ScalarBool(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": ", what, " is missing");
  if (t->num_elements() != 1) return InvalidArgument(node.Describe(), ": ", what, " must have one element");
  if (t->dtype() == DataType::kBool) return t->data<bool>()[0];
  return InvalidArgument(node.Describe(), ": ", what, " must be bool, got ", DataTypeName(t->dtype()));
}

// Scan outputs pile up across iterations before they are stacked; counting them against
// the session memory cap stops a huge trip count before it exhausts memory.
class ScanBudget {
 public:
  ScanBudget(const Node& node, const Allocator* alloc) : node_(node), cap_(MemoryCapOf(alloc)) {}
  Status Add(const Tensor& t) {
    if (!cap_) return Status::Ok();
    size_t b = t.dtype() == DataType::kString ? t.num_elements() * sizeof(std::string) : t.byte_size();
    // Each held item also costs its Tensor and buffer bookkeeping: without it, a loop of a
    // billion iterations whose scan output is a scalar (or empty) held gigabytes under the cap.
    held_ += b + kItemOverheadBytes;
    if (held_ > cap_)
      return MakeStatus(StatusCode::kOutOfMemory, node_.Describe(), ": scan outputs accumulated over ", iterations_ + 1,
                        " iterations reach ", held_, " bytes, above the session memory cap of ", cap_, " bytes");
    return Status::Ok();
  }
  void NextIteration() { ++iterations_; }

 private:
  static constexpr size_t kItemOverheadBytes = sizeof(Tensor) + 64;
  const Node& node_;
  size_t cap_;
  size_t held_ = 0;
  int64_t iterations_ = 0;
};

const Graph* GraphAttr(const Node& n, const char* name) {
  const Attribute* a = n.FindAttr(name);
  return a && a->g ? a->g.get() : nullptr;
}

// Stacks equally shaped tensors along a new axis at `axis` (0..rank).
Result<Tensor> Stack(const std::vector<Tensor>& items, int64_t axis, DataType dt, const Shape& empty_elem,
                     Allocator* alloc, const Node& node) {
  Shape elem = items.empty() ? empty_elem : items[0].shape();
  for (const Tensor& t : items)
    if (t.shape() != elem || t.dtype() != items[0].dtype())
      return InvalidArgument(node.Describe(), ": scan outputs differ in shape across iterations (", ShapeToString(elem),
                             " vs ", ShapeToString(t.shape()), ")");
  if (axis < 0) axis += static_cast<int64_t>(elem.size()) + 1;
  if (axis < 0 || axis > static_cast<int64_t>(elem.size()))
    return InvalidArgument(node.Describe(), ": scan output axis out of range");
  Shape out = elem;
  out.insert(out.begin() + axis, static_cast<int64_t>(items.size()));
  ASSIGN_OR_RETURN(Tensor r, Tensor::Allocate(items.empty() ? dt : items[0].dtype(), out, alloc));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= elem[i];
  for (size_t i = axis; i < elem.size(); ++i) inner *= elem[i];
  size_t es = DataTypeSize(r.dtype());
  int64_t n = static_cast<int64_t>(items.size());
  if (r.dtype() == DataType::kString) {
    auto* dst = r.mutable_data<std::string>();
    for (int64_t k = 0; k < n; ++k)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) dst[(o * n + k) * inner + i] = items[k].data<std::string>()[o * inner + i];
    return r;
  }
  char* dst = static_cast<char*>(r.raw_mutable_data());
  for (int64_t k = 0; k < n; ++k) {
    const char* src = static_cast<const char*>(items[k].raw_data());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + ((o * n + k) * inner) * es, src + o * inner * es, static_cast<size_t>(inner) * es);
  }
  return r;
}

// Slice `i` along `axis` of t (a copy; scan inputs are small per step).
Result<Tensor> SliceAxis(const Tensor& t, int64_t axis, int64_t i, Allocator* alloc) {
  Shape s = t.shape();
  // Callers check their inputs' shapes; this keeps a missed case an error, not a read past
  // the buffer (a fuzzed opset-8 Scan whose inputs disagreed on the batch did that).
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()) || i < 0 || i >= s[axis])
    return InvalidArgument("slice ", i, " of axis ", axis, " is outside shape ", ShapeToString(s));
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= s[k];
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  int64_t n = s[axis];
  s.erase(s.begin() + axis);
  ASSIGN_OR_RETURN(Tensor r, Tensor::Allocate(t.dtype(), s, alloc));
  if (t.dtype() == DataType::kString) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k)
        r.mutable_data<std::string>()[o * inner + k] = t.data<std::string>()[(o * n + i) * inner + k];
    return r;
  }
  size_t es = DataTypeSize(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(r.raw_mutable_data());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * inner * es, src + ((o * n + i) * inner) * es, static_cast<size_t>(inner) * es);
  return r;
}

Shape DeclaredShapeOrEmpty(const TypeInfo& t) {
  Shape s;
  for (const Dim& d : t.dims) s.push_back(d.known() ? d.value : 0);
  return s;
}

Status IfKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(bool cond, ScalarBool(ctx.input(0), node, "condition"));
  const Graph* body = GraphAttr(node, cond ? "then_branch" : "else_branch");
  if (!body) return InvalidModel(node.Describe(), ": missing branch graph");
  if (!ctx.subgraphs()) return InternalError(node.Describe(), ": no subgraph runner");
  ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.subgraphs()->Run(*body, {}));
  if (outs.size() != ctx.num_outputs())
    return InvalidModel(node.Describe(), ": branch returns ", outs.size(), " values, node has ", ctx.num_outputs(),
                        " outputs");
  for (size_t i = 0; i < outs.size(); ++i) ctx.SetOutput(i, std::move(outs[i]));
  return Status::Ok();
}

Status LoopKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Graph* body = GraphAttr(node, "body");
  if (!body) return InvalidModel(node.Describe(), ": missing body graph");
  int64_t max_trip = INT64_MAX;
  if (const Tensor* m = ctx.input(0)) {
    if (m->num_elements() != 1 || m->dtype() != DataType::kInt64)
      return InvalidArgument(node.Describe(), ": M must be an int64 scalar");
    max_trip = m->data<int64_t>()[0];
  }
  bool cond = true;
  if (const Tensor* c = ctx.input(1)) {
    ASSIGN_OR_RETURN(cond, ScalarBool(c, node, "cond"));
  }
  size_t n_carried = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  if (body->outputs.size() < n_carried + 1)
    return InvalidModel(node.Describe(), ": body has ", body->outputs.size(), " outputs, needs at least ",
                        n_carried + 1);
  size_t n_scan = body->outputs.size() - 1 - n_carried;
  std::vector<Value> carried;
  for (size_t i = 0; i < n_carried; ++i) carried.push_back(ctx.input_value(2 + i));
  std::vector<std::vector<Tensor>> scans(n_scan);
  ScanBudget budget(node, ctx.allocator());
  int64_t it = 0;
  for (; it < max_trip && cond; ++it) {
    std::vector<Value> in;
    in.push_back(Tensor::Scalar<int64_t>(it));
    in.push_back(Tensor::Scalar<bool>(cond));
    for (auto& v : carried) in.push_back(v);
    ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->Run(*body, in));
    if (out.size() != body->outputs.size()) return InternalError(node.Describe(), ": body output count");
    if (!out[0].is_tensor()) return InvalidArgument(node.Describe(), ": body condition output is not a tensor");
    ASSIGN_OR_RETURN(cond, ScalarBool(&out[0].tensor(), node, "body condition output"));
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(out[1 + i]);
    for (size_t i = 0; i < n_scan; ++i) {
      const Value& v = out[1 + n_carried + i];
      if (!v.is_tensor()) return Unsupported(node.Describe(), ": non-tensor scan outputs are not supported");
      RETURN_IF_ERROR(budget.Add(v.tensor()));
      scans[i].push_back(v.tensor());
    }
    budget.NextIteration();
  }
  for (size_t i = 0; i < n_carried && i < ctx.num_outputs(); ++i) ctx.SetOutput(i, carried[i]);
  for (size_t i = 0; i < n_scan && n_carried + i < ctx.num_outputs(); ++i) {
    const TypeInfo& t = body->values[body->outputs[1 + n_carried + i]].type;
    ASSIGN_OR_RETURN(Tensor s, Stack(scans[i], 0, t.elem_type == DataType::kUndefined ? DataType::kFloat : t.elem_type,
                                     DeclaredShapeOrEmpty(t), ctx.allocator(), node));
    ctx.SetOutput(n_carried + i, Value(std::move(s)));
  }
  return Status::Ok();
}

Status ScanKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Graph* body = GraphAttr(node, "body");
  if (!body) return InvalidModel(node.Describe(), ": missing body graph");
  int64_t n_scan_in = node.GetInt("num_scan_inputs", -1);
  bool legacy = node.opset < 9;  // opset 8: first input is sequence_lens, tensors have a batch axis
  size_t first = legacy ? 1 : 0;
  if (n_scan_in < 1 || static_cast<size_t>(n_scan_in) > ctx.num_inputs() - first)
    return InvalidModel(node.Describe(), ": bad num_scan_inputs ", n_scan_in);
  size_t n_state = ctx.num_inputs() - first - static_cast<size_t>(n_scan_in);
  if (body->outputs.size() < n_state)
    return InvalidModel(node.Describe(), ": the body has ", body->outputs.size(), " outputs, fewer than the ", n_state,
                        " state variables");
  size_t n_scan_out = body->outputs.size() - n_state;
  auto in_axes = node.GetInts("scan_input_axes", std::vector<int64_t>(n_scan_in, 0));
  auto in_dirs = node.GetInts(legacy ? "directions" : "scan_input_directions", std::vector<int64_t>(n_scan_in, 0));
  auto out_axes = node.GetInts("scan_output_axes", std::vector<int64_t>(n_scan_out, 0));
  auto out_dirs = node.GetInts("scan_output_directions", std::vector<int64_t>(n_scan_out, 0));
  if (legacy) {
    // Opset 8 carries a leading batch axis; run each batch item separately.
    const Tensor* x0 = ctx.input(first + n_state);
    if (!x0 || x0->rank() < 2) return InvalidArgument(node.Describe(), ": scan input 0 must be [batch, steps, ...]");
    int64_t batch = x0->dim(0);
    // Every state and scan input is sliced per batch item: all must have that batch, and the
    // scan inputs one sequence length (inputs that disagreed were read past their end).
    for (size_t i = first; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.input(i);
      const bool scan = i >= first + n_state;
      if (!t || t->rank() < (scan ? 2u : 1u) || t->dim(0) != batch)
        return InvalidArgument(node.Describe(), ": input ", i, (t ? " of shape " + ShapeToString(t->shape()) : ""),
                               " must be a ", scan ? "[batch, steps, ...] scan input" : "[batch, ...] state",
                               " with batch ", batch, " (of the first scan input)");
      if (scan && t->dim(1) != x0->dim(1))
        return InvalidArgument(node.Describe(), ": scan inputs differ in length: ", ShapeToString(t->shape()), " and ",
                               ShapeToString(x0->shape()));
    }
    std::vector<std::vector<Tensor>> finals(body->outputs.size());
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> state;
      for (size_t i = 0; i < n_state; ++i) {
        ASSIGN_OR_RETURN(Tensor s, SliceAxis(*ctx.input(first + i), 0, b, ctx.allocator()));
        state.push_back(s);
      }
      std::vector<Tensor> xs;
      for (int64_t k = 0; k < n_scan_in; ++k) {
        ASSIGN_OR_RETURN(Tensor s, SliceAxis(*ctx.input(first + n_state + k), 0, b, ctx.allocator()));
        xs.push_back(s);
      }
      int64_t steps = xs[0].dim(0);
      std::vector<std::vector<Tensor>> outs(n_scan_out);
      for (int64_t t = 0; t < steps; ++t) {
        std::vector<Value> in = state;
        for (int64_t k = 0; k < n_scan_in; ++k) {
          int64_t idx = (k < static_cast<int64_t>(in_dirs.size()) && in_dirs[k]) ? steps - 1 - t : t;
          ASSIGN_OR_RETURN(Tensor s, SliceAxis(xs[k], 0, idx, ctx.allocator()));
          in.push_back(s);
        }
        ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->Run(*body, in));
        if (out.size() != body->outputs.size()) return InternalError(node.Describe(), ": body output count");
        for (size_t i = 0; i < n_state; ++i) state[i] = out[i];
        for (size_t i = 0; i < n_scan_out; ++i) {
          if (!out[n_state + i].is_tensor()) return Unsupported(node.Describe(), ": non-tensor scan output");
          outs[i].push_back(out[n_state + i].tensor());
        }
      }
      for (size_t i = 0; i < n_state; ++i) {
        if (!state[i].is_tensor()) return Unsupported(node.Describe(), ": non-tensor scan state");
        finals[i].push_back(state[i].tensor());
      }
      for (size_t i = 0; i < n_scan_out; ++i) {
        ASSIGN_OR_RETURN(Tensor s, Stack(outs[i], 0, DataType::kFloat, {}, ctx.allocator(), node));
        finals[n_state + i].push_back(s);
      }
    }
    for (size_t i = 0; i < finals.size() && i < ctx.num_outputs(); ++i) {
      ASSIGN_OR_RETURN(Tensor s, Stack(finals[i], 0, DataType::kFloat, {}, ctx.allocator(), node));
      ctx.SetOutput(i, Value(std::move(s)));
    }
    return Status::Ok();
  }
  std::vector<Value> state;
  for (size_t i = 0; i < n_state; ++i) state.push_back(ctx.input_value(i));
  int64_t steps = -1;
  std::vector<int64_t> axes(n_scan_in);
  for (int64_t k = 0; k < n_scan_in; ++k) {
    const Tensor* x = ctx.input(n_state + k);
    if (!x) return InvalidArgument(node.Describe(), ": missing scan input ", k);
    ASSIGN_OR_RETURN(axes[k], NormalizeAxis(k < static_cast<int64_t>(in_axes.size()) ? in_axes[k] : 0,
                                            static_cast<int64_t>(x->rank()), node));
    int64_t len = x->dim(axes[k]);
    if (steps >= 0 && len != steps) return InvalidArgument(node.Describe(), ": scan inputs differ in length");
    steps = len;
  }
  std::vector<std::vector<Tensor>> outs(n_scan_out);
  ScanBudget budget(node, ctx.allocator());
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Value> in = state;
    for (int64_t k = 0; k < n_scan_in; ++k) {
      int64_t idx = (k < static_cast<int64_t>(in_dirs.size()) && in_dirs[k]) ? steps - 1 - t : t;
      ASSIGN_OR_RETURN(Tensor s, SliceAxis(*ctx.input(n_state + k), axes[k], idx, ctx.allocator()));
      in.push_back(s);
    }
    ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->Run(*body, in));
    for (size_t i = 0; i < n_state; ++i) state[i] = out[i];
    for (size_t i = 0; i < n_scan_out; ++i) {
      if (!out[n_state + i].is_tensor()) return Unsupported(node.Describe(), ": non-tensor scan output");
      RETURN_IF_ERROR(budget.Add(out[n_state + i].tensor()));
      outs[i].push_back(out[n_state + i].tensor());
    }
    budget.NextIteration();
  }
  for (size_t i = 0; i < n_state && i < ctx.num_outputs(); ++i) ctx.SetOutput(i, state[i]);
  for (size_t i = 0; i < n_scan_out && n_state + i < ctx.num_outputs(); ++i) {
    if (i < out_dirs.size() && out_dirs[i]) std::reverse(outs[i].begin(), outs[i].end());
    const TypeInfo& ti = body->values[body->outputs[n_state + i]].type;
    int64_t axis = i < out_axes.size() ? out_axes[i] : 0;
    ASSIGN_OR_RETURN(Tensor s,
                     Stack(outs[i], axis, ti.elem_type == DataType::kUndefined ? DataType::kFloat : ti.elem_type,
                           DeclaredShapeOrEmpty(ti), ctx.allocator(), node));
    ctx.SetOutput(n_state + i, Value(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("If", 1, IfKernel));
  r.Register(UntypedFnDef("Loop", 1, LoopKernel));
  r.Register(UntypedFnDef("Scan", 8, ScanKernel));
}

}  // namespace strata
