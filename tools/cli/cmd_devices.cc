// `strata devices`: the CPU (built in, always first), then every provider candidate
// from discovery with its load-report status, and the devices of usable providers.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "plugin/cpu_features.h"
#include "plugin/provider_manager.h"

namespace strata::cli {
namespace {

struct DevicesOptions {
  bool json = false;
  bool no_load = false;
  bool isolate = false;
  std::vector<std::string> provider_paths;
};

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "x86-64 CPU";
}

uint64_t HostMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::vector<std::string> CpuFeatureList() {
  std::vector<std::string> out;
  for (const char* f : {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                        "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"})
    if (plugin::CpuSupports(f)) out.push_back(f);
  return out;
}

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string DeviceLine(size_t i, const plugin::DeviceProps& d) {
  std::string s = "  device " + std::to_string(i) + ": " + d.name + " (";
  std::vector<std::string> parts;
  if (d.compute_units) parts.push_back(std::to_string(d.compute_units) + " compute units");
  if (d.memory_bytes) parts.push_back(Gib(d.memory_bytes));
  if (!d.driver_version.empty()) parts.push_back("driver " + d.driver_version);
  if (!d.api_version.empty()) parts.push_back(d.api_version);
  for (size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
  return s + ")";
}

int RunDevices(const DevicesOptions& o) {
  plugin::ProviderManager m;
  Status st = m.Discover(o.provider_paths, /*load=*/!o.no_load, o.isolate);
  if (!st.ok()) return Fail("provider discovery failed: " + st.ToString());
  const auto report = m.Report();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto features = CpuFeatureList();
  const std::string pkg = plugin::ProviderManager::PackageProviderDir();

  if (o.json) {
    nlohmann::ordered_json j;
    j["package_provider_dir"] = pkg;
    j["loaded"] = !o.no_load;
    nlohmann::ordered_json cpu = {{"name", "cpu"},
                                  {"status", "OK"},
                                  {"origin", "built-in"},
                                  {"path", ""},
                                  {"detail", ""},
                                  {"variant", ""},
                                  {"version", STRATA_VERSION_STRING},
                                  {"builtin", true},
                                  {"loaded", true}};
    cpu["devices"] = nlohmann::ordered_json::array({{{"name", CpuModel()},
                                                     {"memory_bytes", HostMemory()},
                                                     {"compute_units", cores},
                                                     {"driver_version", ""},
                                                     {"api_version", ""},
                                                     {"cpu_features", features}}});
    j["providers"] = nlohmann::ordered_json::array({cpu});
    for (const auto& e : report) {
      nlohmann::ordered_json p = {{"name", e.name},       {"status", plugin::ProviderStatusName(e.status)},
                                  {"origin", e.origin},   {"path", e.path},
                                  {"detail", e.detail},   {"variant", e.variant},
                                  {"version", e.version}, {"builtin", false},
                                  {"loaded", e.loaded}};
      p["devices"] = nlohmann::ordered_json::array();
      for (const auto& d : e.devices)
        p["devices"].push_back({{"name", d.name},
                                {"memory_bytes", d.memory_bytes},
                                {"compute_units", d.compute_units},
                                {"driver_version", d.driver_version},
                                {"api_version", d.api_version}});
      j["providers"].push_back(p);
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  size_t wname = 8, wstatus = 6, worigin = 6;
  for (const auto& e : report) {
    wname = std::max(wname, e.name.size());
    wstatus = std::max(wstatus, std::string(plugin::ProviderStatusName(e.status)).size());
    worigin = std::max(worigin, e.origin.size());
  }
  worigin = std::max(worigin, std::string("built-in").size());
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                 const std::string& e) {
    std::printf("%-*s  %-*s  %-*s  %-8s  %s\n", static_cast<int>(wname), a.c_str(), static_cast<int>(wstatus),
                b.c_str(), static_cast<int>(worigin), c.c_str(), d.c_str(), e.c_str());
  };
  row("PROVIDER", "STATUS", "ORIGIN", "VERSION", "PATH");
  row("cpu", "OK", "built-in", STRATA_VERSION_STRING, "");
  std::string cpu_line = "  device 0: " + CpuModel() + " (" + std::to_string(cores) + " cores, " + Gib(HostMemory());
  if (!features.empty()) {
    cpu_line += ", ";
    for (size_t k = 0; k < features.size(); ++k) cpu_line += (k ? " " : "") + features[k];
  }
  std::printf("%s)\n", cpu_line.c_str());
  for (const auto& e : report) {
    row(e.name.empty() ? "?" : e.name, plugin::ProviderStatusName(e.status), e.origin,
        e.version.empty() ? "-" : e.version, e.path);
    if (!e.detail.empty()) std::printf("  %s\n", e.detail.c_str());
    for (size_t i = 0; i < e.devices.size(); ++i) std::printf("%s\n", DeviceLine(i, e.devices[i]).c_str());
    if (e.status == plugin::ProviderStatus::kOk && !e.loaded) std::printf("  (not loaded: --no-load)\n");
  }
  if (report.empty())
    std::printf("no accelerator providers found (searched: --provider-path, STRATA_PROVIDER_PATH, %s)\n",
                pkg.empty() ? "<package folder unknown>" : pkg.c_str());
  return 0;
}

}  // namespace

void AddDevicesCommand(CLI::App& app) {
  auto opts = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the CPU and every accelerator provider found, with its load status and devices");
  cmd->add_flag("--json", opts->json, "Machine-readable output");
  cmd->add_option("--provider-path", opts->provider_paths,
                  "Provider library or folder to search first (repeatable; absolute paths)");
  cmd->add_flag("--no-load", opts->no_load,
                "Only inspect the files (ELF, manifest, dependencies, CPU features); run no provider code");
  cmd->add_flag("--isolate", opts->isolate,
                "Load each provider in a child process, so one that crashes is reported CRASHED");
  cmd->callback([opts] {
    int rc = RunDevices(*opts);
    if (rc != 0) Exit(rc);
  });
}

}  // namespace strata::cli
