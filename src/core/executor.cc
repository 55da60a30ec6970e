#include "core/executor.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <optional>
#include <set>

#include "core/large_pages.h"
#include "core/profiler.h"

namespace strata {

namespace {

// Picks the kernel by the dtype that the node's inputs actually have at run time.
// Used when shape inference could not tell the dtype at session creation.
class LateDispatchKernel final : public OpKernel {
 public:
  LateDispatchKernel(const Node& node, const Graph& graph, ThreadPool* pool, KernelConfig cfg, int type_input)
      : node_(node), graph_(graph), pool_(pool), cfg_(cfg), type_input_(type_input) {}

  Status Compute(KernelContext& ctx) const override {
    DataType dt = DataType::kUndefined;
    const Value& v = ctx.input_value(static_cast<size_t>(std::max(0, type_input_)));
    if (v.is_tensor() || v.is_sequence() || v.is_none()) dt = v.elem_type();
    const OpKernel* k = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(dt);
      if (it == cache_.end()) {
        KernelInit init{node_, graph_, pool_, cfg_};
        const KernelDef* def = CpuKernels().Select(init, dt, cfg_.prefer_reference);
        if (!def) return Unsupported(node_.Describe(), ": no kernel for input type ", DataTypeName(dt));
        auto r = def->factory(init);
        if (!r.ok()) return r.status();
        it = cache_.emplace(dt, std::move(r).value()).first;
      }
      k = it->second.get();
    }
    return k->Compute(ctx);
  }

 private:
  const Node& node_;
  const Graph& graph_;
  ThreadPool* pool_;
  KernelConfig cfg_;
  int type_input_;
  mutable std::mutex mu_;
  mutable std::unordered_map<DataType, std::unique_ptr<OpKernel>> cache_;
};

// Names used in `g` (or its nested subgraphs) that `g` does not define.
void CollectFreeNames(const Graph& g, std::set<std::string>* out) {
  std::set<std::string> defined;
  for (int v : g.inputs) defined.insert(g.ValueName(v));
  for (const auto& [v, t] : g.initializers) defined.insert(g.ValueName(v));
  for (const Node& n : g.nodes)
    for (int o : n.outputs)
      if (o >= 0) defined.insert(g.ValueName(o));
  auto use = [&](const std::string& name) {
    if (!defined.count(name)) out->insert(name);
  };
  for (const Node& n : g.nodes) {
    for (int i : n.inputs)
      if (i >= 0) use(g.ValueName(i));
    for (const auto& [an, a] : n.attrs) {
      std::vector<const Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const Graph* sg : subs) {
        std::set<std::string> inner;
        CollectFreeNames(*sg, &inner);
        for (const auto& nm : inner) use(nm);
      }
    }
  }
  for (int o : g.outputs) use(g.ValueName(o));
}

std::vector<const Graph*> Subgraphs(const Node& n) {
  std::vector<const Graph*> subs;
  for (const auto& [an, a] : n.attrs) {
    if (a.g) subs.push_back(a.g.get());
    for (const auto& sg : a.graphs) subs.push_back(sg.get());
  }
  return subs;
}

}  // namespace

uint64_t& OfferedOutputs() {
  static thread_local uint64_t offered = 0;
  return offered;
}

Executor::~Executor() = default;

Result<std::unique_ptr<Executor>> Executor::Create(std::shared_ptr<const Graph> graph, ThreadPool* pool,
                                                   const ExecOptions& opts) {
  std::unique_ptr<Executor> ex(new Executor());
  ex->graph_ = std::move(graph);
  ex->pool_ = pool;
  ex->opts_ = opts;
  ex->opts_.on_kernel_created = nullptr;  // the callback's target lives only as long as Create
  const Graph& g = *ex->graph_;
  ex->constants_.resize(g.values.size());
  for (const auto& [v, t] : g.initializers) ex->constants_[v] = Value(t);

  ExecOptions sub_opts = opts;
  sub_opts.on_kernel_created = nullptr;  // node indices of a subgraph mean nothing to the caller
  // Weights freed while kernels are created (constants released by on_kernel_created, packing
  // scratch) become the memory of the packed weights that follow, instead of fresh pages the
  // kernel zeroes. It ends with the loop: what is still kept then is unmapped before Plan.
  std::optional<LargePageRecycleScope> recycle(std::in_place);
  for (const Node& node : g.nodes) {
    // A provider partition's body is run by the provider, not by strata.
    bool own_subgraphs = node.domain != "strata.provider";
    for (const Graph* sg : own_subgraphs ? Subgraphs(node) : std::vector<const Graph*>{}) {
      // The subgraph is owned by the node's attribute, which the parent graph owns.
      std::shared_ptr<const Graph> alias(ex->graph_, sg);
      ASSIGN_OR_RETURN(auto sub, Create(alias, pool, sub_opts));
      ex->subexecs_.emplace(sg, std::move(sub));
    }
    std::string impl;
    std::unique_ptr<OpKernel> kernel;
    KernelInit init{node, g, pool, opts.kernel};
    if (opts.custom_factory) {
      ASSIGN_OR_RETURN(kernel, opts.custom_factory(init, &impl));
    }
    if (!kernel) {
      const KernelRegistry& reg = CpuKernels();
      if (!reg.Supports(node.domain, node.op_type, node.opset)) return Unsupported("unsupported op: ", node.Describe());
      // Find the dispatch dtype from the declared type of the kernel's type input.
      auto defs = reg.FindAll(node.domain, node.op_type);
      int type_input = 0;
      for (const KernelDef* d : defs)
        if (node.opset >= d->since_version && node.opset <= d->end_version) type_input = d->type_input;
      DataType dt = DataType::kUndefined;
      if (type_input >= 0 && static_cast<size_t>(type_input) < node.inputs.size() && node.inputs[type_input] >= 0) {
        dt = g.values[node.inputs[type_input]].type.elem_type;
      } else if (type_input < 0 && !node.outputs.empty() && node.outputs[0] >= 0) {
        dt = g.values[node.outputs[0]].type.elem_type;
      }
      if (dt == DataType::kUndefined && type_input >= 0) {
        kernel = std::make_unique<LateDispatchKernel>(node, g, pool, opts.kernel, type_input);
        impl = "late";
      } else {
        const KernelDef* def = reg.Select(init, dt, opts.kernel.prefer_reference);
        // Entries for the op and dtype exist, but their `covers` reject this node's form.
        if (!def && reg.Find(node.domain, node.op_type, node.opset, dt, opts.kernel.prefer_reference))
          return Unsupported("unsupported op: ", node.Describe(),
                             ": no registered kernel covers this form of it (its inputs, attributes or CPU)");
        if (!def) return Unsupported("unsupported op: ", node.Describe(), " has no kernel for type ", DataTypeName(dt));
        ASSIGN_OR_RETURN(kernel, def->factory(init));
        const char* chosen = kernel ? kernel->ImplName() : nullptr;
        impl = chosen ? chosen : def->impl;
      }
    }
    ex->kernels_.push_back(std::move(kernel));
    ex->impls_.push_back(impl);
    if (opts.on_kernel_created) opts.on_kernel_created(ex->kernels_.size() - 1, ex->kernels_.back().get());
  }
  recycle.reset();
  RETURN_IF_ERROR(ex->Plan());
  return ex;
}

Status Executor::Plan() {
  const Graph& g = *graph_;
  std::set<std::string> free;
  CollectFreeNames(g, &free);
  free_names_.assign(free.begin(), free.end());
  for (const auto& nm : free_names_) free_slots_.push_back(g.FindValue(nm));

  // Last use of every value; graph outputs and constants are never released.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (int v : n.inputs)
      if (v >= 0) last_use[v] = static_cast<int>(i);
    for (const Graph* sg : Subgraphs(n)) {
      auto it = subexecs_.find(sg);
      if (it == subexecs_.end()) continue;  // provider partition bodies
      const Executor* sub = it->second.get();
      for (const auto& nm : sub->free_names_) {
        int v = g.FindValue(nm);
        if (v >= 0) last_use[v] = static_cast<int>(i);
      }
    }
    // An output nobody reads is released right after it is produced.
    for (int v : n.outputs)
      if (v >= 0 && last_use[v] < static_cast<int>(i)) last_use[v] = static_cast<int>(i);
  }
  std::vector<bool> keep(g.values.size(), false);
  for (int v : g.outputs) keep[v] = true;
  for (const auto& [v, t] : g.initializers) keep[v] = true;
  output_pos_.assign(g.values.size(), -1);
  for (size_t j = 0; j < g.outputs.size(); ++j)
    if (output_pos_[g.outputs[j]] < 0) output_pos_[g.outputs[j]] = static_cast<int>(j);
  input_slot_.assign(g.values.size(), false);
  for (int v : g.inputs) input_slot_[v] = true;
  release_after_.assign(g.nodes.size(), {});
  for (size_t v = 0; v < g.values.size(); ++v)
    if (!keep[v] && last_use[v] >= 0) release_after_[last_use[v]].push_back(static_cast<int>(v));

  // Outputs that may take over a dying input's buffer: the value must be released right
  // after this node (so no later node, subgraph or graph output reads it), be computed in
  // this frame (not a graph input, constant or outer capture, whose buffers belong to
  // someone else), and feed this node only once (else the kernel reads it as another
  // operand while overwriting it). Whether another handle shares the buffer (a Reshape
  // alias still alive) is checked per run.
  std::vector<bool> captured(g.values.size(), false);
  for (int v : free_slots_)
    if (v >= 0) captured[v] = true;
  in_place_value_.assign(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const int j = kernels_[i]->InPlaceInput();
    if (j < 0 || static_cast<size_t>(j) >= n.inputs.size() || n.outputs.empty() || n.outputs[0] < 0) continue;
    const int v = n.inputs[j];
    if (v < 0 || keep[v] || last_use[v] != static_cast<int>(i) || input_slot_[v] || captured[v] ||
        !constants_[v].empty())
      continue;
    if (std::count(n.inputs.begin(), n.inputs.end(), v) != 1) continue;
    in_place_value_[i] = v;
  }
  return Status::Ok();
}

const Executor* Executor::SubExecutor(const Graph* g) const {
  auto it = subexecs_.find(g);
  return it == subexecs_.end() ? nullptr : it->second.get();
}

Frame::Frame(const Executor& exec, const Frame* outer, std::vector<Value>* values)
    : exec_(exec), outer_(outer), values_(*values) {
  values_.resize(exec.graph().values.size());
}

const Value* Frame::Lookup(const std::string& name) const {
  int v = exec_.graph().FindValue(name);
  if (v >= 0) {
    if (!values_[v].empty()) return &values_[v];
    if (!exec_.constants_[v].empty()) return &exec_.constants_[v];
  }
  return outer_ ? outer_->Lookup(name) : nullptr;
}

namespace {
class FrameSubgraphRunner final : public SubgraphRunner {
 public:
  FrameSubgraphRunner(const Executor& parent, const Frame& frame, std::function<const Executor*(const Graph*)> find)
      : parent_(parent), frame_(frame), find_(std::move(find)) {}
  Result<std::vector<Value>> Run(const Graph& g, const std::vector<Value>& inputs) override {
    const Executor* sub = find_(&g);
    if (!sub) return InternalError("subgraph '", g.name, "' was not prepared");
    // Once per Loop/Scan iteration, so that even a body without nodes can be stopped.
    RETURN_IF_ERROR(CheckRunControl());
    return sub->Run(inputs, &frame_);
  }

 private:
  const Executor& parent_;
  const Frame& frame_;
  std::function<const Executor*(const Graph*)> find_;
};
}  // namespace

namespace {
// A kernel's Compute, with any C++ exception it lets out (std::bad_alloc from a scratch
// vector; the thread pool rethrows a chunk's on the caller) turned into a Status naming
// the node: it must not reach the C API's guard unexplained, nor unwind through a caller
// that does not expect it.
Status ComputeNode(const OpKernel& kernel, KernelContext& ctx) {
  try {
    return kernel.Compute(ctx);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kOutOfMemory, ctx.node().Describe(), ": out of memory");
  } catch (const std::exception& e) {
    return MakeStatus(StatusCode::kInternal, ctx.node().Describe(), ": internal error: ", e.what());
  } catch (...) {
    return MakeStatus(StatusCode::kInternal, ctx.node().Describe(), ": internal error: unknown exception");
  }
}
}  // namespace

Result<std::vector<Value>> Executor::Run(const std::vector<Value>& inputs, const Frame* outer,
                                         const RunOptions* run) const {
  RunState st;
  st.run_options = run;
  std::vector<Value> result;
  RETURN_IF_ERROR(RunImpl(&st, inputs, outer, &result));
  return result;
}

Status Executor::RunWith(RunState* state, const std::vector<Value>& inputs, std::vector<Value>* results) const {
  return RunImpl(state, inputs, nullptr, results);
}

// Written so that, with a reused RunState, the executor itself does not allocate once
// the slots have been sized: values are overwritten in place (a Tensor copy-assigned
// over a slot reuses the slot's shape storage) and scratch vectors keep their capacity.
Status Executor::RunImpl(RunState* st, const std::vector<Value>& inputs, const Frame* outer,
                         std::vector<Value>* results) const {
  const Graph& g = *graph_;
  std::optional<RunControlScope> control;
  if (outer == nullptr) control.emplace(opts_.terminator, opts_.run_timeout_ms, st->run_options);
  if (inputs.size() > g.inputs.size())
    return InvalidArgument("graph '", g.name, "' takes ", g.inputs.size(), " inputs, got ", inputs.size());
  // Slots left over from a previous run (graph outputs, captures) are dropped, except
  // input slots, which are overwritten below and so keep their storage.
  Frame frame(*this, outer, &st->values);
  for (size_t v = 0; v < frame.values_.size(); ++v)
    if (!frame.values_[v].empty() && !input_slot_[v]) frame.values_[v] = Value();
  for (size_t i = 0; i < inputs.size(); ++i) frame.values_[g.inputs[i]] = inputs[i];
  for (size_t i = inputs.size(); i < g.inputs.size(); ++i) frame.values_[g.inputs[i]] = Value();
  // Bring captured outer-scope values into this frame (handles share buffers; no copy).
  for (size_t i = 0; i < free_names_.size(); ++i) {
    if (free_slots_[i] < 0) continue;
    if (!frame.values_[free_slots_[i]].empty() || !constants_[free_slots_[i]].empty()) continue;
    const Value* v = outer ? outer->Lookup(free_names_[i]) : nullptr;
    if (v) frame.values_[free_slots_[i]] = *v;
  }
  Allocator* alloc = opts_.allocator ? opts_.allocator : DefaultAllocator();
  FrameSubgraphRunner runner(*this, frame, [this](const Graph* sg) { return SubExecutor(sg); });

  // Only top-level runs are profiled: subgraph time belongs to the control-flow node.
  Profiler* prof = outer == nullptr ? ActiveProfiler() : nullptr;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point run_start = prof ? Clock::now() : Clock::time_point();

  std::vector<const Value*>& in_ptrs = st->in_ptrs;
  std::vector<Value>& outs = st->outs;
  const std::vector<Tensor>* bound = st->bound_outputs;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (Status stop = CheckRunControl(); !stop.ok())
      return MakeStatus(stop.code(), stop.message(), ", before ", node.Describe());
    in_ptrs.resize(node.inputs.size());
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      in_ptrs[k] = nullptr;
      int v = node.inputs[k];
      if (v < 0) continue;
      if (!frame.values_[v].empty()) {
        in_ptrs[k] = &frame.values_[v];
      } else if (!constants_[v].empty()) {
        in_ptrs[k] = &constants_[v];
      } else {
        return InvalidArgument(node.Describe(), ": input '", g.ValueName(v), "' has no value");
      }
    }
    outs.resize(node.outputs.size());
    uint64_t offered = 0;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int v = node.outputs[k];
      int pos = v >= 0 && bound && k < 64 ? output_pos_[v] : -1;
      // A bound output is offered to the kernel: KernelContext::AllocateOutput writes
      // into it when the kernel asks for exactly its dtype and shape.
      if (pos >= 0 && static_cast<size_t>(pos) < bound->size() && (*bound)[pos].valid()) {
        outs[k] = (*bound)[pos];
        offered |= uint64_t{1} << k;
      } else if (!outs[k].empty()) {
        outs[k] = Value();
      }
    }
    // A dying input offered as output 0 (see Plan): only when its buffer has no other
    // holder now, so the kernel's writes cannot show through another handle.
    bool in_place = false;
    if (!(offered & 1) && in_place_value_[i] >= 0) {
      const Value& dying = frame.values_[in_place_value_[i]];
      if (dying.is_tensor() && dying.tensor().buffer() && dying.tensor().buffer().use_count() == 1) {
        outs[0] = dying;
        offered |= 1;
        in_place = true;
      }
    }
    KernelContext ctx(node, in_ptrs, &outs, pool_, alloc, &runner);
    const Clock::time_point node_start = prof ? Clock::now() : Clock::time_point();
    uint64_t& tls_offered = OfferedOutputs();
    const uint64_t saved_offered = tls_offered;  // nested (subgraph) runs restore the outer node's
    tls_offered = offered;
    Status st_node = ComputeNode(*kernels_[i], ctx);
    uint64_t untaken = tls_offered;
    tls_offered = saved_offered;
    // An untaken in-place offer still holds the input's handle in output 0: not a result.
    if (in_place && (untaken & 1)) {
      const Value& dying = frame.values_[in_place_value_[i]];
      if (outs[0].is_tensor() && outs[0].tensor().buffer() == dying.tensor().buffer()) outs[0] = Value();
      untaken &= ~uint64_t{1};
    }
    // An offer the kernel did not take, in a slot it did not set, still holds the
    // caller's tensor: that is not a result.
    for (size_t k = 0; untaken && k < node.outputs.size(); ++k) {
      if (!((untaken >> k) & 1)) continue;
      const Tensor& offer = (*bound)[output_pos_[node.outputs[k]]];
      if (outs[k].is_tensor() && outs[k].tensor().buffer() == offer.buffer()) outs[k] = Value();
    }
    if (prof && st_node.ok()) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - node_start).count();
      prof->Record(node, in_ptrs, outs, ns);
    }
    if (!st_node.ok()) {
      // Make sure every error names the node that failed.
      if (st_node.message().find(node.name) == std::string::npos)
        return MakeStatus(st_node.code(), node.Describe(), ": ", st_node.message());
      return st_node;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int v = node.outputs[k];
      if (v < 0) continue;
      if (outs[k].empty())
        return InternalError(node.Describe(), ": kernel did not produce output ", k, " ('", g.ValueName(v), "')");
      frame.values_[v] = std::move(outs[k]);
    }
    for (int v : release_after_[i]) frame.values_[v] = Value();
  }
  std::vector<Value>& result = *results;
  result.resize(g.outputs.size());
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    int v = g.outputs[j];
    if (!frame.values_[v].empty()) {
      result[j] = frame.values_[v];
    } else if (!constants_[v].empty()) {
      result[j] = constants_[v];
    } else if (const Value* ov = outer ? outer->Lookup(g.ValueName(v)) : nullptr) {
      result[j] = *ov;
    } else {
      return InvalidArgument("graph output '", g.ValueName(v), "' was not computed");
    }
  }
  if (prof) prof->CountRun(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - run_start).count());
  return Status::Ok();
}

}  // namespace strata
