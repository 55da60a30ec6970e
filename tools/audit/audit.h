// strata audit: ELF dependency/symbol/RUNPATH checks over files, folders and archives.
#pragma once

#include <string>
#include <vector>

namespace strata::audit {

// Entry point of `strata audit ARGS...`. Returns the process exit code.
int RunAuditCommand(const std::vector<std::string>& args);

}  // namespace strata::audit
