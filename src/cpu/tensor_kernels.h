// Shared helpers for the tensor/shape/index kernel family (tensor_*.cc, index_*.cc).
// Data movement is dtype-generic: plain types are moved by element size (so one
// instantiation serves float/int32/uint32...), strings by assignment.
#pragma once

#include <climits>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "cpu/fn_kernel_def.h"

namespace strata::tensorops {

// Registers `op` once per ONNX version range: versions {1, 6, 13} become [1,5], [6,12], [13,last_end].
void RegisterVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int> versions,
                      const KernelFactory& factory, int last_end = INT_MAX, std::vector<DataType> types = {},
                      int type_input = 0);

// Input i as a tensor, or an error naming the node and `what` when it is missing.
Result<const Tensor*> RequireInput(const KernelContext& ctx, size_t i, const char* what);

// A shape viewed as [outer, dim, inner] around `axis` (already normalised): the products of
// the dims before and after it.
struct AxisSplit {
  int64_t axis = 0, outer = 1, dim = 1, inner = 1;
};
AxisSplit SplitAtAxis(const Shape& shape, int64_t axis);
// Compress and Unique: around the optional "axis" attribute; without it the flattened input
// (outer = inner = 1, dim = all elements). Error names the node when axis is out of range.
Result<AxisSplit> SplitAtOptionalAxis(const Node& node, const Tensor& x);
// Reads an int32/int64 tensor as int64 values; error names the node and `what`.
Result<std::vector<int64_t>> ReadInts(const Tensor& t, const Node& node, const char* what);
// INTS attribute `name` of exactly n values, or n copies of dflt when absent; other lengths are
// an error naming the node and the attribute.
Result<std::vector<int64_t>> IntsAttrOfLength(const Node& node, const char* name, size_t n, int64_t dflt);
// Same, into a Shape: no allocation for up to 8 values (Reshape's shape input, every run).
Status ReadIntsInto(const Tensor& t, const Node& node, const char* what, Shape* out);
// Reads a scalar (or 1-element) int32/int64 tensor.
Result<int64_t> ReadScalarInt(const Tensor& t, const Node& node, const char* what);
// Normalises a list of axes against rank, rejecting out-of-range and duplicate axes.
Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, const Node& node);

Shape ContiguousStrides(const Shape& s);

// Allocates output i filled with zeros (empty strings for kString).
Result<Tensor*> AllocateZeros(KernelContext& ctx, size_t i, DataType dt, Shape shape);

// Calls fn.template operator()<T>() with a type of the element's size (uint8/16/32/64_t)
// or std::string. Returns false for unsupported element types (complex128).
template <typename Fn>
bool DispatchBySize(DataType dt, Fn&& fn) {
  if (dt == DataType::kString) {
    fn.template operator()<std::string>();
    return true;
  }
  switch (DataTypeSize(dt)) {
    case 1:
      fn.template operator()<uint8_t>();
      return true;
    case 2:
      fn.template operator()<uint16_t>();
      return true;
    case 4:
      fn.template operator()<uint32_t>();
      return true;
    case 8:
      fn.template operator()<uint64_t>();
      return true;
    default:
      return false;
  }
}

Status UnsupportedType(const Node& node, DataType dt);

// A strided element copy: for every index in `shape`,
// dst[dst_off + idx . dst_strides] = src[src_off + idx . src_strides]. Strides are in
// elements and may be 0 (broadcast) or negative (reversed slices).
struct CopyPlan {
  Shape shape;  // Shape-typed strides too: plans are built per run and must not allocate
  Shape dst_strides;
  Shape src_strides;
  int64_t dst_off = 0;
  int64_t src_off = 0;
};

// Runs a CopyPlan between same-dtype tensors; parallel and memcpy-based where possible,
// with a cache-tiled path for transposes.
Status StridedCopy(const Tensor& src, Tensor* dst, const CopyPlan& plan, ThreadPool* pool, const Node& node);

// Per-axis index-map copy: dst[i0,i1,...] = src[maps[0][i0] + maps[1][i1] + ...], where
// maps[a][i] is a source element offset (coordinate * stride). dst's shape gives the sizes.
Status AxisMapCopy(const Tensor& src, Tensor* dst, const std::vector<std::vector<int64_t>>& maps, ThreadPool* pool,
                   const Node& node);

// Runs fn(begin, end) over [0, n), in parallel when the work (n * cost) is large.
void ParallelRange(ThreadPool* pool, int64_t n, int64_t cost_per_item, ThreadPool::RangeRef fn);

// Family registration functions, all called by RegisterTensorKernels.
void RegisterShapeKernels(KernelRegistry& r);   // tensor_shape.cc
void RegisterCopyKernels(KernelRegistry& r);    // tensor_copy.cc
void RegisterLayoutKernels(KernelRegistry& r);  // tensor_layout.cc
void RegisterGatherKernels(KernelRegistry& r);  // index_gather.cc
void RegisterSortKernels(KernelRegistry& r);    // index_sort.cc
void RegisterCastKernels(KernelRegistry& r);    // tensor_cast.cc

}  // namespace strata::tensorops
