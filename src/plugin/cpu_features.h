// Host CPU feature checks for provider requirements ("avx2,fma").
#pragma once

#include <string>
#include <vector>

namespace strata::plugin {

// True if the CPU and the OS (XSAVE state) support `feature`. Known names: sse4_1,
// sse4_2, avx, avx2, fma, f16c, bmi2, avx512f, avx512bw, avx512cd, avx512dq, avx512vl,
// avx512_vnni, avx512_bf16, avx512_fp16, avx_vnni, amx_tile, amx_bf16, amx_int8.
// Unknown names answer false (a requirement we cannot verify is not met).
bool CpuSupports(const std::string& feature);
// CpuSupports, except that features named in the STRATA_CPU_HIDE environment variable
// (comma-separated) answer false: what provider requirement checks and the cpu.*
// capability queries use, so a test can see an "unsupported CPU" report on any machine.
bool CpuFeatureUsable(const std::string& feature);
bool IsKnownCpuFeature(const std::string& feature);

// Splits a comma-separated list, trimming blanks and dropping empty items.
std::vector<std::string> SplitList(const std::string& list, char sep = ',');

// The features of `required` (comma-separated) that this machine lacks (CpuFeatureUsable).
std::vector<std::string> MissingCpuFeatures(const std::string& required);

}  // namespace strata::plugin
