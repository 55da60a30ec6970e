// `strata selftest [--require NAME]... [--json]`: proves an installed or unpacked package
// works on this machine. Runs the bundled digits example on the CPU (every prediction must
// equal its label), then on every provider the package ships in <prefix>/lib/strata/providers
// (outputs within 1e-4 of the CPU's). A provider that cannot run here (no driver, no device,
// missing runtime) is reported with its load-report line and is not a failure unless it is
// named by --require. Exit 0 on pass, 1 on failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/npy.h"
#include "core/session.h"

namespace strata::cli {

namespace {

namespace fs = std::filesystem;

constexpr double kMaxAbsDiff = 1e-4;
constexpr const char kProviderPrefix[] = "libstrata-provider-";

struct SelftestArgs {
  std::vector<std::string> require;
  std::string examples_dir;
  std::string provider_dir;
  int threads = 0;
  bool json = false;
};

// The example and its expected answers, loaded once.
struct Example {
  std::string model;
  Tensor samples;
  Tensor labels;
};

struct RunResult {
  std::vector<Tensor> outputs;
  std::vector<int64_t> predictions;  // argmax of the first output, per row
  size_t provider_nodes = 0;         // nodes the session assigned to the provider under test
};

// <prefix> of the running binary (<prefix>/bin/strata). The build tree has the same shape:
// <build>/bin/strata with the examples mirrored into <build>/share/strata/examples.
Result<fs::path> BinaryPrefix() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return MakeStatus(StatusCode::kIOError, "cannot resolve /proc/self/exe: ", ec.message());
  return exe.parent_path().parent_path();
}

Result<Example> LoadExample(const fs::path& dir) {
  Example ex;
  ex.model = (dir / "digits.onnx").string();
  std::error_code ec;
  if (!fs::is_regular_file(ex.model, ec))
    return MakeStatus(StatusCode::kNotFound, "bundled example ", ex.model,
                      " is missing (the package is incomplete; --examples-dir overrides the folder)");
  ASSIGN_OR_RETURN(ex.samples, ReadNpy((dir / "digits_samples.npy").string()));
  ASSIGN_OR_RETURN(ex.labels, ReadNpy((dir / "digits_labels.npy").string()));
  if (ex.samples.shape().empty() || ex.labels.shape().size() != 1 || ex.samples.shape()[0] != ex.labels.shape()[0])
    return MakeStatus(StatusCode::kInvalidArgument, "example data in ", dir.string(), ": samples ",
                      ShapeToString(ex.samples.shape()), " and labels ", ShapeToString(ex.labels.shape()),
                      " do not have one label per sample");
  return ex;
}

Result<RunResult> RunExample(const Example& ex, const SessionOptions& so, const std::string& provider) {
  ASSIGN_OR_RETURN(auto session, Session::CreateFromFile(ex.model, so));
  if (session->inputs().size() != 1)
    return MakeStatus(StatusCode::kInvalidModel, ex.model, " has ", session->inputs().size(),
                      " inputs; the selftest example must have exactly one");
  ASSIGN_OR_RETURN(std::vector<Value> outs, session->Run({{session->inputs()[0].name, Value(ex.samples)}}));
  RunResult r;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      return MakeStatus(StatusCode::kInvalidModel, "output ", session->outputs()[i].name, " is not a tensor");
    r.outputs.push_back(outs[i].tensor());
  }
  if (r.outputs.empty() || !IsClassifierOutput(r.outputs[0]) || r.outputs[0].shape().size() != 2)
    return MakeStatus(StatusCode::kInvalidModel, ex.model, ": first output is not a [batch, classes] float tensor");
  for (const auto& row : TopK(r.outputs[0], 1)) r.predictions.push_back(row.empty() ? -1 : row[0].first);
  for (const auto& a : session->assignments())
    if (!provider.empty() && a.provider == provider) ++r.provider_nodes;
  return r;
}

// Largest |a - b| over all float outputs; an error when shapes or dtypes differ.
Result<double> MaxAbsDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return MakeStatus(StatusCode::kRuntimeError, a.size(), " outputs vs ", b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape())
      return MakeStatus(StatusCode::kRuntimeError, "output ", i, " is ", DataTypeName(b[i].dtype()), " ",
                        ShapeToString(b[i].shape()), ", the CPU gave ", DataTypeName(a[i].dtype()), " ",
                        ShapeToString(a[i].shape()));
    if (a[i].dtype() != DataType::kFloat) continue;
    for (int64_t k = 0; k < a[i].num_elements(); ++k) {
      double d = std::fabs(double(a[i].data<float>()[k]) - double(b[i].data<float>()[k]));
      if (std::isnan(d)) return MakeStatus(StatusCode::kRuntimeError, "output ", i, " element ", k, " is NaN");
      worst = std::max(worst, d);
    }
  }
  return worst;
}

// Provider libraries the package ships, sorted by name: (name, path).
std::vector<std::pair<std::string, std::string>> ShippedProviders(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    if (file.rfind(kProviderPrefix, 0) != 0 || file.size() < 4 || file.substr(file.size() - 3) != ".so") continue;
    std::string name = file.substr(sizeof(kProviderPrefix) - 1, file.size() - 3 - (sizeof(kProviderPrefix) - 1));
    if (!name.empty()) found.emplace_back(name, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

int Execute(const SelftestArgs& a) {
  nlohmann::json j;
  bool pass = true;
  auto say = [&](const std::string& line) {
    if (!a.json) std::printf("%s\n", line.c_str());
  };
  auto fail = [&](const std::string& line) {
    pass = false;
    if (!a.json) std::printf("FAIL: %s\n", line.c_str());
    j["failures"].push_back(line);
  };
  j["failures"] = nlohmann::json::array();

  auto prefix = BinaryPrefix();
  if (!prefix.ok()) return Fail(prefix.status().ToString());
  // Absolute: provider discovery never searches relative paths (they depend on the cwd).
  std::error_code ec;
  fs::path examples =
      fs::absolute(a.examples_dir.empty() ? *prefix / "share" / "strata" / "examples" : fs::path(a.examples_dir), ec);
  fs::path provider_dir =
      fs::absolute(a.provider_dir.empty() ? *prefix / "lib" / "strata" / "providers" : fs::path(a.provider_dir), ec);
  j["version"] = STRATA_VERSION_STRING;
  j["prefix"] = prefix->string();
  j["examples"] = examples.string();
  j["provider_dir"] = provider_dir.string();
  say(std::string("strata ") + STRATA_VERSION_STRING + " selftest, prefix " + prefix->string());

  auto ex = LoadExample(examples);
  if (!ex.ok()) return Fail(ex.status().ToString());

  // ---- CPU: the core must classify every sample correctly.
  SessionOptions cpu_opts;
  cpu_opts.threads = a.threads;
  auto cpu = RunExample(*ex, cpu_opts, "");
  nlohmann::json jc;
  if (!cpu.ok()) {
    fail("cpu: " + cpu.status().ToString());
    jc["status"] = "fail";
  } else {
    size_t right = 0, n = cpu->predictions.size();
    std::string preds, labels;
    for (size_t i = 0; i < n; ++i) {
      int64_t want = LabelAt(ex->labels, i);
      right += cpu->predictions[i] == want;
      preds += (i ? " " : "") + std::to_string(cpu->predictions[i]);
      labels += (i ? " " : "") + std::to_string(want);
    }
    jc = {{"status", right == n ? "pass" : "fail"}, {"correct", right}, {"total", n}};
    if (right == n) {
      say("cpu: pass (" + std::to_string(right) + "/" + std::to_string(n) +
          " predictions equal their labels: " + preds + ")");
    } else {
      fail("cpu: " + std::to_string(right) + "/" + std::to_string(n) + " correct; predicted " + preds + ", labels " +
           labels);
    }
  }
  j["cpu"] = jc;

  // ---- providers shipped by the package.
  auto shipped = ShippedProviders(provider_dir);
  j["providers"] = nlohmann::json::array();
  if (shipped.empty()) say("providers: none shipped in " + provider_dir.string() + " (CPU-only package)");
  for (const auto& [name, path] : shipped) {
    bool required = std::find(a.require.begin(), a.require.end(), name) != a.require.end();
    nlohmann::json jp = {{"name", name}, {"path", path}, {"required", required}};
    SessionOptions so = cpu_opts;
    so.providers = {name};
    so.provider_paths = {path};
    auto run = RunExample(*ex, so, name);
    if (!run.ok()) {
      // Session creation names the provider's load-report line ("cuda: MISSING_DEPENDENCY:
      // needs libcudart.so.13 (...)"); a shipped provider that cannot run here is expected
      // on machines without its hardware.
      jp["status"] = "unavailable";
      jp["detail"] = run.status().message();
      if (required) {
        fail(name + ": required but unavailable: " + run.status().message());
      } else {
        say(name + ": unavailable on this machine (not required): " + run.status().message());
      }
    } else if (!cpu.ok()) {
      jp["status"] = "fail";
      fail(name + ": ran, but there is no CPU result to compare with");
    } else {
      auto diff = MaxAbsDiff(cpu->outputs, run->outputs);
      jp["nodes"] = run->provider_nodes;
      if (!diff.ok()) {
        jp["status"] = "fail";
        fail(name + ": " + diff.status().message());
      } else {
        jp["max_abs_diff"] = *diff;
        char buf[160];
        std::snprintf(buf, sizeof(buf), "max abs diff vs cpu %.3g (limit %.0e), %zu node(s) ran on %s", *diff,
                      kMaxAbsDiff, run->provider_nodes, name.c_str());
        if (*diff > kMaxAbsDiff) {
          jp["status"] = "fail";
          fail(name + ": " + buf);
        } else if (required && run->provider_nodes == 0) {
          jp["status"] = "fail";
          fail(name + ": required, but the session assigned no node to it");
        } else {
          jp["status"] = "pass";
          say(name + ": pass (" + buf + ")");
        }
      }
    }
    j["providers"].push_back(jp);
  }

  for (const auto& r : a.require) {
    if (r == "cpu") continue;
    bool found = std::any_of(shipped.begin(), shipped.end(), [&](const auto& s) { return s.first == r; });
    if (!found) fail("required provider '" + r + "' is not shipped in " + provider_dir.string());
  }

  j["result"] = pass ? "PASS" : "FAIL";
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    say(std::string("selftest: ") + (pass ? "PASS" : "FAIL"));
  }
  return pass ? 0 : 1;
}

}  // namespace

void AddSelftestCommand(CLI::App& app) {
  auto args = std::make_shared<SelftestArgs>();
  CLI::App* sub = app.add_subcommand(
      "selftest", "Check this installation: the bundled example on the CPU and on every shipped provider");
  sub->add_option("--require", args->require,
                  "Fail unless this provider is shipped and passes (repeatable; 'cpu' is always required)");
  sub->add_option("--examples-dir", args->examples_dir,
                  "Folder with digits.onnx and its samples (default <prefix>/share/strata/examples)");
  sub->add_option("--provider-dir", args->provider_dir,
                  "Folder of shipped providers (default <prefix>/lib/strata/providers)");
  sub->add_option("-t,--threads", args->threads, "Intra-op threads (0 = all cores)")->check(CLI::Range(0, 1024));
  sub->add_flag("--json", args->json, "Machine-readable output");
  sub->callback([args] { Exit(Execute(*args)); });
}

}  // namespace strata::cli
