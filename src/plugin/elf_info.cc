#include "plugin/elf_info.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "plugin/cpu_features.h"

namespace strata::plugin {
namespace {

Status Corrupt(const std::string& path, const std::string& why) {
  return InvalidModel("corrupt ELF file '", path, "': ", why);
}

// Bounds-checked view of the whole file.
class Bytes {
 public:
  explicit Bytes(std::string data) : d_(std::move(data)) {}
  size_t size() const { return d_.size(); }
  const char* data() const { return d_.data(); }
  bool Has(uint64_t off, uint64_t len) const { return off <= d_.size() && len <= d_.size() - off; }
  template <typename T>
  T At(uint64_t off) const {
    T v;
    std::memcpy(&v, d_.data() + off, sizeof(T));
    return v;
  }
  // NUL-terminated string at off, limited to [off, end).
  bool Str(uint64_t off, uint64_t end, std::string* out) const {
    if (end > d_.size() || off >= end) return false;
    const char* p = d_.data() + off;
    const void* nul = std::memchr(p, '\0', end - off);
    if (!nul) return false;
    out->assign(p, static_cast<const char*>(nul) - p);
    return true;
  }

 private:
  std::string d_;
};

bool FileExists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DirName(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

}  // namespace

bool ElfInfo::Exports(const std::string& sym) const {
  for (const auto& e : exports)
    if (e == sym) return true;
  return false;
}

Result<ElfInfo> ReadElfInfo(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeStatus(StatusCode::kIOError, "cannot open '", path, "': ", std::strerror(errno));
  Bytes b(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
  if (b.size() < EI_NIDENT || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0)
    return InvalidModel("'", path, "' is not an ELF file");
  if (b.At<unsigned char>(EI_CLASS) != ELFCLASS64 || b.At<unsigned char>(EI_DATA) != ELFDATA2LSB)
    return InvalidModel("'", path, "' is not a 64-bit little-endian ELF file");
  if (!b.Has(0, sizeof(Elf64_Ehdr))) return Corrupt(path, "truncated ELF header");
  auto eh = b.At<Elf64_Ehdr>(0);
  if (eh.e_type != ET_DYN) return InvalidModel("'", path, "' is not a shared library (ELF type ", eh.e_type, ")");
  if (eh.e_machine != EM_X86_64)
    return InvalidModel("'", path, "' is built for another architecture (ELF machine ", eh.e_machine, ")");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return Corrupt(path, "no usable section header table");
  if (!b.Has(eh.e_shoff, static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr)))
    return Corrupt(path, "section header table lies beyond the end of the file (" + std::to_string(b.size()) +
                             " bytes; truncated?)");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (size_t i = 0; i < sh.size(); ++i) sh[i] = b.At<Elf64_Shdr>(eh.e_shoff + i * sizeof(Elf64_Shdr));
  auto section_ok = [&](const Elf64_Shdr& s) { return s.sh_type == SHT_NOBITS || b.Has(s.sh_offset, s.sh_size); };

  ElfInfo info;
  bool have_dynamic = false;
  std::vector<std::string> rpath;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNAMIC && s.sh_type != SHT_DYNSYM) continue;
    if (!section_ok(s)) return Corrupt(path, "a section lies beyond the end of the file (truncated?)");
    if (s.sh_link >= sh.size() || !section_ok(sh[s.sh_link])) return Corrupt(path, "bad string table link");
    const Elf64_Shdr& strtab = sh[s.sh_link];
    const uint64_t str_end = strtab.sh_offset + strtab.sh_size;
    auto str = [&](uint64_t off, std::string* out) { return b.Str(strtab.sh_offset + off, str_end, out); };
    if (s.sh_type == SHT_DYNAMIC) {
      have_dynamic = true;
      for (uint64_t off = s.sh_offset; off + sizeof(Elf64_Dyn) <= s.sh_offset + s.sh_size; off += sizeof(Elf64_Dyn)) {
        auto d = b.At<Elf64_Dyn>(off);
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag != DT_NEEDED && d.d_tag != DT_RUNPATH && d.d_tag != DT_RPATH && d.d_tag != DT_SONAME) continue;
        std::string v;
        if (!str(d.d_un.d_val, &v)) return Corrupt(path, "dynamic entry string out of bounds");
        if (d.d_tag == DT_NEEDED) info.needed.push_back(v);
        if (d.d_tag == DT_SONAME) info.soname = v;
        if (d.d_tag == DT_RUNPATH) info.runpath = SplitList(v, ':');
        if (d.d_tag == DT_RPATH) rpath = SplitList(v, ':');
      }
    } else {
      for (uint64_t off = s.sh_offset; off + sizeof(Elf64_Sym) <= s.sh_offset + s.sh_size; off += sizeof(Elf64_Sym)) {
        auto sym = b.At<Elf64_Sym>(off);
        const int bind = ELF64_ST_BIND(sym.st_info);
        const int vis = ELF64_ST_VISIBILITY(sym.st_other);
        if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
        if ((bind != STB_GLOBAL && bind != STB_WEAK) || (vis != STV_DEFAULT && vis != STV_PROTECTED)) continue;
        std::string name;
        if (!str(sym.st_name, &name)) return Corrupt(path, "symbol name out of bounds");
        info.exports.push_back(std::move(name));
      }
    }
  }
  if (!have_dynamic) return InvalidModel("'", path, "' has no dynamic section (not a shared library)");
  if (info.runpath.empty()) info.runpath = rpath;  // the loader ignores RPATH when RUNPATH is present
  return info;
}

std::string FirstMissingDependency(const ElfInfo& info, const std::string& lib_path) {
  const std::string origin = DirName(lib_path);
  std::vector<std::string> dirs;
  for (std::string d : info.runpath) {
    for (const char* tok : {"$ORIGIN", "${ORIGIN}"}) {
      size_t p;
      while ((p = d.find(tok)) != std::string::npos) d.replace(p, std::strlen(tok), origin);
    }
    dirs.push_back(d);
  }
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
    for (const auto& d : SplitList(ld, ':'))
      if (!d.empty() && d[0] == '/') dirs.push_back(d);
  }
  for (const std::string& soname : info.needed) {
    if (soname.find('/') != std::string::npos) {
      if (!FileExists(soname)) return soname;
      continue;
    }
    bool found = false;
    for (const auto& d : dirs) {
      if (FileExists(d + "/" + soname)) {
        found = true;
        break;
      }
    }
    if (found) continue;
    // Already loaded (libc, libstdc++...) or resolvable through ld.so.cache / default dirs.
    void* h = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) h = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!h) return soname;
    dlclose(h);
  }
  return "";
}

}  // namespace strata::plugin
