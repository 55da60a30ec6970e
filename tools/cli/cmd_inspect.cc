// `strata inspect MODEL [--json]`: inputs/outputs, opsets, op histogram, unsupported ops.
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "core/kernel.h"
#include "core/onnx_import.h"

namespace strata::cli {

namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
};

void CountOps(const Graph& g, std::map<std::string, int>* hist, std::map<std::string, std::string>* unsupported,
              const std::map<std::string, int>& opsets) {
  for (const Node& n : g.nodes) {
    std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    ++(*hist)[key];
    if (!CpuKernels().Supports(n.domain, n.op_type, n.opset))
      (*unsupported)[key] = (n.domain.empty() ? "ai.onnx" : n.domain) + " opset " + std::to_string(n.opset) +
                            ", first at node '" + n.name + "'";
    for (const auto& [an, a] : n.attrs) {
      if (a.g) CountOps(*a.g, hist, unsupported, opsets);
      for (const auto& sg : a.graphs) CountOps(*sg, hist, unsupported, opsets);
    }
  }
}

int Execute(const InspectArgs& a) {
  ImportOptions io;
  io.base_dir = std::filesystem::path(a.model).parent_path().string();
  if (io.base_dir.empty()) io.base_dir = ".";
  io.has_kernel = [](const std::string& d, const std::string& op, int v) { return CpuKernels().Supports(d, op, v); };
  auto m = ImportOnnxFile(a.model, io);
  if (!m.ok()) return Fail(m.status().ToString());
  const Graph& g = *m->graph;
  std::map<std::string, int> hist;
  std::map<std::string, std::string> unsupported;
  CountOps(g, &hist, &unsupported, m->opsets);

  nlohmann::json j;
  j["model"] = a.model;
  j["ir_version"] = m->ir_version;
  j["producer"] = m->producer;
  for (const auto& [d, v] : m->opsets) j["opsets"][d.empty() ? "ai.onnx" : d] = v;
  auto describe = [&](int v) {
    const ValueInfo& vi = g.values[v];
    nlohmann::json dims = nlohmann::json::array();
    for (const Dim& d : vi.type.dims) {
      if (d.known()) {
        dims.push_back(d.value);
      } else {
        dims.push_back(d.param.empty() ? "?" : d.param);
      }
    }
    return nlohmann::json{{"name", vi.name}, {"dtype", DataTypeName(vi.type.elem_type)}, {"shape", dims},
                          {"type", vi.type.ToString()}};
  };
  j["inputs"] = nlohmann::json::array();
  for (int v : g.inputs)
    if (!g.IsConstant(v)) j["inputs"].push_back(describe(v));
  j["outputs"] = nlohmann::json::array();
  for (int v : g.outputs) j["outputs"].push_back(describe(v));
  j["nodes"] = g.nodes.size();
  j["initializers"] = g.initializers.size();
  j["op_histogram"] = hist;
  j["unsupported_ops"] = unsupported;

  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model:    %s\n", a.model.c_str());
  std::printf("producer: %s (IR version %lld)\n", m->producer.c_str(), static_cast<long long>(m->ir_version));
  std::printf("opsets:  ");
  for (const auto& [d, v] : m->opsets) std::printf(" %s=%d", d.empty() ? "ai.onnx" : d.c_str(), v);
  std::printf("\ninputs:\n");
  for (const auto& in : j["inputs"])
    std::printf("  %-30s %s\n", in["name"].get<std::string>().c_str(), in["type"].get<std::string>().c_str());
  std::printf("outputs:\n");
  for (const auto& out : j["outputs"])
    std::printf("  %-30s %s\n", out["name"].get<std::string>().c_str(), out["type"].get<std::string>().c_str());
  std::printf("nodes: %zu, initializers: %zu\nops:\n", g.nodes.size(), g.initializers.size());
  for (const auto& [op, n] : hist) std::printf("  %-30s %d\n", op.c_str(), n);
  if (unsupported.empty()) {
    std::printf("unsupported ops: none\n");
  } else {
    std::printf("unsupported ops:\n");
    for (const auto& [op, why] : unsupported) std::printf("  %-30s %s\n", op.c_str(), why.c_str());
  }
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "Show a model's inputs, outputs, opsets and ops");
  sub->add_option("model", args->model, "ONNX model file")->required();
  sub->add_flag("--json", args->json, "Machine-readable output");
  sub->callback([args] { Exit(Execute(*args)); });
}

}  // namespace strata::cli
