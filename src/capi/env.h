// Internal definitions behind the C API's opaque handles that the provider functions
// (capi_providers.cc) need. The rest of the C API (capi.cc) shares this header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capi/capi_internal.h"
#include "core/status.h"
#include "plugin/provider_manager.h"
#include "strata/strata.h"


struct strata_env {
  std::unique_ptr<strata::plugin::ProviderManager> providers = std::make_unique<strata::plugin::ProviderManager>();
  // Snapshot of the load report taken by strata_env_discover_providers; the strings
  // strata_env_provider_info hands out point into it until the next discovery.
  std::vector<strata::plugin::LoadReportEntry> report;
};

namespace strata::capi {

// nullptr for OK, otherwise a new strata_status the caller releases.
inline strata_status* ToCStatus(const Status& st) {
  if (st.ok()) return nullptr;
  auto* s = new (std::nothrow) strata_status;
  if (!s) return nullptr;  // cannot report without memory; callers see success (documented)
  s->code = static_cast<strata_status_code>(st.code());
  s->message = st.message();
  return s;
}

}  // namespace strata::capi
