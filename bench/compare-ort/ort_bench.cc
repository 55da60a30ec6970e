// ort_bench: times ONNX Runtime through its C API on the inputs `strata bench
// --save-inputs DIR` wrote, and prints the same JSON statistics as `strata bench --json`.
//
//   ort_bench MODEL INPUT_DIR [--threads N] [--warmup W] [--iters K] [--creations C]
//             [--save-outputs DIR] [--save-optimized FILE]
//
// --save-outputs writes each float32 output of one more run as DIR/<name>.npy (the names
// `strata run -o DIR` uses), for parity checks (bench/compare-ort/nbits_parity.py).
// --save-optimized writes the model as ORT's graph optimizer left it (level "extended"),
// with its contrib ops, for bench/compare-ort/contrib_models.py.
// Built by run.sh against the ORT headers from npm; not part of the CMake build.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"
#include "ort_check.h"

namespace {

using ort_tools::Check;
using ort_tools::Die;
using ort_tools::g_ort;
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void OnSigint(int) { g_interrupted = 1; }

struct Npy {
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

// Minimal reader for the C-order little-endian .npy files strata writes.
Npy ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Die("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) Die(path + ": not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    hstart = 10;
  } else {
    if (bytes.size() < 12) Die(path + ": truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    hstart = 12;
  }
  if (hstart + hlen > bytes.size()) Die(path + ": truncated header");
  std::string h = bytes.substr(hstart, hlen);
  auto field = [&](const std::string& key) {
    size_t p = h.find("'" + key + "'");
    if (p == std::string::npos) Die(path + ": header lacks " + key);
    return h.substr(h.find(':', p) + 1);
  };
  std::string descr = field("descr");
  descr = descr.substr(descr.find('\'') + 1);
  descr = descr.substr(0, descr.find('\''));
  if (field("fortran_order").find("True") < field("fortran_order").find(',')) Die(path + ": Fortran order");
  struct {
    const char* d;
    ONNXTensorElementDataType t;
    size_t size;
  } static const kTypes[] = {
      {"<f4", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 4},   {"<f8", ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, 8},
      {"<f2", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, 2}, {"<i8", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 8},
      {"<i4", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, 4},   {"|i1", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, 1},
      {"|u1", ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, 1},   {"|b1", ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, 1},
  };
  size_t elem = 0;
  Npy out;
  for (const auto& t : kTypes)
    if (descr == t.d) out.type = t.t, elem = t.size;
  if (!elem) Die(path + ": unsupported dtype " + descr);
  std::string sh = field("shape");
  sh = sh.substr(sh.find('(') + 1, sh.find(')') - sh.find('(') - 1);
  std::stringstream ss(sh);
  std::string tok;
  size_t n = 1;
  while (std::getline(ss, tok, ',')) {
    if (tok.find_first_of("0123456789") == std::string::npos) continue;
    out.shape.push_back(std::stoll(tok));
    n *= static_cast<size_t>(out.shape.back());
  }
  size_t data_start = hstart + hlen;
  if (bytes.size() - data_start < n * elem) Die(path + ": truncated data");
  out.data.assign(bytes.begin() + data_start, bytes.begin() + data_start + n * elem);
  return out;
}

// Writes a float32 tensor as a C-order .npy (version 1.0).
void SaveNpy(const std::string& path, OrtValue* v) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  Check(g_ort->GetTensorTypeAndShape(v, &info), "GetTensorTypeAndShape");
  ONNXTensorElementDataType type;
  Check(g_ort->GetTensorElementType(info, &type), "GetTensorElementType");
  size_t rank = 0, count = 0;
  Check(g_ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
  std::vector<int64_t> dims(rank);
  Check(g_ort->GetDimensions(info, dims.data(), rank), "GetDimensions");
  Check(g_ort->GetTensorShapeElementCount(info, &count), "GetTensorShapeElementCount");
  g_ort->ReleaseTensorTypeAndShapeInfo(info);
  if (type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) Die(path + ": only float32 outputs can be saved");
  void* data = nullptr;
  Check(g_ort->GetTensorMutableData(v, &data), "GetTensorMutableData");
  std::string shape = "(";
  for (size_t i = 0; i < rank; ++i) shape += std::to_string(dims[i]) + (rank == 1 || i + 1 < rank ? "," : "");
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) Die("cannot write " + path);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                static_cast<unsigned char>(header.size() >> 8)};
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(len), 2);
  f << header;
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) Die("cannot write " + path);
}

double Percentile(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  double pos = q / 100.0 * (s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

std::string StatsJson(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0, var = 0;
  for (double x : v) sum += x;
  double mean = v.empty() ? 0 : sum / v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"count\": %zu, \"median\": %.6f, \"p10\": %.6f, \"p90\": %.6f, \"p99\": %.6f, \"mean\": %.6f, "
                "\"min\": %.6f, \"max\": %.6f, \"stddev\": %.6f}",
                v.size(), Percentile(v, 50), Percentile(v, 10), Percentile(v, 90), Percentile(v, 99), mean,
                v.empty() ? 0 : v.front(), v.empty() ? 0 : v.back(),
                v.size() > 1 ? std::sqrt(var / (v.size() - 1)) : 0);
  return buf;
}

std::string List(const std::vector<double>& v) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.6f", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

long VmHwmKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  ort_tools::g_tool = "ort_bench";
  if (argc < 3)
    Die("usage: ort_bench MODEL INPUT_DIR [--threads N] [--warmup W] [--warmup-ms T] [--iters K] [--creations C] "
        "[--save-outputs DIR] [--save-optimized FILE]");
  std::string model = argv[1], dir = argv[2], save_dir, save_optimized;
  int threads = 0, warmup = 5, iters = 50, creations = 3;
  double warmup_ms = 0;  // as strata bench --warmup-ms: warm up for W runs and T ms
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Die("missing value for " + a);
    if (a == "--save-outputs") {
      save_dir = argv[++i];
      continue;
    }
    if (a == "--save-optimized") {
      save_optimized = argv[++i];
      continue;
    }
    if (a == "--warmup-ms") {
      warmup_ms = std::atof(argv[++i]);
      continue;
    }
    int v = std::atoi(argv[++i]);
    if (a == "--threads")
      threads = v;
    else if (a == "--warmup")
      warmup = v;
    else if (a == "--iters")
      iters = v;
    else if (a == "--creations")
      creations = std::max(1, v);
    else
      Die("unknown option " + a);
  }
  std::signal(SIGINT, OnSigint);
  ort_tools::InitApi();

  // Inputs: DIR/inputs.txt lists "name<TAB>file" in the model's input order.
  std::vector<std::string> names;
  std::vector<Npy> arrays;
  {
    std::ifstream idx(dir + "/inputs.txt");
    if (!idx) Die("cannot open " + dir + "/inputs.txt (write it with strata bench --save-inputs)");
    std::string line;
    while (std::getline(idx, line)) {
      size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      names.push_back(line.substr(0, tab));
      arrays.push_back(ReadNpy(dir + "/" + line.substr(tab + 1)));
    }
  }

  OrtEnv* env = nullptr;
  Check(g_ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_bench", &env), "CreateEnv");
  OrtSessionOptions* so = ort_tools::BenchSessionOptions(threads);
  if (!save_optimized.empty()) {
    // Level "extended": ORT's transformer fusions (Attention, SkipLayerNormalization, ...)
    // without "all"'s layout ops for this CPU, so the file is a portable ORT-optimized model.
    Check(g_ort->SetSessionGraphOptimizationLevel(so, ORT_ENABLE_EXTENDED), "SetSessionGraphOptimizationLevel");
    Check(g_ort->SetOptimizedModelFilePath(so, save_optimized.c_str()), "SetOptimizedModelFilePath");
  }

  std::vector<double> create_ms;
  OrtSession* session = nullptr;
  for (int c = 0; c < creations; ++c) {
    if (session) g_ort->ReleaseSession(session);
    session = nullptr;
    auto t0 = Clock::now();
    Check(g_ort->CreateSession(env, model.c_str(), so, &session), "CreateSession");
    create_ms.push_back(MsSince(t0));
  }

  OrtMemoryInfo* mem = nullptr;
  Check(g_ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mem), "CreateCpuMemoryInfo");
  std::vector<OrtValue*> inputs;
  std::vector<const char*> in_names;
  for (size_t i = 0; i < arrays.size(); ++i) {
    OrtValue* v = nullptr;
    Check(g_ort->CreateTensorWithDataAsOrtValue(mem, arrays[i].data.data(), arrays[i].data.size(),
                                                arrays[i].shape.data(), arrays[i].shape.size(), arrays[i].type, &v),
          "CreateTensorWithDataAsOrtValue");
    inputs.push_back(v);
    in_names.push_back(names[i].c_str());
  }
  OrtAllocator* alloc = nullptr;
  Check(g_ort->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions");
  const std::vector<std::string> out_name_store = ort_tools::OutputNames(session, alloc);
  const size_t nout = out_name_store.size();
  std::vector<const char*> out_names;
  for (const auto& s : out_name_store) out_names.push_back(s.c_str());

  auto run_once = [&](bool save = false) {
    std::vector<OrtValue*> outs(nout, nullptr);
    Check(g_ort->Run(session, nullptr, in_names.data(), inputs.data(), inputs.size(), out_names.data(), nout,
                     outs.data()),
          "Run");
    for (size_t i = 0; save && i < nout; ++i) SaveNpy(save_dir + "/" + out_name_store[i] + ".npy", outs[i]);
    for (OrtValue* o : outs) g_ort->ReleaseValue(o);
  };
  if (!save_dir.empty()) run_once(true);
  int64_t warmup_runs = 0;
  const auto w0 = Clock::now();
  for (; (warmup_runs < warmup || MsSince(w0) < warmup_ms) && !g_interrupted; ++warmup_runs) run_once();
  std::vector<double> samples;
  for (int i = 0; i < iters && !g_interrupted; ++i) {
    auto t0 = Clock::now();
    run_once();
    samples.push_back(MsSince(t0));
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::vector<double> sorted_create = create_ms;
  std::sort(sorted_create.begin(), sorted_create.end());
  std::printf(
      "{\n  \"runtime\": \"onnxruntime\",\n  \"api\": \"C API version %d\",\n  \"model\": \"%s\",\n"
      "  \"threads\": %d,\n  \"warmup\": %d,\n  \"warmup_ms\": %.1f,\n  \"warmup_runs\": %lld,\n  \"iters\": %d,\n  "
      "\"interrupted\": %s,\n  \"latency_ms\": %s,\n"
      "  \"samples_ms\": %s,\n  \"session_create_ms\": {\"median\": %.6f, \"samples\": %s},\n"
      "  \"peak_rss_kib\": {\"ru_maxrss\": %ld, \"vm_hwm\": %ld}\n}\n",
      ORT_API_VERSION, model.c_str(), threads, warmup, warmup_ms, static_cast<long long>(warmup_runs), iters,
      g_interrupted ? "true" : "false", StatsJson(samples).c_str(), List(samples).c_str(),
      Percentile(sorted_create, 50), List(create_ms).c_str(), ru.ru_maxrss, VmHwmKib());

  for (OrtValue* v : inputs) g_ort->ReleaseValue(v);
  g_ort->ReleaseMemoryInfo(mem);
  g_ort->ReleaseSession(session);
  g_ort->ReleaseSessionOptions(so);
  g_ort->ReleaseEnv(env);
  return g_interrupted ? 130 : 0;
}
