// `strata quantize IN.onnx OUT.onnx --bits 4|8 --block-size N [--symmetric] [--exclude NODE...]
//  [--accuracy-level L] [--input NAME=FILE.npy ...]`: weight-only quantization of MatMul/Gemm
// weights into com.microsoft MatMulNBits, or with `--dynamic-int8 [--per-channel]` ONNX
// Runtime's dynamic int8 form, then a comparison of OUT against IN on the CPU.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/npy.h"
#include "core/quantize_model.h"
#include "core/session.h"

namespace strata::cli {

namespace {

struct QuantizeArgs {
  std::string in, out;
  int bits = 4;
  int64_t block_size = 32;
  bool symmetric = false;
  std::vector<std::string> exclude;
  int64_t accuracy_level = 0;
  std::vector<std::string> inputs;
  bool no_compare = false;
  bool dynamic_int8 = false;
  bool per_channel = false;
};

constexpr size_t kProgressMinBytes = 64u << 20;  // a progress bar only for models this large

std::string Megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

Result<Tensor> RandomFeed(const ValueInfo& vi, uint32_t seed) {
  const DataType dt = vi.type.elem_type;
  if (dt != DataType::kFloat && dt != DataType::kInt64 && dt != DataType::kInt32 && dt != DataType::kBool)
    return Unsupported("input '", vi.name, "' has dtype ", DataTypeName(dt), "; pass it with --input NAME=FILE.npy");
  return RandomInputTensor(vi, seed);
}

// Runs IN and OUT on the same inputs and prints the largest output differences.
int Compare(const QuantizeArgs& a) {
  SessionOptions so;
  auto ref = Session::CreateFromFile(a.in, so);
  if (!ref.ok()) return Fail("loading " + a.in + ": " + ref.status().ToString());
  auto quant = Session::CreateFromFile(a.out, so);
  if (!quant.ok()) return Fail("loading " + a.out + ": " + quant.status().ToString());
  std::vector<std::pair<std::string, Value>> feeds;
  for (const auto& spec : a.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--input expects NAME=FILE.npy, got '" + spec + "'");
    auto t = ReadNpy(spec.substr(eq + 1));
    if (!t.ok()) return Fail(t.status().ToString());
    feeds.emplace_back(spec.substr(0, eq), *t);
  }
  uint32_t seed = 42;
  for (const ValueInfo& vi : (*ref)->inputs()) {
    bool given = false;
    for (const auto& f : feeds) given = given || f.first == vi.name;
    if (given) continue;
    auto t = RandomFeed(vi, seed++);
    if (!t.ok()) return Fail(t.status().ToString());
    feeds.emplace_back(vi.name, *t);
  }
  auto r0 = (*ref)->Run(feeds);
  if (!r0.ok()) return Fail("running " + a.in + ": " + r0.status().ToString());
  auto r1 = (*quant)->Run(feeds);
  if (!r1.ok()) return Fail("running " + a.out + ": " + r1.status().ToString());
  const auto& outs = (*ref)->outputs();
  for (size_t i = 0; i < r0->size() && i < r1->size(); ++i) {
    const Value& v0 = (*r0)[i];
    const Value& v1 = (*r1)[i];
    if (!v0.is_tensor() || !v1.is_tensor() || v0.tensor().dtype() != DataType::kFloat ||
        v1.tensor().dtype() != DataType::kFloat || v0.tensor().num_elements() != v1.tensor().num_elements()) {
      std::printf("  output %-20s not a comparable float tensor\n", outs[i].name.c_str());
      continue;
    }
    double max_abs = 0, ref_max = 0;
    const float* x = v0.tensor().data<float>();
    const float* y = v1.tensor().data<float>();
    for (int64_t j = 0; j < v0.tensor().num_elements(); ++j) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(x[j]) - y[j]));
      ref_max = std::max(ref_max, std::fabs(static_cast<double>(x[j])));
    }
    std::printf("  output %-20s max abs error %.4g, relative to max |fp32| %.4g\n", outs[i].name.c_str(), max_abs,
                ref_max > 0 ? max_abs / ref_max : 0.0);
  }
  return 0;
}

int Execute(const QuantizeArgs& a) {
  std::ifstream f(a.in, std::ios::binary);
  if (!f) return Fail("cannot open " + a.in);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string in_bytes = ss.str();
  QuantizeOptions opts;
  opts.bits = a.bits;
  opts.block_size = a.block_size;
  opts.symmetric = a.symmetric;
  opts.exclude = a.exclude;
  opts.accuracy_level = a.accuracy_level;
  opts.dynamic_int8 = a.dynamic_int8;
  opts.per_channel = a.per_channel;
  const bool bar = isatty(2) && in_bytes.size() >= kProgressMinBytes;
  if (bar) {
    opts.progress = [](size_t done, size_t total) {
      const int width = 40, filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
      std::fprintf(stderr, "\r[%s%s] %zu/%zu weights", std::string(filled, '#').c_str(),
                   std::string(width - filled, ' ').c_str(), done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  std::string out_bytes;
  auto rep = QuantizeModelBytes(in_bytes, &out_bytes, opts);
  if (!rep.ok()) return Fail(a.in + ": " + rep.status().ToString());
  std::ofstream o(a.out, std::ios::binary | std::ios::trunc);
  if (!o || !o.write(out_bytes.data(), static_cast<std::streamsize>(out_bytes.size())) || !o.flush())
    return Fail("cannot write " + a.out);
  o.close();
  if (a.dynamic_int8) {
    std::printf("quantized %d node(s) to dynamic int8 (%s weight scales)\n", rep->quantized,
                a.per_channel ? "per-channel" : "per-tensor");
  } else {
    std::printf("quantized %d node(s) to %d-bit, block size %lld%s\n", rep->quantized, a.bits,
                static_cast<long long>(a.block_size), a.symmetric ? ", symmetric" : "");
  }
  for (const auto& s : rep->skipped) std::printf("  left in fp32: %s\n", s.c_str());
  std::printf("model size: %s -> %s (weights %s -> %s)\n", Megabytes(in_bytes.size()).c_str(),
              Megabytes(out_bytes.size()).c_str(), Megabytes(rep->weight_bytes_before).c_str(),
              Megabytes(rep->weight_bytes_after).c_str());
  if (a.no_compare) return 0;
  std::printf("output error of %s vs %s%s:\n", a.out.c_str(), a.in.c_str(),
              a.inputs.empty() ? " on random inputs" : "");
  return Compare(a);
}

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize MatMul/Gemm weights: weight-only 4/8-bit (MatMulNBits), or dynamic int8 (--dynamic-int8)");
  cmd->add_option("input", args->in, "fp32 ONNX model")->required()->check(CLI::ExistingFile);
  cmd->add_option("output", args->out, "quantized model to write")->required();
  auto* bits = cmd->add_option("--bits", args->bits, "4 or 8")->check(CLI::IsMember({4, 8}));
  auto* block =
      cmd->add_option("--block-size", args->block_size, "weights per scale along K: a power of two >= 16 (default 32)");
  auto* sym = cmd->add_flag("--symmetric", args->symmetric, "no zero points (ORT's default zero point 2^(bits-1))");
  cmd->add_option("--exclude", args->exclude, "node names to keep in fp32")->expected(1, -1);
  auto* level = cmd->add_option("--accuracy-level", args->accuracy_level, "MatMulNBits accuracy_level attribute (0-4)");
  auto* dyn = cmd->add_flag("--dynamic-int8", args->dynamic_int8,
                            "ONNX Runtime's dynamic int8 form (DynamicQuantizeLinear + MatMulInteger, int8 weights)");
  cmd->add_flag("--per-channel", args->per_channel, "with --dynamic-int8: one weight scale per output column")
      ->needs(dyn);
  dyn->excludes(bits)->excludes(block)->excludes(sym)->excludes(level);
  cmd->add_option("--input", args->inputs, "NAME=FILE.npy inputs for the error check (default: random)");
  cmd->add_flag("--no-compare", args->no_compare, "skip running both models");
  cmd->callback([args] {
    const int rc = Execute(*args);
    if (rc != 0) Exit(rc);
  });
}

}  // namespace strata::cli
