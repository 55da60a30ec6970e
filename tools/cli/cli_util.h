// Small formatting helpers shared by CLI commands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata::cli {

// Applies `--precision` and `--provider-option KEY=VALUE` (shared by run and bench) to so,
// whose providers are already set. fp32 and bf16 (CPU fast math) apply to the CPU; fp16 is
// CUDA's tensor-core GEMM (the provider option cuda.precision=fp16) and so needs cuda (or
// auto) in --device. Errors name the flag and the value.
Status ApplyPrecisionFlags(const std::string& precision, const std::vector<std::string>& provider_options,
                           SessionOptions* so);

// The session flags `run` and `bench` share.
struct SessionFlags {
  int threads = 0;
  std::string device = "cpu";
  std::vector<std::string> provider_paths;
  std::string precision = "fp32";
  std::vector<std::string> provider_options;  // --provider-option cuda.precision=fp16
  int opt_level = 99;
};
// Registers -t/--threads, -d/--device, --provider-path, --precision, --provider-option and
// --opt-level on `sub`, stored into `f` (which must outlive the parse).
void AddSessionFlags(CLI::App* sub, SessionFlags* f);
// The SessionOptions the flags ask for; errors name the flag and the value.
Result<SessionOptions> MakeSessionOptions(const SessionFlags& f);

// A tensor for a model input nobody fed: declared dims (unknown ones 1), float N(0, 1) and
// int32/int64 in [0, 100) from std::mt19937(seed); other dtypes stay zero.
Result<Tensor> RandomInputTensor(const ValueInfo& vi, uint32_t seed);

// "cpu" | "auto" | "name[,name...]" -> provider preference list.
Result<std::vector<std::string>> ParseDeviceList(const std::string& device);
// A float tensor shaped [N, C] (C >= 2) or [C] reads as class scores.
bool IsClassifierOutput(const Tensor& t);
// Top-k (class, score) per row of a classifier output.
std::vector<std::vector<std::pair<int64_t, float>>> TopK(const Tensor& t, int k);
// Integer label at index i of a label tensor (any integer dtype).
int64_t LabelAt(const Tensor& labels, size_t i);
// "[0.1, 0.2, ...]" for up to n leading elements.
std::string FirstValues(const Tensor& t, int n);
// "key: value, ..." for up to n leading entries of a map Value.
std::string JoinMapEntries(const Value& map, int n);

}  // namespace strata::cli
