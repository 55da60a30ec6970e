// Shared by the ONNX Runtime C-API bench tools (ort_bench, ort_profile): the API table and
// fail-fast error handling. These are benchmark drivers, so any ORT error ends the run.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

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

}  // namespace ort_tools
