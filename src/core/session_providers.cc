// Provider selection for a session. "cpu" (the default) never touches a plugin. A
// named provider must load, or session creation fails with its load-report line: no
// silent fallback. "auto" picks the first usable provider and records why the others
// were skipped. Nodes a chosen provider does not support stay on the CPU.
#include <map>

#include "core/executor.h"
#include "core/session.h"
#include "plugin/partition.h"
#include "plugin/provider_manager.h"

namespace strata {

namespace {
plugin::ProviderManager& GlobalProviders() {
  static plugin::ProviderManager* pm = new plugin::ProviderManager();  // leaked: providers outlive statics
  return *pm;
}
}  // namespace

Status Session::SetUpProviders(Graph& g, ExecOptions* eo) {
  bool only_cpu = true;
  for (const auto& p : opts_.providers) only_cpu = only_cpu && p == "cpu";
  if (only_cpu) return Status::Ok();

  plugin::ProviderManager& pm = opts_.provider_manager ? *opts_.provider_manager : GlobalProviders();
  if (!opts_.provider_paths.empty() || !pm.discovered()) RETURN_IF_ERROR(pm.Discover(opts_.provider_paths));

  std::vector<std::shared_ptr<plugin::LoadedProvider>> chosen;
  for (const auto& name : opts_.providers) {
    if (name == "cpu") break;  // everything after "cpu" would never be reached
    if (name == "auto") {
      auto cands = pm.AutoCandidates();
      std::string skipped;
      for (const auto& e : pm.Report())
        if (e.status != plugin::ProviderStatus::kOk || e.devices.empty())
          skipped += (skipped.empty() ? "" : "; ") + e.ToString();
      if (cands.empty()) {
        provider_notes_.push_back("auto: no usable accelerator provider, running on cpu" +
                                  (skipped.empty() ? std::string() : " (skipped: " + skipped + ")"));
      } else {
        provider_notes_.push_back("auto: picked " + cands[0]->name() +
                                  (skipped.empty() ? std::string() : " (skipped: " + skipped + ")"));
        chosen.push_back(cands[0]);
      }
      break;
    }
    auto p = pm.Acquire(name);
    if (!p.ok()) {
      // Report the provider's load-report line; never fall back silently.
      return MakeStatus(StatusCode::kProviderError, "--device ", name, ": ", p.status().message());
    }
    provider_notes_.push_back("using provider " + name);
    chosen.push_back(std::move(p).value());
  }

  std::map<std::string, std::shared_ptr<plugin::LoadedProvider>> by_name;
  for (auto& p : chosen) {
    std::vector<plugin::PartitionInfo> infos;
    RETURN_IF_ERROR(plugin::PartitionForProvider(g, *p, plugin::PartitionOptions{}, &infos));
    provider_notes_.push_back(p->name() + ": " + std::to_string(infos.size()) + " partition(s)");
    by_name[p->name()] = p;
    provider_handles_.push_back(p);
  }
  if (by_name.empty()) return Status::Ok();
  eo->custom_factory = [by_name](const KernelInit& init,
                                 std::string* impl) -> Result<std::unique_ptr<OpKernel>> {
    if (init.node.domain != plugin::kPartitionDomain || init.node.op_type != plugin::kPartitionOp)
      return std::unique_ptr<OpKernel>();
    auto it = by_name.find(init.node.provider);
    if (it == by_name.end())
      return InternalError(init.node.Describe(), ": provider '", init.node.provider, "' is not loaded");
    *impl = "provider:" + it->first;
    return plugin::CreateProviderPartitionKernel(init, it->second);
  };
  return Status::Ok();
}

}  // namespace strata
