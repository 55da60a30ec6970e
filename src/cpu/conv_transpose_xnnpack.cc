// fp32 2-D ConvTranspose through XNNPACK's NHWC deconvolution. Weights are repacked
// [C_in, C_out/g, kh, kw] -> [g, C_out/g, kh, kw, C_in/g] once in the factory. ONNX pads
// are XNNPACK's output cropping and output_padding its "adjustment"; both can depend on
// the input size (auto_pad SAME, output_shape), so the operator is keyed on the crop
// (XnnOperatorCache). Negative pads (output_shape larger than the natural size) and
// adjustments >= stride run on the reference kernel.
#include <algorithm>

#include "cpu/conv_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

class XnnConvTransposeKernel final : public OpKernel {
 public:
  XnnConvTransposeKernel(Shape w_shape, int64_t group, std::unique_ptr<OpKernel> ref)
      : w_shape_(std::move(w_shape)), group_(group), ref_(std::move(ref)) {
    cin_ = w_shape_[0];
    cog_ = w_shape_[1];
    kh_ = w_shape_[2];
    kw_ = w_shape_[3];
  }

  Status Init(const Node& node, const Tensor& w, const Tensor* b) {
    const int64_t cig = cin_ / group_, ks = kh_ * kw_;
    const float* src = w.data<float>();
    weights_.resize(static_cast<size_t>(cin_ * cog_ * ks));
    for (int64_t g = 0; g < group_; ++g)
      for (int64_t ic = 0; ic < cig; ++ic)
        for (int64_t oc = 0; oc < cog_; ++oc)
          for (int64_t k = 0; k < ks; ++k)
            weights_[((g * cog_ + oc) * ks + k) * cig + ic] = src[((g * cig + ic) * cog_ + oc) * ks + k];
    if (b) bias_.assign(b->data<float>(), b->data<float>() + cog_ * group_);
    ASSIGN_OR_RETURN(strides_, SpatialInts(node, "strides", 2, 1));
    ASSIGN_OR_RETURN(dilations_, SpatialInts(node, "dilations", 2, 1));
    ASSIGN_OR_RETURN(out_pad_, SpatialInts(node, "output_padding", 2, 0));
    for (int a = 0; a < 2; ++a)
      if (strides_[a] <= 0 || strides_[a] > UINT32_MAX || dilations_[a] <= 0 || dilations_[a] > UINT32_MAX)
        return InvalidModel(node.Describe(), ": bad strides or dilations");
    return EnsureXnnpackInitialized();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4 || x->dim(1) != cin_) return ref_->Compute(ctx);
    const Shape in = {x->dim(2), x->dim(3)};
    auto geo_or = ComputeTransposeGeometry(node, in, {kh_, kw_});
    if (!geo_or.ok()) return ref_->Compute(ctx);  // precise error from the reference path
    const SpatialGeometry& g = *geo_or;
    const Shape key = {g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
    for (int64_t v : key)
      if (v < 0 || v > UINT32_MAX) return ref_->Compute(ctx);
    for (int a = 0; a < 2; ++a)
      if (out_pad_[a] >= strides_[a]) return ref_->Compute(ctx);
    const int64_t n = x->dim(0), cout = cog_ * group_, hw = in[0] * in[1], ohw = g.OutSize();
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, cout, g.out[0], g.out[1]}));
    if (y->num_elements() == 0) return Status::Ok();
    if (hw == 0) {
      // No input pixels: the output is just the bias.
      float* yp = y->mutable_data<float>();
      for (int64_t i = 0; i < n * cout; ++i) std::fill(yp + i * ohw, yp + (i + 1) * ohw, bias_.empty() ? 0.0f : bias_[i % cout]);
      return Status::Ok();
    }
    Tensor in_s, out_s;
    ASSIGN_OR_RETURN(in_s, AllocateScratch(n * hw * cin_, ctx.allocator(), node));
    ASSIGN_OR_RETURN(out_s, AllocateScratch(n * ohw * cout, ctx.allocator(), node));
    TransposeNchwToNhwc(x->data<float>(), in_s.mutable_data<float>(), n, cin_, hw, ctx.pool());
    const float inf = std::numeric_limits<float>::infinity();
    auto create = [&](xnn_operator_t* op) {
      return xnn_create_deconvolution2d_nhwc_f32(key[0], key[3], key[2], key[1], kh_, kw_, strides_[0], strides_[1],
                                                 dilations_[0], dilations_[1], group_, cin_ / group_, cog_, cin_, cout,
                                                 weights_.data(), bias_.empty() ? nullptr : bias_.data(), -inf, inf, 0,
                                                 op);
    };
    pthreadpool_t tp = ctx.pool() ? ctx.pool()->handle() : nullptr;
    float* out_nhwc = out_s.mutable_data<float>();
    auto setup = [&](xnn_operator_t op) {
      return xnn_setup_deconvolution2d_nhwc_f32(op, n, in[0], in[1], out_pad_[0], out_pad_[1], in_s.data<float>(),
                                                out_nhwc, tp);
    };
    Status st = cache_.Run(key, create, setup, tp, node, "deconvolution");
    if (st.code() == StatusCode::kUnsupported) return ref_->Compute(ctx);
    RETURN_IF_ERROR(st);
    TransposeNhwcToNchw(out_nhwc, y->mutable_data<float>(), n, cout, ohw, ctx.pool());
    return Status::Ok();
  }

 private:
  Shape w_shape_;
  int64_t group_;
  std::unique_ptr<OpKernel> ref_;
  int64_t cin_ = 0, cog_ = 0, kh_ = 1, kw_ = 1;
  Shape strides_, dilations_, out_pad_;
  std::vector<float> weights_, bias_;
  XnnOperatorCache cache_;
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeXnnConvTranspose(const KernelInit& init) {
  const Node& node = init.node;
  ASSIGN_OR_RETURN(auto ref, MakeRefConvTranspose(init));
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  int64_t group = node.GetInt("group", 1);
  bool usable = w && w->dtype() == DataType::kFloat && w->rank() == 4 && w->num_elements() > 0 && group > 0 &&
                group <= UINT32_MAX && w->dim(0) % group == 0;
  if (usable && init.has_input(2))
    usable = b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == w->dim(1) * group;
  if (usable && node.HasAttr("kernel_shape"))
    usable = node.GetInts("kernel_shape") == std::vector<int64_t>(w->shape().begin() + 2, w->shape().end());
  if (!usable) return ref;
  auto ref_copy = MakeRefConvTranspose(init);
  auto k = std::make_unique<XnnConvTransposeKernel>(w->shape(), group, std::move(ref));
  if (!k->Init(node, *w, b).ok()) return ref_copy;
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace strata
