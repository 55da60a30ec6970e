#include "audit/policy.h"

#include <fnmatch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace strata::audit {
namespace {

using nlohmann::json;

Status Bad(const std::string& origin, const std::string& what) {
  return InvalidArgument("policy '", origin, "': ", what);
}

Result<std::vector<std::string>> StringList(const json& v, const std::string& origin, const std::string& key) {
  if (!v.is_array()) return Bad(origin, "'" + key + "' must be an array of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) return Bad(origin, "'" + key + "' must be an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<RequiredFile> ParseRequired(const json& v, const std::string& origin, size_t index) {
  const std::string where = "require_files[" + std::to_string(index) + "]";
  if (!v.is_object()) return Bad(origin, where + " must be an object");
  RequiredFile r;
  for (const auto& [k, val] : v.items()) {
    if (k == "glob" || k == "description") {
      if (!val.is_string()) return Bad(origin, where + "." + k + " must be a string");
      (k == "glob" ? r.glob : r.description) = val.get<std::string>();
    } else if (k == "needed_must_include") {
      ASSIGN_OR_RETURN(r.needed_all, StringList(val, origin, where + "." + k));
    } else if (k == "needed_must_not_include") {
      ASSIGN_OR_RETURN(r.needed_none, StringList(val, origin, where + "." + k));
    } else {
      return Bad(origin, "unknown key '" + where + "." + k + "'");
    }
  }
  if (r.glob.empty()) return Bad(origin, where + " needs a non-empty 'glob'");
  return r;
}

bool IsDottedNumber(const std::string& s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  }
  return true;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Result<Policy> ParsePolicy(const std::string& text, const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) return Bad(origin, "not valid JSON");
  if (!doc.is_object()) return Bad(origin, "top level must be a JSON object");
  Policy p;
  p.from_file = true;
  for (const auto& [k, v] : doc.items()) {
    if (k == "name" || k == "description") {
      if (!v.is_string()) return Bad(origin, "'" + k + "' must be a string");
      (k == "name" ? p.name : p.description) = v.get<std::string>();
    } else if (k == "self_contained" || k == "origin_relative_runpath") {
      if (!v.is_boolean()) return Bad(origin, "'" + k + "' must be true or false");
      (k == "self_contained" ? p.self_contained : p.origin_relative_runpath) = v.get<bool>();
    } else if (k == "core_prefixes") {
      ASSIGN_OR_RETURN(p.core_prefixes, StringList(v, origin, k));
    } else if (k == "forbid_files") {
      ASSIGN_OR_RETURN(p.forbid_files, StringList(v, origin, k));
    } else if (k == "extra_deny") {
      ASSIGN_OR_RETURN(p.extra_deny, StringList(v, origin, k));
    } else if (k == "extra_allow_system") {
      ASSIGN_OR_RETURN(p.extra_allow_system, StringList(v, origin, k));
    } else if (k == "require_files") {
      if (!v.is_array()) return Bad(origin, "'require_files' must be an array of objects");
      for (size_t i = 0; i < v.size(); ++i) {
        ASSIGN_OR_RETURN(RequiredFile r, ParseRequired(v[i], origin, i));
        p.require_files.push_back(std::move(r));
      }
    } else if (k == "max_versions") {
      if (!v.is_object()) return Bad(origin, "'max_versions' must be an object like {\"GLIBC\": \"2.36\"}");
      for (const auto& [family, ver] : v.items()) {
        if (!ver.is_string() || !IsDottedNumber(ver.get<std::string>())) {
          return Bad(origin, "max_versions." + family + " must be a dotted version string like \"2.36\"");
        }
        p.max_versions[family] = ver.get<std::string>();
      }
    } else if (k == "$schema" || k == "comment") {
      // Free-form documentation keys.
    } else {
      return Bad(origin, "unknown key '" + k + "'");
    }
  }
  if (p.name.empty()) return Bad(origin, "'name' must not be empty");
  return p;
}

Result<Policy> LoadPolicy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeStatus(StatusCode::kIOError, "cannot open policy file '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParsePolicy(ss.str(), path);
}

const std::vector<std::string>& DefaultDenyList() {
  static const std::vector<std::string> kDeny = {
      "libcuda.so",       "libcudart.so",        "libcublas.so",   "libcublasLt.so",
      "libcudnn",         "libnvrtc.so",         "libnccl.so",     "libcurand.so",
      "libcufft.so",      "libcusparse.so",      "libcusolver.so", "libnvinfer.so",
      "libnvToolsExt.so", "libvulkan.so",        "libOpenCL.so",   "libamdhip64.so",
      "librocm",          "libhsa-runtime64.so", "libMIOpen.so",   "librocblas.so",
      "libze_loader.so",  "libze_intel_gpu.so",  "libmetal"};
  return kDeny;
}

const std::vector<std::string>& DefaultSystemAllowlist() {
  static const std::vector<std::string> kAllow = {"libc.so.6",       "libm.so.6",    "libdl.so.2",
                                                  "libpthread.so.0", "librt.so.1",   "ld-linux-x86-64.so.2",
                                                  "libstdc++.so.6",  "libgcc_s.so.1"};
  return kAllow;
}

std::optional<std::string> MatchDeny(const std::string& soname, const Policy& policy) {
  // Only the file name matters: a NEEDED entry may carry a path.
  const std::string base = soname.substr(soname.rfind('/') == std::string::npos ? 0 : soname.rfind('/') + 1);
  for (const auto* list : {&DefaultDenyList(), &policy.extra_deny}) {
    for (const auto& prefix : *list) {
      if (StartsWith(base, prefix)) return prefix;
    }
  }
  return std::nullopt;
}

bool IsAllowedSystem(const std::string& soname, const Policy& policy) {
  for (const auto& name : DefaultSystemAllowlist()) {
    if (soname == name) return true;
  }
  for (const auto& prefix : policy.extra_allow_system) {
    if (StartsWith(soname, prefix)) return true;
  }
  return false;
}

bool GlobMatchesPath(const std::string& glob, const std::string& path) {
  if (fnmatch(glob.c_str(), path.c_str(), FNM_PATHNAME) == 0) return true;
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    if (fnmatch(glob.c_str(), path.c_str() + slash + 1, FNM_PATHNAME) == 0) return true;
  }
  return false;
}

bool PrefixMatchesPath(const std::string& prefix, const std::string& path) {
  if (StartsWith(path, prefix)) return true;
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    if (StartsWith(path.substr(slash + 1), prefix)) return true;
  }
  return false;
}

}  // namespace strata::audit
