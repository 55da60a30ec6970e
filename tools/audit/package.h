// The audited package: a virtual file tree built from the files, folders and archives
// named on the command line. Archives are read member by member through libarchive and
// never extracted; folders are walked without following symlinks.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "audit/types.h"
#include "core/status.h"

namespace strata::audit {

enum class InputKind { kFile, kFolder, kArchive };

struct PackageElf {
  std::string key;      // absolute, normalised path in the package tree (archives live under "/@archive<N>")
  std::string display;  // what reports print: the path inside the folder/archive, or the path as given
  InputKind input = InputKind::kFile;
  ElfInfo elf;
};

class Package {
 public:
  // Adds one command-line input. Errors (missing path, unreadable or corrupt archive, a directly
  // named file that is not ELF or is malformed) are returned; problems inside folders and
  // archives become findings instead.
  Status AddInput(const std::string& path);

  // Follows symlinks inside the package (at most 40 hops, like the kernel). Returns the key of
  // the regular file `key` names, nullopt when it names nothing in the package, or an error for
  // a symlink loop.
  Result<std::optional<std::string>> Resolve(const std::string& key) const;
  // The ELF file at a resolved key, or nullptr.
  const PackageElf* ElfAt(const std::string& key) const;
  // True for keys inside an archive: they have no counterpart on the real file system.
  static bool IsVirtual(const std::string& key);
  // Display path for any key in the package (the key itself when unknown).
  std::string Display(const std::string& key) const;

  const std::vector<PackageElf>& elves() const { return elves_; }
  // Every regular file and symlink, by display path (for policy file globs).
  std::vector<std::string> AllDisplayPaths() const;
  // Checks every symlink: loops are violations, dangling or escaping links warnings.
  void CheckSymlinks();

  std::vector<Finding> violations, warnings, notes;

 private:
  Status AddFile(const std::string& path);
  Status AddFolder(const std::string& path);
  Status AddArchive(const std::string& path);
  // Registers a regular file; parses it when it is ELF. `strict` makes ELF problems errors.
  Status AddBytes(const std::string& key, const std::string& display, InputKind input, std::string bytes, bool strict);

  std::vector<PackageElf> elves_;
  std::map<std::string, size_t> elf_index_;
  std::set<std::string> regular_;
  std::map<std::string, std::string> symlinks_;  // key -> absolute target key (not yet normalised)
  std::map<std::string, std::string> display_;
  int archive_count_ = 0;
};

bool IsArchivePath(const std::string& path);
// Lexically normalised absolute key ("/a/b/../c" -> "/a/c").
std::string NormalizeKey(const std::string& path);

}  // namespace strata::audit
