// C API: provider discovery, the load report and capability queries.
#include <functional>
#include <new>
#include <string>

#include "capi/env.h"
#include "plugin/cpu_features.h"

using strata::Status;
using strata::StatusCode;
using strata::capi::ToCStatus;
namespace plugin = strata::plugin;

namespace {

strata_status* Guarded(const char* fn, const std::function<Status()>& body) {
  try {
    return ToCStatus(body());
  } catch (const std::bad_alloc&) {
    return ToCStatus(strata::MakeStatus(StatusCode::kOutOfMemory, fn, ": out of memory"));
  } catch (...) {
    return ToCStatus(strata::InternalError(fn, ": unexpected exception"));
  }
}

}  // namespace

extern "C" {

STRATA_API strata_status* strata_env_discover_providers(strata_env* env, const char* const* extra_paths,
                                                        size_t extra_count, int load) {
  return Guarded("strata_env_discover_providers", [&]() -> Status {
    if (!env) return strata::InvalidArgument("strata_env_discover_providers: env is NULL");
    if (extra_count > 0 && !extra_paths)
      return strata::InvalidArgument("strata_env_discover_providers: extra_paths is NULL but extra_count is ",
                                     extra_count);
    std::vector<std::string> paths;
    for (size_t i = 0; i < extra_count; ++i) {
      if (!extra_paths[i])
        return strata::InvalidArgument("strata_env_discover_providers: extra_paths[", i, "] is NULL");
      paths.emplace_back(extra_paths[i]);
    }
    RETURN_IF_ERROR(env->providers->Discover(paths, load != 0));
    env->report = env->providers->Report();
    return Status::Ok();
  });
}

STRATA_API size_t strata_env_provider_count(const strata_env* env) { return env ? env->report.size() : 0; }

STRATA_API strata_status* strata_env_provider_info(const strata_env* env, size_t index, const char** name,
                                                   const char** path, strata_provider_status* status,
                                                   const char** detail) {
  return Guarded("strata_env_provider_info", [&]() -> Status {
    if (!env) return strata::InvalidArgument("strata_env_provider_info: env is NULL");
    if (index >= env->report.size())
      return strata::InvalidArgument("strata_env_provider_info: index ", index, " is out of range (the report has ",
                                     env->report.size(), " entries)");
    const plugin::LoadReportEntry& e = env->report[index];
    if (name) *name = e.name.c_str();
    if (path) *path = e.path.c_str();
    if (status) *status = static_cast<strata_provider_status>(e.status);
    if (detail) *detail = e.detail.c_str();
    return Status::Ok();
  });
}

STRATA_API const char* strata_provider_status_name(strata_provider_status status) {
  return plugin::ProviderStatusName(static_cast<plugin::ProviderStatus>(status));
}

STRATA_API int strata_has_capability(strata_env* env, const char* name) {
  try {
    if (!name) return 0;
    const std::string cap = name;
    if (cap.rfind("cpu.", 0) == 0) {
      const std::string f = cap.substr(4);
      return plugin::IsKnownCpuFeature(f) && plugin::CpuFeatureUsable(f) ? 1 : 0;
    }
    if (!env || !env->providers) return 0;
    if (cap.rfind("provider.", 0) == 0) {
      // Answered from the static report (no provider code runs); a provider that was
      // loaded and failed (NO_DEVICE, INIT_FAILED...) is reported as such and answers 0.
      if (!env->providers->discovered() && !env->providers->Discover({}, false).ok()) return 0;
      const std::string want = cap.substr(9);
      for (const auto& e : env->providers->Report())
        if (e.name == want && e.status == plugin::ProviderStatus::kOk) return 1;
      return 0;
    }
    // "<provider>.<capability>", e.g. "cuda.weight_prepack": only for a provider already
    // loaded OK; answering never loads one.
    const size_t dot = cap.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == cap.size()) return 0;
    return env->providers->ProviderHasCapability(cap.substr(0, dot), cap.substr(dot + 1)) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
