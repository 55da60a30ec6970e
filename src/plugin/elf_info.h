// Static inspection of a provider library: reads the ELF file with <elf.h> (no libelf,
// no dlopen), so listing providers never runs provider code.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace strata::plugin {

struct ElfInfo {
  std::vector<std::string> needed;   // DT_NEEDED sonames, in order
  std::vector<std::string> runpath;  // DT_RUNPATH (or DT_RPATH when no RUNPATH) entries, unexpanded
  std::string soname;
  std::vector<std::string> exports;  // defined global/weak dynamic symbols
  bool Exports(const std::string& sym) const;
};

// Parses a 64-bit little-endian x86-64 shared object. Every problem (not an ELF, wrong
// class or machine, truncated, offsets out of bounds) is an error naming the file.
Result<ElfInfo> ReadElfInfo(const std::string& path);

// Checks that every NEEDED soname resolves: a path entry must exist; a bare soname is
// looked for in the RUNPATH entries ($ORIGIN expanded) and LD_LIBRARY_PATH, and
// otherwise dlopen'ed with RTLD_LAZY|RTLD_LOCAL (which consults ld.so.cache and the
// default folders). Loading a *dependency* may run its constructors; the provider's own
// code never runs. Returns the first soname that does not resolve, or "" if all do.
std::string FirstMissingDependency(const ElfInfo& info, const std::string& lib_path);

}  // namespace strata::plugin
