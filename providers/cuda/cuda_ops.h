// The CUDA provider's op set: which nodes it accepts (WhyUnsupported) and how a compiled
// node runs on a stream (RunNode). Tensors live in device memory owned by BlockRefs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../common/node_copy.h"
#include "cuda_kernels.h"
#include "cuda_runtime_state.h"
#include "strata/provider.h"

namespace strata_cuda {

constexpr int32_t kFloat = 1;  // strata_dtype values
constexpr int32_t kUint8 = 2;
constexpr int32_t kInt32 = 6;
constexpr int32_t kInt64 = 7;

size_t DtypeSize(int32_t dtype);  // 0 for dtypes the provider does not handle

struct DTensor {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  BlockRef block;        // keeps the memory alive (views share it)
  char* data = nullptr;  // device pointer (inside block, or an input's buffer)
  std::shared_ptr<const std::vector<int64_t>> host_ints;  // constants: int64/int32 values on the host too
  bool valid() const { return dtype != 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * DtypeSize(dtype); }
};

using Attr = strata_provider_common::Attr;

// A compiled node: its description copy, plus what MatMulNBits prepared at compile.
struct CNode : strata_provider_common::NodeCopy {
  // MatMulNBits: the packed weight blob (device) and its parameters, prepared at compile.
  BlockRef packed;
  NBitsPackParams nbits;
};

// Per-run context: the device, the run's stream and cuBLAS handle, and the error slot.
// How GEMMs (MatMul, Gemm, Conv's im2col products, LSTM projections) compute, from the
// session option "cuda.precision". Tensors stay fp32 in memory either way.
enum class GemmPrecision {
  kFp32,  // "fp32" (default): pedantic fp32 math, no TF32, no tensor-core down-conversion
  kFp16,  // "fp16": inputs rounded to fp16 on tensor cores, fp32 accumulation and output
};

// Parses a partition's provider options; "" when valid, else the error (names the key).
std::string ParseCudaOptions(const strata_partition_desc* p, GemmPrecision* precision);

struct RunContext {
  DeviceState* dev = nullptr;
  StreamSlot* slot = nullptr;
  GemmPrecision precision = GemmPrecision::kFp32;
  std::string error;
  bool oom = false;
  // Every block allocated during the run, released only after the stream is synchronized:
  // the allocator is shared by concurrent runs on other streams.
  std::vector<BlockRef> hold;
  // A device tensor of `shape` (uninitialized); false with error set on failure.
  bool Alloc(int32_t dtype, std::vector<int64_t> shape, DTensor* out);
  bool Cuda(cudaError_t e, const CNode& n, const char* what);
  bool Fail(const CNode& n, const std::string& msg);
  // Reads a small int tensor (shape arguments) to the host, from host_ints when constant.
  bool HostInts(const CNode& n, const DTensor& t, const char* what, std::vector<int64_t>* out);
};

// "" when the node is supported, else the reason (the capability query answers 0).
std::string WhyUnsupported(const strata_node_desc* node);

// Row-major C[b] (m x n) = alpha * op(A[b]) (m x k) * op(B[b]) (k x n) + beta * C[b] on the
// run's stream and cuBLAS handle (strides in elements; batch 1 ignores them). Fails with
// the node named when a dimension exceeds cuBLAS's 32-bit limits or cuBLAS fails.
bool Sgemm(RunContext* ctx, const CNode& n, bool ta, bool tb, int64_t m, int64_t nn, int64_t k, float alpha,
           const float* a, int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
           int64_t batch);

// Runs one node; `vals` is indexed by value id.
bool RunNode(const CNode& n, std::vector<DTensor>& vals, RunContext* ctx);

}  // namespace strata_cuda
