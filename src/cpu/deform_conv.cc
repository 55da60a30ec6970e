// ai.onnx DeformConv (opset 19; opset 22 adds bfloat16 only), 2-D: a convolution whose kernel
// taps sample the input at learned fractional offsets (deformable convolution v1; with the
// optional mask, v2). Each tap's position is the regular one plus its (dy, dx) offset, read by
// bilinear interpolation with zeros outside the image (as torchvision.ops.deform_conv2d, which
// the tests compare with), scaled by the mask; the sampled columns then meet the weights as in
// an im2col convolution. Plain loops in double accumulation: the reference and only kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/float_double.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"
#include "cpu/tensor_kernels.h"

namespace strata {
namespace {

// Bilinear sample of plane x [h, w] at (y, xx): corners outside the image count as zero, and
// a point a whole pixel or more outside is zero.
template <typename T>
double Sample(const T* x, int64_t h, int64_t w, double y, double xx) {
  if (!(y > -1.0 && y < static_cast<double>(h) && xx > -1.0 && xx < static_cast<double>(w))) return 0.0;
  const double fy = std::floor(y), fx = std::floor(xx);
  const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ly = y - fy, lx = xx - fx;
  double v = 0;
  auto at = [&](int64_t r, int64_t c, double wgt) {
    if (r >= 0 && r < h && c >= 0 && c < w && wgt != 0) v += wgt * AsDouble(x[r * w + c]);
  };
  at(y0, x0, (1 - ly) * (1 - lx));
  at(y0, x0 + 1, (1 - ly) * lx);
  at(y0 + 1, x0, ly * (1 - lx));
  at(y0 + 1, x0 + 1, ly * lx);
  return v;
}

Status DeformConvOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* off = ctx.input(2);
  const Tensor* bias = ctx.input(3);
  const Tensor* mask = ctx.input(4);
  if (!x || !w || !off) return InvalidArgument(node.Describe(), ": inputs X, W and offset are required");
  if (x->rank() != 4 || w->rank() != 4)
    return Unsupported(node.Describe(), ": only 2-D DeformConv is implemented (X [N, C, H, W], W [oC, C/group, kH, ",
                       "kW]); got X ", ShapeToString(x->shape()), ", W ", ShapeToString(w->shape()));
  for (const Tensor* t : {w, off, bias, mask})
    if (t && t->dtype() != x->dtype())
      return InvalidArgument(node.Describe(), ": every input must be ", DataTypeName(x->dtype()), ", got ",
                             DataTypeName(t->dtype()));
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), wd = x->dim(3);
  const int64_t oc = w->dim(0), kh = w->dim(2), kw = w->dim(3);
  const int64_t group = node.GetInt("group", 1), offset_group = node.GetInt("offset_group", 1);
  if (group <= 0 || offset_group <= 0 || c % group != 0 || oc % group != 0 || c % offset_group != 0)
    return InvalidModel(node.Describe(), ": group ", group, " and offset_group ", offset_group,
                        " must be positive and divide the ", c, " input channels (and group the ", oc,
                        " output channels)");
  if (w->dim(1) != c / group)
    return InvalidArgument(node.Describe(), ": W has ", w->dim(1), " input channels per group, X has ", c / group);
  if (node.HasAttr("kernel_shape") && node.GetInts("kernel_shape") != std::vector<int64_t>{kh, kw})
    return InvalidModel(node.Describe(), ": kernel_shape differs from W's spatial shape ", ShapeToString(w->shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> dil, tensorops::IntsAttrOfLength(node, "dilations", 2, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, tensorops::IntsAttrOfLength(node, "pads", 4, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, tensorops::IntsAttrOfLength(node, "strides", 2, 1));
  for (int d = 0; d < 2; ++d)
    if (dil[d] <= 0 || strides[d] <= 0 || pads[d] < 0 || pads[d + 2] < 0 || dil[d] > (1 << 20) ||
        strides[d] > (1 << 20) || pads[d] > (1 << 20) || pads[d + 2] > (1 << 20))
      return InvalidModel(node.Describe(), ": dilations and strides must be in [1, 2^20], pads in [0, 2^20]");
  const int64_t oh = (h + pads[0] + pads[2] - (dil[0] * (kh - 1) + 1)) / strides[0] + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - (dil[1] * (kw - 1) + 1)) / strides[1] + 1;
  if (kh <= 0 || kw <= 0 || oh <= 0 || ow <= 0)
    return InvalidArgument(node.Describe(), ": the ", kh, "x", kw, " kernel does not fit the padded ", h, "x", wd,
                           " input");
  const int64_t taps = kh * kw;
  const Shape want_off = {n, offset_group * 2 * taps, oh, ow};
  if (off->shape() != want_off)
    return InvalidArgument(node.Describe(), ": offset must be ", ShapeToString(want_off), ", got ",
                           ShapeToString(off->shape()));
  const Shape want_mask = {n, offset_group * taps, oh, ow};
  if (mask && mask->shape() != want_mask)
    return InvalidArgument(node.Describe(), ": mask must be ", ShapeToString(want_mask), ", got ",
                           ShapeToString(mask->shape()));
  if (bias && (bias->rank() != 1 || bias->dim(0) != oc))
    return InvalidArgument(node.Describe(), ": B must be [", oc, "], got ", ShapeToString(bias->shape()));
  // The sampled columns of one image, C * taps * oH * oW values: refused past 2^28 (1 GiB).
  int64_t col_count = 0;
  int64_t rows = 0, plane_n = 0;
  if (__builtin_mul_overflow(c, taps, &rows) || __builtin_mul_overflow(oh, ow, &plane_n) ||
      __builtin_mul_overflow(rows, plane_n, &col_count) || col_count > (int64_t{1} << 28))
    return InvalidArgument(node.Describe(), ": the sampled columns (", c, " channels x ", taps, " taps x ", oh, "x", ow,
                           " positions) exceed 2^28 values");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {n, oc, oh, ow}));
  KernelStop stop(node);
  const bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* px = x->data<T>();
    const T* pw = w->data<T>();
    const T* po = off->data<T>();
    const T* pm = mask ? mask->data<T>() : nullptr;
    T* py = y->mutable_data<T>();
    const int64_t plane = oh * ow, cg = c / group, ocg = oc / group, cpo = c / offset_group;
    // Sampled columns of one image: [C * taps, oH * oW], in float (double for double inputs).
    using Col = std::conditional_t<std::is_same_v<T, double>, double, float>;
    std::vector<Col> cols(static_cast<size_t>(col_count));
    int64_t pending = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t g = ch / cpo;
        const T* xp = px + (b * c + ch) * h * wd;
        for (int64_t k = 0; k < taps; ++k) {
          const int64_t ki = k / kw, kj = k % kw;
          const T* dy = po + ((b * offset_group + g) * 2 * taps + 2 * k) * plane;
          const T* dx = dy + plane;
          const T* mk = pm ? pm + ((b * offset_group + g) * taps + k) * plane : nullptr;
          Col* col = cols.data() + (ch * taps + k) * plane;
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              const int64_t p = i * ow + j;
              const double yy = static_cast<double>(i * strides[0] - pads[0] + ki * dil[0]) + AsDouble(dy[p]);
              const double xx = static_cast<double>(j * strides[1] - pads[1] + kj * dil[1]) + AsDouble(dx[p]);
              col[p] = static_cast<Col>(Sample(xp, h, wd, yy, xx) * (mk ? AsDouble(mk[p]) : 1.0));
            }
        }
        if (!stop.Continue(pending, taps * plane * 8)) return;
      }
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t g = o / ocg;
        std::vector<double> acc(static_cast<size_t>(plane), bias ? AsDouble(bias->data<T>()[o]) : 0.0);
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < taps; ++k) {
            const double wv = AsDouble(pw[(o * cg + ci) * taps + k]);
            const Col* col = cols.data() + ((g * cg + ci) * taps + k) * plane;
            for (int64_t p = 0; p < plane; ++p) acc[p] += wv * col[p];
          }
        T* out = py + (b * oc + o) * plane;
        for (int64_t p = 0; p < plane; ++p) out[p] = FromDouble<T>(acc[p]);
        if (!stop.Continue(pending, cg * taps * plane)) return;
      }
    }
  });
  if (!ok) return Unsupported(node.Describe(), ": DeformConv does not support dtype ", DataTypeName(x->dtype()));
  return stop.status();
}

}  // namespace

void RegisterDeformConvKernels(KernelRegistry& r) { r.Register(UntypedFnDef("DeformConv", 19, DeformConvOp)); }

}  // namespace strata
