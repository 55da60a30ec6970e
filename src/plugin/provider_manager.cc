#include "plugin/provider_manager.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plugin/cpu_features.h"
#include "plugin/elf_info.h"

namespace strata::plugin {
namespace {

constexpr const char* kPrefix = "libstrata-provider-";
constexpr const char* kSuffix = ".so";

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}
std::string BaseName(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}
std::string DirName(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos) return "";
  return s == 0 ? "/" : p.substr(0, s);
}
bool IsCandidateName(const std::string& file) {
  const size_t np = std::strlen(kPrefix), ns = std::strlen(kSuffix);
  return file.size() > np + ns && file.compare(0, np, kPrefix) == 0 && file.compare(file.size() - ns, ns, kSuffix) == 0;
}
// "libstrata-provider-cuda.so" -> "cuda"; other file names -> the name without ".so*".
std::string NameFromFile(const std::string& path) {
  std::string f = BaseName(path);
  if (IsCandidateName(f)) return f.substr(std::strlen(kPrefix), f.size() - std::strlen(kPrefix) - std::strlen(kSuffix));
  size_t so = f.find(".so");
  return so == std::string::npos ? f : f.substr(0, so);
}
std::string ManifestPath(const std::string& lib) {
  std::string p = lib;
  if (p.size() > 3 && p.compare(p.size() - 3, 3, ".so") == 0) p.resize(p.size() - 3);
  return p + ".json";
}
std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

struct Candidate {
  std::string path;
  std::string origin;
};

// Lists libstrata-provider-*.so in a folder, sorted for a deterministic report.
std::vector<std::string> ScanFolder(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return files;
  while (dirent* e = ::readdir(d)) {
    std::string f = e->d_name;
    if (IsCandidateName(f)) files.push_back(dir + "/" + f);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

LoadReportEntry NotFoundEntry(const std::string& path, const std::string& origin, const std::string& detail) {
  LoadReportEntry e;
  e.name = NameFromFile(path);
  e.path = path;
  e.origin = origin;
  e.status = ProviderStatus::kNotFound;
  e.detail = detail;
  return e;
}

// Adds the candidates for one path entry; records unusable entries in the report.
void AddPathEntry(const std::string& entry, const std::string& origin, std::vector<Candidate>* out,
                  std::vector<LoadReportEntry>* bad) {
  if (entry.empty()) return;
  if (entry[0] != '/') {
    // A relative entry would be resolved against the current directory, which strata never searches.
    bad->push_back(NotFoundEntry(
        entry, origin, "relative path ignored: providers are never searched relative to the current directory"));
    return;
  }
  if (IsDir(entry)) {
    for (auto& f : ScanFolder(entry)) out->push_back({f, origin});
  } else if (Exists(entry)) {
    out->push_back({entry, origin});
  } else {
    bad->push_back(NotFoundEntry(entry, origin, "no such file or folder"));
  }
}

struct Manifest {
  std::string name, variant, version;
  long abi = -1;
  std::vector<std::string> needs, cpu_features;
};

std::vector<std::string> JsonList(const nlohmann::json& j) {
  if (j.is_string()) return SplitList(j.get<std::string>());
  std::vector<std::string> v;
  if (j.is_array())
    for (const auto& x : j)
      if (x.is_string()) v.push_back(x.get<std::string>());
  return v;
}

// Reads the sidecar manifest if present. Returns false with *error set when it is malformed.
bool ReadManifest(const std::string& path, Manifest* m, bool* present, std::string* error) {
  *present = false;
  if (!Exists(path)) return true;
  *present = true;
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "malformed manifest '" + path + "': not a JSON object";
    return false;
  }
  auto str = [&](const char* k, std::string* out) -> bool {
    if (!j.contains(k)) return true;
    if (!j[k].is_string()) {
      *error = "malformed manifest '" + path + "': '" + k + "' must be a string";
      return false;
    }
    *out = j[k].get<std::string>();
    return true;
  };
  if (!str("name", &m->name) || !str("variant", &m->variant) || !str("version", &m->version)) return false;
  if (j.contains("abi")) {
    if (!j["abi"].is_number_integer()) {
      *error = "malformed manifest '" + path + "': 'abi' must be an integer";
      return false;
    }
    m->abi = j["abi"].get<long>();
  }
  if (j.contains("needs")) m->needs = JsonList(j["needs"]);
  if (j.contains("cpu_features")) m->cpu_features = JsonList(j["cpu_features"]);
  return true;
}

std::string MissingSoname(const std::vector<std::string>& sonames) {
  ElfInfo fake;
  fake.needed = sonames;
  return FirstMissingDependency(fake, "/");
}

// Static (no provider code) checks of one candidate. Fills name/status/detail.
void CheckStatically(LoadReportEntry* e) {
  e->name = NameFromFile(e->path);
  auto elf = ReadElfInfo(e->path);
  if (!elf.ok()) {
    e->status = ProviderStatus::kInvalid;
    e->detail = elf.status().message();
    return;
  }
  for (const char* sym : {STRATA_PROVIDER_PROBE_SYMBOL, STRATA_PROVIDER_INIT_SYMBOL}) {
    if (!elf->Exports(sym)) {
      e->status = ProviderStatus::kInvalid;
      e->detail = std::string("does not export ") + sym;
      return;
    }
  }
  Manifest m;
  bool present = false;
  std::string error;
  if (!ReadManifest(ManifestPath(e->path), &m, &present, &error)) {
    e->status = ProviderStatus::kInvalid;
    e->detail = error;
    return;
  }
  if (present) {
    if (!m.name.empty()) e->name = m.name;
    e->variant = m.variant;
    e->version = m.version;
    if (m.abi >= 0 && m.abi != static_cast<long>(STRATA_PROVIDER_ABI_VERSION)) {
      e->status = ProviderStatus::kAbiMismatch;
      e->detail = "manifest declares provider ABI " + std::to_string(m.abi) + ", host wants " +
                  std::to_string(STRATA_PROVIDER_ABI_VERSION);
      return;
    }
  }
  std::string missing = FirstMissingDependency(*elf, e->path);
  if (missing.empty()) missing = MissingSoname(m.needs);
  if (!missing.empty()) {
    e->status = ProviderStatus::kMissingDependency;
    e->detail = "needs " + missing + ", which is not found on this system";
    return;
  }
  std::vector<std::string> no_cpu;
  for (const auto& f : m.cpu_features)
    if (!CpuFeatureUsable(f)) no_cpu.push_back(f);
  if (!no_cpu.empty()) {
    e->status = ProviderStatus::kUnsupportedCpu;
    e->detail = "this CPU lacks " + Join(no_cpu, ", ");
    return;
  }
  e->status = ProviderStatus::kOk;
}

// --- host API handed to providers ---
void HostLog(void*, int32_t level, const char* msg) {
  if (level >= STRATA_PROVIDER_LOG_WARNING) std::fprintf(stderr, "strata: provider: %s\n", msg ? msg : "");
}
void* HostAlloc(void*, size_t bytes, size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0 || alignment > 4096) return nullptr;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}
void HostFree(void*, void* p) { std::free(p); }
void HostReportError(void*, const char* msg) { std::fprintf(stderr, "strata: provider error: %s\n", msg ? msg : ""); }

std::string SafeStr(const char* s) { return s ? std::string(s) : std::string(); }

// Splits on '\n', keeping empty lines (fields may be empty); drops the text after the last '\n'.
std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0, nl;
  while ((nl = s.find('\n', start)) != std::string::npos) {
    out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace

const strata_host_api* HostApi() {
  static const strata_host_api api = {
      sizeof(strata_host_api), STRATA_PROVIDER_ABI_VERSION, nullptr, HostLog, HostAlloc, HostFree, HostReportError};
  return &api;
}

const char* ProviderStatusName(ProviderStatus s) {
  switch (s) {
    case ProviderStatus::kOk:
      return "OK";
    case ProviderStatus::kNotFound:
      return "NOT_FOUND";
    case ProviderStatus::kMissingDependency:
      return "MISSING_DEPENDENCY";
    case ProviderStatus::kAbiMismatch:
      return "ABI_MISMATCH";
    case ProviderStatus::kUnsupportedCpu:
      return "UNSUPPORTED_CPU";
    case ProviderStatus::kNoDevice:
      return "NO_DEVICE";
    case ProviderStatus::kInitFailed:
      return "INIT_FAILED";
    case ProviderStatus::kInvalid:
      return "INVALID";
    case ProviderStatus::kCrashed:
      return "CRASHED";
  }
  return "UNKNOWN";
}

std::string LoadReportEntry::ToString() const {
  std::string s = (name.empty() ? "?" : name) + ": " + ProviderStatusName(status);
  if (!detail.empty()) s += ": " + detail;
  return s + " (" + path + ")";
}

// ------------------------------------------------------------------ LoadedProvider

LoadedProvider::~LoadedProvider() {
  if (api_ && api_->shutdown) api_->shutdown(api_->self);
  if (handle_) dlclose(handle_);
}

bool LoadedProvider::HasCapability(const std::string& capability) const {
  if (!api_ || api_->struct_size < offsetof(strata_provider_api, has_capability) + sizeof(void*) ||
      !api_->has_capability)
    return false;
  return api_->has_capability(api_->self, capability.c_str()) != 0;
}

Status LoadedProvider::ErrorFrom(const std::string& what, int32_t rc, const char* msg) const {
  std::string m = (msg && *msg) ? msg : "no message";
  if (rc == STRATA_PROVIDER_RESULT_OUT_OF_MEMORY)
    return MakeStatus(StatusCode::kOutOfMemory, "provider '", name_, "' ", what, ": out of memory: ", m);
  if (rc == STRATA_PROVIDER_RESULT_UNSUPPORTED)
    return MakeStatus(StatusCode::kUnsupported, "provider '", name_, "' ", what, ": unsupported: ", m);
  return MakeStatus(StatusCode::kProviderError, "provider '", name_, "' ", what, " failed (code ", rc, "): ", m);
}

// Loads one candidate: dlopen, probe, init, validation, devices. Updates *e; returns the
// provider when it ends OK.
struct LoaderAccess {
  static std::shared_ptr<LoadedProvider> Load(LoadReportEntry* e, const std::vector<LoadReportEntry>& earlier) {
    auto fail = [&](ProviderStatus st, std::string detail) -> std::shared_ptr<LoadedProvider> {
      e->status = st;
      e->detail = std::move(detail);
      return nullptr;
    };
    e->loaded = true;
    void* h = dlopen(e->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return fail(ProviderStatus::kInvalid, "dlopen failed: " + SafeStr(dlerror()));
    auto p = std::shared_ptr<LoadedProvider>(new LoadedProvider());
    p->handle_ = h;  // from here on, p's destructor closes the library
    p->path_ = e->path;
    auto probe = reinterpret_cast<strata_provider_probe_fn>(dlsym(h, STRATA_PROVIDER_PROBE_SYMBOL));
    auto init = reinterpret_cast<strata_provider_init_fn>(dlsym(h, STRATA_PROVIDER_INIT_SYMBOL));
    if (!probe) return fail(ProviderStatus::kInvalid, "does not export " STRATA_PROVIDER_PROBE_SYMBOL);
    if (!init) return fail(ProviderStatus::kInvalid, "does not export " STRATA_PROVIDER_INIT_SYMBOL);
    const strata_provider_probe_info* info = probe();
    if (!info) return fail(ProviderStatus::kInvalid, "strata_provider_probe returned NULL");
    if (info->struct_size < sizeof(uint32_t) * 2)
      return fail(ProviderStatus::kInvalid,
                  "probe info has a wrong struct size (" + std::to_string(info->struct_size) + ")");
    if (info->abi_version != STRATA_PROVIDER_ABI_VERSION)
      return fail(ProviderStatus::kAbiMismatch, "provider ABI " + std::to_string(info->abi_version) + ", host wants " +
                                                    std::to_string(STRATA_PROVIDER_ABI_VERSION));
    if (info->struct_size < offsetof(strata_provider_probe_info, min_driver) + sizeof(const char*))
      return fail(ProviderStatus::kInvalid, "probe info has a wrong struct size (" + std::to_string(info->struct_size) +
                                                " bytes, ABI 1 needs " +
                                                std::to_string(sizeof(strata_provider_probe_info)) + ")");
    std::string name = SafeStr(info->name);
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      return fail(ProviderStatus::kInvalid, "probe reports an invalid provider name '" + name + "'");
    e->name = name;
    e->variant = SafeStr(info->variant);
    e->version = SafeStr(info->version);
    for (const auto& prev : earlier)
      if (prev.name == name && prev.status == ProviderStatus::kOk)
        return fail(ProviderStatus::kInvalid,
                    "duplicate provider name '" + name + "': already provided by " + prev.path);
    std::string missing = MissingSoname(SplitList(SafeStr(info->needed_libraries)));
    if (!missing.empty())
      return fail(ProviderStatus::kMissingDependency, "needs " + missing + ", which is not found on this system");
    auto no_cpu = MissingCpuFeatures(SafeStr(info->cpu_features));
    if (!no_cpu.empty()) return fail(ProviderStatus::kUnsupportedCpu, "this CPU lacks " + Join(no_cpu, ", "));

    char buf[1024] = {0};
    strata_provider_error err{sizeof(strata_provider_error), sizeof(buf), buf};
    const strata_provider_api* api = nullptr;
    int32_t rc = init(HostApi(), &api, &err);
    if (rc != STRATA_PROVIDER_RESULT_OK) {
      std::string msg = buf[0] ? buf : "no message";
      if (rc == STRATA_PROVIDER_RESULT_NO_DEVICE) return fail(ProviderStatus::kNoDevice, msg);
      return fail(ProviderStatus::kInitFailed, "strata_provider_init returned " + std::to_string(rc) + ": " + msg);
    }
    if (!api) return fail(ProviderStatus::kInvalid, "strata_provider_init succeeded but returned no API table");
    constexpr size_t kV1Size = offsetof(strata_provider_api, has_capability) + sizeof(void*);
    if (api->struct_size < kV1Size || api->struct_size > (1u << 16))
      return fail(ProviderStatus::kInvalid, "provider API table has a wrong struct size (" +
                                                std::to_string(api->struct_size) + " bytes, ABI 1 needs " +
                                                std::to_string(kV1Size) + ")");
    if (api->abi_version != STRATA_PROVIDER_ABI_VERSION)
      return fail(ProviderStatus::kAbiMismatch, "API table has ABI " + std::to_string(api->abi_version) +
                                                    ", host wants " + std::to_string(STRATA_PROVIDER_ABI_VERSION));
    const std::pair<const char*, const void*> required[] = {
        {"device_count", reinterpret_cast<const void*>(api->device_count)},
        {"device_info", reinterpret_cast<const void*>(api->device_info)},
        {"supports_node", reinterpret_cast<const void*>(api->supports_node)},
        {"compile", reinterpret_cast<const void*>(api->compile)},
        {"release_partition", reinterpret_cast<const void*>(api->release_partition)},
        {"buffer_alloc", reinterpret_cast<const void*>(api->buffer_alloc)},
        {"buffer_free", reinterpret_cast<const void*>(api->buffer_free)},
        {"copy_to_device", reinterpret_cast<const void*>(api->copy_to_device)},
        {"copy_to_host", reinterpret_cast<const void*>(api->copy_to_host)},
        {"execute", reinterpret_cast<const void*>(api->execute)},
        {"synchronize", reinterpret_cast<const void*>(api->synchronize)},
        {"shutdown", reinterpret_cast<const void*>(api->shutdown)},
    };
    for (const auto& [fn, ptr] : required) {
      if (!ptr) {
        // The table is unusable; shutdown may be the null one, so do not call it.
        return fail(ProviderStatus::kInvalid,
                    std::string("provider API table has a null required function '") + fn + "'");
      }
    }
    p->api_ = api;
    p->name_ = name;
    uint32_t count = 0;
    buf[0] = '\0';
    rc = api->device_count(api->self, &count, &err);
    if (rc != STRATA_PROVIDER_RESULT_OK)
      return fail(ProviderStatus::kNoDevice, buf[0] ? buf : "device enumeration failed");
    if (count == 0) return fail(ProviderStatus::kNoDevice, buf[0] ? buf : "the provider reports no devices");
    for (uint32_t i = 0; i < count; ++i) {
      strata_device_info di;
      std::memset(&di, 0, sizeof(di));
      di.struct_size = sizeof(di);
      buf[0] = '\0';
      rc = api->device_info(api->self, i, &di, &err);
      if (rc != STRATA_PROVIDER_RESULT_OK)
        return fail(ProviderStatus::kInitFailed,
                    "device_info(" + std::to_string(i) + ") failed: " + (buf[0] ? buf : "no message"));
      p->devices_.push_back(
          {SafeStr(di.name), di.memory_bytes, di.compute_units, SafeStr(di.driver_version), SafeStr(di.api_version)});
    }
    e->devices = p->devices_;
    e->status = ProviderStatus::kOk;
    e->detail.clear();
    return p;
  }
};

// ------------------------------------------------------------------ ProviderManager

ProviderManager::ProviderManager() = default;
ProviderManager::~ProviderManager() = default;

std::string ProviderManager::PackageProviderDir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&ProviderManager::PackageProviderDir), &info) == 0 || !info.dli_fname) return "";
  std::string self = info.dli_fname;
  if (self.empty() || self.find('/') == std::string::npos) {
    // The main executable can come back as a bare name; /proc/self/exe is exact.
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return "";
    self.assign(buf, n);
  }
  std::string dir = DirName(RealPath(self));
  if (dir.empty()) return "";
  // <prefix>/bin/strata -> <prefix>/lib/strata/providers; <prefix>/lib[/<triplet>]/libstrata.so ->
  // <dir>/strata/providers
  if (BaseName(dir) == "bin") return DirName(dir) + "/lib/strata/providers";
  return dir + "/strata/providers";
}

Status ProviderManager::Discover(const std::vector<std::string>& extra_paths, bool load, bool isolate) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Candidate> cands;
  std::vector<LoadReportEntry> bad;
  for (const auto& p : extra_paths) AddPathEntry(p, "explicit", &cands, &bad);
  if (const char* env = std::getenv("STRATA_PROVIDER_PATH")) {
    for (const auto& p : SplitList(env, ':')) AddPathEntry(p, "STRATA_PROVIDER_PATH", &cands, &bad);
  }
  std::string pkg = PackageProviderDir();
  if (!pkg.empty() && IsDir(pkg))
    for (auto& f : ScanFolder(pkg)) cands.push_back({f, "package"});

  // Keep already-loaded providers (sessions may hold them) keyed by real path.
  std::vector<LoadReportEntry> old_report = std::move(report_);
  std::vector<std::shared_ptr<LoadedProvider>> old_loaded = std::move(loaded_);
  report_ = std::move(bad);
  loaded_.assign(report_.size(), nullptr);
  std::vector<std::string> seen;
  for (const auto& c : cands) {
    std::string real = RealPath(c.path);
    if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;  // same file reached twice
    seen.push_back(real);
    LoadReportEntry e;
    e.path = c.path;
    e.origin = c.origin;
    std::shared_ptr<LoadedProvider> kept;
    for (size_t i = 0; i < old_report.size(); ++i) {
      if (old_loaded[i] && RealPath(old_report[i].path) == real) {
        e = old_report[i];
        e.origin = c.origin;
        kept = old_loaded[i];
      }
    }
    if (!kept) {
      CheckStatically(&e);
      if (e.status == ProviderStatus::kOk) {
        for (const auto& prev : report_) {
          if (prev.name == e.name && prev.status == ProviderStatus::kOk) {
            e.status = ProviderStatus::kInvalid;
            e.detail = "duplicate provider name '" + e.name + "': already provided by " + prev.path;
            break;
          }
        }
      }
    }
    report_.push_back(std::move(e));
    loaded_.push_back(kept);
  }
  discovered_ = true;
  if (load) {
    for (size_t i = 0; i < report_.size(); ++i) {
      if (report_[i].status != ProviderStatus::kOk || loaded_[i]) continue;
      if (isolate) {
        LoadEntryIsolatedLocked(i);
      } else {
        RETURN_IF_ERROR(LoadEntryLocked(i));
      }
    }
  }
  return Status::Ok();
}

namespace {

std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

bool WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

void ProviderManager::LoadEntryIsolatedLocked(size_t i) {
  LoadReportEntry& e = report_[i];
  std::vector<LoadReportEntry> earlier(report_.begin(), report_.begin() + i);
  int fds[2];
  if (::pipe(fds) != 0) {
    e.status = ProviderStatus::kInitFailed;
    e.detail = std::string("cannot create a pipe for the isolated probe: ") + std::strerror(errno);
    return;
  }
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    e.status = ProviderStatus::kInitFailed;
    e.detail = std::string("cannot fork for the isolated probe: ") + std::strerror(errno);
    return;
  }
  if (pid == 0) {
    // Child: load, report one field per line, and leave without running exit handlers.
    ::close(fds[0]);
    // A crash must end the child by its signal so the parent can name it: a crash handler
    // inherited from the host (a crash reporter, or ASan's, which reports and exits 1)
    // would turn it into a plain exit status.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    LoadReportEntry c = e;
    auto p = LoaderAccess::Load(&c, earlier);
    std::string msg = std::to_string(static_cast<int>(c.status)) + "\n" + OneLine(c.detail) + "\n" + OneLine(c.name) +
                      "\n" + OneLine(c.variant) + "\n" + OneLine(c.version) + "\n" + std::to_string(c.devices.size()) +
                      "\n";
    for (const auto& d : c.devices)
      msg += OneLine(d.name) + "\n" + std::to_string(d.memory_bytes) + "\n" + std::to_string(d.compute_units) + "\n" +
             OneLine(d.driver_version) + "\n" + OneLine(d.api_version) + "\n";
    WriteAll(fds[1], msg);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out = ReadAll(fds[0]);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  e.loaded = true;
  if (WIFSIGNALED(wstatus)) {
    e.status = ProviderStatus::kCrashed;
    e.detail = "crashed with signal " + std::to_string(WTERMSIG(wstatus)) + " (" + strsignal(WTERMSIG(wstatus)) +
               ") while being loaded in an isolated process";
    return;
  }
  std::vector<std::string> lines = SplitLines(out);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || lines.size() < 6) {
    e.status = ProviderStatus::kCrashed;
    e.detail = "the isolated probe exited with status " +
               std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) +
               " before reporting (the provider called exit or abort?)";
    return;
  }
  e.status = static_cast<ProviderStatus>(std::atoi(lines[0].c_str()));
  e.detail = lines[1];
  e.name = lines[2];
  e.variant = lines[3];
  e.version = lines[4];
  const size_t ndev = static_cast<size_t>(std::strtoull(lines[5].c_str(), nullptr, 10));
  e.devices.clear();
  for (size_t d = 0; d < ndev && 6 + d * 5 + 4 < lines.size(); ++d) {
    const size_t b = 6 + d * 5;
    e.devices.push_back({lines[b], std::strtoull(lines[b + 1].c_str(), nullptr, 10),
                         static_cast<uint32_t>(std::strtoul(lines[b + 2].c_str(), nullptr, 10)), lines[b + 3],
                         lines[b + 4]});
  }
}

Status ProviderManager::LoadEntryLocked(size_t i) {
  std::vector<LoadReportEntry> earlier(report_.begin(), report_.begin() + i);
  loaded_[i] = LoaderAccess::Load(&report_[i], earlier);
  return Status::Ok();
}

bool ProviderManager::discovered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return discovered_;
}

std::vector<LoadReportEntry> ProviderManager::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_;
}

Result<std::shared_ptr<LoadedProvider>> ProviderManager::Acquire(const std::string& name) {
  if (!discovered()) RETURN_IF_ERROR(Discover({}));
  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  for (size_t i = 0; i < report_.size(); ++i) {
    if (report_[i].name != name) continue;
    if (report_[i].status == ProviderStatus::kOk && !loaded_[i]) RETURN_IF_ERROR(LoadEntryLocked(i));
    if (report_[i].status == ProviderStatus::kOk && loaded_[i]) return loaded_[i];
    lines += (lines.empty() ? "" : "; ") + report_[i].ToString();
  }
  if (lines.empty()) {
    std::vector<std::string> names;
    for (const auto& e : report_)
      if (e.status == ProviderStatus::kOk) names.push_back(e.name);
    return NotFound("no provider named '", name,
                    "' was found (usable: ", names.empty() ? std::string("none") : Join(names, ", "),
                    "); search order: explicit paths, STRATA_PROVIDER_PATH, ",
                    PackageProviderDir().empty() ? std::string("<package folder unknown>") : PackageProviderDir());
  }
  return MakeStatus(StatusCode::kProviderError, "provider '", name, "' cannot be used: ", lines);
}

std::vector<std::shared_ptr<LoadedProvider>> ProviderManager::AutoCandidates() {
  if (!discovered()) Discover({}).IgnoreError();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedProvider>> out;
  for (size_t i = 0; i < report_.size(); ++i) {
    if (report_[i].status == ProviderStatus::kOk && !loaded_[i]) LoadEntryLocked(i).IgnoreError();
    if (report_[i].status == ProviderStatus::kOk && loaded_[i]) out.push_back(loaded_[i]);
  }
  return out;
}

bool ProviderManager::ProviderHasCapability(const std::string& provider, const std::string& capability) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < report_.size(); ++i)
    if (report_[i].name == provider && report_[i].status == ProviderStatus::kOk && loaded_[i])
      return loaded_[i]->HasCapability(capability);
  return false;
}

}  // namespace strata::plugin
