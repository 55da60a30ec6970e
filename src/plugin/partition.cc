#include "plugin/partition.h"

#include <algorithm>
#include <set>

#include "plugin/desc_builder.h"

namespace strata::plugin {
namespace {

// Names read by subgraphs (If/Loop/Scan bodies) from their enclosing scopes.
void CollectCaptures(const Graph& g, std::set<std::string>* names) {
  for (int v : g.captures) names->insert(g.ValueName(v));
  for (const Node& n : g.nodes) {
    for (const auto& [k, a] : n.attrs) {
      if (a.type == Attribute::Type::kGraph && a.g) CollectCaptures(*a.g, names);
      if (a.type == Attribute::Type::kGraphs)
        for (const auto& sg : a.graphs)
          if (sg) CollectCaptures(*sg, names);
    }
  }
}

Status Prefixed(const Node& node, const Status& st) {
  return MakeStatus(st.code(), node.Describe(), ": ", st.message());
}

// Frees device buffers on every exit path of Compute.
class BufferGuard {
 public:
  explicit BufferGuard(const strata_provider_api& api) : api_(api) {}
  ~BufferGuard() {
    for (auto* b : bufs_) api_.buffer_free(api_.self, b);
  }
  void Add(strata_device_buffer* b) {
    if (b) bufs_.push_back(b);
  }

 private:
  const strata_provider_api& api_;
  std::vector<strata_device_buffer*> bufs_;
};

class PartitionKernel final : public OpKernel {
 public:
  PartitionKernel(std::shared_ptr<LoadedProvider> p, uint32_t device, strata_compiled_partition* handle,
                  size_t num_outputs)
      : p_(std::move(p)), device_(device), handle_(handle), num_outputs_(num_outputs) {}
  ~PartitionKernel() override { p_->api().release_partition(p_->api().self, handle_); }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const strata_provider_api& api = p_->api();
    BufferGuard guard(api);
    std::vector<strata_device_tensor> ins(ctx.num_inputs());
    for (size_t i = 0; i < ins.size(); ++i) {
      const Tensor* t = ctx.input(i);
      if (!t) return InvalidArgument(node.Describe(), ": input ", i, " is missing or not a tensor");
      if (t->dtype() == DataType::kString || DataTypeSize(t->dtype()) == 0)
        return Unsupported(node.Describe(), ": input ", i, " has dtype ", DataTypeName(t->dtype()),
                           ", which cannot be copied to a device");
      if (t->rank() > STRATA_PROVIDER_MAX_RANK)
        return Unsupported(node.Describe(), ": input ", i, " has rank ", t->rank(), "; providers accept at most ",
                           STRATA_PROVIDER_MAX_RANK);
      strata_device_tensor& d = ins[i];
      d = {};
      d.struct_size = sizeof(d);
      d.dtype = static_cast<int32_t>(t->dtype());
      d.rank = static_cast<uint32_t>(t->rank());
      for (size_t k = 0; k < t->rank(); ++k) d.dims[k] = t->dim(k);
      const size_t bytes = t->byte_size();
      Status st = p_->Call("buffer_alloc", [&](strata_provider_error* e) {
        return api.buffer_alloc(api.self, device_, bytes, &d.buffer, e);
      });
      if (!st.ok()) return Prefixed(node, st);
      guard.Add(d.buffer);
      if (bytes == 0) continue;
      if (!d.buffer)
        return MakeStatus(StatusCode::kProviderError, node.Describe(), ": buffer_alloc returned no buffer");
      st = p_->Call("copy_to_device", [&](strata_provider_error* e) {
        return api.copy_to_device(api.self, d.buffer, 0, t->raw_data(), bytes, e);
      });
      if (!st.ok()) return Prefixed(node, st);
    }
    std::vector<strata_device_tensor> outs(num_outputs_);
    for (auto& o : outs) {
      o = {};
      o.struct_size = sizeof(o);
    }
    // On failure the provider has released any outputs it made (see provider.h).
    Status st = p_->Call("execute", [&](strata_provider_error* e) {
      return api.execute(api.self, handle_, ins.data(), ins.size(), outs.data(), outs.size(), e);
    });
    if (!st.ok()) return Prefixed(node, st);
    for (auto& o : outs) guard.Add(o.buffer);
    for (size_t j = 0; j < outs.size(); ++j) {
      const strata_device_tensor& o = outs[j];
      const DataType dt = static_cast<DataType>(o.dtype);
      if (o.rank > STRATA_PROVIDER_MAX_RANK || DataTypeSize(dt) == 0 || dt == DataType::kString)
        return MakeStatus(StatusCode::kProviderError, node.Describe(), ": provider '", p_->name(), "' returned output ",
                          j, " with an invalid dtype (", o.dtype, ") or rank (", o.rank, ")");
      Shape shape(o.dims, o.dims + o.rank);
      for (int64_t d : shape)
        if (d < 0)
          return MakeStatus(StatusCode::kProviderError, node.Describe(), ": provider '", p_->name(),
                            "' returned output ", j, " with a negative dimension ", ShapeToString(shape));
      ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(j, dt, shape));
      const size_t bytes = t->byte_size();
      if (bytes == 0) continue;
      if (!o.buffer)
        return MakeStatus(StatusCode::kProviderError, node.Describe(), ": provider returned output ", j,
                          " without a buffer");
      st = p_->Call("copy_to_host", [&](strata_provider_error* e) {
        return api.copy_to_host(api.self, t->raw_mutable_data(), o.buffer, o.byte_offset, bytes, e);
      });
      if (!st.ok()) return Prefixed(node, st);
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<LoadedProvider> p_;
  uint32_t device_;
  strata_compiled_partition* handle_;
  size_t num_outputs_;
};

}  // namespace

Result<std::vector<bool>> QuerySupport(const Graph& g, const LoadedProvider& p, uint32_t device) {
  std::vector<bool> out(g.nodes.size(), false);
  const strata_provider_api& api = p.api();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // Nodes another provider already took are not offered again.
    if (n.provider != "cpu" || !Describable(n, g)) continue;
    DescBuilder b(g);
    b.AddNode(n);
    b.Finish(n.name, {}, {});
    int32_t supported = 0;
    Status st = p.Call("supports_node", [&](strata_provider_error* e) {
      return api.supports_node(api.self, device, &b.node(0), &supported, e);
    });
    if (!st.ok()) return Prefixed(n, st);
    out[i] = supported != 0;
  }
  return out;
}

Status AssignNodes(Graph& g, const LoadedProvider& p, uint32_t device) {
  if (device >= p.devices().size())
    return InvalidArgument("provider '", p.name(), "' has no device ", device, " (it has ", p.devices().size(), ")");
  ASSIGN_OR_RETURN(std::vector<bool> ok, QuerySupport(g, p, device));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (ok[i]) g.nodes[i].provider = p.name();
  return Status::Ok();
}

Status PartitionForProvider(Graph& g, const LoadedProvider& p, const PartitionOptions& opts,
                            std::vector<PartitionInfo>* out) {
  RETURN_IF_ERROR(AssignNodes(g, p, opts.device));
  const size_t n = g.nodes.size();
  std::vector<std::vector<size_t>> consumers(g.values.size());
  for (size_t i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) consumers[v].push_back(i);
  std::vector<bool> needed_outside(g.values.size(), false);
  for (int v : g.outputs)
    if (v >= 0) needed_outside[v] = true;
  std::set<std::string> captured;
  for (const Node& node : g.nodes)
    for (const auto& [k, a] : node.attrs) {
      if (a.type == Attribute::Type::kGraph && a.g) CollectCaptures(*a.g, &captured);
      if (a.type == Attribute::Type::kGraphs)
        for (const auto& sg : a.graphs)
          if (sg) CollectCaptures(*sg, &captured);
    }
  for (const auto& name : captured) {
    int v = g.FindValue(name);
    if (v >= 0) needed_outside[v] = true;
  }

  std::vector<Node> rewritten;
  int count = 0;
  size_t i = 0;
  while (i < n) {
    if (g.nodes[i].provider != p.name()) {
      rewritten.push_back(std::move(g.nodes[i++]));
      continue;
    }
    size_t j = i;
    while (j < n && g.nodes[j].provider == p.name()) ++j;
    std::set<int> produced;
    std::vector<int> ins, outs;
    for (size_t t = i; t < j; ++t)
      for (int v : g.nodes[t].outputs)
        if (v >= 0) produced.insert(v);
    for (size_t t = i; t < j; ++t) {
      for (int v : g.nodes[t].inputs) {
        if (v < 0 || produced.count(v) || g.IsConstant(v)) continue;
        if (std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
      }
      for (int v : g.nodes[t].outputs) {
        if (v < 0) continue;
        bool used_after = needed_outside[v];
        for (size_t c : consumers[v]) used_after = used_after || c < i || c >= j;
        if (used_after) outs.push_back(v);
      }
    }
    if (j - i < opts.min_nodes || outs.empty()) {
      for (size_t t = i; t < j; ++t) {
        g.nodes[t].provider = "cpu";
        rewritten.push_back(std::move(g.nodes[t]));
      }
      i = j;
      continue;
    }
    auto body = std::make_shared<Graph>();
    body->name = p.name() + "_partition_" + std::to_string(count);
    auto map = [&](int v) -> int {
      if (v < 0) return -1;
      int b = body->AddValue(g.ValueName(v));
      body->values[b].type = g.values[v].type;
      if (const Tensor* c = g.Constant(v)) body->initializers[b] = *c;
      return b;
    };
    for (int v : ins) body->inputs.push_back(map(v));
    PartitionInfo info;
    info.name = body->name;
    for (size_t t = i; t < j; ++t) {
      Node copy = std::move(g.nodes[t]);
      info.node_names.push_back(copy.name);
      for (int& v : copy.inputs) v = map(v);
      for (int& v : copy.outputs) v = map(v);
      body->nodes.push_back(std::move(copy));
    }
    for (int v : outs) body->outputs.push_back(map(v));
    Node part;
    part.name = body->name;
    part.op_type = kPartitionOp;
    part.domain = kPartitionDomain;
    part.opset = 1;
    part.inputs = ins;
    part.outputs = outs;
    part.provider = p.name();
    Attribute ab;
    ab.type = Attribute::Type::kGraph;
    ab.g = body;
    part.attrs["body"] = std::move(ab);
    Attribute ap;
    ap.type = Attribute::Type::kString;
    ap.s = p.name();
    part.attrs["provider"] = std::move(ap);
    Attribute ad;
    ad.type = Attribute::Type::kInt;
    ad.i = opts.device;
    part.attrs["device"] = std::move(ad);
    if (!opts.provider_options.empty()) {
      Attribute ao;
      ao.type = Attribute::Type::kStrings;
      for (const auto& [k, v] : opts.provider_options) ao.strings.push_back(k + "=" + v);
      part.attrs["options"] = std::move(ao);
    }
    rewritten.push_back(std::move(part));
    if (out) out->push_back(std::move(info));
    ++count;
    i = j;
  }
  g.nodes = std::move(rewritten);
  return Status::Ok();
}

Result<std::unique_ptr<OpKernel>> CreateProviderPartitionKernel(const KernelInit& init,
                                                                std::shared_ptr<LoadedProvider> provider) {
  const Node& node = init.node;
  if (!provider) return InternalError(node.Describe(), ": no provider given");
  const Attribute* body_attr = node.FindAttr("body");
  if (!body_attr || body_attr->type != Attribute::Type::kGraph || !body_attr->g)
    return InvalidModel(node.Describe(), ": missing graph attribute 'body'");
  const Graph& body = *body_attr->g;
  if (body.inputs.size() != node.inputs.size() || body.outputs.size() != node.outputs.size())
    return InvalidModel(node.Describe(), ": body has ", body.inputs.size(), " inputs and ", body.outputs.size(),
                        " outputs but the node has ", node.inputs.size(), " and ", node.outputs.size());
  const int64_t device = node.GetInt("device", 0);
  if (device < 0 || static_cast<size_t>(device) >= provider->devices().size())
    return InvalidArgument(node.Describe(), ": provider '", provider->name(), "' has no device ", device);
  DescBuilder b(body);
  for (const Node& n : body.nodes) b.AddNode(n);
  if (const Attribute* ao = node.FindAttr("options")) {
    if (ao->type != Attribute::Type::kStrings)
      return InvalidModel(node.Describe(), ": attribute 'options' must be a list of strings");
    std::vector<std::pair<std::string, std::string>> options;
    for (const std::string& kv : ao->strings) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return InvalidModel(node.Describe(), ": provider option '", kv, "' is not of the form key=value");
      options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    b.SetOptions(options);
  }
  const strata_partition_desc& desc = b.Finish(node.name, body.inputs, body.outputs);
  const strata_provider_api& api = provider->api();
  strata_compiled_partition* handle = nullptr;
  Status st = provider->Call("compile", [&](strata_provider_error* e) {
    return api.compile(api.self, static_cast<uint32_t>(device), &desc, &handle, e);
  });
  if (!st.ok()) return Prefixed(node, st);
  if (!handle) return MakeStatus(StatusCode::kProviderError, node.Describe(), ": compile returned no partition");
  return std::unique_ptr<OpKernel>(
      new PartitionKernel(std::move(provider), static_cast<uint32_t>(device), handle, node.outputs.size()));
}

Result<std::unique_ptr<OpKernel>> CreateProviderPartitionKernel(const KernelInit& init, ProviderManager& providers) {
  std::string name = init.node.GetString("provider", "");
  if (name.empty()) return InvalidModel(init.node.Describe(), ": missing string attribute 'provider'");
  auto p = providers.Acquire(name);
  if (!p.ok()) return Prefixed(init.node, p.status());
  return CreateProviderPartitionKernel(init, std::move(p).value());
}

}  // namespace strata::plugin
