// strata audit: ELF dependency/symbol/RUNPATH checks over files, folders and archives.
//
// RunAudit builds a package from the inputs, resolves every file's NEEDED closure with the
// dynamic loader's rules, and checks it against the deny list, the export rules and an optional
// variant policy. RunAuditCommand is the `strata audit` front end (argument parsing + output).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "audit/policy.h"
#include "audit/types.h"
#include "core/status.h"

namespace strata::audit {

struct AuditOptions {
  std::vector<std::string> inputs;         // files, folders, .tar/.tar.gz/.tgz archives
  std::optional<std::string> policy_path;  // --policy FILE
  std::optional<Policy> policy;            // or a policy already loaded (takes precedence)
  std::vector<std::string> core_prefixes;  // --core-prefix (overrides the policy's)
  // Plain mode only: search the real system for dependencies the package lacks. Tests turn it
  // off to be independent of the machine.
  bool search_system = true;
};

// One NEEDED edge in a file's closure.
struct ClosureEntry {
  std::string needed;        // the DT_NEEDED name
  std::string requested_by;  // display path (package file) or soname (system file)
  // "package" (found on the loader's search path), "package-by-name" (in the package but no
  // RUNPATH/RPATH reaches it), "system-allowlist", "system", "denied", "not-found".
  std::string resolution;
  std::string path;  // where it resolved ("" when not resolved)
  int depth = 1;     // 1 = direct dependency
};

struct FileReport {
  std::string path;  // display path
  std::string role;  // "core", "provider", "other"
  ElfInfo elf;
  std::vector<ClosureEntry> closure;
};

struct AuditReport {
  std::string policy_name;  // "plain" without --policy
  std::vector<FileReport> files;
  std::vector<Finding> violations, warnings, notes;
  bool passed() const { return violations.empty(); }
};

// Runs the audit. Errors are usage/IO problems (exit code 2); violations live in the report.
Result<AuditReport> RunAudit(const AuditOptions& options);

std::string FormatText(const AuditReport& report);
std::string FormatJson(const AuditReport& report);

// Entry point of `strata audit ARGS...`: prints to stdout/stderr and returns the exit code
// (0 pass, 1 violations, 2 usage or IO error).
int RunAuditCommand(const std::vector<std::string>& args);

}  // namespace strata::audit
