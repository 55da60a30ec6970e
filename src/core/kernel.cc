#include "core/kernel.h"

#include "core/executor.h"
#include "cpu/register.h"

namespace strata {

namespace {
const TypeInfo& UnknownType() {
  static const TypeInfo t;
  return t;
}
const Value& EmptyValue() {
  static const Value v;
  return v;
}
}  // namespace

const TypeInfo& KernelInit::input_type(size_t i) const {
  if (!has_input(i)) return UnknownType();
  return graph.values[node.inputs[i]].type;
}
const TypeInfo& KernelInit::output_type(size_t i) const {
  if (i >= node.outputs.size() || node.outputs[i] < 0) return UnknownType();
  return graph.values[node.outputs[i]].type;
}

const Value& KernelContext::input_value(size_t i) const {
  if (i >= inputs_.size() || !inputs_[i]) return EmptyValue();
  return *inputs_[i];
}
const Tensor* KernelContext::input(size_t i) const {
  const Value& v = input_value(i);
  return v.is_tensor() ? &v.tensor() : nullptr;
}
Result<Tensor*> KernelContext::AllocateOutput(size_t i, DataType dtype, Shape shape) {
  if (i >= outputs_->size()) return InternalError(node_.Describe(), ": output index ", i, " out of range");
  for (int64_t d : shape)
    if (d < 0) return RuntimeError(node_.Describe(), ": negative output dimension in ", ShapeToString(shape));
  // The executor may offer a caller-bound buffer in the slot (IoBinding); it is used
  // only when it has exactly the dtype and shape asked for, otherwise replaced.
  Value& slot = (*outputs_)[i];
  uint64_t& offered = OfferedOutputs();
  if (i < 64 && ((offered >> i) & 1)) {
    offered &= ~(uint64_t{1} << i);  // an offer is good for one allocation only
    if (slot.is_tensor() && slot.tensor().dtype() == dtype && slot.tensor().shape() == shape &&
        dtype != DataType::kString)
      return &slot.tensor();
  }
  auto r = Tensor::Allocate(dtype, std::move(shape), alloc_);
  if (!r.ok()) return MakeStatus(r.status().code(), node_.Describe(), ": output ", i, ": ", r.status().message());
  (*outputs_)[i] = Value(std::move(r).value());
  return &(*outputs_)[i].tensor();
}
void KernelContext::SetOutput(size_t i, Value v) {
  if (i < outputs_->size()) (*outputs_)[i] = std::move(v);
}

void KernelRegistry::Register(KernelDef def) { defs_.push_back(std::move(def)); }

const KernelDef* KernelRegistry::Find(const std::string& domain, const std::string& op_type, int opset, DataType dtype,
                                      bool want_reference) const {
  return Best(domain, op_type, opset, dtype, want_reference, nullptr);
}

const KernelDef* KernelRegistry::Select(const KernelInit& init, DataType dtype, bool want_reference) const {
  return Best(init.node.domain, init.node.op_type, init.node.opset, dtype, want_reference, &init);
}

const KernelDef* KernelRegistry::Best(const std::string& domain, const std::string& op_type, int opset, DataType dtype,
                                      bool want_reference, const KernelInit* init) const {
  const KernelDef* best = nullptr;
  for (const auto& d : defs_) {
    if (d.op_type != op_type || d.domain != domain) continue;
    if (opset < d.since_version || opset > d.end_version) continue;
    if (!d.types.empty() && dtype != DataType::kUndefined) {
      bool ok = false;
      for (DataType t : d.types) ok = ok || t == dtype;
      if (!ok) continue;
    }
    if (want_reference && !d.reference) continue;
    if (init && d.covers && !d.covers(*init)) continue;
    // Prefer optimized kernels, then the most specific (latest since_version).
    if (!best || (!want_reference && best->reference && !d.reference) ||
        (best->reference == d.reference && d.since_version > best->since_version))
      best = &d;
  }
  return best;
}

bool KernelRegistry::Supports(const std::string& domain, const std::string& op_type, int opset) const {
  for (const auto& d : defs_)
    if (d.op_type == op_type && d.domain == domain && opset >= d.since_version && opset <= d.end_version) return true;
  return false;
}

std::vector<const KernelDef*> KernelRegistry::FindAll(const std::string& domain, const std::string& op_type) const {
  std::vector<const KernelDef*> out;
  for (const auto& d : defs_)
    if (d.op_type == op_type && d.domain == domain) out.push_back(&d);
  return out;
}

const KernelRegistry& CpuKernels() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    RegisterAllCpuKernels(*r);
    return r;
  }();
  return *reg;
}

Result<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0 && axis != -1))
    return InvalidArgument(node.Describe(), ": axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b, const Node& node) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return InvalidArgument(node.Describe(), ": shapes ", ShapeToString(a), " and ", ShapeToString(b),
                             " cannot be broadcast");
    }
  }
  return out;
}

}  // namespace strata
