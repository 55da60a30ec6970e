// Internal interface between the Conv reference kernels (conv.cc) and the XNNPACK
// fp32 kernel (conv_xnnpack.cc).
#pragma once

#include <memory>
#include <optional>

#include "core/kernel.h"
#include "cpu/act_kind.h"
#include "cpu/conv_geometry.h"

namespace strata {

// Validated Conv operand shapes: X [N, C, spatial...], W [M, C/group, kernel...], B [M].
struct ConvShapes {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  SpatialGeometry geo;
};
Result<ConvShapes> CheckConvShapes(const Node& node, const Shape& x, const Shape& w, const Tensor* b);

// The shared start of the NCHW fp32 conv kernels, which hold W (shape w_shape) from
// creation: X present and float32, its geometry checked by CheckConvShapes, then Y
// [N, M, out spatial...] allocated. Errors name ctx.node().
struct FloatConvIo {
  const Tensor* x = nullptr;
  Tensor* y = nullptr;
  ConvShapes shapes;
};
Result<FloatConvIo> StartFloatConv(KernelContext& ctx, const Shape& w_shape);

// The NHWC conv kernels' shared input checks: X present, float32, rank 4 (NHWC), then the
// geometry checked as the NCHW Conv would, so errors read the same as without the layout
// pass. `node` names the NHWC node in errors; `nchw_node` carries the Conv attributes.
struct NhwcConvInput {
  int64_t n = 0, h = 0, w = 0, c = 0;
  ConvShapes shapes;
};
// A conv's checked geometry for the input shape the graph gives X, made once at creation
// when that shape is fully known (and valid), so that a run with X of that shape skips
// re-reading the node's attributes (map lookups by name, ~1% of a mobilenet_v2 run).
class StaticConvShapes {
 public:
  StaticConvShapes() = default;
  // The conv reads [N, C, H, W] for X's static NHWC shape [N, H, W, cin]: C = cin, or `c`
  // when given (the fused block's depthwise conv, whose input the block derives from X).
  StaticConvShapes(const KernelInit& init, const Node& nchw_node, const Shape& w_shape, int64_t c = -1);
  // The geometry for an input [n, c, h, w] (NCHW order) when it is the static one, else null.
  const ConvShapes* For(int64_t n, int64_t c, int64_t h, int64_t w) const;

 private:
  std::optional<ConvShapes> shapes_;
};
// `known`: when X has its static shape, its geometry is taken from there.
Result<NhwcConvInput> CheckNhwcConvInput(const Node& node, const Tensor* x, const Node& nchw_node, const Shape& w_shape,
                                         const StaticConvShapes* known = nullptr);
// A 2-D NHWC conv's sliding window over X [N][H][W][C], in the terms the im2col gathers of
// the SGEMM and bf16 conv kernels read it.
struct NhwcWindow {
  const float* x;
  int64_t h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};
NhwcWindow MakeNhwcWindow(const float* x, const NhwcConvInput& in);
// What an im2col fill or pointer table of one Compute needs; lives on Compute's stack.
struct NhwcIm2col : NhwcWindow {
  const float* zeros;  // zeros for a tap in the padding: at least one segment's floats
};
// sgemm::IndirectA rows over an NhwcIm2col (ctx): for output pixels [row0, row0 + rows),
// one pointer per kernel tap to that input pixel (x + pixel * c), or to the zeros where the
// tap falls in the padding. The segment read there is the IndirectA's seg floats: all C
// channels for a plain conv, one group's for a grouped one (x offset to the group, c still
// the pixel stride).
void NhwcIm2colPointers(const void* ctx, int64_t row0, int64_t rows, const float** dst);
// Output pixel (img, oy, ox) of the NHWC conv GEMM's row `row` ([N][OH][OW] order), stepped
// row by row: the im2col gathers and pointer tables divide once per call, not per row.
struct PixelCursor {
  PixelCursor(int64_t row, int64_t oh, int64_t ow) : oh(oh), ow(ow) {
    img = row / (oh * ow);
    const int64_t q = row - img * oh * ow;
    oy = q / ow;
    ox = q - oy * ow;
  }
  void Next() {
    if (++ox == ow) {
      ox = 0;
      if (++oy == oh) {
        oy = 0;
        ++img;
      }
    }
  }
  int64_t oh, ow, img, oy, ox;
};
// 1x1, stride 1, no padding: X itself is the [N*H*W, C] A matrix.
bool IsPointwiseNhwc(const SpatialGeometry& g);

// The fused residual input (3) of an NHWC conv: nullptr when the node has none, else it must
// be float32 shaped like the conv output.
Result<const Tensor*> NhwcConvResidual(const KernelContext& ctx, bool has_residual, const Shape& out_shape);

// The store of an NHWC conv with m output channels, for either GEMM's epilogue type
// (sgemm::Epilogue, Bf16Epilogue): bias (or null), the fused activation (kind, then the clamp
// [min, max]), and the residual res (NhwcConvResidual), added, or, when Y took over R's
// buffer (the kernel's InPlaceInput), accumulated into Y.
template <typename Ep>
Ep NhwcConvEpilogue(const float* bias, float min, float max, ActKind kind, const Tensor* res, const Tensor* y,
                    int64_t m) {
  Ep ep;
  ep.bias = bias;
  ep.min = min;
  ep.max = max;
  ep.kind = kind;
  if (res && res->data<float>() == y->data<float>()) {
    ep.accumulate = true;  // Y += conv + bias
  } else if (res) {
    ep.residual = res->data<float>();
    ep.ldr = m;
  }
  return ep;
}

Result<std::unique_ptr<OpKernel>> MakeRefConv(const KernelInit& init);
Result<std::unique_ptr<OpKernel>> MakeRefConvTranspose(const KernelInit& init);
// fp32 2-D (and 1-D) Conv with constant weights via XNNPACK; falls back to MakeRefConv.
Result<std::unique_ptr<OpKernel>> MakeXnnConv(const KernelInit& init);
// True for a grouped conv (group > 1) whose outputs each sum more than 4096 products (its
// weight W [M, C/group, k...] has more than 4096 values per output channel: a kernel as large
// as the image, which only hostile models have). Such convs run on the reference conv, which
// checks the run's deadline and terminate calls, not on XNNPACK, whose calls cannot be
// stopped. NCHW (MakeXnnConv) and NHWC (MakeNhwcConv) both ask.
bool GroupedConvTooCostlyForXnnpack(int64_t group, const Tensor& w);

// fp32 2-D ConvTranspose with constant weights via XNNPACK deconvolution; falls back to the reference.
Result<std::unique_ptr<OpKernel>> MakeXnnConvTranspose(const KernelInit& init);

struct FusedActivation;
// fp32 1x1/stride-1/unpadded/ungrouped Conv as a direct NCHW GEMM (conv_pointwise.cc).
// kUnsupported when the node is not of that form. W (and B if given) are validated float.
Result<std::unique_ptr<OpKernel>> MakePointwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                    const FusedActivation& act);
// fp32 depthwise (group == C_in == C_out) 1-D/2-D Conv on NCHW planes (conv_depthwise.cc).
// kUnsupported when the node is not of that form.
Result<std::unique_ptr<OpKernel>> MakeDepthwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                    const FusedActivation& act);

}  // namespace strata
