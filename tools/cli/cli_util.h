// Small formatting helpers shared by CLI commands.
#pragma once

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

}  // namespace strata::cli
