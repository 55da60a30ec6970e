// Shared by the ONNX Runtime C-API bench tools (ort_bench, ort_profile): the API table and
// fail-fast error handling. These are benchmark drivers, so any ORT error ends the run.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace ort_tools {

inline const OrtApi* g_ort = nullptr;  // set from OrtGetApiBase() at the start of main
inline const char* g_tool = "ort";     // the tool's name, for error messages

[[noreturn]] inline void Die(const std::string& msg) {
  std::fprintf(stderr, "%s: error: %s\n", g_tool, msg.c_str());
  std::exit(1);
}

// Ends the run with `what` and ORT's message when `st` is an error.
inline void Check(OrtStatus* st, const char* what) {
  if (!st) return;
  std::string msg = std::string(what) + ": " + g_ort->GetErrorMessage(st);
  g_ort->ReleaseStatus(st);
  Die(msg);
}

// Sets g_ort to the API table of the version these headers declare; ends the run if the
// library does not provide it.
inline void InitApi() {
  g_ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
  if (!g_ort) Die("this libonnxruntime does not provide API version " + std::to_string(ORT_API_VERSION));
}

// The session options every tool uses, so a profiled graph is the timed one: `threads`
// intra-op threads, one inter-op thread, all graph optimizations. The caller releases them.
inline OrtSessionOptions* BenchSessionOptions(int threads) {
  OrtSessionOptions* so = nullptr;
  Check(g_ort->CreateSessionOptions(&so), "CreateSessionOptions");
  Check(g_ort->SetIntraOpNumThreads(so, threads), "SetIntraOpNumThreads");
  Check(g_ort->SetInterOpNumThreads(so, 1), "SetInterOpNumThreads");
  Check(g_ort->SetSessionGraphOptimizationLevel(so, ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
  return so;
}

// The session's output names, in order.
inline std::vector<std::string> OutputNames(OrtSession* session, OrtAllocator* alloc) {
  size_t n = 0;
  Check(g_ort->SessionGetOutputCount(session, &n), "SessionGetOutputCount");
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    char* name = nullptr;
    Check(g_ort->SessionGetOutputName(session, i, alloc, &name), "SessionGetOutputName");
    names.push_back(name);
    Check(g_ort->AllocatorFree(alloc, name), "AllocatorFree");
  }
  return names;
}

}  // namespace ort_tools
