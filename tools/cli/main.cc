#include <cstdio>

#include "cli/cli.h"

namespace strata::cli {
int Fail(const std::string& msg) {
  std::fprintf(stderr, "strata: error: %s\n", msg.c_str());
  return 1;
}
}  // namespace strata::cli

int main(int argc, char** argv) {
  CLI::App app{"strata: an ONNX inference runtime whose accelerators are optional plugins", "strata"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(STRATA_VERSION_STRING));
  strata::cli::AddRunCommand(app);
  strata::cli::AddInspectCommand(app);
  strata::cli::AddDevicesCommand(app);
  strata::cli::AddAuditCommand(app);
  strata::cli::AddSelftestCommand(app);
  strata::cli::AddPackCommand(app);
  strata::cli::AddBenchCommand(app);
  strata::cli::AddQuantizeCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
