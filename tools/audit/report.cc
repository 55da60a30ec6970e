// Human-readable and JSON renderings of an AuditReport.
#include <nlohmann/json.hpp>
#include <sstream>

#include "audit/audit.h"

namespace strata::audit {
namespace {

constexpr size_t kMaxExportsShown = 8;
constexpr size_t kMaxNotesShown = 20;

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

void PrintFindings(std::ostringstream& os, const char* title, const std::vector<Finding>& list, size_t limit) {
  if (list.empty()) return;
  os << title << " (" << list.size() << "):\n";
  for (size_t i = 0; i < list.size() && i < limit; ++i) {
    const Finding& f = list[i];
    os << "  [" << f.kind << "] " << (f.file.empty() ? "" : f.file + ": ") << f.message << "\n";
  }
  if (list.size() > limit) os << "  ... and " << list.size() - limit << " more (see --json)\n";
}

}  // namespace

std::string FormatText(const AuditReport& report) {
  std::ostringstream os;
  os << "policy: " << report.policy_name << "\n";
  for (const auto& f : report.files) {
    const ElfInfo& e = f.elf;
    os << "\n" << f.path << "  [" << f.role << ", " << ElfKindName(e.kind) << "]\n";
    if (!e.soname.empty()) os << "  SONAME:   " << e.soname << "\n";
    os << "  NEEDED:   " << (e.needed.empty() ? "(none)" : Join(e.needed, ", ")) << "\n";
    if (!e.runpath.empty()) os << "  RUNPATH:  " << Join(e.runpath, ":") << "\n";
    if (!e.rpath.empty()) os << "  RPATH:    " << Join(e.rpath, ":") << "\n";
    if (e.kind != ElfKind::kExecutable) {
      os << "  exports:  " << e.exports.size();
      if (!e.exports.empty()) {
        os << " (";
        for (size_t i = 0; i < e.exports.size() && i < kMaxExportsShown; ++i) os << (i ? ", " : "") << e.exports[i];
        if (e.exports.size() > kMaxExportsShown) os << ", ...";
        os << ")";
      }
      os << "\n";
    }
    if (!e.max_versions.empty()) {
      os << "  versions:";
      for (const char* family : {"GLIBC", "GLIBCXX", "CXXABI"}) {
        auto it = e.max_versions.find(family);
        if (it != e.max_versions.end()) os << " " << family << "_" << it->second;
      }
      os << "\n";
    }
    if (f.closure.size() > e.needed.size()) {
      os << "  closure:\n";
      for (const auto& c : f.closure) {
        os << "    " << std::string(2 * (c.depth - 1), ' ') << c.needed << " => "
           << (c.path.empty() ? c.resolution : c.path + " (" + c.resolution + ")") << "\n";
      }
    } else if (!f.closure.empty()) {
      os << "  resolved: ";
      for (size_t i = 0; i < f.closure.size(); ++i) {
        const auto& c = f.closure[i];
        os << (i ? ", " : "") << c.needed << " => " << (c.path.empty() ? c.resolution : c.path);
      }
      os << "\n";
    }
  }
  os << "\n";
  PrintFindings(os, "notes", report.notes, kMaxNotesShown);
  PrintFindings(os, "warnings", report.warnings, SIZE_MAX);
  PrintFindings(os, "violations", report.violations, SIZE_MAX);
  if (report.passed()) {
    os << "audit: PASS\n";
  } else {
    os << "audit: FAIL (" << report.violations.size() << " violation" << (report.violations.size() == 1 ? "" : "s")
       << ")\n";
  }
  return os.str();
}

std::string FormatJson(const AuditReport& report) {
  using nlohmann::json;
  auto findings = [](const std::vector<Finding>& list) {
    json arr = json::array();
    for (const auto& f : list) arr.push_back({{"kind", f.kind}, {"file", f.file}, {"message", f.message}});
    return arr;
  };
  json files = json::array();
  for (const auto& f : report.files) {
    const ElfInfo& e = f.elf;
    json closure = json::array();
    for (const auto& c : f.closure) {
      closure.push_back({{"needed", c.needed},
                         {"requested_by", c.requested_by},
                         {"resolution", c.resolution},
                         {"path", c.path},
                         {"depth", c.depth}});
    }
    files.push_back({{"path", f.path},
                     {"role", f.role},
                     {"type", ElfKindName(e.kind)},
                     {"soname", e.soname},
                     {"needed", e.needed},
                     {"runpath", e.runpath},
                     {"rpath", e.rpath},
                     {"exports", e.exports},
                     {"max_versions", e.max_versions},
                     {"closure", closure}});
  }
  json out = {{"policy", report.policy_name},
              {"files", files},
              {"violations", findings(report.violations)},
              {"warnings", findings(report.warnings)},
              {"notes", findings(report.notes)},
              {"result", report.passed() ? "PASS" : "FAIL"},
              {"violation_count", report.violations.size()}};
  // Names from hostile files may hold invalid UTF-8: replace rather than throw.
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace strata::audit
