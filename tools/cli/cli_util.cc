#include "cli/cli_util.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/profiler.h"

namespace strata::cli {

Result<std::vector<std::string>> ParseDeviceList(const std::string& device) {
  std::vector<std::string> out;
  std::stringstream ss(device);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    for (char c : item)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
        return InvalidArgument("--device: invalid provider name '", item, "'");
    out.push_back(item);
  }
  if (out.empty()) return InvalidArgument("--device is empty");
  return out;
}

Status ApplyPrecisionFlags(const std::string& precision, const std::vector<std::string>& provider_options,
                           SessionOptions* so) {
  for (const std::string& kv : provider_options) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return InvalidArgument("--provider-option '", kv, "' must be KEY=VALUE");
    std::string provider, key;
    RETURN_IF_ERROR(SplitProviderOption(kv.substr(0, eq), &provider, &key));
    so->provider_options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (precision == "fp32") return Status::Ok();
  if (precision == "bf16") {
    so->kernel.bf16_fast_math = true;
    return Status::Ok();
  }
  if (precision == "fp16") {
    bool cuda = false;
    for (const auto& p : so->providers) cuda = cuda || p == "cuda" || p == "auto";
    if (!cuda)
      return InvalidArgument("--precision fp16 is CUDA's tensor-core mode and needs --device cuda (or auto); ",
                             "on the CPU use fp32 or bf16");
    so->provider_options.emplace_back("cuda.precision", "fp16");
    return Status::Ok();
  }
  return InvalidArgument("--precision must be fp32, bf16 or fp16, got '", precision, "'");
}

void AddSessionFlags(CLI::App* sub, SessionFlags* f) {
  sub->add_option("-t,--threads", f->threads, "Intra-op threads (0 = all cores)")->check(CLI::Range(0, 1024));
  sub->add_option("-d,--device", f->device, "cpu (default), auto, or a provider name (e.g. cuda, vulkan)");
  sub->add_option("--provider-path", f->provider_paths, "Extra provider library or folder (repeatable)");
  sub->add_option("--precision", f->precision, "fp32 (default), bf16 (CPU fast math) or fp16 (CUDA tensor cores)");
  sub->add_option("--provider-option", f->provider_options,
                  "Provider option PROVIDER.KEY=VALUE, e.g. cuda.precision=fp16 (repeatable)");
  sub->add_option("--opt-level", f->opt_level, "Graph optimization level: 0, 1, 2 or 99")->check(CLI::Range(0, 99));
}

Result<SessionOptions> MakeSessionOptions(const SessionFlags& f) {
  SessionOptions so;
  so.threads = f.threads;
  so.optimization_level = f.opt_level;
  so.provider_paths = f.provider_paths;
  ASSIGN_OR_RETURN(so.providers, ParseDeviceList(f.device));
  RETURN_IF_ERROR(ApplyPrecisionFlags(f.precision, f.provider_options, &so));
  return so;
}

// Every numeric type gets data (FillRandom: the same values as before for float, int32 and
// int64, which were the only types filled; uint8 images, int8, float16, double and bool
// inputs were fed all zeros). Strings stay empty.
Result<Tensor> RandomInputTensor(const ValueInfo& vi, uint32_t seed) {
  if (vi.type.kind != TypeInfo::Kind::kTensor && vi.type.kind != TypeInfo::Kind::kUnknown)
    return InvalidArgument("input '", vi.name, "' is ", vi.type.ToString(),
                           "; random inputs are tensors only (feed it through the C API or Python)");
  Shape shape;
  for (const Dim& d : vi.type.dims) shape.push_back(d.known() ? d.value : 1);
  ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(vi.type.elem_type, shape));
  if (t.dtype() == DataType::kString) return t;
  Status st = FillRandom(&t, seed);
  if (!st.ok()) return MakeStatus(st.code(), "input '", vi.name, "': ", st.message());
  return t;
}

bool IsClassifierOutput(const Tensor& t) {
  if (t.dtype() != DataType::kFloat) return false;
  if (t.rank() == 2) return t.dim(1) >= 2 && t.dim(1) <= 100000 && t.dim(0) >= 1;
  return false;
}

std::vector<std::vector<std::pair<int64_t, float>>> TopK(const Tensor& t, int k) {
  std::vector<std::vector<std::pair<int64_t, float>>> rows;
  int64_t n = t.dim(0), c = t.dim(1);
  const float* p = t.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    std::vector<std::pair<int64_t, float>> row;
    for (int64_t j = 0; j < c; ++j) row.emplace_back(j, p[r * c + j]);
    int kk = static_cast<int>(std::min<int64_t>(k, c));
    std::partial_sort(row.begin(), row.begin() + kk, row.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    row.resize(kk);
    rows.push_back(row);
  }
  return rows;
}

int64_t LabelAt(const Tensor& labels, size_t i) {
  int64_t v = -1;
  DispatchNumeric(labels.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) v = static_cast<int64_t>(labels.data<T>()[i]);
  });
  return v;
}

namespace {

// Element i of t as text: a quoted string, true/false, an integer or "%.6g".
void FormatElement(std::ostringstream& os, const Tensor& t, int64_t i) {
  if (t.dtype() == DataType::kString) {
    os << '"' << t.data<std::string>()[i] << '"';
    return;
  }
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      os << (t.data<bool>()[i] ? "true" : "false");
    } else if constexpr (std::is_integral_v<T>) {
      os << static_cast<int64_t>(t.data<T>()[i]);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.6g", static_cast<double>(static_cast<float>(t.data<T>()[i])));
      os << buf;
    }
  });
}

}  // namespace

std::string JoinMapEntries(const Value& map, int n) {
  std::ostringstream os;
  const Tensor& k = map.map_keys();
  const int64_t count = std::min<int64_t>(n, k.num_elements());
  for (int64_t i = 0; i < count; ++i) {
    if (i) os << ", ";
    FormatElement(os, k, i);
    os << ": ";
    FormatElement(os, map.map_values(), i);
  }
  if (k.num_elements() > count) os << ", ...";
  return os.str();
}

std::string FirstValues(const Tensor& t, int n) {
  std::ostringstream os;
  os << "[";
  int64_t count = std::min<int64_t>(n, t.num_elements());
  for (int64_t i = 0; i < count; ++i) {
    if (i) os << ", ";
    FormatElement(os, t, i);
  }
  if (t.num_elements() > count) os << ", ...";
  os << "]";
  return os.str();
}

}  // namespace strata::cli
