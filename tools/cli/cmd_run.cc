// Stub: replaced by the real 'run' command.
#include "cli/cli.h"

namespace strata::cli {
void AddRunCommand(CLI::App& app) {
  app.add_subcommand("run", "(not built yet)")->callback([] { Exit(Fail("'run' is not built yet")); });
}
}  // namespace strata::cli
