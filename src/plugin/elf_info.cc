#include "plugin/elf_info.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plugin/cpu_features.h"

namespace strata::plugin {
namespace {

Status Corrupt(const std::string& path, const std::string& why) {
  return InvalidModel("corrupt ELF file '", path, "': ", why);
}

// Bounds-checked reads of parts of the file: provider libraries with embedded device
// code can be hundreds of MB, and listing needs only the headers and dynamic tables.
class ElfFile {
 public:
  ~ElfFile() {
    if (f_) std::fclose(f_);
  }
  bool Open(const std::string& path) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) return false;
    struct stat st;
    if (::fstat(::fileno(f_), &st) != 0) return false;
    size_ = static_cast<uint64_t>(st.st_size);
    regular_ = S_ISREG(st.st_mode);
    return true;
  }
  uint64_t size() const { return size_; }
  bool regular() const { return regular_; }
  bool Has(uint64_t off, uint64_t len) const { return off <= size_ && len <= size_ - off; }
  bool Read(uint64_t off, uint64_t len, std::string* out) {
    if (!Has(off, len) || len > (uint64_t{1} << 30)) return false;
    out->resize(len);
    if (len == 0) return true;
    return ::fseeko(f_, static_cast<off_t>(off), SEEK_SET) == 0 && std::fread(out->data(), 1, len, f_) == len;
  }
  template <typename T>
  bool ReadStruct(uint64_t off, T* v) {
    std::string b;
    if (!Read(off, sizeof(T), &b)) return false;
    std::memcpy(v, b.data(), sizeof(T));
    return true;
  }

 private:
  std::FILE* f_ = nullptr;
  uint64_t size_ = 0;
  bool regular_ = false;
};

// NUL-terminated string at `off` inside a loaded string table.
bool TableString(const std::string& table, uint64_t off, std::string* out) {
  if (off >= table.size()) return false;
  size_t nul = table.find('\0', off);
  if (nul == std::string::npos) return false;
  out->assign(table, off, nul - off);
  return true;
}

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
  ElfFile f;
  if (!f.Open(path)) return MakeStatus(StatusCode::kIOError, "cannot open '", path, "': ", std::strerror(errno));
  if (!f.regular()) return InvalidModel("'", path, "' is not a regular file");
  std::string ident;
  if (!f.Read(0, EI_NIDENT, &ident) || std::memcmp(ident.data(), ELFMAG, SELFMAG) != 0)
    return InvalidModel("'", path, "' is not an ELF file");
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
    return InvalidModel("'", path, "' is not a 64-bit little-endian ELF file");
  Elf64_Ehdr eh;
  if (!f.ReadStruct(0, &eh)) return Corrupt(path, "truncated ELF header");
  if (eh.e_type != ET_DYN) return InvalidModel("'", path, "' is not a shared library (ELF type ", eh.e_type, ")");
  if (eh.e_machine != EM_X86_64)
    return InvalidModel("'", path, "' is built for another architecture (ELF machine ", eh.e_machine, ")");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0) return Corrupt(path, "no usable section header table");
  std::string shbytes;
  if (!f.Read(eh.e_shoff, static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr), &shbytes))
    return Corrupt(path, "section header table lies beyond the end of the file (" + std::to_string(f.size()) +
                             " bytes; truncated?)");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), shbytes.data(), shbytes.size());
  auto load = [&](const Elf64_Shdr& s, std::string* out) { return f.Read(s.sh_offset, s.sh_size, out); };

  ElfInfo info;
  bool have_dynamic = false;
  std::vector<std::string> rpath;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNAMIC && s.sh_type != SHT_DYNSYM) continue;
    std::string data, strtab;
    if (!load(s, &data)) return Corrupt(path, "a section lies beyond the end of the file (truncated?)");
    if (s.sh_link >= sh.size() || !load(sh[s.sh_link], &strtab)) return Corrupt(path, "bad string table link");
    if (s.sh_type == SHT_DYNAMIC) {
      have_dynamic = true;
      for (size_t off = 0; off + sizeof(Elf64_Dyn) <= data.size(); off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        std::memcpy(&d, data.data() + off, sizeof(d));
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag != DT_NEEDED && d.d_tag != DT_RUNPATH && d.d_tag != DT_RPATH && d.d_tag != DT_SONAME) continue;
        std::string v;
        if (!TableString(strtab, d.d_un.d_val, &v)) return Corrupt(path, "dynamic entry string out of bounds");
        if (d.d_tag == DT_NEEDED) info.needed.push_back(v);
        if (d.d_tag == DT_SONAME) info.soname = v;
        if (d.d_tag == DT_RUNPATH) info.runpath = SplitList(v, ':');
        if (d.d_tag == DT_RPATH) rpath = SplitList(v, ':');
      }
    } else {
      for (size_t off = 0; off + sizeof(Elf64_Sym) <= data.size(); off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        std::memcpy(&sym, data.data() + off, sizeof(sym));
        const int bind = ELF64_ST_BIND(sym.st_info);
        const int vis = ELF64_ST_VISIBILITY(sym.st_other);
        if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
        if ((bind != STB_GLOBAL && bind != STB_WEAK) || (vis != STV_DEFAULT && vis != STV_PROTECTED)) continue;
        std::string name;
        if (!TableString(strtab, sym.st_name, &name)) return Corrupt(path, "symbol name out of bounds");
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
