// `strata audit`: the ELF artifact audit (tools/audit). Arguments are parsed by the audit
// itself so that usage errors exit with status 2, as documented in docs/audit.md.
#include "audit/audit.h"
#include "cli/cli.h"

namespace strata::cli {
void AddAuditCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("audit", "Audit ELF files, folders and archives (NEEDED closure, deny list, exports)");
  sub->set_help_flag();  // --help is handled by the audit's own usage text
  sub->allow_extras();
  sub->prefix_command();
  sub->callback([sub] {
    const int code = strata::audit::RunAuditCommand(sub->remaining());
    if (code != 0) Exit(code);
  });
}
}  // namespace strata::cli
