// Stub: replaced by the real audit.
#include "audit/audit.h"

#include <cstdio>

namespace strata::audit {
int RunAuditCommand(const std::vector<std::string>&) {
  std::fprintf(stderr, "strata audit: not built yet\n");
  return 2;
}
}  // namespace strata::audit
