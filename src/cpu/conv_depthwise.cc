// fp32 depthwise Conv (group == C_in == C_out) directly on NCHW planes. Depthwise layers
// are memory-bound, so the two NCHW<->NHWC transposes around XNNPACK would cost about as
// much as the convolution; here each plane is convolved in place, tap by tap, into an
// output row held in L1. The row loop is compiled for AVX-512, AVX2 and baseline and the
// best clone is picked at load time (GCC target_clones).
#include <algorithm>

#include "cpu/conv_kernels.h"
#include "cpu/target_clones.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

struct PlaneGeometry {
  int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};

STRATA_TARGET_CLONES("avx512f", "avx2", "default")
void DepthwisePlane(const float* in, const float* w, float* out, const PlaneGeometry& g, float bias, float lo,
                    float hi) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    float* orow = out + oy * g.ow;
    for (int64_t ox = 0; ox < g.ow; ++ox) orow[ox] = bias;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      int64_t iy = oy * g.sh + ky * g.dh - g.pt;
      if (iy < 0 || iy >= g.ih) continue;
      const float* irow = in + iy * g.iw;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const float wv = w[ky * g.kw + kx];
        const int64_t off = kx * g.dw - g.pl;
        // Output columns whose input column ox*sw + off lies inside [0, iw).
        int64_t x0 = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
        int64_t x1 = g.iw - 1 - off >= 0 ? std::min(g.ow, (g.iw - 1 - off) / g.sw + 1) : 0;
        if (g.sw == 1) {
          const float* src = irow + off;
          for (int64_t ox = x0; ox < x1; ++ox) orow[ox] += wv * src[ox];
        } else {
          for (int64_t ox = x0; ox < x1; ++ox) orow[ox] += wv * irow[ox * g.sw + off];
        }
      }
    }
    for (int64_t ox = 0; ox < g.ow; ++ox) orow[ox] = std::min(hi, std::max(lo, orow[ox]));
  }
}

class DepthwiseConvKernel final : public OpKernel {
 public:
  DepthwiseConvKernel(Shape w_shape, const float* w, const float* b, FusedActivation act)
      : w_shape_(std::move(w_shape)), act_(act) {
    c_ = w_shape_[0];
    weights_.assign(w, w + NumElements(w_shape_));
    if (b) bias_.assign(b, b + c_);
  }

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(FloatConvIo io, StartFloatConv(ctx, w_shape_));
    if (io.y->num_elements() == 0) return Status::Ok();
    const Tensor* x = io.x;
    Tensor* y = io.y;
    const ConvShapes& s = io.shapes;
    const SpatialGeometry& sg = s.geo;
    const bool two_d = sg.rank() == 2;
    PlaneGeometry g;
    g.ih = two_d ? sg.in[0] : 1;
    g.iw = sg.in.back();
    g.oh = two_d ? sg.out[0] : 1;
    g.ow = sg.out.back();
    g.kh = two_d ? sg.kernel[0] : 1;
    g.kw = sg.kernel.back();
    g.sh = two_d ? sg.strides[0] : 1;
    g.sw = sg.strides.back();
    g.dh = two_d ? sg.dilations[0] : 1;
    g.dw = sg.dilations.back();
    g.pt = two_d ? sg.pad_begin[0] : 0;
    g.pl = sg.pad_begin.back();
    const int64_t is = g.ih * g.iw, os = g.oh * g.ow, ks = g.kh * g.kw;
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        int64_t c = p % c_;
        DepthwisePlane(xp + p * is, weights_.data() + c * ks, yp + p * os, g, bias_.empty() ? 0.0f : bias_[c], act_.min,
                       act_.max);
      }
    };
    int64_t planes = s.batch * c_;
    if (ctx.pool() && planes * os * ks > 65536) {
      ctx.pool()->ParallelFor(planes, 1, body);
    } else {
      body(0, planes);
    }
    return Status::Ok();
  }

 private:
  Shape w_shape_;
  FusedActivation act_;
  int64_t c_ = 0;
  std::vector<float> weights_, bias_;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeDepthwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                    const FusedActivation& act) {
  int64_t group = init.node.GetInt("group", 1);
  if ((w.rank() != 3 && w.rank() != 4) || group <= 1 || w.dim(0) != group || w.dim(1) != 1)
    return Unsupported("not depthwise with multiplier 1");
  return std::unique_ptr<OpKernel>(
      std::make_unique<DepthwiseConvKernel>(w.shape(), w.data<float>(), b ? b->data<float>() : nullptr, act));
}

}  // namespace strata
