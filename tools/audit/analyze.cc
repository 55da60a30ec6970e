// RunAudit: closure resolution with the loader's search rules, and every per-file and policy check.
#include <glob.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>

#include "audit/audit.h"
#include "audit/elf_reader.h"
#include "audit/package.h"

namespace strata::audit {
namespace fs = std::filesystem;
namespace {

const char* const kDefaultSystemDirs[] = {
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"};
const char* const kProviderExports[] = {"strata_provider_probe", "strata_provider_init"};

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string Dirname(const std::string& key) {
  size_t slash = key.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : key.substr(0, slash);
}
bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool IsProviderName(const std::string& base) {
  return StartsWith(base, "libstrata-provider-") && base.find(".so") != std::string::npos;
}
bool IsOriginRelative(const std::string& entry) {
  return StartsWith(entry, "$ORIGIN") || StartsWith(entry, "${ORIGIN}");
}

std::string Join(const std::vector<std::string>& v, const std::string& sep, size_t limit = SIZE_MAX) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < limit; ++i) out += (i ? sep : "") + v[i];
  if (v.size() > limit) out += sep + "... (" + std::to_string(v.size() - limit) + " more)";
  return out;
}

// ld.so.conf with its `include` globs, in file order (what ldconfig caches).
void ReadLdSoConf(const std::string& path, int depth, std::vector<std::string>& dirs) {
  if (depth > 8) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, e - b + 1);
    if (StartsWith(line, "include")) {
      std::string pattern = line.substr(7);
      pattern.erase(0, pattern.find_first_not_of(" \t"));
      if (!pattern.empty() && pattern.front() != '/') pattern = Dirname(path) + "/" + pattern;
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) ReadLdSoConf(g.gl_pathv[i], depth + 1, dirs);
      }
      globfree(&g);
    } else if (line.front() == '/') {
      dirs.push_back(line);
    }
  }
}

// Dependencies found on the real file system, parsed once each.
class SystemFiles {
 public:
  const ElfInfo* Load(const std::string& path) {
    std::error_code ec;
    std::string canon = fs::canonical(path, ec).string();
    if (ec) return nullptr;
    auto it = cache_.find(canon);
    if (it != cache_.end()) return it->second.get();
    std::unique_ptr<ElfInfo> info;
    std::ifstream in(canon, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = ParseElf(bytes.data(), bytes.size());
    if (parsed.ok()) info = std::make_unique<ElfInfo>(std::move(parsed).value());
    return cache_.emplace(canon, std::move(info)).first->second.get();
  }

 private:
  std::map<std::string, std::unique_ptr<ElfInfo>> cache_;
};

struct Node {
  std::string key;    // package key or real path; $ORIGIN is its directory
  std::string label;  // display path (package) or NEEDED name (dependency)
  const ElfInfo* elf = nullptr;
};

struct Resolution {
  std::string where = "not-found";
  std::string key;
  std::string label;
  const ElfInfo* elf = nullptr;
};

class Auditor {
 public:
  Auditor(const Package& pkg, const Policy& policy, bool search_system, AuditReport& report)
      : pkg_(pkg), policy_(policy), search_system_(search_system), report_(report) {
    for (const auto& e : pkg_.elves()) {
      if (!e.elf.soname.empty()) by_name_.emplace(e.elf.soname, e.key);
      by_name_.emplace(Basename(e.display), e.key);
    }
    if (search_system_) {
      ReadLdSoConf("/etc/ld.so.conf", 0, system_dirs_);
      for (const char* d : kDefaultSystemDirs) system_dirs_.push_back(d);
    }
  }

  void CheckFile(const PackageElf& file, const std::string& role, FileReport& fr) {
    const ElfInfo& elf = file.elf;
    const std::string base = Basename(file.display);
    // Build-path leaks: anything not $ORIGIN-relative depends on the machine that built it.
    for (const auto* list : {&elf.runpath, &elf.rpath}) {
      for (const auto& entry : *list) {
        if (IsOriginRelative(entry)) continue;
        const std::string what = std::string(list == &elf.runpath ? "RUNPATH" : "RPATH") + " entry '" + entry +
                                 "' is not $ORIGIN-relative (build-path leak)";
        if (file.input != InputKind::kFile && policy_.origin_relative_runpath) {
          report_.violations.push_back({"runpath-leak", file.display, what});
        } else {
          report_.warnings.push_back({"runpath-leak", file.display, what});
        }
      }
    }
    if (elf.kind != ElfKind::kExecutable) {
      if (StartsWith(base, "libstrata.so")) {
        std::vector<std::string> bad;
        for (const auto& s : elf.exports) {
          if (!StartsWith(s, "strata_")) bad.push_back(s);
        }
        if (!bad.empty()) {
          report_.violations.push_back(
              {"export-prefix", file.display,
               std::to_string(bad.size()) +
                   " exported symbol(s) without the 'strata_' prefix: " + Join(bad, ", ", 10)});
        }
      } else if (role == "provider") {
        std::vector<std::string> bad;
        for (const auto& s : elf.exports) {
          if (s != kProviderExports[0] && s != kProviderExports[1]) bad.push_back(s);
        }
        if (!bad.empty()) {
          report_.violations.push_back(
              {"export-prefix", file.display,
               "provider exports " + std::to_string(bad.size()) +
                   " symbol(s) besides strata_provider_probe/strata_provider_init: " + Join(bad, ", ", 10)});
        }
        for (const char* want : kProviderExports) {
          if (!std::binary_search(elf.exports.begin(), elf.exports.end(), std::string(want))) {
            report_.violations.push_back(
                {"provider-exports", file.display, std::string("provider does not export '") + want + "'"});
          }
        }
      }
    }
    for (const auto& [family, cap] : policy_.max_versions) {
      auto it = elf.max_versions.find(family);
      if (it != elf.max_versions.end() && CompareVersions(it->second, cap) > 0) {
        report_.violations.push_back(
            {"symbol-version", file.display,
             "requires " + family + "_" + it->second + ", above the policy's maximum " + family + "_" + cap});
      }
    }
    Walk(file, role == "core", fr);
  }

 private:
  std::optional<Resolution> LookIn(const std::string& dir, const std::string& name, const ElfInfo& requester,
                                   const std::string& via) {
    const std::string cand = NormalizeKey(dir + "/" + name);
    auto r = pkg_.Resolve(cand);
    if (!r.ok()) {
      Once("symlink-loop", via, "while resolving " + name + ": " + r.status().message(), false);
    } else if (r->has_value()) {
      const PackageElf* e = pkg_.ElfAt(**r);
      if (e != nullptr && Compatible(e->elf, requester)) return Resolution{"package", e->key, e->display, &e->elf};
      return std::nullopt;
    }
    if (search_system_ && !Package::IsVirtual(cand)) {
      std::error_code ec;
      if (fs::is_regular_file(cand, ec)) {
        const ElfInfo* e = system_.Load(cand);
        if (e != nullptr && Compatible(*e, requester)) return Resolution{"system", cand, cand, e};
      }
    }
    return std::nullopt;
  }

  static bool Compatible(const ElfInfo& a, const ElfInfo& b) {
    return a.elf_class == b.elf_class && a.machine == b.machine;
  }

  static std::optional<std::string> Expand(const std::string& entry, const std::string& origin) {
    std::string out = entry;
    for (const std::string token : {"${ORIGIN}", "$ORIGIN"}) {
      for (size_t p = out.find(token); p != std::string::npos; p = out.find(token, p + origin.size())) {
        out.replace(p, token.size(), origin);
      }
    }
    // Relative entries resolve against the process's working directory: nothing to audit there.
    if (out.empty() || out.front() != '/') return std::nullopt;
    return out;
  }

  // The loader's order: RPATH of the requester and its loaders (only while the requester has no
  // RUNPATH; an object's own RUNPATH disables its RPATH), then the requester's RUNPATH only.
  Resolution ResolveNeeded(const std::string& name, const std::vector<Node>& chain) {
    const Node& req = chain.back();
    if (name.find('/') != std::string::npos) {
      if (name.front() == '/') {
        if (auto r = LookIn(Dirname(name), Basename(name), *req.elf, req.label)) return *r;
      }
      return {};
    }
    if (req.elf->runpath.empty()) {
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        if (!it->elf->runpath.empty()) continue;
        for (const auto& entry : it->elf->rpath) {
          auto dir = Expand(entry, Dirname(it->key));
          if (!dir) continue;
          if (auto r = LookIn(*dir, name, *req.elf, req.label)) return *r;
        }
      }
    }
    for (const auto& entry : req.elf->runpath) {
      auto dir = Expand(entry, Dirname(req.key));
      if (!dir) continue;
      if (auto r = LookIn(*dir, name, *req.elf, req.label)) return *r;
    }
    if (IsAllowedSystem(name, policy_)) return {"system-allowlist", "", name, nullptr};
    if (auto it = by_name_.find(name); it != by_name_.end()) {
      const PackageElf* e = pkg_.ElfAt(it->second);
      if (e != nullptr && Compatible(e->elf, *req.elf)) {
        Once("not-on-search-path", req.label,
             name + " is in the package (" + e->display +
                 ") but no RUNPATH/RPATH reaches it; the loader will not find it without LD_LIBRARY_PATH",
             false);
        return {"package-by-name", e->key, e->display, &e->elf};
      }
    }
    for (const auto& dir : system_dirs_) {
      if (auto r = LookIn(dir, name, *req.elf, req.label)) return *r;
    }
    return {};
  }

  void Once(const std::string& kind, const std::string& file, const std::string& message, bool violation) {
    if (!seen_.insert(kind + '\0' + file + '\0' + message).second) return;
    (violation ? report_.violations : report_.warnings).push_back({kind, file, message});
  }

  void Walk(const PackageElf& root, bool is_core, FileReport& fr) {
    std::set<std::string> visited = {root.key};
    std::vector<Node> chain = {{root.key, root.display, &root.elf}};
    std::function<void(int)> visit = [&](int depth) {
      const Node node = chain.back();
      for (const auto& name : node.elf->needed) {
        std::optional<std::string> deny = MatchDeny(name, policy_);
        Resolution r;
        if (!deny) {
          r = ResolveNeeded(name, chain);
          if (r.elf != nullptr && !r.elf->soname.empty()) deny = MatchDeny(r.elf->soname, policy_);
        }
        ClosureEntry entry{name, node.label, deny ? "denied" : r.where, r.where == "not-found" ? "" : r.label, depth};
        fr.closure.push_back(entry);
        if (deny) {
          if (is_core) {
            std::string path = root.display;
            for (size_t i = 1; i < chain.size(); ++i) path += " -> " + chain[i].label;
            path += " -> " + name;
            Once("deny-list", root.display,
                 "core file reaches accelerator runtime " + name + " (deny-list entry '" + *deny + "*'): " + path,
                 true);
          }
          continue;
        }
        if (r.where == "not-found") {
          const bool violation = policy_.from_file && policy_.self_contained;
          Once("unbundled-dependency", node.label,
               "unbundled dependency " + name + ": not in the package" + (search_system_ ? " nor on the system" : "") +
                   " and not on the system allowlist",
               violation);
        } else if (r.where == "system") {
          Once("unbundled-dependency", node.label,
               "unbundled dependency " + name + " (resolved from the system: " + r.key + ")", false);
        }
        if (r.elf != nullptr && visited.insert(r.key).second) {
          chain.push_back({r.key, name, r.elf});
          visit(depth + 1);
          chain.pop_back();
        }
      }
    };
    visit(1);
  }

  const Package& pkg_;
  const Policy& policy_;
  const bool search_system_;
  AuditReport& report_;
  SystemFiles system_;
  std::vector<std::string> system_dirs_;
  std::multimap<std::string, std::string> by_name_;
  std::set<std::string> seen_;
};

void CheckPolicyFiles(const Package& pkg, const Policy& policy, AuditReport& report) {
  const std::vector<std::string> paths = pkg.AllDisplayPaths();
  for (const auto& glob : policy.forbid_files) {
    for (const auto& p : paths) {
      if (GlobMatchesPath(glob, p)) {
        report.violations.push_back(
            {"forbidden-file", p, "policy '" + policy.name + "' forbids files matching '" + glob + "'"});
      }
    }
  }
  for (const auto& req : policy.require_files) {
    const std::string why = req.description.empty() ? "" : " (" + req.description + ")";
    bool found = false;
    for (const auto& e : pkg.elves()) {
      if (!GlobMatchesPath(req.glob, e.display)) continue;
      found = true;
      for (const auto& prefix : req.needed_all) {
        bool has = std::any_of(e.elf.needed.begin(), e.elf.needed.end(),
                               [&](const std::string& n) { return StartsWith(n, prefix); });
        if (!has) {
          report.violations.push_back(
              {"required-needed", e.display,
               "must NEED " + prefix + "*" + why + "; its NEEDED is [" + Join(e.elf.needed, ", ") + "]"});
        }
      }
      for (const auto& prefix : req.needed_none) {
        for (const auto& n : e.elf.needed) {
          if (StartsWith(n, prefix)) {
            report.violations.push_back(
                {"forbidden-needed", e.display, "must not NEED " + prefix + "*" + why + " but NEEDs " + n});
          }
        }
      }
    }
    if (!found) {
      report.violations.push_back(
          {"missing-required-file", "",
           "policy '" + policy.name + "' requires an ELF file matching '" + req.glob + "'" + why});
    }
  }
}

}  // namespace

Result<AuditReport> RunAudit(const AuditOptions& options) {
  if (options.inputs.empty()) return InvalidArgument("no PATH given to audit");
  Policy policy;
  if (options.policy) {
    policy = *options.policy;
  } else if (options.policy_path) {
    ASSIGN_OR_RETURN(policy, LoadPolicy(*options.policy_path));
  }
  if (!options.core_prefixes.empty()) policy.core_prefixes = options.core_prefixes;

  Package pkg;
  for (const auto& input : options.inputs) RETURN_IF_ERROR(pkg.AddInput(input));
  pkg.CheckSymlinks();

  AuditReport report;
  report.policy_name = policy.name;
  const bool search_system = options.search_system && !policy.from_file;
  Auditor auditor(pkg, policy, search_system, report);
  for (const auto& e : pkg.elves()) {
    FileReport fr;
    fr.path = e.display;
    fr.elf = e.elf;
    const std::string base = Basename(e.display);
    if (IsProviderName(base)) {
      fr.role = "provider";
    } else if (policy.core_prefixes.empty() ||
               std::any_of(policy.core_prefixes.begin(), policy.core_prefixes.end(),
                           [&](const std::string& p) { return PrefixMatchesPath(p, e.display); })) {
      fr.role = "core";
    } else {
      fr.role = "other";
    }
    if (e.elf.kind != ElfKind::kRelocatable) auditor.CheckFile(e, fr.role, fr);
    report.files.push_back(std::move(fr));
  }
  if (policy.from_file) CheckPolicyFiles(pkg, policy, report);
  for (auto* list : {&pkg.violations, &pkg.warnings, &pkg.notes}) {
    auto& dst = list == &pkg.violations ? report.violations : list == &pkg.warnings ? report.warnings : report.notes;
    dst.insert(dst.end(), list->begin(), list->end());
  }
  return report;
}

}  // namespace strata::audit
