// Sequence and optional ops. A sequence Value shares its tensors; ops that "modify"
// a sequence build a new item list, never touching the input's buffers.
#include <cstring>

#include "core/kernel.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"

namespace strata {

namespace {

Result<const std::vector<Tensor>*> SeqInput(KernelContext& ctx, size_t i) {
  const Value& v = ctx.input_value(i);
  if (!v.is_sequence()) return InvalidArgument(ctx.node().Describe(), ": input ", i, " must be a sequence");
  return &v.sequence();
}

Result<int64_t> Position(KernelContext& ctx, size_t i, int64_t size, bool allow_end) {
  const Tensor* p = ctx.input(i);
  if (!p) return allow_end ? size : size - 1;
  if (p->num_elements() != 1 || (p->dtype() != DataType::kInt64 && p->dtype() != DataType::kInt32))
    return InvalidArgument(ctx.node().Describe(), ": position must be an int32/int64 scalar");
  int64_t pos = p->dtype() == DataType::kInt64 ? p->data<int64_t>()[0] : p->data<int32_t>()[0];
  int64_t hi = allow_end ? size : size - 1;
  if (pos < -size || pos > hi)
    return InvalidArgument(ctx.node().Describe(), ": position ", pos, " is out of range for a sequence of ", size);
  return pos < 0 ? pos + size : pos;
}

DataType SeqType(KernelContext& ctx, size_t i) { return ctx.input_value(i).elem_type(); }

// Copies t[outer, [begin,end), inner] into a new tensor.
Result<Tensor> SliceRange(const Tensor& t, int64_t axis, int64_t begin, int64_t end, bool keep_axis, Allocator* alloc) {
  Shape s = t.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= s[k];
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  int64_t n = s[axis], len = end - begin;
  Shape os = s;
  os[axis] = len;
  if (!keep_axis) os.erase(os.begin() + axis);
  ASSIGN_OR_RETURN(Tensor r, Tensor::Allocate(t.dtype(), os, alloc));
  if (t.dtype() == DataType::kString) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < len * inner; ++k)
        r.mutable_data<std::string>()[o * len * inner + k] = t.data<std::string>()[(o * n + begin) * inner + k];
    return r;
  }
  size_t es = DataTypeSize(t.dtype());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(r.raw_mutable_data()) + o * len * inner * es,
                static_cast<const char*>(t.raw_data()) + (o * n + begin) * inner * es,
                static_cast<size_t>(len * inner) * es);
  return r;
}

Status SequenceEmpty(KernelContext& ctx) {
  auto dt = static_cast<DataType>(ctx.node().GetInt("dtype", static_cast<int64_t>(DataType::kFloat)));
  ctx.SetOutput(0, Value::Sequence({}, dt));
  return Status::Ok();
}

Status SequenceConstruct(KernelContext& ctx) {
  std::vector<Tensor> items;
  DataType dt = DataType::kUndefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) return InvalidArgument(ctx.node().Describe(), ": input ", i, " must be a tensor");
    if (dt != DataType::kUndefined && t->dtype() != dt)
      return InvalidArgument(ctx.node().Describe(), ": sequence items must share one dtype");
    dt = t->dtype();
    items.push_back(*t);
  }
  ctx.SetOutput(0, Value::Sequence(std::move(items), dt));
  return Status::Ok();
}

Status SequenceAt(KernelContext& ctx) {
  ASSIGN_OR_RETURN(auto* seq, SeqInput(ctx, 0));
  if (!ctx.input(1)) return InvalidArgument(ctx.node().Describe(), ": position is required");
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, static_cast<int64_t>(seq->size()), false));
  ctx.SetOutput(0, Value((*seq)[pos]));
  return Status::Ok();
}

Status SequenceInsert(KernelContext& ctx) {
  ASSIGN_OR_RETURN(auto* seq, SeqInput(ctx, 0));
  const Tensor* t = ctx.input(1);
  if (!t) return InvalidArgument(ctx.node().Describe(), ": tensor to insert is missing");
  DataType dt = SeqType(ctx, 0);
  if (dt != DataType::kUndefined && !seq->empty() && t->dtype() != dt)
    return InvalidArgument(ctx.node().Describe(), ": inserted tensor has dtype ", DataTypeName(t->dtype()),
                           ", sequence holds ", DataTypeName(dt));
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 2, static_cast<int64_t>(seq->size()), true));
  std::vector<Tensor> items = *seq;
  items.insert(items.begin() + pos, *t);
  ctx.SetOutput(0, Value::Sequence(std::move(items), t->dtype()));
  return Status::Ok();
}

Status SequenceErase(KernelContext& ctx) {
  ASSIGN_OR_RETURN(auto* seq, SeqInput(ctx, 0));
  if (seq->empty()) return InvalidArgument(ctx.node().Describe(), ": cannot erase from an empty sequence");
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, static_cast<int64_t>(seq->size()), false));
  std::vector<Tensor> items = *seq;
  items.erase(items.begin() + pos);
  ctx.SetOutput(0, Value::Sequence(std::move(items), SeqType(ctx, 0)));
  return Status::Ok();
}

Status SequenceLength(KernelContext& ctx) {
  ASSIGN_OR_RETURN(auto* seq, SeqInput(ctx, 0));
  ctx.SetOutput(0, Value(Tensor::Scalar<int64_t>(static_cast<int64_t>(seq->size()))));
  return Status::Ok();
}

Status SplitToSequence(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input is missing");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), static_cast<int64_t>(x->rank()), node));
  int64_t n = x->dim(axis);
  std::vector<int64_t> sizes;
  bool keep = true;
  const Tensor* split = ctx.input(1);
  if (!split) {
    keep = node.GetInt("keepdims", 1) != 0;
    sizes.assign(n, 1);
  } else {
    std::vector<int64_t> sv;
    for (int64_t i = 0, n_elems = split->num_elements(); i < n_elems; ++i)
      sv.push_back(split->dtype() == DataType::kInt64 ? split->data<int64_t>()[i] : split->data<int32_t>()[i]);
    if (split->rank() == 0) {
      int64_t c = sv[0];
      if (c <= 0) return InvalidArgument(node.Describe(), ": split must be positive");
      for (int64_t b = 0; b < n; b += c) sizes.push_back(std::min(c, n - b));
    } else {
      int64_t total = 0;
      for (int64_t s : sv) {
        if (s < 0) return InvalidArgument(node.Describe(), ": negative split size");
        // total <= n here, so n - total cannot overflow; the sum itself could (fuzz find).
        if (s > n - total)
          return InvalidArgument(node.Describe(), ": split sizes sum past the axis's ", n, " (at size ", s, ")");
        total += s;
      }
      if (total != n) return InvalidArgument(node.Describe(), ": split sizes sum to ", total, ", axis has ", n);
      sizes = sv;
    }
  }
  std::vector<Tensor> items;
  int64_t b = 0;
  for (int64_t s : sizes) {
    ASSIGN_OR_RETURN(Tensor t, SliceRange(*x, axis, b, b + s, keep, ctx.allocator()));
    items.push_back(std::move(t));
    b += s;
  }
  ctx.SetOutput(0, Value::Sequence(std::move(items), x->dtype()));
  return Status::Ok();
}

Status ConcatFromSequence(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(auto* seq, SeqInput(ctx, 0));
  if (seq->empty()) return InvalidArgument(node.Describe(), ": cannot concatenate an empty sequence");
  bool new_axis = node.GetInt("new_axis", 0) != 0;
  const Shape& s0 = (*seq)[0].shape();
  int64_t rank = static_cast<int64_t>(s0.size()) + (new_axis ? 1 : 0);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), rank, node));
  for (size_t i = 1; i < seq->size(); ++i)  // before new_axis inserts at an axis of item 0's rank
    if ((*seq)[i].rank() != s0.size())
      return InvalidArgument(node.Describe(), ": sequence item ", i, " has shape ", ShapeToString((*seq)[i].shape()),
                             ", item 0 has ", ShapeToString(s0), "; they must have the same rank");
  std::vector<Tensor> items;
  for (const Tensor& t : *seq)
    items.push_back(new_axis ? [&] {
    Shape s = t.shape();
    s.insert(s.begin() + axis, 1);
    return t.Reshaped(s);
  }() : t);
  Shape out = items[0].shape();
  int64_t total = 0;
  for (const Tensor& t : items) {
    if (t.rank() != out.size() || t.dtype() != items[0].dtype())
      return InvalidArgument(node.Describe(), ": sequence items differ in rank or dtype");
    for (size_t d = 0; d < out.size(); ++d)
      if (static_cast<int64_t>(d) != axis && t.dim(d) != out[d])
        return InvalidArgument(node.Describe(), ": sequence items differ in shape off the concat axis");
    total += t.dim(axis);
  }
  out[axis] = total;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, items[0].dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out[k];
  for (size_t k = axis + 1; k < out.size(); ++k) inner *= out[k];
  size_t es = DataTypeSize(y->dtype());
  int64_t off = 0;
  for (const Tensor& t : items) {
    int64_t len = t.dim(axis);
    for (int64_t o = 0; o < outer; ++o) {
      if (y->dtype() == DataType::kString) {
        for (int64_t k = 0; k < len * inner; ++k)
          y->mutable_data<std::string>()[(o * total + off) * inner + k] = t.data<std::string>()[o * len * inner + k];
      } else {
        std::memcpy(static_cast<char*>(y->raw_mutable_data()) + ((o * total + off) * inner) * es,
                    static_cast<const char*>(t.raw_data()) + o * len * inner * es,
                    static_cast<size_t>(len * inner) * es);
      }
    }
    off += len;
  }
  return Status::Ok();
}

Status SequenceMap(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Attribute* a = node.FindAttr("body");
  if (!a || !a->g) return InvalidModel(node.Describe(), ": missing body");
  ASSIGN_OR_RETURN(auto* seq0, SeqInput(ctx, 0));
  size_t n = seq0->size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Value& v = ctx.input_value(i);
    if (v.is_sequence() && v.sequence().size() != n)
      return InvalidArgument(node.Describe(), ": input sequences differ in length");
  }
  std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Value> in;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Value& v = ctx.input_value(i);
      in.push_back(v.is_sequence() ? Value(v.sequence()[k]) : v);
    }
    ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->Run(*a->g, in));
    for (size_t j = 0; j < outs.size() && j < out.size(); ++j) {
      if (!out[j].is_tensor()) return Unsupported(node.Describe(), ": body output must be a tensor");
      outs[j].push_back(out[j].tensor());
    }
  }
  for (size_t j = 0; j < outs.size(); ++j) {
    DataType dt = a->g->values[a->g->outputs[j]].type.elem_type;
    ctx.SetOutput(j, Value::Sequence(std::move(outs[j]), dt));
  }
  return Status::Ok();
}

Status OptionalOp(KernelContext& ctx) {
  const Value& v = ctx.input_value(0);
  if (!v.empty()) {
    ctx.SetOutput(0, v);
    return Status::Ok();
  }
  const Attribute* t = ctx.node().FindAttr("type");
  (void)t;
  ctx.SetOutput(0, Value::OptionalNone());
  return Status::Ok();
}

Status OptionalHasElement(KernelContext& ctx) {
  const Value& v = ctx.input_value(0);
  bool has = !v.empty() && !v.is_none();
  ctx.SetOutput(0, Value(Tensor::Scalar<bool>(has)));
  return Status::Ok();
}

Status OptionalGetElement(KernelContext& ctx) {
  const Value& v = ctx.input_value(0);
  if (v.empty() || v.is_none()) return InvalidArgument(ctx.node().Describe(), ": the optional input has no element");
  ctx.SetOutput(0, v);
  return Status::Ok();
}

}  // namespace

void RegisterSequenceKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("SequenceEmpty", 11, SequenceEmpty));
  r.Register(UntypedFnDef("SequenceConstruct", 11, SequenceConstruct));
  r.Register(UntypedFnDef("SequenceAt", 11, SequenceAt));
  r.Register(UntypedFnDef("SequenceInsert", 11, SequenceInsert));
  r.Register(UntypedFnDef("SequenceErase", 11, SequenceErase));
  r.Register(UntypedFnDef("SequenceLength", 11, SequenceLength));
  r.Register(UntypedFnDef("SplitToSequence", 11, SplitToSequence));
  r.Register(UntypedFnDef("ConcatFromSequence", 11, ConcatFromSequence));
  r.Register(UntypedFnDef("SequenceMap", 17, SequenceMap));
  r.Register(UntypedFnDef("Optional", 15, OptionalOp));
  r.Register(UntypedFnDef("OptionalHasElement", 15, OptionalHasElement));
  r.Register(UntypedFnDef("OptionalGetElement", 15, OptionalGetElement));
}

}  // namespace strata
