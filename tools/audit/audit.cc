// `strata audit` front end: argument parsing, output and exit codes.
#include "audit/audit.h"

#include <cstdio>

namespace strata::audit {
namespace {

constexpr const char* kUsage =
    "usage: strata audit PATH... [--json] [--policy FILE] [--core-prefix PREFIX]...\n"
    "\n"
    "Audits ELF files, folders and .tar/.tar.gz/.tgz archives: NEEDED closure, RUNPATH/RPATH,\n"
    "exported symbols, required GLIBC/GLIBCXX/CXXABI versions, accelerator deny list.\n"
    "\n"
    "  --json               print a JSON report instead of text\n"
    "  --policy FILE        check a variant policy (packaging/policies/*.json)\n"
    "  --core-prefix PREFIX package path prefix of core files (repeatable; default: every\n"
    "                       ELF that is not a libstrata-provider-*.so)\n"
    "  --no-system          plain mode: do not resolve dependencies on this system\n"
    "\n"
    "Exit status: 0 pass, 1 violations found, 2 usage or I/O error.\n";

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "strata audit: error: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

}  // namespace

int RunAuditCommand(const std::vector<std::string>& args) {
  AuditOptions options;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag, std::string* out) {
      if (size_t eq = a.find('='); eq != std::string::npos && a.compare(0, eq, flag) == 0) {
        *out = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-system") {
      options.search_system = false;
    } else if (a == "--policy" || a.rfind("--policy=", 0) == 0) {
      if (!value("--policy", &v) || v.empty()) return UsageError("--policy needs a FILE");
      options.policy_path = v;
    } else if (a == "--core-prefix" || a.rfind("--core-prefix=", 0) == 0) {
      if (!value("--core-prefix", &v) || v.empty()) return UsageError("--core-prefix needs a PREFIX");
      options.core_prefixes.push_back(v);
    } else if (a == "--") {
      options.inputs.insert(options.inputs.end(), args.begin() + i + 1, args.end());
      break;
    } else if (a.size() > 1 && a[0] == '-') {
      return UsageError("unknown option '" + a + "'");
    } else {
      options.inputs.push_back(a);
    }
  }
  if (options.inputs.empty()) return UsageError("no PATH given");
  auto report = RunAudit(options);
  if (!report.ok()) {
    std::fprintf(stderr, "strata audit: error: %s\n", report.status().message().c_str());
    return 2;
  }
  const std::string out = json ? FormatJson(*report) : FormatText(*report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return report->passed() ? 0 : 1;
}

}  // namespace strata::audit
