// Shared machinery for the elementwise kernel family: numpy and legacy (opset < 7)
// broadcasting, dimension collapsing into rows, compute-type mapping, and the
// registration helpers used by elementwise_*.cc and activation.cc.
#pragma once

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/kernel.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata::cpu {

// fp16/bf16 are computed in float; everything else in its own type.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Float16> {
  using type = float;
};
template <>
struct ComputeTypeOf<BFloat16> {
  using type = float;
};
template <typename T>
using ComputeT = typename ComputeTypeOf<T>::type;

template <typename T>
constexpr bool kIsFloatLike = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// A broadcast of N input shapes onto one output shape, with adjacent dimensions that
// broadcast the same way for every input merged. The innermost merged dimension is a
// "row": within a row every input is either contiguous (stride 1) or constant (stride 0).
// [input][merged dim] strides in one inline buffer (heap only past 16 entries), so that a
// plan built on every run of a binary op allocates nothing.
class StrideTable {
 public:
  void Reset(size_t inputs, size_t dims) {
    inputs_ = inputs;
    dims_ = dims;
    v_.assign(inputs * dims, 0);
  }
  size_t size() const { return inputs_; }  // number of inputs
  int64_t* operator[](size_t input) { return v_.data() + input * dims_; }
  const int64_t* operator[](size_t input) const { return v_.data() + input * dims_; }

 private:
  size_t inputs_ = 0, dims_ = 0;
  SmallVector<int64_t, 16> v_;
};

struct BroadcastPlan {
  Shape out_shape;
  int64_t out_size = 0;
  Shape dims;           // merged dims, never empty
  StrideTable strides;  // [input][merged dim], in elements; 0 = broadcast

  int64_t inner() const { return dims.back(); }
  int64_t rows() const { return dims.back() == 0 ? 0 : out_size / dims.back(); }
  int64_t inner_stride(size_t input) const { return strides[input][dims.size() - 1]; }
  // Element offset of each input at the start of row `row`.
  void RowOffsets(int64_t row, int64_t* offsets) const;
};

// Builds the plan for numpy (multidirectional) broadcasting. Errors name the node.
Result<BroadcastPlan> MakeBroadcastPlan(const Shape* shapes, size_t n, const Node& node);
inline Result<BroadcastPlan> MakeBroadcastPlan(const std::vector<Shape>& shapes, const Node& node) {
  return MakeBroadcastPlan(shapes.data(), shapes.size(), node);
}
// For a braced list of shapes (binary ops on every run): no vector is built.
inline Result<BroadcastPlan> MakeBroadcastPlan(std::initializer_list<Shape> shapes, const Node& node) {
  return MakeBroadcastPlan(shapes.begin(), shapes.size(), node);
}

// Legacy opset < 7 broadcasting of B onto A (attributes `broadcast` and `axis`).
// Returns the shape B must be viewed as so that numpy broadcasting gives the legacy
// result; without broadcast=1 the shapes must be equal.
Result<Shape> LegacyBroadcastShape(const Shape& a, const Shape& b, const Node& node);

// Calls fn(offsets, out_offset) for every row in [begin, end), where offsets[i] is the
// element offset of input i at the row start. Uses an odometer to avoid divisions.
template <typename Fn>
void ForEachRow(const BroadcastPlan& p, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const size_t n_in = p.strides.size();
  const size_t outer_rank = p.dims.size() - 1;
  SmallVector<int64_t, 8> offs(n_in), idx(outer_rank, 0);  // inline: no allocation per call
  int64_t r = begin;
  for (size_t d = outer_rank; d-- > 0;) {
    idx[d] = r % p.dims[d];
    r /= p.dims[d];
  }
  p.RowOffsets(begin, offs.data());
  const int64_t inner = p.inner();
  for (int64_t row = begin; row < end; ++row) {
    fn(offs.data(), row * inner);
    // Advance the odometer over the outer dims.
    for (size_t d = outer_rank; d-- > 0;) {
      if (++idx[d] < p.dims[d]) {
        for (size_t i = 0; i < n_in; ++i) offs[i] += p.strides[i][d];
        break;
      }
      for (size_t i = 0; i < n_in; ++i) offs[i] -= p.strides[i][d] * (p.dims[d] - 1);
      idx[d] = 0;
    }
  }
}

// Checks that every present input has the dtype of input 0 (ONNX type constraint "T").
Status CheckSameDtype(const KernelContext& ctx, size_t first, size_t last);
// Error for a dtype the op does not support: "<node>: unsupported dtype int8".
Status UnsupportedDtype(const Node& node, DataType dt);
// The input, or an error naming the node when the required input is missing.
Result<const Tensor*> RequiredInput(const KernelContext& ctx, size_t i);

// Registers `factory` for every ONNX version range given by `since` (each range runs
// up to the next since-version minus one; the last is open-ended).
void RegisterVersions(KernelRegistry& r, const std::string& domain, const std::string& op,
                      std::initializer_list<int> since, const std::vector<DataType>& types,
                      const KernelFactory& factory, bool reference = true, const std::string& impl = "ref");

// Common dtype lists.
const std::vector<DataType>& FloatTypes();          // float, double, float16, bfloat16
const std::vector<DataType>& SignedNumericTypes();  // FloatTypes + int8..int64
const std::vector<DataType>& NumericTypes();        // SignedNumericTypes + uint8..uint64
const std::vector<DataType>& IntegerTypes();        // int8..uint64
const std::vector<DataType>& UnsignedTypes();       // uint8..uint64
const std::vector<DataType>& BoolTypes();           // bool

// Rows of at least this many elements are worth a parallel task.
constexpr int64_t kParallelGrain = 1 << 15;

// Test hook for elementwise_simd.cc: caps the instruction set the optimized kernels
// use ("avx512", "avx2" or "base"; anything else removes the cap) so tests can cover
// every variant on one machine. Returns the name of the variant now in effect.
std::string SetElementwiseIsaCapForTesting(const std::string& cap);

// Families (defined in their own files, called from RegisterElementwiseKernels).
void RegisterBinaryKernels(KernelRegistry& r);      // elementwise_binary.cc
void RegisterUnaryKernels(KernelRegistry& r);       // elementwise_unary.cc
void RegisterActivationKernels(KernelRegistry& r);  // activation.cc
void RegisterOptimizedKernels(KernelRegistry& r);   // elementwise_simd.cc

}  // namespace strata::cpu
