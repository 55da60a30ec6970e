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

// Splits "cuda.precision" into ("cuda", "precision"); both parts must be non-empty and
// the provider part a provider name ([a-z0-9_]+).
Status SplitProviderOption(const std::string& full, std::string* provider, std::string* key) {
  const size_t dot = full.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == full.size())
    return InvalidArgument("provider option '", full, "' must be '<provider>.<key>' (e.g. cuda.precision)");
  for (size_t i = 0; i < dot; ++i) {
    const char c = full[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return InvalidArgument("provider option '", full, "': '", full.substr(0, dot), "' is not a provider name");
  }
  *provider = full.substr(0, dot);
  *key = full.substr(dot + 1);
  return Status::Ok();
}

namespace {
// The options addressed to `provider`, prefix removed, in the order they were set.
std::vector<std::pair<std::string, std::string>> OptionsFor(const SessionOptions& o, const std::string& provider) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [full, value] : o.provider_options) {
    std::string p, k;
    if (SplitProviderOption(full, &p, &k).ok() && p == provider) out.emplace_back(k, value);
  }
  return out;
}
}  // namespace

Status Session::SetUpProviders(Graph& g, ExecOptions* eo) {
  bool only_cpu = true, has_auto = false;
  for (const auto& p : opts_.providers) {
    only_cpu = only_cpu && p == "cpu";
    has_auto = has_auto || p == "auto";
  }
  // An option for a provider the session never uses would be silently ignored: refuse it
  // (under "auto" the provider is not known yet, so it applies only if picked).
  for (const auto& [full, value] : opts_.provider_options) {
    std::string p, k;
    RETURN_IF_ERROR(SplitProviderOption(full, &p, &k));
    bool named = false;
    for (const auto& d : opts_.providers) {
      if (d == "cpu") break;  // providers after "cpu" are never used
      named = named || d == p;
    }
    if (!named && !has_auto)
      return InvalidArgument("provider option '", full, "' is for provider '", p,
                             "', which this session does not use (pass --device ", p, " or auto)");
  }
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
      return MakeStatus(p.status().code(), "--device ", name, ": ", p.status().message());
    }
    provider_notes_.push_back("using provider " + name);
    chosen.push_back(std::move(p).value());
  }

  // Under "auto", say which options did not apply because their provider was not picked.
  for (const auto& [full, value] : opts_.provider_options) {
    std::string p, k;
    RETURN_IF_ERROR(SplitProviderOption(full, &p, &k));
    bool used = false;
    for (const auto& c : chosen) used = used || c->name() == p;
    if (!used) provider_notes_.push_back("option " + full + "=" + value + " not applied: " + p + " is not in use");
  }

  std::map<std::string, std::shared_ptr<plugin::LoadedProvider>> by_name;
  for (auto& p : chosen) {
    std::vector<plugin::PartitionInfo> infos;
    plugin::PartitionOptions po;
    po.provider_options = OptionsFor(opts_, p->name());
    if (!po.provider_options.empty())
      provider_notes_.push_back(p->name() + ": " + std::to_string(po.provider_options.size()) + " option(s)");
    RETURN_IF_ERROR(plugin::PartitionForProvider(g, *p, po, &infos));
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
