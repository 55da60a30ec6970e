// Variant policies (packaging/policies/*.json) and the built-in deny list and system allowlist.
// The JSON schema is documented in docs/audit.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::audit {

struct RequiredFile {
  std::string glob;                      // matched against package paths (see GlobMatchesPath)
  std::string description;               // says why, printed in the violation
  std::vector<std::string> needed_all;   // each prefix must match one of the file's own NEEDED
  std::vector<std::string> needed_none;  // no NEEDED may match any of these prefixes
};

struct Policy {
  std::string name = "plain";
  std::string description;
  bool from_file = false;
  // Every NEEDED must resolve inside the package or to the system allowlist.
  bool self_contained = false;
  // Non-$ORIGIN RUNPATH/RPATH entries in packaged files are violations.
  bool origin_relative_runpath = true;
  // Package path prefixes that are core. Empty: every ELF that is not a provider.
  std::vector<std::string> core_prefixes;
  std::vector<std::string> forbid_files;  // globs
  std::vector<RequiredFile> require_files;
  std::map<std::string, std::string> max_versions;  // "GLIBC" -> "2.36"
  std::vector<std::string> extra_deny;              // soname prefixes added to the deny list
  std::vector<std::string> extra_allow_system;      // soname prefixes added to the allowlist
};

// Loads and validates a policy file. Unknown keys and wrong types are errors naming the key.
Result<Policy> LoadPolicy(const std::string& path);
Result<Policy> ParsePolicy(const std::string& text, const std::string& origin);

// Accelerator runtimes core files must never reach (soname prefixes).
const std::vector<std::string>& DefaultDenyList();
// System libraries a package may rely on without bundling them (exact sonames).
const std::vector<std::string>& DefaultSystemAllowlist();

// The deny-list entry `soname` matches, or nullopt.
std::optional<std::string> MatchDeny(const std::string& soname, const Policy& policy);
bool IsAllowedSystem(const std::string& soname, const Policy& policy);

// fnmatch-style glob ('*' stays within one path component) tried against the path and every
// suffix after a '/', so "lib/x.so" also matches "strata-0.1.0/lib/x.so" in a release tarball.
bool GlobMatchesPath(const std::string& glob, const std::string& path);
// Same anchoring for a plain prefix ("lib/" matches "strata-0.1.0/lib/libstrata.so.0").
bool PrefixMatchesPath(const std::string& prefix, const std::string& path);

}  // namespace strata::audit
