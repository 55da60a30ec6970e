#include "core/load_trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata {

bool LoadTraceEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("STRATA_TRACE_LOAD");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

double CurrentRssMiB() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long kib = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return static_cast<double>(kib) / 1024.0;
}

void LoadTrace::Phase(const char* name) {
  if (!on_) return;
  auto now = Clock::now();
  double ms = std::chrono::duration<double, std::milli>(now - last_).count();
  last_ = now;
  std::fprintf(stderr, "strata load [%s] %-18s %9.1f ms  (rss %.0f MiB)\n", scope_, name, ms, CurrentRssMiB());
}

void LoadTrace::Total() {
  if (!on_) return;
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0_).count();
  std::fprintf(stderr, "strata load [%s] %-18s %9.1f ms  (rss %.0f MiB)\n", scope_, "total", ms, CurrentRssMiB());
}

}  // namespace strata
