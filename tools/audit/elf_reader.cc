#include "audit/elf_reader.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <mutex>

namespace strata::audit {
namespace {

// libelf caps nothing on hostile input, so every offset we follow is checked against the image.
constexpr size_t kMaxVerneedEntries = 1 << 16;

std::string ElfError() {
  const char* msg = elf_errmsg(-1);
  return msg ? msg : "unknown libelf error";
}

std::vector<std::string> SplitPath(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool IsNumericVersion(std::string_view v) {
  if (v.empty() || v.front() == '.' || v.back() == '.') return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

Status Malformed(const std::string& what) { return InvalidArgument("malformed or truncated ELF: ", what); }

}  // namespace

const char* ElfKindName(ElfKind kind) {
  switch (kind) {
    case ElfKind::kExecutable:
      return "executable";
    case ElfKind::kSharedLibrary:
      return "shared library";
    case ElfKind::kRelocatable:
      return "relocatable object";
    case ElfKind::kOther:
      break;
  }
  return "other ELF";
}

bool HasElfMagic(std::string_view head) {
  return head.size() >= 4 && head.substr(0, 4) ==
                                 "\x7f"
                                 "ELF";
}

int CompareVersions(std::string_view a, std::string_view b) {
  while (!a.empty() || !b.empty()) {
    auto take = [](std::string_view& s) {
      size_t dot = s.find('.');
      std::string_view part = s.substr(0, dot);
      s = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
      unsigned long long v = 0;
      std::from_chars(part.data(), part.data() + part.size(), v);
      return v;
    };
    unsigned long long x = take(a), y = take(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

Result<ElfInfo> ParseElf(const char* data, size_t size) {
  if (!HasElfMagic(std::string_view(data, size))) return InvalidArgument("not an ELF file (no ELF magic)");
  if (size < EI_NIDENT) return Malformed("file is shorter than the ELF identification");
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });

  // libelf's read-only modes never write to the image; the cast only satisfies its C signature.
  std::unique_ptr<Elf, ElfCloser> elf(elf_memory(const_cast<char*>(data), size));
  if (!elf) return Malformed(ElfError());
  if (elf_kind(elf.get()) != ELF_K_ELF) return Malformed("libelf does not recognise the image as ELF");

  ElfInfo info;
  info.elf_class = gelf_getclass(elf.get());
  if (info.elf_class != ELFCLASS32 && info.elf_class != ELFCLASS64) return Malformed("unknown ELF class");
  const size_t ehdr_size = info.elf_class == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (size < ehdr_size) return Malformed("file (" + std::to_string(size) + " bytes) is shorter than the ELF header");
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf.get(), &ehdr)) return Malformed("cannot read ELF header: " + ElfError());
  info.machine = ehdr.e_machine;

  size_t shnum = 0, phnum = 0;
  if (elf_getshdrnum(elf.get(), &shnum) != 0) return Malformed("cannot read section count: " + ElfError());
  if (elf_getphdrnum(elf.get(), &phnum) != 0) return Malformed("cannot read program header count: " + ElfError());
  if (ehdr.e_shoff != 0 && (ehdr.e_shoff > size || shnum * uint64_t{ehdr.e_shentsize} > size - ehdr.e_shoff)) {
    return Malformed("section header table (offset " + std::to_string(ehdr.e_shoff) + ") lies past the end of the " +
                     std::to_string(size) + "-byte file");
  }
  if (ehdr.e_phoff != 0 && (ehdr.e_phoff > size || phnum * uint64_t{ehdr.e_phentsize} > size - ehdr.e_phoff)) {
    return Malformed("program header table lies past the end of the " + std::to_string(size) + "-byte file");
  }

  bool has_interp = false;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf.get(), static_cast<int>(i), &ph))
      return Malformed("cannot read program header: " + ElfError());
    if (ph.p_type == PT_INTERP) has_interp = true;
  }

  info.has_section_headers = shnum > 0;
  bool pie_flag = false;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn != nullptr; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) return Malformed("cannot read section header: " + ElfError());
    const size_t index = elf_ndxscn(scn);
    if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL &&
        (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
      return Malformed("section " + std::to_string(index) + " (offset " + std::to_string(sh.sh_offset) + ", size " +
                       std::to_string(sh.sh_size) + ") extends past the end of the " + std::to_string(size) +
                       "-byte file");
    }
    if (sh.sh_type != SHT_DYNAMIC && sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_GNU_verneed) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (d == nullptr) return Malformed("cannot read section " + std::to_string(index) + ": " + ElfError());
    auto str = [&](size_t off) -> Result<std::string> {
      const char* s = elf_strptr(elf.get(), sh.sh_link, off);
      if (s == nullptr)
        return Malformed("bad string offset " + std::to_string(off) + " in section " + std::to_string(index));
      return std::string(s);
    };

    if (sh.sh_type == SHT_DYNAMIC) {
      const size_t entsize = sh.sh_entsize ? sh.sh_entsize : gelf_fsize(elf.get(), ELF_T_DYN, 1, EV_CURRENT);
      const size_t n = entsize ? sh.sh_size / entsize : 0;
      for (size_t i = 0; i < n; ++i) {
        GElf_Dyn dyn;
        if (!gelf_getdyn(d, static_cast<int>(i), &dyn)) break;
        if (dyn.d_tag == DT_NULL) break;
        switch (dyn.d_tag) {
          case DT_NEEDED: {
            ASSIGN_OR_RETURN(std::string s, str(dyn.d_un.d_val));
            info.needed.push_back(std::move(s));
            break;
          }
          case DT_SONAME: {
            ASSIGN_OR_RETURN(info.soname, str(dyn.d_un.d_val));
            break;
          }
          case DT_RUNPATH: {
            ASSIGN_OR_RETURN(std::string s, str(dyn.d_un.d_val));
            info.runpath = SplitPath(s);
            break;
          }
          case DT_RPATH: {
            ASSIGN_OR_RETURN(std::string s, str(dyn.d_un.d_val));
            info.rpath = SplitPath(s);
            break;
          }
          case DT_FLAGS_1:
            if (dyn.d_un.d_val & DF_1_PIE) pie_flag = true;
            break;
          default:
            break;
        }
      }
    } else if (sh.sh_type == SHT_DYNSYM) {
      const size_t entsize = sh.sh_entsize ? sh.sh_entsize : gelf_fsize(elf.get(), ELF_T_SYM, 1, EV_CURRENT);
      const size_t n = entsize ? sh.sh_size / entsize : 0;
      for (size_t i = 1; i < n; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(d, static_cast<int>(i), &sym)) break;
        const int bind = GELF_ST_BIND(sym.st_info);
        const int type = GELF_ST_TYPE(sym.st_info);
        if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
        if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
        if (GELF_ST_VISIBILITY(sym.st_other) != STV_DEFAULT) continue;
        if (type == STT_SECTION || type == STT_FILE) continue;
        ASSIGN_OR_RETURN(std::string name, str(sym.st_name));
        info.exports.push_back(std::move(name));
      }
    } else {  // SHT_GNU_verneed
      size_t off = 0, visited = 0;
      for (size_t i = 0; i < sh.sh_info || sh.sh_info == 0; ++i) {
        GElf_Verneed vn;
        if (!gelf_getverneed(d, static_cast<int>(off), &vn))
          return Malformed("bad .gnu.version_r entry: " + ElfError());
        size_t aux = off + vn.vn_aux;
        for (unsigned j = 0; j < vn.vn_cnt; ++j) {
          if (++visited > kMaxVerneedEntries) return Malformed(".gnu.version_r has a cycle");
          GElf_Vernaux va;
          if (!gelf_getvernaux(d, static_cast<int>(aux), &va))
            return Malformed("bad .gnu.version_r aux: " + ElfError());
          ASSIGN_OR_RETURN(std::string name, str(va.vna_name));
          const size_t us = name.rfind('_');
          if (us != std::string::npos && IsNumericVersion(std::string_view(name).substr(us + 1))) {
            std::string family = name.substr(0, us), version = name.substr(us + 1);
            auto [it, inserted] = info.max_versions.emplace(family, version);
            if (!inserted && CompareVersions(it->second, version) < 0) it->second = version;
          }
          if (va.vna_next == 0) break;
          aux += va.vna_next;
        }
        if (vn.vn_next == 0 || ++visited > kMaxVerneedEntries) break;
        off += vn.vn_next;
      }
    }
  }
  std::sort(info.exports.begin(), info.exports.end());
  info.exports.erase(std::unique(info.exports.begin(), info.exports.end()), info.exports.end());

  if (ehdr.e_type == ET_EXEC || (ehdr.e_type == ET_DYN && (pie_flag || (has_interp && info.soname.empty())))) {
    info.kind = ElfKind::kExecutable;
  } else if (ehdr.e_type == ET_DYN) {
    info.kind = ElfKind::kSharedLibrary;
  } else if (ehdr.e_type == ET_REL) {
    info.kind = ElfKind::kRelocatable;
  }
  return info;
}

}  // namespace strata::audit
