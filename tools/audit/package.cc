#include "audit/package.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "audit/elf_reader.h"

namespace strata::audit {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxSymlinkHops = 40;
// Guards against decompression bombs: no shipped library comes close.
constexpr size_t kMaxMemberBytes = size_t{4} << 30;
constexpr const char* kArchiveRoot = "/@archive";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Parent(const std::string& key) {
  size_t slash = key.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : key.substr(0, slash);
}

// Reads a real file: only the magic when it is not ELF, so large data files cost nothing.
Result<std::string> ReadFileIfElf(const fs::path& path, bool* is_elf) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeStatus(StatusCode::kIOError, "cannot open '", path.string(), "'");
  char head[4] = {};
  in.read(head, 4);
  *is_elf = HasElfMagic(std::string_view(head, static_cast<size_t>(in.gcount())));
  if (!*is_elf) return std::string();
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  if (size < 0) return MakeStatus(StatusCode::kIOError, "cannot size '", path.string(), "'");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (in.gcount() != size) return MakeStatus(StatusCode::kIOError, "short read on '", path.string(), "'");
  return bytes;
}

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

// Member names are untrusted: reject absolute paths and any ".." component.
Result<std::string> SafeMemberPath(const std::string& raw) {
  if (raw.empty()) return InvalidArgument("empty member name");
  if (raw.front() == '/') return InvalidArgument("absolute member path '", raw, "'");
  std::string out;
  size_t start = 0;
  while (start <= raw.size()) {
    size_t end = raw.find('/', start);
    if (end == std::string::npos) end = raw.size();
    std::string part = raw.substr(start, end - start);
    if (part == "..") return InvalidArgument("member path '", raw, "' contains '..'");
    if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
    start = end + 1;
  }
  if (out.empty()) return InvalidArgument("member path '", raw, "' names the archive root");
  return out;
}

}  // namespace

bool IsArchivePath(const std::string& path) {
  for (const char* ext : {".tar.gz", ".tgz", ".tar", ".tar.xz", ".txz", ".tar.zst", ".tar.bz2"}) {
    if (EndsWith(path, ext)) return true;
  }
  return false;
}

std::string NormalizeKey(const std::string& path) {
  std::string s = fs::path(path).lexically_normal().generic_string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s.empty() ? "/" : s;
}

bool Package::IsVirtual(const std::string& key) { return key.rfind(kArchiveRoot, 0) == 0; }

std::string Package::Display(const std::string& key) const {
  auto it = display_.find(key);
  return it == display_.end() ? key : it->second;
}

const PackageElf* Package::ElfAt(const std::string& key) const {
  auto it = elf_index_.find(key);
  return it == elf_index_.end() ? nullptr : &elves_[it->second];
}

std::vector<std::string> Package::AllDisplayPaths() const {
  std::vector<std::string> out;
  for (const auto& k : regular_) out.push_back(Display(k));
  for (const auto& [k, t] : symlinks_) out.push_back(Display(k));
  return out;
}

Status Package::AddInput(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    if (fs::is_symlink(fs::symlink_status(path, ec))) {
      return NotFound("'", path, "' is a dangling symlink or a symlink loop");
    }
    return NotFound("no such file or directory: '", path, "'");
  }
  if (fs::is_directory(st)) return AddFolder(path);
  if (!fs::is_regular_file(st)) return InvalidArgument("'", path, "' is not a regular file, folder or archive");
  if (IsArchivePath(path)) return AddArchive(path);
  return AddFile(path);
}

Status Package::AddBytes(const std::string& key, const std::string& display, InputKind input, std::string bytes,
                         bool strict) {
  regular_.insert(key);
  display_[key] = display;
  auto info = ParseElf(bytes.data(), bytes.size());
  if (!info.ok()) {
    if (strict) return InvalidArgument("'", display, "': ", info.status().message());
    violations.push_back({"malformed-elf", display, info.status().message()});
    return Status::Ok();
  }
  if (!info->has_section_headers) notes.push_back({"no-section-headers", display, "no section headers; not analysed"});
  elf_index_[key] = elves_.size();
  elves_.push_back({key, display, input, std::move(info).value()});
  return Status::Ok();
}

Status Package::AddFile(const std::string& path) {
  bool is_elf = false;
  ASSIGN_OR_RETURN(std::string bytes, ReadFileIfElf(path, &is_elf));
  if (!is_elf) return InvalidArgument("'", path, "' is not an ELF file (and not a .tar/.tar.gz/.tgz archive)");
  return AddBytes(NormalizeKey(fs::absolute(path).string()), path, InputKind::kFile, std::move(bytes), true);
}

Status Package::AddFolder(const std::string& path) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) return MakeStatus(StatusCode::kIOError, "cannot resolve folder '", path, "': ", ec.message());
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) return MakeStatus(StatusCode::kIOError, "cannot read folder '", path, "': ", ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return MakeStatus(StatusCode::kIOError, "cannot walk folder '", path, "': ", ec.message());
    const fs::path& p = it->path();
    const std::string key = NormalizeKey(p.string());
    const std::string display = p.lexically_relative(root).generic_string();
    const fs::file_status lst = it->symlink_status(ec);
    if (ec) {
      warnings.push_back({"unreadable", display, ec.message()});
      ec.clear();
      continue;
    }
    if (fs::is_symlink(lst)) {
      const fs::path target = fs::read_symlink(p, ec);
      if (ec) {
        warnings.push_back({"unreadable", display, "cannot read symlink: " + ec.message()});
        ec.clear();
        continue;
      }
      symlinks_[key] = target.is_absolute() ? target.string() : Parent(key) + "/" + target.string();
      display_[key] = display;
    } else if (fs::is_regular_file(lst)) {
      bool is_elf = false;
      auto bytes = ReadFileIfElf(p, &is_elf);
      if (!bytes.ok()) {
        warnings.push_back({"unreadable", display, bytes.status().message()});
        continue;
      }
      if (!is_elf) {
        regular_.insert(key);
        display_[key] = display;
        notes.push_back({"non-elf", display, "skipped: not an ELF file"});
        continue;
      }
      RETURN_IF_ERROR(AddBytes(key, display, InputKind::kFolder, std::move(bytes).value(), false));
    } else if (!fs::is_directory(lst)) {
      notes.push_back({"special-file", display, "skipped: not a regular file"});
    }
  }
  return Status::Ok();
}

Status Package::AddArchive(const std::string& path) {
  std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
  if (!a) return InternalError("archive_read_new failed");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return MakeStatus(StatusCode::kIOError, "cannot open archive '", path, "': ", archive_error_string(a.get()));
  }
  const std::string root = std::string(kArchiveRoot) + std::to_string(archive_count_++);
  archive_entry* entry = nullptr;
  int members = 0;
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_FATAL || r == ARCHIVE_RETRY) {
      return MakeStatus(StatusCode::kIOError, "archive '", path, "' is corrupt or unreadable after ", members,
                        " members: ", archive_error_string(a.get()));
    }
    if (r == ARCHIVE_WARN) notes.push_back({"archive-warning", path, archive_error_string(a.get())});
    ++members;
    const char* raw_name = archive_entry_pathname(entry);
    auto member = SafeMemberPath(raw_name ? raw_name : "");
    if (!member.ok()) {
      violations.push_back({"unsafe-archive-member", raw_name ? raw_name : "",
                            member.status().message() + " (skipped; nothing is ever extracted)"});
      continue;
    }
    const std::string key = root + "/" + *member;
    if (regular_.count(key) || symlinks_.count(key)) {
      warnings.push_back(
          {"duplicate-member", *member, "archive holds this path more than once; the first copy is audited"});
      continue;
    }
    const char* hardlink = archive_entry_hardlink(entry);
    const mode_t type = archive_entry_filetype(entry);
    if (hardlink != nullptr) {
      auto target = SafeMemberPath(hardlink);
      if (!target.ok()) {
        violations.push_back({"unsafe-archive-member", *member, "hard link target: " + target.status().message()});
        continue;
      }
      // A hard link aliases an earlier member; modelling it as a link keeps one parsed copy.
      symlinks_[key] = root + "/" + *target;
      display_[key] = *member;
    } else if (type == AE_IFLNK) {
      const char* t = archive_entry_symlink(entry);
      std::string target = t ? t : "";
      symlinks_[key] = !target.empty() && target.front() == '/' ? target : Parent(key) + "/" + target;
      display_[key] = *member;
    } else if (type == AE_IFREG) {
      std::string bytes;
      char buf[1 << 16];
      bool checked = false, is_elf = false;
      while (true) {
        const la_ssize_t n = archive_read_data(a.get(), buf, sizeof(buf));
        if (n < 0) {
          return MakeStatus(StatusCode::kIOError, "archive '", path, "': cannot read member '", *member,
                            "': ", archive_error_string(a.get()));
        }
        if (n == 0) break;
        if (bytes.size() + static_cast<size_t>(n) > kMaxMemberBytes) {
          return MakeStatus(StatusCode::kIOError, "archive '", path, "': member '", *member, "' is larger than ",
                            kMaxMemberBytes >> 30, " GiB");
        }
        bytes.append(buf, static_cast<size_t>(n));
        if (!checked && bytes.size() >= 4) {
          checked = true;
          is_elf = HasElfMagic(bytes);
          if (!is_elf) break;  // the next header call skips the rest of the member
        }
      }
      if (!is_elf) {
        regular_.insert(key);
        display_[key] = *member;
        notes.push_back({"non-elf", *member, "skipped: not an ELF file"});
        continue;
      }
      RETURN_IF_ERROR(AddBytes(key, *member, InputKind::kArchive, std::move(bytes), false));
    } else if (type != AE_IFDIR) {
      notes.push_back({"special-file", *member, "skipped: not a regular file"});
    }
  }
  if (members == 0) notes.push_back({"empty-archive", path, "archive has no members"});
  return Status::Ok();
}

Result<std::optional<std::string>> Package::Resolve(const std::string& start) const {
  std::string key = NormalizeKey(start);
  std::vector<std::string> trail;
  for (int hops = 0;;) {
    std::string cur;
    bool restarted = false;
    size_t pos = 1;
    while (pos <= key.size()) {
      size_t end = key.find('/', pos);
      if (end == std::string::npos) end = key.size();
      const std::string cand = cur + "/" + key.substr(pos, end - pos);
      auto link = symlinks_.find(cand);
      if (link != symlinks_.end()) {
        trail.push_back(Display(cand));
        if (++hops > kMaxSymlinkHops) {
          std::string chain;
          for (size_t i = 0; i < trail.size() && i < 6; ++i) chain += (i ? " -> " : "") + trail[i];
          return InvalidArgument("symlink loop: ", chain, " -> ...");
        }
        key = NormalizeKey(link->second + key.substr(end));
        restarted = true;
        break;
      }
      cur = cand;
      pos = end + 1;
    }
    if (!restarted) return regular_.count(cur) ? std::optional<std::string>(cur) : std::nullopt;
  }
}

void Package::CheckSymlinks() {
  for (const auto& [key, target] : symlinks_) {
    auto r = Resolve(key);
    if (!r.ok()) {
      violations.push_back({"symlink-loop", Display(key), r.status().message()});
    } else if (!r->has_value()) {
      const std::string t = NormalizeKey(target);
      const bool escapes = IsVirtual(key) && t.rfind(key.substr(0, key.find('/', 1)) + "/", 0) != 0;
      if (escapes) {
        warnings.push_back({"symlink-escapes", Display(key), "symlink points outside the archive"});
      } else if (IsVirtual(key) || !fs::exists(t)) {
        warnings.push_back({"dangling-symlink", Display(key), "symlink target does not exist in the package"});
      }
    }
  }
}

}  // namespace strata::audit
