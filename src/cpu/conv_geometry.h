// Spatial geometry shared by Conv, ConvTranspose and the pooling ops: attribute
// validation, auto_pad resolution and output sizes.
#pragma once

#include <string>
#include <vector>

#include "core/ir.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata {

// Shape-typed (inline storage) so that computing the geometry on every run allocates nothing.
struct SpatialGeometry {
  Shape in, kernel, strides, dilations, pad_begin, pad_end, out;
  size_t rank() const { return in.size(); }
  int64_t InSize() const;
  int64_t OutSize() const;
  int64_t KernelSize() const;
};

// Reads strides/dilations/pads/auto_pad for a sliding-window op over `in` with the given
// kernel. `ceil_mode` applies to pooling. Errors name the node and the bad attribute.
Result<SpatialGeometry> ComputeWindowGeometry(const Node& node, const Shape& in, const Shape& kernel, bool ceil_mode,
                                              bool allow_dilations = true);

// ConvTranspose: output_padding, output_shape and auto_pad as in the ONNX spec.
Result<SpatialGeometry> ComputeTransposeGeometry(const Node& node, const Shape& in, const Shape& kernel);

// The ints attribute `name` of `node` in place (nullptr when absent or not ints). Kernels use
// it on the run path, where Node::GetInts' fresh vector would be a heap allocation.
inline const std::vector<int64_t>* FindInts(const Node& node, const std::string& name) {
  const Attribute* a = node.FindAttr(name);
  return a && a->type == Attribute::Type::kInts ? &a->ints : nullptr;
}

// Reads an ints attribute of length `rank` (default `def` everywhere); errors if its length differs.
Result<Shape> SpatialInts(const Node& node, const char* name, size_t rank, int64_t def);

}  // namespace strata
