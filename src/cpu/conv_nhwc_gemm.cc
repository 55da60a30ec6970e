// NhwcConv on strata's SGEMM (see conv_nhwc_gemm.h). The weight OIHW is reordered to
// [M][KH][KW][C] and packed once as B^T (one pass: sgemm::PackConvWeights), so K = (ky * KW + kx) * C + c matches the
// order in which an NHWC input stores one output pixel's receptive field: for dilation 1 every in-bounds (ky, kx..) run
// of taps is one contiguous copy of the input.
#include "cpu/conv_nhwc_gemm.h"

#include <algorithm>
#include <cstring>

#include "core/constant_release.h"
#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_scale.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"

namespace strata {

void NhwcIm2colPointers(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
  const NhwcIm2col& g = *static_cast<const NhwcIm2col*>(ctx);
  PixelCursor px(row0, g.oh, g.ow);
  for (int64_t r = 0; r < rows; ++r, px.Next()) {
    const int64_t iy0 = px.oy * g.sh - g.pt, ix0 = px.ox * g.sw - g.pl;
    const float* xn = g.x + px.img * g.h * g.w * g.c;
    const float** d = dst + r;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = iy0 + ky * g.dh;
      const bool row_in = iy >= 0 && iy < g.h;
      for (int64_t kx = 0; kx < g.kw; ++kx, d += sgemm::kIndirectRows) {
        const int64_t ix = ix0 + kx * g.dw;
        *d = row_in && ix >= 0 && ix < g.w ? xn + (iy * g.w + ix) * g.c : g.zeros;
      }
    }
  }
}

namespace {

// IndirectA rows over a zero-padded copy of X: KH segments of KW * C floats per output pixel.
void PaddedRowPointers(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
  PaddedKernelRowPointers<sgemm::kIndirectRows>(*static_cast<const PaddedNhwcImage<float>*>(ctx), row0, rows, dst);
}

// Whether a short-channel conv (C < 16, e.g. the 7x7 RGB stem: segments of 3 floats)
// should run on kernel-row segments of a padded copy of X instead of gathering im2col
// rows: at least 16 floats per segment, and a copy not much larger than X itself.
// The 7x7 s2 224x224x3 -> 64 stem at 1 thread, min CPU ms: gathered 2.30, row segments
// 1.47 (the copy included). Not for C >= 16: the copy cost more than it saved (3x3 s2
// 56x56x128: 1.30 -> 1.43).
bool UseRowSegments(int64_t c, int64_t kw, int64_t dw, int64_t k, double padded_floats, double x_floats) {
  return c < 16 && dw == 1 && kw * c >= kMinRowSegmentFloats && k <= sgemm::kMaxIndirectK &&
         padded_floats <= 2.0 * x_floats + 65536.0;
}

// Whether the indirect (pointer) A beats gathering + packing it. It skips the packing
// (a large share at N = 64) but runs whole-K tiles, so each B panel (K x 32 floats) must
// stay in L2. Measured at 1 thread (CPU ms, gathered / indirect / XNNPACK): 3x3 56x56
// 64->64 1.57 / 1.35 / 1.39; 3x3 s2 128->128 1.49 / 1.31 / 1.51; 3x3 14x14 256->256
// (K = 2304) 1.29 / 1.29 / 1.49; 3x3 7x7 512->512 (K = 4608), later re-measured as min
// CPU ms of 6 runs: 1.43 / 1.26 (2 threads 0.80 / 0.69). Short segments (C < 16, e.g. an RGB stem) leave the per-tap
// pointer setup too large.
bool UseIndirect(int64_t c, int64_t k) { return c >= 16 && k <= sgemm::kMaxIndirectK; }

// Writes im2col rows [row0, row0 + rows) x columns [k0, k0 + kc) row-major into dst.
void FillIm2col(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
  const NhwcIm2col& g = *static_cast<const NhwcIm2col*>(ctx);
  const int64_t c = g.c, end = k0 + kc, kwc = g.kw * c;
  PixelCursor px(row0, g.oh, g.ow);
  for (int64_t r = 0; r < rows; ++r, px.Next()) {
    const int64_t iy0 = px.oy * g.sh - g.pt, ix0 = px.ox * g.sw - g.pl;
    const float* xn = g.x + px.img * g.h * g.w * c;
    float* d = dst + r * ld - k0;
    for (int64_t k = k0; k < end;) {
      const int64_t tap = k / c, c0 = k - tap * c, ky = tap / g.kw, kx = tap - ky * g.kw;
      const int64_t iy = iy0 + ky * g.dh, ix = ix0 + kx * g.dw;
      int64_t run_end;
      bool zero;
      if (iy < 0 || iy >= g.h) {
        run_end = (ky + 1) * kwc;  // the whole kernel row lies in the vertical padding
        zero = true;
      } else if (ix < 0 || ix >= g.w) {
        run_end = (tap + 1) * c;
        zero = true;
      } else {
        // Dilation 1: the following taps of this kernel row are adjacent pixels; extend the
        // copy over every one still inside the image.
        const int64_t last_kx = g.dw == 1 ? std::min(g.kw - 1, g.w - 1 - ix0) : kx;
        run_end = ky * kwc + (last_kx + 1) * c;
        zero = false;
      }
      const int64_t len = std::min(end, run_end) - k;
      if (zero) {
        std::memset(d + k, 0, static_cast<size_t>(len) * sizeof(float));
      } else {
        std::memcpy(d + k, xn + (iy * g.w + ix) * c + c0, static_cast<size_t>(len) * sizeof(float));
      }
      k += len;
    }
  }
}

class NhwcGemmConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  // W is packed and B copied at creation; Compute only looks at W's shape (kept here).
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }
  // The sum may overwrite the residual: the SGEMM then accumulates into it (Epilogue::accumulate).
  int InPlaceInput() const override { return has_residual_ ? 3 : -1; }
  const char* ImplName() const override { return "nhwc-sgemm"; }
  NhwcGemmConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act,
                     sgemm::PackedB packed)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act),
        packed_(std::move(packed)),
        has_residual_(init.node.inputs.size() > 3 && init.node.inputs[3] >= 0) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + w.dim(0));
    zeros_.assign(static_cast<size_t>(w.dim(1)), 0.0f);
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const int64_t n = xin.n, h = xin.h, w = xin.w, c = xin.c;
    const ConvShapes& s = xin.shapes;
    const SpatialGeometry& g = s.geo;
    const int64_t m = w_shape_[0], oh = g.out[0], ow = g.out[1];
    const Shape out_shape = {n, oh, ow, m};
    ASSIGN_OR_RETURN(const Tensor* res, NhwcConvResidual(ctx, has_residual_, out_shape));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();

    const auto ep =
        NhwcConvEpilogue<sgemm::Epilogue>(bias_.empty() ? nullptr : bias_.data(), act_.min, act_.max, act_.kind, res, y,
                                          m);
    const int64_t rows = n * oh * ow;
    float* out = y->mutable_data<float>();
    // A fused per-channel input scale (conv_nhwc_scale.h): folded into the product for a
    // pointwise conv, else applied to a scaled copy of X that the paths below read.
    ASSIGN_OR_RETURN(const Tensor* scale, NhwcConvInputScale(ctx, n, c));
    const float* xd = x->data<float>();
    Tensor scaled;
    if (scale && !IsPointwiseNhwc(g)) {
      auto t = Tensor::Allocate(DataType::kFloat, x->shape(), ctx.allocator());
      if (!t.ok()) return MakeStatus(t.status().code(), node.Describe(), ": scaled input: ", t.status().message());
      scaled = std::move(t).value();
      ScaleNhwcChannels(xd, *scale, n, h * w, c, scaled.mutable_data<float>(), ctx.pool());
      xd = scaled.data<float>();
    }
    Status st;
    // 1x1 stride-1 convs pack X as a plain matrix: the indirect A (one pointer per pixel)
    // won on 1x1 56x56 256->64 (0.57-0.61 vs 0.65-0.66 CPU ms) but lost on mobilenet_v2's
    // pointwise convs (6.8-8.1 vs 6.4-6.5 CPU ms per run at 1 thread).
    if (IsPointwiseNhwc(g) && scale) {
      thread_local sgemm::PackedB scaled_b;  // the caller thread's diag(S) B, reused across runs
      st = ScaledPointwiseGemm(xd, *scale, n, h * w, c, packed_, out, m, ep, ctx.pool(), &scaled_b);
    } else if (IsPointwiseNhwc(g)) {
      st = sgemm::Gemm(rows, xd, c, packed_, out, m, ep, ctx.pool());
    } else {
      const NhwcIm2col geo{MakeNhwcWindow(xd, xin), zeros_.data()};
      // Padded extent: every row / column any output pixel's window reaches, and X itself.
      const int64_t hp = std::max(g.pad_begin[0] + h, (oh - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1);
      const int64_t wp = std::max(g.pad_begin[1] + w, (ow - 1) * g.strides[1] + g.kernel[1]);
      const double padded = static_cast<double>(n) * static_cast<double>(hp) * static_cast<double>(wp) * c;
      if (UseRowSegments(c, g.kernel[1], g.dilations[1], packed_.k(), padded, static_cast<double>(x->num_elements()))) {
        Allocator* alloc = ctx.allocator() ? ctx.allocator() : DefaultAllocator();
        auto buf = alloc->Allocate(static_cast<size_t>(padded) * sizeof(float));
        if (!buf.ok())
          return MakeStatus(buf.status().code(), node.Describe(), ": padded input: ", buf.status().message());
        float* xp = static_cast<float*>((*buf)->data());
        PadNhwcImage(
            xd, n, h, w, c, g.pad_begin[0], g.pad_begin[1], hp, wp, xp, ctx.pool(),
            [](const float* s, int64_t k, float* d) { std::memcpy(d, s, static_cast<size_t>(k) * sizeof(float)); });
        const PaddedNhwcImage<float> pimg{
            xp, hp, wp, c, oh, ow, g.kernel[0], g.strides[0], g.strides[1], g.dilations[0]};
        const sgemm::IndirectA ia{PaddedRowPointers, &pimg, g.kernel[0], g.kernel[1] * c};
        st = sgemm::GemmIndirect(rows, ia, packed_, out, m, ep, ctx.pool());
      } else if (UseIndirect(c, packed_.k())) {
        const sgemm::IndirectA ia{NhwcIm2colPointers, &geo, g.kernel[0] * g.kernel[1], c};
        st = sgemm::GemmIndirect(rows, ia, packed_, out, m, ep, ctx.pool());
      } else {
        st = sgemm::GemmGathered(rows, sgemm::ASource{FillIm2col, &geo}, packed_, out, m, ep, ctx.pool());
      }
    }
    if (!st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  sgemm::PackedB packed_;
  std::vector<float> bias_;
  std::vector<float> zeros_;  // one input pixel of zeros (C floats), for the indirect A
  bool has_residual_ = false;
};

}  // namespace

bool NhwcGemmConvApplies(const Node& node, const Tensor& w) {
  return sgemm::Available() && node.GetInt("group", 1) == 1 && w.dtype() == DataType::kFloat && w.rank() == 4 &&
         w.num_elements() > 0;
}

Result<std::unique_ptr<OpKernel>> MakeNhwcGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                   const FusedActivation& act) {
  const Node& node = init.node;
  if (!NhwcGemmConvApplies(node, w)) return Unsupported(node.Describe(), ": the SGEMM conv needs group 1 and AVX-512F");
  // OIHW -> B^T with K in im2col order ([M][KH*KW][C]), reordered while packing.
  // WeightRows: a payload still on disk is read a panel's rows at a time, never loaded whole.
  auto packed = sgemm::PackConvWeights(sgemm::WeightRows::Of(w), w.dim(0), w.dim(1), w.dim(2) * w.dim(3), init.pool);
  if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcGemmConvKernel>(init, w, b, act, std::move(packed).value()));
}

}  // namespace strata
