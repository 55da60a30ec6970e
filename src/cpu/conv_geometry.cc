#include "cpu/conv_geometry.h"

#include <algorithm>

#include "core/tensor.h"

namespace strata {

int64_t SpatialGeometry::InSize() const { return NumElements(in); }
int64_t SpatialGeometry::OutSize() const { return NumElements(out); }
int64_t SpatialGeometry::KernelSize() const { return NumElements(kernel); }

Result<Shape> SpatialInts(const Node& node, const char* name, size_t rank, int64_t def) {
  if (!node.HasAttr(name)) return Shape(rank, def);
  const std::vector<int64_t>* v = FindInts(node, name);
  const size_t n = v ? v->size() : 0;
  if (n != rank)
    return InvalidModel(node.Describe(), ": attribute '", name, "' has ", n, " values, expected ", rank,
                        " (one per spatial axis)");
  return Shape(v->begin(), v->end());
}

namespace {
Status ReadCommon(const Node& node, size_t r, const Shape& kernel, bool allow_dilations, SpatialGeometry* g) {
  g->kernel = kernel;
  for (size_t i = 0; i < r; ++i)
    if (kernel[i] <= 0) return InvalidModel(node.Describe(), ": kernel size ", kernel[i], " on axis ", i, " is not positive");
  ASSIGN_OR_RETURN(g->strides, SpatialInts(node, "strides", r, 1));
  ASSIGN_OR_RETURN(g->dilations, SpatialInts(node, "dilations", r, 1));
  for (size_t i = 0; i < r; ++i) {
    if (g->strides[i] <= 0) return InvalidModel(node.Describe(), ": stride ", g->strides[i], " is not positive");
    if (g->dilations[i] <= 0) return InvalidModel(node.Describe(), ": dilation ", g->dilations[i], " is not positive");
    if (!allow_dilations && g->dilations[i] != 1)
      return Unsupported(node.Describe(), ": dilations are not supported for this op");
  }
  return Status::Ok();
}

Status ReadPads(const Node& node, size_t r, SpatialGeometry* g) {
  g->pad_begin.assign(r, 0);
  g->pad_end.assign(r, 0);
  if (!node.HasAttr("pads")) return Status::Ok();
  static const std::vector<int64_t> kNone;
  const std::vector<int64_t>* found = FindInts(node, "pads");
  const std::vector<int64_t>& pads = found ? *found : kNone;  // read in place: no copy per run
  if (pads.size() != 2 * r)
    return InvalidModel(node.Describe(), ": attribute 'pads' has ", pads.size(), " values, expected ", 2 * r);
  for (size_t i = 0; i < r; ++i) {
    g->pad_begin[i] = pads[i];
    g->pad_end[i] = pads[i + r];
  }
  return Status::Ok();
}
}  // namespace

Result<SpatialGeometry> ComputeWindowGeometry(const Node& node, const Shape& in, const Shape& kernel, bool ceil_mode,
                                              bool allow_dilations) {
  size_t r = in.size();
  SpatialGeometry g;
  g.in = in;
  if (kernel.size() != r)
    return InvalidModel(node.Describe(), ": kernel has ", kernel.size(), " spatial dims but the input has ", r);
  RETURN_IF_ERROR(ReadCommon(node, r, kernel, allow_dilations, &g));
  std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  g.out.assign(r, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    g.pad_begin.assign(r, 0);
    g.pad_end.assign(r, 0);
    for (size_t i = 0; i < r; ++i) {
      int64_t eff = (kernel[i] - 1) * g.dilations[i] + 1;
      g.out[i] = (in[i] + g.strides[i] - 1) / g.strides[i];
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.strides[i] + eff - in[i]);
      int64_t small = total / 2;
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[i] = total - g.pad_begin[i];
    }
    return g;
  }
  if (auto_pad == "VALID") {
    g.pad_begin.assign(r, 0);
    g.pad_end.assign(r, 0);
  } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
    RETURN_IF_ERROR(ReadPads(node, r, &g));
  } else {
    return InvalidModel(node.Describe(), ": unknown auto_pad '", auto_pad, "'");
  }
  for (size_t i = 0; i < r; ++i) {
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0)
      return InvalidModel(node.Describe(), ": negative pads are not allowed");
    int64_t eff = (kernel[i] - 1) * g.dilations[i] + 1;
    int64_t span = in[i] + g.pad_begin[i] + g.pad_end[i] - eff;
    if (span < 0)
      return InvalidArgument(node.Describe(), ": kernel extent ", eff, " on spatial axis ", i,
                             " exceeds the padded input size ", in[i] + g.pad_begin[i] + g.pad_end[i]);
    if (ceil_mode) {
      g.out[i] = (span + g.strides[i] - 1) / g.strides[i] + 1;
      // A window that would start inside the end padding is dropped.
      if ((g.out[i] - 1) * g.strides[i] >= in[i] + g.pad_begin[i]) --g.out[i];
    } else {
      g.out[i] = span / g.strides[i] + 1;
    }
  }
  return g;
}

Result<SpatialGeometry> ComputeTransposeGeometry(const Node& node, const Shape& in, const Shape& kernel) {
  size_t r = in.size();
  SpatialGeometry g;
  g.in = in;
  if (kernel.size() != r)
    return InvalidModel(node.Describe(), ": kernel has ", kernel.size(), " spatial dims but the input has ", r);
  RETURN_IF_ERROR(ReadCommon(node, r, kernel, true, &g));
  ASSIGN_OR_RETURN(Shape out_pad, SpatialInts(node, "output_padding", r, 0));
  for (size_t i = 0; i < r; ++i)
    if (out_pad[i] < 0) return InvalidModel(node.Describe(), ": output_padding must be non-negative");
  std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      !auto_pad.empty())
    return InvalidModel(node.Describe(), ": unknown auto_pad '", auto_pad, "'");
  Shape out_shape;
  if (node.HasAttr("output_shape")) {
    out_shape = node.GetInts("output_shape");
    // Accept the full [N, C, spatial...] form as well as the spatial-only one.
    if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (out_shape.size() != r)
      return InvalidModel(node.Describe(), ": attribute 'output_shape' has ", out_shape.size(), " values, expected ", r);
  }
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (same && out_shape.empty()) {
    out_shape.resize(r);
    for (size_t i = 0; i < r; ++i) out_shape[i] = in[i] * g.strides[i];
  }
  g.out.assign(r, 0);
  if (!out_shape.empty()) {
    g.pad_begin.assign(r, 0);
    g.pad_end.assign(r, 0);
    for (size_t i = 0; i < r; ++i) {
      int64_t full = g.strides[i] * (in[i] - 1) + out_pad[i] + (kernel[i] - 1) * g.dilations[i] + 1;
      int64_t total = full - out_shape[i];
      // Floor division (as the ONNX reference): output_shape may exceed the natural size.
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      // Spec: SAME_UPPER puts the smaller half first; otherwise the larger half goes first.
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pad_end[i] = total - g.pad_begin[i];
      g.out[i] = out_shape[i];
      if (g.out[i] < 0) return InvalidModel(node.Describe(), ": negative output_shape");
    }
    return g;
  }
  if (auto_pad == "VALID") {
    g.pad_begin.assign(r, 0);
    g.pad_end.assign(r, 0);
  } else {
    RETURN_IF_ERROR(ReadPads(node, r, &g));
  }
  for (size_t i = 0; i < r; ++i) {
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0) return InvalidModel(node.Describe(), ": negative pads are not allowed");
    g.out[i] = g.strides[i] * (in[i] - 1) + out_pad[i] + (kernel[i] - 1) * g.dilations[i] + 1 - g.pad_begin[i] -
               g.pad_end[i];
    if (g.out[i] < 0)
      return InvalidArgument(node.Describe(), ": pads leave a negative output size on spatial axis ", i);
  }
  return g;
}

}  // namespace strata
