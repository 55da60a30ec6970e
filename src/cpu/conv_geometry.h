// Spatial geometry shared by Conv, ConvTranspose and the pooling ops: attribute
// validation, auto_pad resolution and output sizes.
#pragma once

#include <string>
#include <vector>

#include "core/ir.h"
#include "core/status.h"

namespace strata {

struct SpatialGeometry {
  std::vector<int64_t> in, kernel, strides, dilations, pad_begin, pad_end, out;
  size_t rank() const { return in.size(); }
  int64_t InSize() const;
  int64_t OutSize() const;
  int64_t KernelSize() const;
};

// Reads strides/dilations/pads/auto_pad for a sliding-window op over `in` with the given
// kernel. `ceil_mode` applies to pooling. Errors name the node and the bad attribute.
Result<SpatialGeometry> ComputeWindowGeometry(const Node& node, const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& kernel, bool ceil_mode,
                                              bool allow_dilations = true);

// ConvTranspose: output_padding, output_shape and auto_pad as in the ONNX spec.
Result<SpatialGeometry> ComputeTransposeGeometry(const Node& node, const std::vector<int64_t>& in,
                                                 const std::vector<int64_t>& kernel);

// Reads an ints attribute of length `rank` (default `def` everywhere); errors if its length differs.
Result<std::vector<int64_t>> SpatialInts(const Node& node, const char* name, size_t rank, int64_t def);

}  // namespace strata
