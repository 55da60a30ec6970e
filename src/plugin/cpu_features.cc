#include "plugin/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

namespace strata::plugin {
namespace {

struct CpuState {
  uint32_t l1_ecx = 0, l1_edx = 0;
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_edx = 0, l7_1_eax = 0;
  uint64_t xcr0 = 0;
};

const CpuState& State() {
  static const CpuState s = [] {
    CpuState c;
    unsigned a, b, cx, d;
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
      c.l1_ecx = cx;
      c.l1_edx = d;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
      c.l7_ebx = b;
      c.l7_ecx = cx;
      c.l7_edx = d;
    }
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.l7_1_eax = a;
    // XGETBV is only legal when the OS enabled XSAVE (OSXSAVE, CPUID.1:ECX bit 27).
    if (c.l1_ecx & (1u << 27)) {
      uint32_t lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      c.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    }
    return c;
  }();
  return s;
}

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

}  // namespace

bool IsKnownCpuFeature(const std::string& f) {
  static const char* kKnown[] = {"sse4_1",   "sse4_2",   "avx",         "avx2",        "fma",
                                 "f16c",     "bmi2",     "avx512f",     "avx512bw",    "avx512cd",
                                 "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                 "avx_vnni", "amx_tile", "amx_bf16",    "amx_int8"};
  for (const char* k : kKnown)
    if (f == k) return true;
  return false;
}

namespace {

// STRATA_CPU_HIDE lets a test (or a user reproducing a report) see what a provider check
// does on a CPU without some feature, on any machine. The kernels' own CPU checks ignore it.
bool HiddenByEnv(const std::string& f) {
  const char* hide = std::getenv("STRATA_CPU_HIDE");
  if (!hide || !*hide) return false;
  for (const std::string& h : SplitList(hide))
    if (h == f) return true;
  return false;
}

}  // namespace

bool CpuFeatureUsable(const std::string& f) { return !HiddenByEnv(f) && CpuSupports(f); }

bool CpuSupports(const std::string& f) {
  const CpuState& s = State();
  // The OS must save the wider registers, or the instructions fault.
  const bool os_avx = (s.xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (s.xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (s.xcr0 & 0x60000) == 0x60000;
  if (f == "sse4_1") return Bit(s.l1_ecx, 19);
  if (f == "sse4_2") return Bit(s.l1_ecx, 20);
  if (f == "avx") return os_avx && Bit(s.l1_ecx, 28);
  if (f == "fma") return os_avx && Bit(s.l1_ecx, 12);
  if (f == "f16c") return os_avx && Bit(s.l1_ecx, 29);
  if (f == "avx2") return os_avx && Bit(s.l7_ebx, 5);
  if (f == "bmi2") return Bit(s.l7_ebx, 8);
  if (f == "avx512f") return os_avx512 && Bit(s.l7_ebx, 16);
  if (f == "avx512dq") return os_avx512 && Bit(s.l7_ebx, 17);
  if (f == "avx512cd") return os_avx512 && Bit(s.l7_ebx, 28);
  if (f == "avx512bw") return os_avx512 && Bit(s.l7_ebx, 30);
  if (f == "avx512vl") return os_avx512 && Bit(s.l7_ebx, 31);
  if (f == "avx512_vnni") return os_avx512 && Bit(s.l7_ecx, 11);
  if (f == "avx512_fp16") return os_avx512 && Bit(s.l7_edx, 23);
  if (f == "avx512_bf16") return os_avx512 && Bit(s.l7_1_eax, 5);
  if (f == "avx_vnni") return os_avx && Bit(s.l7_1_eax, 4);
  if (f == "amx_bf16") return os_amx && Bit(s.l7_edx, 22);
  if (f == "amx_tile") return os_amx && Bit(s.l7_edx, 24);
  if (f == "amx_int8") return os_amx && Bit(s.l7_edx, 25);
  return false;
}

std::vector<std::string> SplitList(const std::string& list, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(sep, start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> MissingCpuFeatures(const std::string& required) {
  std::vector<std::string> missing;
  for (const std::string& f : SplitList(required))
    if (!CpuFeatureUsable(f)) missing.push_back(f);
  return missing;
}

}  // namespace strata::plugin
