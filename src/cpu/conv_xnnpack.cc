// fp32 Conv 1-D/2-D through XNNPACK's NHWC convolution (depthwise and grouped
// included). Weights are repacked OIHW -> OHWI and handed to XNNPACK once, in the
// factory; each Compute transposes NCHW -> NHWC, runs the operator and transposes back.
// With auto_pad=SAME the pads depend on the input size, so the operator is (re)created
// lazily whenever they change (XnnOperatorCache), keeping the OHWI weights for that.
#include <algorithm>
#include <cstring>

#include "cpu/conv_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

class XnnConvKernel final : public OpKernel {
 public:
  XnnConvKernel(Shape w_shape, int64_t group, FusedActivation act, std::unique_ptr<OpKernel> ref)
      : w_shape_(std::move(w_shape)), group_(group), act_(act), ref_(std::move(ref)) {
    one_d_ = w_shape_.size() == 3;
    m_ = w_shape_[0];
    cig_ = w_shape_[1];
    kh_ = one_d_ ? 1 : w_shape_[2];
    kw_ = w_shape_.back();
  }

  Status Init(const KernelInit& init, const Tensor& w, const Tensor* b) {
    const Node& node = init.node;
    // OIHW -> OHWI (XNNPACK's [groups, group_out, kh, kw, group_in] layout).
    const float* src = w.data<float>();
    weights_.resize(static_cast<size_t>(m_ * kh_ * kw_ * cig_));
    for (int64_t o = 0; o < m_; ++o)
      for (int64_t i = 0; i < cig_; ++i)
        for (int64_t k = 0; k < kh_ * kw_; ++k)
          weights_[(o * kh_ * kw_ + k) * cig_ + i] = src[(o * cig_ + i) * kh_ * kw_ + k];
    if (b) bias_.assign(b->data<float>(), b->data<float>() + m_);
    Shape kernel(w_shape_.begin() + 2, w_shape_.end());
    ASSIGN_OR_RETURN(strides_, SpatialInts(node, "strides", kernel.size(), 1));
    ASSIGN_OR_RETURN(dilations_, SpatialInts(node, "dilations", kernel.size(), 1));
    for (int64_t v : strides_)
      if (v <= 0 || v > UINT32_MAX) return InvalidModel(node.Describe(), ": bad stride ", v);
    for (int64_t v : dilations_)
      if (v <= 0 || v > UINT32_MAX) return InvalidModel(node.Describe(), ": bad dilation ", v);
    std::string auto_pad = node.GetString("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET" || auto_pad == "VALID") {
      Shape pads(2 * kernel.size(), 0);
      if (auto_pad == "NOTSET" && node.HasAttr("pads")) pads = node.GetInts("pads");
      if (pads.size() != 2 * kernel.size()) return InvalidModel(node.Describe(), ": bad pads");
      for (int64_t p : pads)
        if (p < 0 || p > UINT32_MAX) return InvalidModel(node.Describe(), ": bad pad ", p);
      Shape key = one_d_ ? Shape{0, pads[0], 0, pads[1]} : Shape{pads[0], pads[1], pads[2], pads[3]};
      RETURN_IF_ERROR(cache_.Prepare(
          key, [&](xnn_operator_t* op) { return CreateOp(key, op); }, node, "convolution"));
      // Static pads never change the key, so the operator is never re-created.
      weights_ = {};
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(FloatConvIo io, StartFloatConv(ctx, w_shape_));
    if (io.y->num_elements() == 0) return Status::Ok();
    const Tensor* x = io.x;
    Tensor* y = io.y;
    const ConvShapes& s = io.shapes;
    const SpatialGeometry& g = s.geo;
    const int64_t n = s.batch, c = s.in_channels;
    const int64_t h = one_d_ ? 1 : g.in[0], w = g.in.back();
    const int64_t ohw = g.OutSize(), hw = g.InSize();
    const Shape key = one_d_ ? Shape{0, g.pad_begin[0], 0, g.pad_end[0]}
                             : Shape{g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
    // With one channel or one pixel NCHW and NHWC coincide: skip that transpose.
    bool direct_in = c == 1 || hw == 1, direct_out = m_ == 1 || ohw == 1;
    Tensor in_scratch, out_scratch;
    const float* in_nhwc = x->data<float>();
    float* out_nhwc = y->mutable_data<float>();
    if (!direct_in) {
      ASSIGN_OR_RETURN(in_scratch, AllocateScratch(n * hw * c, ctx.allocator(), node));
      TransposeNchwToNhwc(x->data<float>(), in_scratch.mutable_data<float>(), n, c, hw, ctx.pool());
      in_nhwc = in_scratch.data<float>();
    }
    if (!direct_out) {
      ASSIGN_OR_RETURN(out_scratch, AllocateScratch(n * ohw * m_, ctx.allocator(), node));
      out_nhwc = out_scratch.mutable_data<float>();
    }
    pthreadpool_t tp = ctx.pool() ? ctx.pool()->handle() : nullptr;
    Status st = cache_.Run(
        key, [&](xnn_operator_t* op) { return CreateOp(key, op); },
        [&](xnn_operator_t op) { return xnn_setup_convolution2d_nhwc_f32(op, n, h, w, in_nhwc, out_nhwc, tp); }, tp,
        node, "convolution");
    // Pads XNNPACK rejects (possible only with auto_pad SAME) run on the reference kernel.
    if (st.code() == StatusCode::kUnsupported) return ref_->Compute(ctx);
    RETURN_IF_ERROR(st);
    if (!direct_out) TransposeNhwcToNchw(out_nhwc, y->mutable_data<float>(), n, m_, ohw, ctx.pool());
    return Status::Ok();
  }

 private:
  // Creates the XNNPACK operator for key = {top, left, bottom, right}; call sites wrap it in
  // a lambda that a CreateFn refers to (no std::function, so no allocation per run).
  xnn_status CreateOp(const Shape& key, xnn_operator_t* op) const {
    if (weights_.empty()) return xnn_status_invalid_state;
    uint32_t sh = one_d_ ? 1 : strides_[0], sw = strides_.back();
    uint32_t dh = one_d_ ? 1 : dilations_[0], dw = dilations_.back();
    return xnn_create_convolution2d_nhwc_f32(key[0], key[3], key[2], key[1], kh_, kw_, sh, sw, dh, dw, group_, cig_,
                                             m_ / group_, cig_ * group_, m_, weights_.data(),
                                             bias_.empty() ? nullptr : bias_.data(), act_.min, act_.max, 0, op);
  }

  Shape w_shape_;
  int64_t group_;
  FusedActivation act_;
  std::unique_ptr<OpKernel> ref_;
  bool one_d_ = false;
  int64_t m_ = 0, cig_ = 0, kh_ = 1, kw_ = 1;
  Shape strides_, dilations_;
  std::vector<float> weights_, bias_;
  XnnOperatorCache cache_;
};

}  // namespace

bool GroupedConvTooCostlyForXnnpack(int64_t group, const Tensor& w) {
  return group > 1 && w.rank() > 0 && w.dim(0) > 0 && w.num_elements() / w.dim(0) > 4096;
}

Result<std::unique_ptr<OpKernel>> MakeXnnConv(const KernelInit& init) {
  const Node& node = init.node;
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  int64_t group = node.GetInt("group", 1);
  bool usable = w && w->dtype() == DataType::kFloat && (w->rank() == 3 || w->rank() == 4) && group > 0 &&
                group <= UINT32_MAX && w->num_elements() > 0 && w->dim(0) % group == 0;
  if (usable && init.has_input(2))
    usable = b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == w->dim(0);
  if (usable && node.HasAttr("kernel_shape"))
    usable = node.GetInts("kernel_shape") == std::vector<int64_t>(w->shape().begin() + 2, w->shape().end());
  // Such convs run on the reference conv; XNNPACK's calls and the depthwise kernel's cannot
  // be stopped.
  if (usable && GroupedConvTooCostlyForXnnpack(group, *w)) usable = false;
  if (usable) {
    auto pw = MakePointwiseConv(init, *w, b, act);
    if (pw.ok()) return std::move(pw).value();
    auto dw = MakeDepthwiseConv(init, *w, b, act);
    if (dw.ok()) return std::move(dw).value();
    ASSIGN_OR_RETURN(auto ref, MakeRefConv(init));
    auto k = std::make_unique<XnnConvKernel>(w->shape(), group, act, std::move(ref));
    // Anything XNNPACK rejects (or a malformed attribute) runs on the reference kernel,
    // which reports malformed attributes with a precise message at run time.
    if (k->Init(init, *w, b).ok()) return std::unique_ptr<OpKernel>(std::move(k));
  }
  return MakeRefConv(init);
}

}  // namespace strata
