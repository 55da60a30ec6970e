#include "core/io_binding.h"

#include <cstring>

namespace strata {

IoBinding::IoBinding(const Session& session) : session_(session), exec_(*session.exec_) {
  const Graph& g = exec_.graph();
  inputs_.resize(g.inputs.size());
  outputs_.resize(g.outputs.size());
  results_.reserve(g.outputs.size());
}

int IoBinding::InputPos(const std::string& name) const {
  const Graph& g = exec_.graph();
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.ValueName(g.inputs[i]) == name) return static_cast<int>(i);
  return -1;
}

int IoBinding::OutputPos(const std::string& name) const {
  const Graph& g = exec_.graph();
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.ValueName(g.outputs[i]) == name) return static_cast<int>(i);
  return -1;
}

namespace {
std::string Names(const std::vector<ValueInfo>& infos) {
  std::string names;
  for (const auto& vi : infos) names += (names.empty() ? "" : ", ") + vi.name;
  return names;
}
}  // namespace

Status IoBinding::BindInput(const std::string& name, const Tensor& t) {
  if (busy_.load(std::memory_order_acquire))
    return InvalidArgument("cannot bind input '", name, "' while the binding is running");
  int pos = InputPos(name);
  if (pos < 0)
    return InvalidArgument("'", name, "' is not an input of the model (inputs: ", Names(session_.inputs()), ")");
  if (!t.valid()) return InvalidArgument("input '", name, "': the tensor is empty");
  const Graph& g = exec_.graph();
  RETURN_IF_ERROR(Session::CheckInput(g.values[g.inputs[pos]], Value(t)));
  inputs_[pos] = Value(t);
  return Status::Ok();
}

Status IoBinding::BindOutput(const std::string& name, const Tensor& t) {
  if (busy_.load(std::memory_order_acquire))
    return InvalidArgument("cannot bind output '", name, "' while the binding is running");
  int pos = OutputPos(name);
  if (pos < 0)
    return InvalidArgument("'", name, "' is not an output of the model (outputs: ", Names(session_.outputs()), ")");
  if (!t.valid() || !t.buffer()) return InvalidArgument("output '", name, "': the tensor is empty");
  if (t.dtype() == DataType::kString) return Unsupported("output '", name, "': string outputs cannot be bound");
  const Graph& g = exec_.graph();
  const TypeInfo& type = g.values[g.outputs[pos]].type;
  if (type.kind != TypeInfo::Kind::kTensor && type.kind != TypeInfo::Kind::kUnknown)
    return Unsupported("output '", name, "' is ", type.ToString(), ", not a tensor; it cannot be bound");
  if (type.elem_type != DataType::kUndefined && type.elem_type != t.dtype())
    return InvalidArgument("output '", name, "': bound buffer has dtype ", DataTypeName(t.dtype()),
                           " but the model produces ", type.ToString());
  if (type.has_shape) {
    bool ok = type.dims.size() == t.rank();
    for (size_t i = 0; ok && i < type.dims.size(); ++i)
      if (type.dims[i].known() && type.dims[i].value != t.dim(i)) ok = false;
    if (!ok)
      return InvalidArgument("output '", name, "': bound buffer has shape ", ShapeToString(t.shape()),
                             " but the model produces ", type.ToString());
  }
  outputs_[pos] = t;
  return Status::Ok();
}

void IoBinding::Clear() {
  if (busy_.load(std::memory_order_acquire)) return;
  for (auto& v : inputs_) v = Value();
  for (auto& t : outputs_) t = Tensor();
}

Status IoBinding::Run(const RunOptions* run) {
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true, std::memory_order_acq_rel))
    return InvalidArgument(
        "io binding is already running on another thread; a binding is single-threaded "
        "(use one binding per thread)");
  Status st = RunLocked(run);
  state_.run_options = nullptr;  // not kept past the run: the caller may destroy it now
  busy_.store(false, std::memory_order_release);
  return st;
}

Status IoBinding::RunLocked(const RunOptions* run) {
  const Graph& g = exec_.graph();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].empty() && !g.IsConstant(g.inputs[i])) {
      const ValueInfo& vi = g.values[g.inputs[i]];
      return InvalidArgument("input '", vi.name, "' of type ", vi.type.ToString(), " is not bound");
    }
  }
  state_.bound_outputs = &outputs_;
  state_.run_options = run;  // the caller keeps it alive for the run
  RETURN_IF_ERROR(exec_.RunWith(&state_, inputs_, &results_));
  bool in_place = true;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    Tensor& dst = outputs_[j];
    if (!dst.valid()) continue;
    const Value& v = results_[j];
    const std::string& name = g.ValueName(g.outputs[j]);
    if (!v.is_tensor()) return Unsupported("output '", name, "' is not a tensor; it cannot be bound");
    const Tensor& src = v.tensor();
    if (src.dtype() != dst.dtype())
      return InvalidArgument("output '", name, "' has dtype ", DataTypeName(src.dtype()), " but its bound buffer has ",
                             DataTypeName(dst.dtype()));
    if (src.shape() != dst.shape())
      return InvalidArgument("output '", name, "' has shape ", ShapeToString(src.shape()),
                             " but its bound buffer has shape ", ShapeToString(dst.shape()));
    if (src.raw_data() == dst.raw_data()) continue;  // the kernel wrote into the caller's buffer
    in_place = false;
    std::memcpy(dst.raw_mutable_data(), src.raw_data(), src.byte_size());
  }
  in_place_ = in_place;
  ++runs_;
  return Status::Ok();
}

}  // namespace strata
