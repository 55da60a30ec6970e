// `strata run MODEL [--input NAME=FILE.npy ...] [--output-dir DIR] [--threads N] [--device D] [--timeout-ms N]`
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/npy.h"
#include "core/session.h"

namespace strata::cli {

namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  SessionFlags session;
  bool json = false;
  bool verbose = false;
  bool random_inputs = false;
  int64_t timeout_ms = 0;  // 0: no deadline
};

// Bundled samples: "<dir>/<stem>_samples.npy" (+ optional "<stem>_labels.npy") beside the model.
bool FindSamples(const std::string& model, std::string* samples, std::string* labels) {
  std::filesystem::path p(model);
  auto base = p.parent_path() / p.stem();
  *samples = base.string() + "_samples.npy";
  *labels = base.string() + "_labels.npy";
  return std::filesystem::exists(*samples);
}

int Execute(const RunArgs& a) {
  auto opts = MakeSessionOptions(a.session);
  if (!opts.ok()) return Fail(opts.status().message());
  opts->run_timeout_ms = a.timeout_ms;
  const SessionOptions& so = *opts;

  auto created = Session::CreateFromFile(a.model, so);
  if (!created.ok()) return Fail(created.status().ToString());
  Session& session = **created;
  // Say which provider was picked and why others were skipped (never silent).
  if (!a.json)
    for (const auto& note : session.provider_notes()) std::printf("device: %s\n", note.c_str());

  std::vector<std::pair<std::string, Value>> feeds;
  for (const auto& spec : a.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--input expects NAME=FILE.npy, got '" + spec + "'");
    auto t = ReadNpy(spec.substr(eq + 1));
    if (!t.ok()) return Fail(t.status().ToString());
    feeds.emplace_back(spec.substr(0, eq), Value(std::move(t).value()));
  }
  Tensor labels;
  bool have_labels = false;
  if (feeds.empty()) {
    std::string samples, labels_path;
    if (session.inputs().size() == 1 && FindSamples(a.model, &samples, &labels_path)) {
      auto t = ReadNpy(samples);
      if (!t.ok()) return Fail(t.status().ToString());
      feeds.emplace_back(session.inputs()[0].name, Value(std::move(t).value()));
      if (std::filesystem::exists(labels_path)) {
        auto l = ReadNpy(labels_path);
        if (!l.ok()) return Fail(l.status().ToString());
        labels = std::move(l).value();
        have_labels = true;
      }
      if (!a.json) std::printf("using bundled samples %s\n", samples.c_str());
    } else if (a.random_inputs) {
      for (const auto& vi : session.inputs()) {
        auto t = RandomInputTensor(vi, 42);
        if (!t.ok()) return Fail(t.status().ToString());
        feeds.emplace_back(vi.name, Value(std::move(t).value()));
      }
    }
  }

  auto outs = session.Run(feeds);
  if (!outs.ok()) return Fail(outs.status().ToString());

  nlohmann::json j;
  j["model"] = a.model;
  j["device_notes"] = session.provider_notes();
  j["outputs"] = nlohmann::json::array();
  if (a.verbose || a.json) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : session.assignments()) {
      nodes.push_back({{"node", n.node_name}, {"op", n.op_type}, {"provider", n.provider}, {"kernel", n.impl}});
      if (a.verbose && !a.json)
        std::printf("node %-40s %-20s provider=%s kernel=%s\n", n.node_name.c_str(), n.op_type.c_str(),
                    n.provider.c_str(), n.impl.c_str());
    }
    j["nodes"] = nodes;
  }
  if (!a.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.output_dir, ec);
    if (ec) return Fail("cannot create output directory '" + a.output_dir + "': " + ec.message());
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    const std::string& name = session.outputs()[i].name;
    const Value& v = (*outs)[i];
    if (!v.is_tensor()) {
      nlohmann::json jo = {{"name", name}, {"value", v.Describe()}};
      if (!a.json) std::printf("output %s: %s\n", name.c_str(), v.Describe().c_str());
      // The first rows of a classifier's ZipMap output: {label: probability} per row.
      std::vector<Value> maps;
      if (v.is_map()) maps.push_back(v);
      if (v.is_map_sequence()) maps.assign(v.maps().begin(), v.maps().begin() + std::min<size_t>(3, v.maps().size()));
      nlohmann::json jm = nlohmann::json::array();
      for (size_t r = 0; r < maps.size(); ++r) {
        std::string line = "{" + JoinMapEntries(maps[r], 8) + "}";
        jm.push_back(line);
        if (!a.json) std::printf("  [%zu] %s\n", r, line.c_str());
      }
      if (!maps.empty()) jo["first_maps"] = jm;
      j["outputs"].push_back(jo);
      continue;
    }
    const Tensor& t = v.tensor();
    nlohmann::json jo = {{"name", name}, {"dtype", DataTypeName(t.dtype())}, {"shape", t.shape()}};
    if (!a.json)
      std::printf("output %s: %s %s\n", name.c_str(), DataTypeName(t.dtype()), ShapeToString(t.shape()).c_str());
    if (IsClassifierOutput(t)) {
      auto rows = TopK(t, 3);
      nlohmann::json jr = nlohmann::json::array();
      for (size_t r = 0; r < rows.size(); ++r) {
        nlohmann::json row = {{"top", nlohmann::json::array()}};
        std::string line = "  [" + std::to_string(r) + "]";
        if (have_labels && static_cast<int64_t>(r) < labels.num_elements()) {
          int64_t lab = LabelAt(labels, r);
          row["label"] = lab;
          line += " label=" + std::to_string(lab);
        }
        for (size_t k = 0; k < rows[r].size(); ++k) {
          row["top"].push_back({{"class", rows[r][k].first}, {"score", rows[r][k].second}});
          char buf[64];
          const char* sep = k == 0 ? " predicted=" : (k == 1 ? "  next: " : ", ");
          std::snprintf(buf, sizeof(buf), "%s%lld (%.4f)", sep, (long long)rows[r][k].first, rows[r][k].second);
          line += buf;
        }
        if (have_labels && static_cast<int64_t>(r) < labels.num_elements())
          line += LabelAt(labels, r) == rows[r][0].first ? "  ok" : "  WRONG";
        jr.push_back(row);
        if (!a.json) std::printf("%s\n", line.c_str());
      }
      jo["rows"] = jr;
    } else {
      std::string vals = FirstValues(t, 8);
      jo["first_values"] = vals;
      if (!a.json) std::printf("  first values: %s\n", vals.c_str());
    }
    if (!a.output_dir.empty()) {
      std::string safe = name;
      for (char& c : safe)
        if (c == '/' || c == '\\' || c == ':') c = '_';
      std::string path = (std::filesystem::path(a.output_dir) / (safe + ".npy")).string();
      Status st = WriteNpy(path, t);
      if (!st.ok()) return Fail(st.ToString());
      jo["file"] = path;
      if (!a.json) std::printf("  wrote %s\n", path.c_str());
    }
    j["outputs"].push_back(jo);
  }
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "Run a model and print its outputs");
  sub->add_option("model", args->model, "ONNX model file")->required();
  sub->add_option("-i,--input", args->inputs, "Input as NAME=FILE.npy (repeatable)");
  sub->add_option("-o,--output-dir", args->output_dir, "Write each output to DIR/<name>.npy");
  AddSessionFlags(sub, &args->session);
  sub->add_flag("--random", args->random_inputs,
                "Feed seeded random inputs when none are given (floats ~ N(0, 1), integers in [0, 100), bool 0/1)");
  sub->add_option("--timeout-ms", args->timeout_ms, "Fail each run that takes longer than this (0 = no limit)")
      ->check(CLI::Range(int64_t{0}, kMaxRunTimeoutMs));
  sub->add_flag("-v,--verbose", args->verbose, "Show which provider and kernel ran each node");
  sub->add_flag("--json", args->json, "Machine-readable output");
  sub->callback([args] { Exit(Execute(*args)); });
}

}  // namespace strata::cli
