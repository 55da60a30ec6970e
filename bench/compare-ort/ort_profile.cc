// ort_profile: runs a model on ONNX Runtime's CPU provider with ORT's own profiler on
// (OrtApi::EnableProfiling) and prints the path of the JSON trace it wrote. The trace holds
// one "Node" event per kernel call ("<node name>_kernel_time", duration in us), which
// layer_compare.py sets beside `strata bench --profile --json`'s per-node means.
//
//   ort_profile MODEL PREFIX [--threads N] [--runs R]
//
// Inputs are random floats (integer inputs: zeros), with dynamic dimensions set to 1: the
// per-layer cost of a dense model does not depend on the values. Built by layer_compare.py
// against the ORT headers from npm; not part of the CMake build.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"
#include "ort_check.h"

namespace {

using ort_tools::Check;
using ort_tools::Die;
using ort_tools::g_ort;

size_t ElementSize(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ort_tools::g_tool = "ort_profile";
  if (argc < 3) Die("usage: ort_profile MODEL PREFIX [--threads N] [--runs R]");
  const std::string model = argv[1], prefix = argv[2];
  int threads = 1, runs = 50;
  for (int i = 3; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Die("missing value for " + a);
    const int v = std::atoi(argv[i + 1]);
    if (v < 1) Die(a + " needs a positive number, got '" + argv[i + 1] + "'");
    if (a == "--threads")
      threads = v;
    else if (a == "--runs")
      runs = v;
    else
      Die("unknown option " + a);
  }
  ort_tools::InitApi();

  OrtEnv* env = nullptr;
  Check(g_ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_profile", &env), "CreateEnv");
  OrtSessionOptions* so = ort_tools::BenchSessionOptions(threads);
  Check(g_ort->EnableProfiling(so, prefix.c_str()), "EnableProfiling");
  OrtSession* session = nullptr;
  Check(g_ort->CreateSession(env, model.c_str(), so, &session), "CreateSession");

  OrtAllocator* alloc = nullptr;
  Check(g_ort->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions");
  OrtMemoryInfo* mem = nullptr;
  Check(g_ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mem), "CreateCpuMemoryInfo");
  size_t nin = 0, nout = 0;
  Check(g_ort->SessionGetInputCount(session, &nin), "SessionGetInputCount");
  Check(g_ort->SessionGetOutputCount(session, &nout), "SessionGetOutputCount");
  std::vector<std::string> in_store, out_store;
  std::vector<std::vector<char>> buffers(nin);
  std::vector<OrtValue*> inputs;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < nin; ++i) {
    char* name = nullptr;
    Check(g_ort->SessionGetInputName(session, i, alloc, &name), "SessionGetInputName");
    in_store.push_back(name);
    Check(g_ort->AllocatorFree(alloc, name), "AllocatorFree");
    OrtTypeInfo* ti = nullptr;
    Check(g_ort->SessionGetInputTypeInfo(session, i, &ti), "SessionGetInputTypeInfo");
    const OrtTensorTypeAndShapeInfo* info = nullptr;
    Check(g_ort->CastTypeInfoToTensorInfo(ti, &info), "CastTypeInfoToTensorInfo");
    if (!info) Die("input '" + in_store.back() + "' is not a tensor");
    ONNXTensorElementDataType type;
    Check(g_ort->GetTensorElementType(info, &type), "GetTensorElementType");
    size_t rank = 0;
    Check(g_ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
    std::vector<int64_t> dims(rank);
    Check(g_ort->GetDimensions(info, dims.data(), rank), "GetDimensions");
    g_ort->ReleaseTypeInfo(ti);
    const size_t elem = ElementSize(type);
    if (!elem) Die("input '" + in_store.back() + "' has an element type this tool does not fill");
    size_t count = 1;
    for (int64_t& d : dims) count *= static_cast<size_t>(d = d > 0 ? d : 1);
    buffers[i].assign(count * elem, 0);
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
      for (size_t e = 0; e < count; ++e) reinterpret_cast<float*>(buffers[i].data())[e] = dist(rng);
    OrtValue* v = nullptr;
    Check(g_ort->CreateTensorWithDataAsOrtValue(mem, buffers[i].data(), buffers[i].size(), dims.data(), rank, type, &v),
          "CreateTensorWithDataAsOrtValue");
    inputs.push_back(v);
  }
  out_store = ort_tools::OutputNames(session, alloc);
  std::vector<const char*> in_names, out_names;
  for (const auto& s : in_store) in_names.push_back(s.c_str());
  for (const auto& s : out_store) out_names.push_back(s.c_str());

  for (int r = 0; r < runs; ++r) {
    std::vector<OrtValue*> outs(nout, nullptr);
    Check(g_ort->Run(session, nullptr, in_names.data(), inputs.data(), nin, out_names.data(), nout, outs.data()),
          "Run");
    for (OrtValue* o : outs) g_ort->ReleaseValue(o);
  }
  char* path = nullptr;
  Check(g_ort->SessionEndProfiling(session, alloc, &path), "SessionEndProfiling");
  std::printf("%s\n", path);
  Check(g_ort->AllocatorFree(alloc, path), "AllocatorFree");

  for (OrtValue* v : inputs) g_ort->ReleaseValue(v);
  g_ort->ReleaseMemoryInfo(mem);
  g_ort->ReleaseSession(session);
  g_ort->ReleaseSessionOptions(so);
  g_ort->ReleaseEnv(env);
  return 0;
}
