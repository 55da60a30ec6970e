// Stub: replaced by the real 'audit' command.
#include "cli/cli.h"

namespace strata::cli {
void AddAuditCommand(CLI::App& app) {
  app.add_subcommand("audit", "(not built yet)")->callback([] { Exit(Fail("'audit' is not built yet")); });
}
}  // namespace strata::cli
