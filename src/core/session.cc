#include "core/session.h"

#include <malloc.h>

#include <cstdio>
#include <filesystem>

#include "core/caching_allocator.h"
#include "core/constant_release.h"
#include "core/deferred_payload.h"
#include "core/executor.h"
#include "core/load_trace.h"
#include "core/onnx_import.h"
#include "core/optimizer.h"

namespace strata {

namespace {
// Free main-arena bytes from which a destroyed session trims the heap (see ~Session).
constexpr size_t kTrimMinFreeBytes = size_t{16} << 20;
}  // namespace

Session::~Session() {
  // Free the kernels' packed weights and the model now, then hand a large freed heap back:
  // glibc keeps multi-MiB blocks freed into its heap resident, so the next session created
  // in this process would otherwise grow the peak RSS by this one's size.
  // Same order as the implicit member destruction.
  exec_.reset();
  provider_handles_.clear();
  allocator_.reset();
  pool_.reset();
  model_.reset();
  // Only past kTrimMinFreeBytes: a trim also returns every free page inside the heap, and
  // the next session faults them in again, at ~11 us per 4 KiB page on a VM (lstm: its
  // creation 2.7-3.7 -> 2.2-3.0 ms without). Weights live in mappings of their own
  // (core/large_pages.h), so after any benchmark model 0.3-9 MiB are free here, and not
  // trimming them left the peak RSS of 7 creations unchanged (bert 439, resnet50 145 MiB).
  // mallinfo2 sums every arena, the pool threads' too (checked: 25 MiB freed in a thread's
  // arena show in the main thread's fordblks), and malloc_trim trims them all.
  if (mallinfo2().fordblks >= kTrimMinFreeBytes) malloc_trim(0);
}

Result<std::unique_ptr<Session>> Session::CreateFromFile(const std::string& path, const SessionOptions& opts) {
  ImportOptions io;
  io.base_dir = std::filesystem::path(path).parent_path().string();
  if (io.base_dir.empty()) io.base_dir = ".";
  io.memory_cap_bytes = opts.memory_cap_bytes;
  io.defer_weight_reads = true;  // Init reads what is left and reports read errors
  SetKernelPredicate(&io);
  ASSIGN_OR_RETURN(Model m, ImportOnnxFile(path, io));
  m.path = path;
  std::unique_ptr<Session> s(new Session());
  RETURN_IF_ERROR(s->Init(std::make_shared<Model>(std::move(m)), opts));
  return s;
}

Result<std::unique_ptr<Session>> Session::CreateFromBytes(const void* data, size_t size, const SessionOptions& opts) {
  ImportOptions io;
  io.memory_cap_bytes = opts.memory_cap_bytes;
  SetKernelPredicate(&io);
  ASSIGN_OR_RETURN(Model m, ImportOnnxBytes(data, size, io));
  std::unique_ptr<Session> s(new Session());
  RETURN_IF_ERROR(s->Init(std::make_shared<Model>(std::move(m)), opts));
  return s;
}

void Session::SetKernelPredicate(ImportOptions* io) {
  io->has_kernel = [](const std::string& domain, const std::string& op, int opset) {
    return CpuKernels().Supports(domain, op, opset);
  };
}

Status Session::Init(std::shared_ptr<Model> model, const SessionOptions& opts) {
  LoadTrace trace("session");
  if (opts.run_timeout_ms < 0 || opts.run_timeout_ms > kMaxRunTimeoutMs)
    return InvalidArgument("run_timeout_ms must be from 0 (no deadline) to 10^12, got ", opts.run_timeout_ms);
  opts_ = opts;
  model_ = std::move(model);
  Graph& g = *model_->graph;
  // Metadata is taken before optimization so it reflects the model as written.
  for (int v : g.inputs)
    if (!g.IsConstant(v)) inputs_.push_back(g.values[v]);
  for (int v : g.outputs) outputs_.push_back(g.values[v]);

  pool_ = std::make_unique<ThreadPool>(opts.threads, CpuKernels().thread_init());
  allocator_ = std::make_unique<CachingAllocator>(opts.memory_cap_bytes);

  OptimizerOptions oo;
  oo.level = opts.optimization_level;
  oo.pool = pool_.get();
  oo.kernel = opts.kernel;
  oo.memory_cap_bytes = opts.memory_cap_bytes;
  for (const auto& p : opts.providers) oo.cpu_only = oo.cpu_only && p == "cpu";
  RETURN_IF_ERROR(OptimizeGraph(g, oo));
  trace.Phase("optimize");

  ExecOptions eo;
  eo.kernel = opts.kernel;
  eo.allocator = allocator_.get();
  eo.terminator = terminator_.get();
  eo.run_timeout_ms = opts.run_timeout_ms;
  RETURN_IF_ERROR(SetUpProviders(g, &eo));
  trace.Phase("providers");
  // Constants that every reader packed into its own layout are dead weight: each goes as
  // soon as its last reader's kernel exists, so the originals and the packed copies of all
  // weights are never resident together.
  ConstantReleaser releaser(g);
  eo.on_kernel_created = [&releaser](size_t node, const OpKernel* k) { releaser.OnKernel(node, k); };
  ASSIGN_OR_RETURN(exec_, Executor::Create(model_->graph, pool_.get(), eo));
  trace.Phase("kernels + plan");
  // Payloads deferred at import that no kernel packed are read now, and a failed read of
  // any of them (they read as zeros meanwhile) fails the creation.
  if (model_->deferred) {
    Status read = model_->deferred->LoadAll();
    model_->deferred.reset();
    RETURN_IF_ERROR(read);
    trace.Phase("remaining weights");
  }
  const ConstantReleaseStats& released = releaser.stats();
  if (trace.on() && released.released > 0)
    std::fprintf(stderr, "strata load [session] released %d packed constants (%.1f MiB)\n", released.released,
                 static_cast<double>(released.bytes) / (1 << 20));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    assignments_.push_back({g.nodes[i].name, g.nodes[i].op_type, g.nodes[i].provider, exec_->impl(i)});
  // The workers started with the pool and reserved their scratch meanwhile; a run must not
  // find one still allocating.
  pool_->AwaitWorkerInits();
  trace.Total();
  return Status::Ok();
}

Result<std::vector<Value>> Session::Run(const std::vector<std::pair<std::string, Value>>& feeds,
                                        const std::vector<std::string>& output_names, const RunOptions* run) const {
  const Graph& g = exec_->graph();
  std::vector<Value> in(g.inputs.size());
  for (const auto& [name, value] : feeds) {
    size_t pos = g.inputs.size();
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (g.ValueName(g.inputs[i]) == name) pos = i;
    if (pos == g.inputs.size()) {
      std::string names;
      for (const auto& vi : inputs_) names += (names.empty() ? "" : ", ") + vi.name;
      return InvalidArgument("'", name, "' is not an input of the model (inputs: ", names, ")");
    }
    RETURN_IF_ERROR(CheckInput(g.values[g.inputs[pos]], value));
    in[pos] = value;
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (in[i].empty() && !g.IsConstant(g.inputs[i])) {
      const ValueInfo& vi = g.values[g.inputs[i]];
      return InvalidArgument("missing input '", vi.name, "' of type ", vi.type.ToString());
    }
  }
  ASSIGN_OR_RETURN(std::vector<Value> outs, exec_->Run(in, nullptr, run));
  if (output_names.empty()) return outs;
  std::vector<Value> picked;
  for (const auto& name : output_names) {
    size_t pos = g.outputs.size();
    for (size_t i = 0; i < g.outputs.size(); ++i)
      if (g.ValueName(g.outputs[i]) == name) pos = i;
    if (pos == g.outputs.size()) return InvalidArgument("'", name, "' is not an output of the model");
    picked.push_back(outs[pos]);
  }
  return picked;
}

Status Session::CheckInput(const ValueInfo& vi, const Value& v) {
  const TypeInfo& t = vi.type;
  if (v.empty()) return InvalidArgument("input '", vi.name, "' is empty");
  if (t.kind == TypeInfo::Kind::kTensor) {
    if (!v.is_tensor())
      return InvalidArgument("input '", vi.name, "' must be a tensor of type ", t.ToString(), ", not ", v.Describe());
    const Tensor& x = v.tensor();
    if (t.elem_type != DataType::kUndefined && x.dtype() != t.elem_type)
      return InvalidArgument("input '", vi.name, "' has dtype ", DataTypeName(x.dtype()), " but the model expects ",
                             t.ToString());
    if (t.has_shape) {
      bool ok = x.rank() == t.dims.size();
      for (size_t i = 0; ok && i < t.dims.size(); ++i)
        if (t.dims[i].known() && t.dims[i].value != x.dim(i)) ok = false;
      if (!ok)
        return InvalidArgument("input '", vi.name, "' has shape ", ShapeToString(x.shape()), " but the model expects ",
                               t.ToString());
    }
  } else if (t.kind == TypeInfo::Kind::kSequence && t.map_key != DataType::kUndefined) {
    if (!v.is_map_sequence())
      return InvalidArgument("input '", vi.name, "' must be a sequence of maps (", t.ToString(), "), not ",
                             v.Describe());
    RETURN_IF_ERROR(CheckMapTypes(vi, t, v));
  } else if (t.kind == TypeInfo::Kind::kSequence && !v.is_sequence()) {
    return InvalidArgument("input '", vi.name, "' must be a sequence (", t.ToString(), "), not ", v.Describe());
  } else if (t.kind == TypeInfo::Kind::kMap) {
    if (!v.is_map())
      return InvalidArgument("input '", vi.name, "' must be a map (", t.ToString(), "), not ", v.Describe());
    RETURN_IF_ERROR(CheckMapTypes(vi, t, v));
  }
  return Status::Ok();
}

// A map (or map sequence) input's key and value dtypes against the declared ones.
Status Session::CheckMapTypes(const ValueInfo& vi, const TypeInfo& t, const Value& v) {
  if ((t.map_key != DataType::kUndefined && v.key_type() != t.map_key) ||
      (t.elem_type != DataType::kUndefined && v.elem_type() != t.elem_type))
    return InvalidArgument("input '", vi.name, "' is a ", v.Describe(), " but the model expects ", t.ToString());
  return Status::Ok();
}

}  // namespace strata
