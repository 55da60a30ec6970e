// The `strata` command line. Each subcommand lives in its own cmd_<name>.cc and
// registers itself explicitly from main.cc through one Add*Command function.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace strata::cli {

void AddRunCommand(CLI::App& app);       // cmd_run.cc
void AddInspectCommand(CLI::App& app);   // cmd_inspect.cc
void AddDevicesCommand(CLI::App& app);   // cmd_devices.cc
void AddAuditCommand(CLI::App& app);     // cmd_audit.cc
void AddSelftestCommand(CLI::App& app);  // cmd_selftest.cc
void AddPackCommand(CLI::App& app);      // cmd_pack.cc
void AddBenchCommand(CLI::App& app);     // cmd_bench.cc
void AddQuantizeCommand(CLI::App& app);  // cmd_quantize.cc

// Ends the subcommand with `code` as the process exit status (CLI11 turns a
// RuntimeError into that exit code without printing anything more).
[[noreturn]] inline void Exit(int code) { throw CLI::RuntimeError(code); }

// Prints "strata: error: <msg>" to stderr and returns the exit code (1).
int Fail(const std::string& msg);

}  // namespace strata::cli
