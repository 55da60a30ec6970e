// Plain data shared by the audit pieces: what one ELF file says about itself,
// and the findings (violations, warnings, notes) an audit produces.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace strata::audit {

enum class ElfKind { kExecutable, kSharedLibrary, kRelocatable, kOther };
const char* ElfKindName(ElfKind kind);

struct ElfInfo {
  ElfKind kind = ElfKind::kOther;
  int elf_class = 0;  // ELFCLASS32 / ELFCLASS64
  int machine = 0;    // e_machine
  std::string soname;
  std::vector<std::string> needed;
  std::vector<std::string> runpath;  // DT_RUNPATH split on ':'
  std::vector<std::string> rpath;    // DT_RPATH split on ':'
  // Defined, global/weak, default-visibility dynamic symbols, sorted and unique.
  std::vector<std::string> exports;
  // Highest required version per family from .gnu.version_r: "GLIBC" -> "2.34", "GLIBCXX" -> "3.4.30".
  std::map<std::string, std::string> max_versions;
  bool has_section_headers = true;
};

struct Finding {
  std::string kind;  // stable machine-readable tag, e.g. "deny-list", "unbundled-dependency"
  std::string file;  // display path of the file concerned ("" when it is about the package)
  std::string message;
};

}  // namespace strata::audit
