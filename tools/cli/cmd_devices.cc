// Stub: replaced by the real 'devices' command.
#include "cli/cli.h"

namespace strata::cli {
void AddDevicesCommand(CLI::App& app) {
  app.add_subcommand("devices", "(not built yet)")->callback([] { Exit(Fail("'devices' is not built yet")); });
}
}  // namespace strata::cli
