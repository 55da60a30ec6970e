// Helpers shared by the quantization kernels: QuantizeLinear/DequantizeLinear (quantize.cc),
// MatMulInteger/QLinearMatMul (int_matmul.cc) and ConvInteger/QLinearConv (int_conv.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "core/kernel.h"

namespace strata {

inline bool IsQuant8(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// Reads element i of an 8-bit or int32 integer tensor.
inline int32_t LoadQ(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUInt8:
      return t.data<uint8_t>()[i];
    case DataType::kInt8:
      return t.data<int8_t>()[i];
    case DataType::kInt32:
      return t.data<int32_t>()[i];
    default:
      return 0;
  }
}

inline float LoadScale(const Tensor& t, int64_t i) {
  if (t.dtype() == DataType::kFloat16) return static_cast<float>(t.data<Float16>()[i]);
  if (t.dtype() == DataType::kDouble) return static_cast<float>(t.data<double>()[i]);
  return t.data<float>()[i];
}

// A scale input is present and float, float16 or double. Errors name the node and the input.
Status CheckScale(const Tensor* t, const Node& node, const char* what);

// A scale or zero point input that must be a scalar: present, one element. Errors name the
// node and the input.
Status CheckScalar(const Tensor* t, const Node& node, const char* what);

// Input i of a kernel as a scalar scale (present, one element, a float type), or as a scalar
// zero point of type t (absent allowed when `optional`, then 0). Errors name the node and `what`.
Status CheckScalarScale(const KernelContext& ctx, size_t i, const std::string& what);
Status CheckScalarZeroPoint(const KernelContext& ctx, size_t i, const std::string& what, DataType t, bool optional);
// The scalar zero point input i (0 when absent).
inline int32_t ScalarZeroPoint(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.input(i);
  return t ? LoadQ(*t, 0) : 0;
}

// Rounds half to even and saturates to the range of `dt` (uint8 or int8).
inline int32_t Saturate(float v, DataType dt) {
  float r = std::nearbyint(v);
  if (std::isnan(r)) r = 0;  // NaN quantizes to 0: keeps the integer conversion defined
  const float lo = dt == DataType::kUInt8 ? 0.0f : -128.0f, hi = dt == DataType::kUInt8 ? 255.0f : 127.0f;
  return static_cast<int32_t>(std::clamp(r, lo, hi));
}

inline void StoreQ(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DataType::kUInt8) {
    t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v);
  } else {
    t.mutable_data<int8_t>()[i] = static_cast<int8_t>(v);
  }
}

// An optional zero point of the 8-bit input `what_input`: absent or empty (0), a scalar, or
// `len` values (per row/column/channel). Checks dtype (that of the input) and size; errors
// name the node and the zero point.
Status CheckZeroPoint(const Tensor* zp, DataType input_dtype, int64_t len, const Node& node, const char* what);
// Zero point i of a tensor CheckZeroPoint accepted (0 when absent; a scalar serves every i).
inline int32_t ZeroPointAt(const Tensor* zp, int64_t i) {
  if (!zp || zp->num_elements() == 0) return 0;
  return LoadQ(*zp, zp->num_elements() == 1 ? 0 : i);
}

// DynamicQuantizeLinear's arithmetic: scale = (max(0, x) - min(0, x)) / 255, zero point and
// q = x / scale + zp rounded half to even and saturated to uint8 (AVX-512 where the CPU has
// it, the same bits; large tensors split over the pool, which may be null). A NaN in x is an
// error naming the node.
Status DynamicQuantizeU8(const Node& node, const float* x, int64_t n, uint8_t* q, float* scale, int32_t* zp,
                         ThreadPool* pool);

// True when the CPU has avx512f, avx512bw and avx512vl (the 8-bit AVX-512 paths of quantize.cc
// and qdq_add.cc).
bool HasAvx512Bw();

// sum_k a[k] * b[k] mod 2^32 of 8-bit a against int16 b (int_matmul.cc; vectorised where the
// CPU allows): the reference dot products of MatMulInteger, QLinearMatMul and QGemm.
uint32_t DotU8(const uint8_t* a, const int16_t* b, int64_t n);
uint32_t DotS8(const int8_t* a, const int16_t* b, int64_t n);
inline uint32_t Dot(const uint8_t* a, const int16_t* b, int64_t n) { return DotU8(a, b, n); }
inline uint32_t Dot(const int8_t* a, const int16_t* b, int64_t n) { return DotS8(a, b, n); }

// Per-run scratch of `n` elements of `dt` from the session allocator (the caching allocator
// serves it without malloc after the first run). Errors name the node.
Result<Tensor> AllocateIntScratch(DataType dt, int64_t n, Allocator* alloc, const Node& node);

// The registry entry of an integer op whose kernel K is built as K(qlinear) and then prepared
// by K::Init(init) (packing constant weights; problems are left for Compute to report).
template <typename K>
KernelDef IntKernelDef(const char* op, bool qlinear) {
  KernelDef d;
  d.op_type = op;
  d.since_version = 10;
  d.type_input = -1;
  d.factory = [qlinear](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<K>(qlinear);
    k->Init(init);
    return std::unique_ptr<OpKernel>(std::move(k));
  };
  return d;
}

// The registry entry of a stateless com.microsoft op (opset 1 on).
KernelDef ContribDef(const char* op, Status (*fn)(KernelContext&));

// Registration of the integer-arithmetic ops, called by RegisterQuantizeKernels.
void RegisterIntMatMulKernels(KernelRegistry& r);  // int_matmul.cc: MatMulInteger, QLinearMatMul
void RegisterIntConvKernels(KernelRegistry& r);    // int_conv.cc: ConvInteger, QLinearConv
void RegisterQdqAddKernels(KernelRegistry& r);     // qdq_add.cc: strata.internal QdqAdd
// qlinear_contrib.cc: com.microsoft QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool.
void RegisterQLinearContribKernels(KernelRegistry& r);
// qgemm.cc: com.microsoft QGemm.
void RegisterQGemmKernels(KernelRegistry& r);
// qlinear_lookup.cc: com.microsoft QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearWhere.
void RegisterQLinearLookupKernels(KernelRegistry& r);

}  // namespace strata
