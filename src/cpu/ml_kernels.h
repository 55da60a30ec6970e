// Pieces shared by the ai.onnx.ml kernels of cpu/ml_ops.cc and cpu/ml_linear.cc: registration,
// the [C] / [N, C] input convention, and reading a numeric input as floats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel.h"

namespace strata {

// cpu/ml_linear.cc: LinearClassifier, LinearRegressor, SVMClassifier, SVMRegressor.
void RegisterMlLinearKernels(KernelRegistry& r);
// cpu/ml_map.cc: ZipMap, CastMap, DictVectorizer.
void RegisterMlMapKernels(KernelRegistry& r);

namespace ml {

inline constexpr char kMlDomain[] = "ai.onnx.ml";

// Registers an ai.onnx.ml kernel for opsets [since, end] dispatching on input 0's dtype
// (`types`; empty: any dtype).
inline void RegisterMl(KernelRegistry& r, const char* op, int since, int end, std::vector<DataType> types,
                       KernelFactory factory) {
  KernelDef d;
  d.domain = kMlDomain;
  d.op_type = op;
  d.since_version = since;
  d.end_version = end;
  d.type_input = 0;
  d.types = std::move(types);
  d.factory = std::move(factory);
  r.Register(std::move(d));
}

// The factory of a kernel class K with `Status Init(const Node&)` that parses and checks the
// attributes once.
template <typename K>
KernelFactory InitFactory() {
  return [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<K>();
    RETURN_IF_ERROR(k->Init(init.node));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
}

// Input 0, present and a tensor, or an error naming the node.
inline Result<const Tensor*> RequireInput(const KernelContext& ctx, size_t i = 0) {
  const Tensor* x = ctx.input(i);
  if (!x) return InvalidArgument(ctx.node().Describe(), ": input ", i, " is missing or not a tensor");
  return x;
}

// The ML ops' batch convention: [C] is one row of C features, [N, C] is N rows.
struct RowsCols {
  int64_t rows = 0;
  int64_t cols = 0;
};
inline Result<RowsCols> RowsAndCols(const Node& node, const Tensor& x) {
  if (x.rank() == 1) return RowsCols{1, x.dim(0)};
  if (x.rank() == 2) return RowsCols{x.dim(0), x.dim(1)};
  return InvalidArgument(node.Describe(), ": input must be [C] or [N, C], got ", ShapeToString(x.shape()));
}

// RowsAndCols of an input that must be float32 (the regressors ONNX Runtime registers for
// float only).
inline Result<RowsCols> FloatRowsAndCols(const Node& node, const Tensor& x) {
  if (x.dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": input must be float32, got ", DataTypeName(x.dtype()));
  return RowsAndCols(node, x);
}

// The linear models' coefficients: row r (a class or target) starts at r * features, as in
// ONNX Runtime, so extra values are ignored and too few for `rows` rows of `features` are an
// error naming both counts.
inline Status CheckCoefficientRows(const Node& node, int64_t features, size_t coefficients, int64_t rows,
                                   const char* what) {
  if (features > static_cast<int64_t>(coefficients) / rows)
    return InvalidArgument(node.Describe(), ": input has ", features, " features but coefficients (", coefficients,
                           " values) hold fewer than ", rows, " ", what, " x ", features);
  return Status::Ok();
}

// True for the numeric dtypes the ML ops read as features: float, double, int32, int64.
inline bool IsMlNumeric(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kInt32 || t == DataType::kInt64;
}

// A float view of a float/double/int32/int64 tensor: the tensor's own data when it is float,
// otherwise a converted copy in `buf` (ONNX Runtime casts the other dtypes to float first too).
inline Result<const float*> AsFloats(const Node& node, const Tensor& x, std::vector<float>& buf) {
  const int64_t n = x.num_elements();
  switch (x.dtype()) {
    case DataType::kFloat:
      return x.data<float>();
    case DataType::kDouble:
      buf.assign(x.data<double>(), x.data<double>() + n);
      break;
    case DataType::kInt32:
      buf.assign(x.data<int32_t>(), x.data<int32_t>() + n);
      break;
    case DataType::kInt64:
      buf.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(x.data<int64_t>()[i]);
      break;
    default:
      return InvalidArgument(node.Describe(), ": input dtype ", DataTypeName(x.dtype()),
                             " is not one of float32, float64, int32, int64");
  }
  return static_cast<const float*>(buf.data());
}

}  // namespace ml
}  // namespace strata
