// Stub: replaced by the real 'inspect' command.
#include "cli/cli.h"

namespace strata::cli {
void AddInspectCommand(CLI::App& app) {
  app.add_subcommand("inspect", "(not built yet)")->callback([] { Exit(Fail("'inspect' is not built yet")); });
}
}  // namespace strata::cli
