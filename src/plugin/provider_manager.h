// Provider discovery, the load report, and loaded providers.
//
// Discovery order (first occurrence of a provider name wins; later ones are reported
// INVALID as duplicates):
//   1. explicit paths (session options / --provider-path): files or folders;
//   2. STRATA_PROVIDER_PATH: colon-separated absolute folders or files;
//   3. the package folder next to the core binary (see PackageProviderDir).
// Relative paths are never searched (they would depend on the current directory).
//
// Listing (Discover with load=false) never runs provider code: it reads the ELF dynamic
// section and symbol table (plugin/elf_info.h), the optional sidecar manifest
// libstrata-provider-<name>.json, and checks dependencies and CPU features. Loading
// (load=true, or Acquire) dlopens the library, calls strata_provider_probe and
// strata_provider_init, validates the vtable and enumerates devices.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "strata/provider.h"

namespace strata::plugin {

// Values match strata_provider_status in include/strata/strata.h.
enum class ProviderStatus : int {
  kOk = 0,
  kNotFound = 1,
  kMissingDependency = 2,
  kAbiMismatch = 3,
  kUnsupportedCpu = 4,
  kNoDevice = 5,
  kInitFailed = 6,
  kInvalid = 7,
  kCrashed = 8,
};
// "OK", "MISSING_DEPENDENCY", ...; "UNKNOWN" for values outside the enum.
const char* ProviderStatusName(ProviderStatus s);

struct DeviceProps {
  std::string name;
  uint64_t memory_bytes = 0;
  uint32_t compute_units = 0;
  std::string driver_version;
  std::string api_version;
};

struct LoadReportEntry {
  std::string name;    // from the probe, else the manifest, else the file name
  std::string path;    // as found (absolute)
  std::string origin;  // "explicit", "STRATA_PROVIDER_PATH" or "package"
  ProviderStatus status = ProviderStatus::kOk;
  std::string detail;  // one line: the missing soname, the ABI versions, ...; "" when OK
  std::string variant;
  std::string version;
  bool loaded = false;  // probe + init ran (devices below are then known)
  std::vector<DeviceProps> devices;
  // "ref: OK (path)" / "cuda: MISSING_DEPENDENCY: needs libcudart.so.13 (path)"
  std::string ToString() const;
};

class LoadedProvider;

class ProviderManager {
 public:
  ProviderManager();
  ~ProviderManager();
  ProviderManager(const ProviderManager&) = delete;
  ProviderManager& operator=(const ProviderManager&) = delete;

  // Rebuilds the load report. With load=true every candidate that passes the static
  // checks is also loaded (probe, init, device enumeration). Providers already loaded
  // stay loaded. Only fails for internal errors; per-candidate problems go to the report.
  //
  // isolate (with load): each candidate is loaded in a forked child process that reports
  // its status and devices back; a provider that crashes there is reported CRASHED and is
  // never loaded into this process. The parent keeps no provider loaded (Acquire loads
  // in-process later, and only candidates that ended OK).
  Status Discover(const std::vector<std::string>& extra_paths, bool load = false, bool isolate = false);
  bool discovered() const;
  // A copy, so callers may keep it while another thread rediscovers.
  std::vector<LoadReportEntry> Report() const;

  // The usable provider called `name`, loading it on first use (Discover({}) runs first
  // if it never did). Errors: kNotFound when no candidate has that name, kProviderError
  // with the report line when it cannot be used.
  Result<std::shared_ptr<LoadedProvider>> Acquire(const std::string& name);
  // For "auto": every candidate that loads OK and has a device, in report order.
  std::vector<std::shared_ptr<LoadedProvider>> AutoCandidates();
  // A loaded provider's capability ("weight_prepack"); false when not loaded OK.
  bool ProviderHasCapability(const std::string& provider, const std::string& capability);

  // <prefix>/lib/strata/providers for the object containing the core (found with
  // dladdr): a binary in <prefix>/bin or a library in <prefix>/lib. "" if unknown.
  static std::string PackageProviderDir();

 private:
  Status LoadEntryLocked(size_t index);
  void LoadEntryIsolatedLocked(size_t index);
  mutable std::mutex mu_;
  bool discovered_ = false;
  std::vector<LoadReportEntry> report_;
  std::vector<std::shared_ptr<LoadedProvider>> loaded_;  // parallel to report_ (null if not loaded)
};

// A provider that passed probe + init. Holds the dlopen handle; the library stays mapped
// while any shared_ptr to it (session kernels included) is alive.
class LoadedProvider {
 public:
  ~LoadedProvider();  // shutdown, then dlclose
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::vector<DeviceProps>& devices() const { return devices_; }
  const strata_provider_api& api() const { return *api_; }
  bool HasCapability(const std::string& capability) const;

  // Calls an ABI function with a fresh error buffer and turns a failure into a
  // kProviderError Status "<provider> <what>: <message>".
  template <typename F>
  Status Call(const std::string& what, F&& fn) const {
    char buf[1024] = {0};
    strata_provider_error err{sizeof(strata_provider_error), sizeof(buf), buf};
    int32_t rc = fn(&err);
    if (rc == STRATA_PROVIDER_RESULT_OK) return Status::Ok();
    return ErrorFrom(what, rc, buf);
  }

 private:
  friend class ProviderManager;
  friend struct LoaderAccess;
  Status ErrorFrom(const std::string& what, int32_t rc, const char* msg) const;
  std::string name_;
  std::string path_;
  void* handle_ = nullptr;
  const strata_provider_api* api_ = nullptr;
  std::vector<DeviceProps> devices_;
};

// The host services table handed to strata_provider_init (logging to stderr at
// WARNING and above, aligned heap allocation).
const strata_host_api* HostApi();

}  // namespace strata::plugin
