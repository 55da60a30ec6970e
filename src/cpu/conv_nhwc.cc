// NhwcConv: fp32 2-D Conv on NHWC activations. Ungrouped convs run on strata's SGEMM
// (conv_nhwc_gemm.cc), depthwise ones on conv_nhwc_depthwise.cc, narrow groups on
// conv_nhwc_grouped.cc; other grouped convs (and CPUs without AVX-512F) go through XNNPACK's
// NHWC convolution. The fused inverted-residual block (conv_nhwc_block.cc) is registered
// here too.
// The operator (with its packed weights) is created once, at session creation; each run
// only re-runs setup, which XNNPACK keeps cheap while the input shape is unchanged. With
// auto_pad=SAME the pads depend on the input size, so the operator is re-created whenever
// they change. Parameters XNNPACK rejects run exactly on the reference Conv through
// RunNchwFallback. Also here: the NchwToNhwc / NhwcToNchw layout changes.
#include <algorithm>
#include <cstring>

#include "core/constant_release.h"
#include "core/inverted_residual_fusion.h"
#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_block.h"
#include "cpu/conv_nhwc_depthwise.h"
#include "cpu/conv_nhwc_gemm.h"
#include "cpu/conv_nhwc_grouped.h"
#include "cpu/conv_nhwc_input_norm.h"
#include "cpu/conv_nhwc_scale.h"
#include "cpu/conv_nhwc_stem.h"
#include "cpu/conv_nhwc_winograd.h"
#include "cpu/gemm_bf16.h"
#include "cpu/int_conv_vnni.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/simd_clamp.h"
#include "cpu/xnnpack_util.h"

namespace strata {

Node OriginalNode(const Node& nhwc_node, const char* onnx_op) {
  Node n = nhwc_node;
  n.op_type = onnx_op;
  n.domain = "";
  n.opset = static_cast<int>(nhwc_node.GetInt(kOriginalOpsetAttr, 1));
  n.attrs.erase(kOriginalOpsetAttr);
  return n;
}

int64_t StaticNhwcOutputPixels(const KernelInit& init) {
  const TypeInfo& t = init.output_type(0);
  if (!t.has_shape || t.dims.size() != 4 || !t.dims[1].known() || !t.dims[2].known()) return -1;
  return t.dims[1].value * t.dims[2].value;
}

Result<NhwcConvInput> CheckNhwcConvInput(const Node& node, const Tensor* x, const Node& nchw_node, const Shape& w_shape,
                                         const StaticConvShapes* known) {
  if (!x) return InvalidArgument(node.Describe(), ": Conv needs input X");
  if (x->dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": X dtype ", DataTypeName(x->dtype()), " differs from W's float32");
  if (x->rank() != 4)
    return InvalidArgument(node.Describe(), ": NHWC input X must have rank 4, got ", ShapeToString(x->shape()));
  NhwcConvInput in;
  in.n = x->dim(0), in.h = x->dim(1), in.w = x->dim(2), in.c = x->dim(3);
  if (const ConvShapes* s = known ? known->For(in.n, in.c, in.h, in.w) : nullptr) {
    in.shapes = *s;
    return in;
  }
  ASSIGN_OR_RETURN(in.shapes, CheckConvShapes(nchw_node, {in.n, in.c, in.h, in.w}, w_shape, nullptr));
  return in;
}

StaticConvShapes::StaticConvShapes(const KernelInit& init, const Node& nchw_node, const Shape& w_shape, int64_t c) {
  if (!init.has_input(0)) return;
  const TypeInfo& t = init.input_type(0);
  if (!t.has_shape || t.dims.size() != 4) return;
  for (const Dim& d : t.dims)
    if (!d.known()) return;
  const int64_t n = t.dims[0].value, h = t.dims[1].value, w = t.dims[2].value;
  auto shapes = CheckConvShapes(nchw_node, {n, c >= 0 ? c : t.dims[3].value, h, w}, w_shape, nullptr);
  if (shapes.ok()) shapes_ = std::move(shapes).value();  // else Compute reports it, for X's real shape
}

const ConvShapes* StaticConvShapes::For(int64_t n, int64_t c, int64_t h, int64_t w) const {
  if (!shapes_ || shapes_->batch != n || shapes_->in_channels != c || shapes_->geo.in[0] != h ||
      shapes_->geo.in[1] != w)
    return nullptr;
  return &*shapes_;
}

NhwcWindow MakeNhwcWindow(const float* x, const NhwcConvInput& in) {
  const SpatialGeometry& g = in.shapes.geo;
  return {x,           in.h,         in.w,         in.c,           g.out[0],       g.out[1],       g.kernel[0],
          g.kernel[1], g.strides[0], g.strides[1], g.dilations[0], g.dilations[1], g.pad_begin[0], g.pad_begin[1]};
}

bool IsPointwiseNhwc(const SpatialGeometry& g) {
  return g.kernel[0] == 1 && g.kernel[1] == 1 && g.strides[0] == 1 && g.strides[1] == 1 && g.pad_begin[0] == 0 &&
         g.pad_begin[1] == 0 && g.pad_end[0] == 0 && g.pad_end[1] == 0;
}

Result<const Tensor*> NhwcConvResidual(const KernelContext& ctx, bool has_residual, const Shape& out_shape) {
  if (!has_residual) return nullptr;
  const Node& node = ctx.node();
  const Tensor* res = ctx.input(3);
  if (!res) return InvalidArgument(node.Describe(), ": the fused residual input is missing");
  if (res->dtype() != DataType::kFloat || res->shape() != out_shape)
    return InvalidArgument(node.Describe(), ": the fused residual must be float32 ", ShapeToString(out_shape),
                           " (the conv output), got ", DataTypeName(res->dtype()), " ", ShapeToString(res->shape()));
  return res;
}

Status RunNchwFallback(KernelContext& ctx, const OpKernel& ref, const Node& nchw_node, Tensor** y_out) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
    return InvalidArgument(node.Describe(), ": input X must be a float32 NHWC tensor of rank 4");
  const int64_t n = x->dim(0), h = x->dim(1), w = x->dim(2), c = x->dim(3);
  ASSIGN_OR_RETURN(Tensor xs, AllocateScratch(n * c * h * w, ctx.allocator(), node));
  TransposeNhwcToNchw(x->data<float>(), xs.mutable_data<float>(), n, c, h * w, ctx.pool());
  std::vector<Value> in_vals(ctx.num_inputs());
  in_vals[0] = Value(xs.Reshaped({n, c, h, w}));
  for (size_t i = 1; i < in_vals.size(); ++i) in_vals[i] = ctx.input_value(i);
  std::vector<const Value*> in_ptrs;
  for (size_t i = 0; i < in_vals.size(); ++i) in_ptrs.push_back(in_vals[i].empty() ? nullptr : &in_vals[i]);
  std::vector<Value> outs(nchw_node.outputs.size());
  KernelContext sub(nchw_node, in_ptrs, &outs, ctx.pool(), ctx.allocator(), ctx.subgraphs());
  RETURN_IF_ERROR(ref.Compute(sub));
  if (outs.empty() || !outs[0].is_tensor() || outs[0].tensor().rank() != 4)
    return InternalError(node.Describe(), ": NCHW fallback produced no rank-4 output");
  const Tensor& y = outs[0].tensor();
  const int64_t m = y.dim(1), oh = y.dim(2), ow = y.dim(3);
  ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, {n, oh, ow, m}));
  if (out->num_elements() > 0)
    TransposeNchwToNhwc(y.data<float>(), out->mutable_data<float>(), n, m, oh * ow, ctx.pool());
  if (y_out) *y_out = out;
  return Status::Ok();
}

namespace {

class NhwcConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  // Once XNNPACK packed W and B at creation, the originals are only needed by the NCHW
  // fallback, which then reports that they were released (see Compute).
  std::vector<size_t> PackedConstantInputs() const override {
    if (!weights_.empty() || reference_only_) return {};
    return {1, 2};
  }
  const char* ImplName() const override { return reference_only_ ? "ref" : "xnnpack"; }
  // GroupedConvTooCostlyForXnnpack: the reference conv instead of XNNPACK, whose calls
  // cannot be stopped (a 128 x 128 kernel of 2-channel groups over a padded 384 x 384 image
  // ran for minutes).
  void SetReferenceOnly() {
    reference_only_ = true;
    weights_ = {};
  }
  NhwcConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, FusedActivation act)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act) {
    group_ = init.node.GetInt("group", 1);
    m_ = w_shape_[0];
    cig_ = w_shape_[1];
    kh_ = w_shape_[2];
    kw_ = w_shape_[3];
    // OIHW -> OHWI, XNNPACK's [groups, group_out, kh, kw, group_in] layout.
    const float* src = w.data<float>();
    weights_.resize(static_cast<size_t>(m_ * kh_ * kw_ * cig_));
    for (int64_t o = 0; o < m_; ++o)
      for (int64_t i = 0; i < cig_; ++i)
        for (int64_t k = 0; k < kh_ * kw_; ++k)
          weights_[(o * kh_ * kw_ + k) * cig_ + i] = src[(o * cig_ + i) * kh_ * kw_ + k];
    if (b) bias_.assign(b->data<float>(), b->data<float>() + m_);
    // XNNPACK and the reference conv apply only clamps: a SiLU / HardSwish runs over Y after
    // them (Compute), so the NCHW fallback's node drops it.
    if (act_.kind != ActKind::kClamp)
      for (const char* a : {"activation", "activation_min", "activation_max"}) nchw_node_.attrs.erase(a);
  }

  // Validates the attributes and, for static pads, creates the XNNPACK operator now.
  Status Init(const KernelInit& init) {
    const Node& node = nchw_node_;
    ASSIGN_OR_RETURN(strides_, SpatialInts(node, "strides", 2, 1));
    ASSIGN_OR_RETURN(dilations_, SpatialInts(node, "dilations", 2, 1));
    for (int64_t v : strides_)
      if (v <= 0 || v > UINT32_MAX) return InvalidModel(init.node.Describe(), ": bad stride ", v);
    for (int64_t v : dilations_)
      if (v <= 0 || v > UINT32_MAX) return InvalidModel(init.node.Describe(), ": bad dilation ", v);
    ASSIGN_OR_RETURN(ref_, MakeRefConv(KernelInit{nchw_node_, init.graph, init.pool, init.config}));
    std::string auto_pad = node.GetString("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET" || auto_pad == "VALID") {
      Shape pads(4, 0);
      if (auto_pad == "NOTSET" && node.HasAttr("pads")) pads = node.GetInts("pads");
      if (pads.size() != 4) return InvalidModel(init.node.Describe(), ": attribute 'pads' needs 4 values");
      for (int64_t p : pads)
        if (p < 0 || p > UINT32_MAX) return InvalidModel(init.node.Describe(), ": bad pad ", p);
      // A rejection here is not an error: Compute then takes the exact fallback.
      auto create = [&](xnn_operator_t* op) { return CreateOp(pads, op); };
      if (!reference_only_ && cache_.Prepare(pads, create, init.node, "convolution").ok()) weights_ = {};
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const int64_t n = xin.n, h = xin.h, w = xin.w;
    const SpatialGeometry& g = xin.shapes.geo;
    const Shape key = {g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
    if (reference_only_) {
      Tensor* y = nullptr;
      RETURN_IF_ERROR(RunNchwFallback(ctx, *ref_, nchw_node_, &y));
      ActivateAfterClamp(y);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, g.out[0], g.out[1], m_}));
    if (y->num_elements() == 0) return Status::Ok();
    pthreadpool_t tp = ctx.pool() ? ctx.pool()->handle() : nullptr;
    const float* in = x->data<float>();
    float* out = y->mutable_data<float>();
    Status st = cache_.Run(
        key, [&](xnn_operator_t* op) { return CreateOp(key, op); },
        [&](xnn_operator_t op) { return xnn_setup_convolution2d_nhwc_f32(op, n, h, w, in, out, tp); }, tp, node,
        "convolution");
    if (st.code() == StatusCode::kUnsupported) {
      const Tensor* wt = ctx.input(1);
      if (!wt || !wt->raw_data())
        return Unsupported(node.Describe(), ": XNNPACK rejected this input (", st.message(),
                           ") and the NCHW fallback needs W, which was released after packing");
      RETURN_IF_ERROR(RunNchwFallback(ctx, *ref_, nchw_node_, &y));
    } else {
      RETURN_IF_ERROR(st);
    }
    ActivateAfterClamp(y);
    return Status::Ok();
  }

 private:
  // A SiLU / HardSwish over Y, after the clamp XNNPACK or the reference conv applied.
  void ActivateAfterClamp(Tensor* y) const {
    if (act_.kind == ActKind::kClamp || !y) return;
    if (sgemm::Available()) {
      simd::ActivateSpan(y->mutable_data<float>(), y->num_elements(), act_.kind);
    } else {
      ApplyActivation(y->mutable_data<float>(), y->num_elements(), FusedActivation{.kind = act_.kind});
    }
  }

  // Creates the XNNPACK operator for key = {top, left, bottom, right}; call sites wrap it in
  // a lambda that a CreateFn refers to (no std::function, so no allocation per run).
  xnn_status CreateOp(const Shape& key, xnn_operator_t* op) const {
    if (weights_.empty()) return xnn_status_invalid_state;
    return xnn_create_convolution2d_nhwc_f32(key[0], key[3], key[2], key[1], kh_, kw_, strides_[0], strides_[1],
                                             dilations_[0], dilations_[1], group_, cig_, m_ / group_, cig_ * group_, m_,
                                             weights_.data(), bias_.empty() ? nullptr : bias_.data(), act_.min,
                                             act_.max, 0, op);
  }

  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  int64_t group_ = 1, m_ = 0, cig_ = 0, kh_ = 1, kw_ = 1;
  Shape strides_, dilations_;
  std::vector<float> weights_, bias_;
  std::unique_ptr<OpKernel> ref_;
  XnnOperatorCache cache_;
  bool reference_only_ = false;
};

// The NhwcConv kernel for init's node, without regard to a fused input scale (input 4);
// *takes_scale tells whether the kernel applies that scale itself (the SGEMM conv).
Result<std::unique_ptr<OpKernel>> MakeNhwcConvKernel(const KernelInit& init, bool* takes_scale) {
  *takes_scale = false;
  const Node& node = init.node;
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  // The layout pass only emits NhwcConv for these; anything else is a malformed graph.
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0)
    return InvalidModel(node.Describe(), ": NhwcConv needs a constant non-empty float32 OIHW weight");
  if (init.has_input(2) && (!b || b->dtype() != DataType::kFloat || b->rank() != 1 || b->dim(0) != w->dim(0)))
    return InvalidModel(node.Describe(), ": NhwcConv bias must be a constant float32 [", w->dim(0), "]");
  int64_t group = node.GetInt("group", 1);
  if (group <= 0 || group > UINT32_MAX || w->dim(0) % group != 0)
    return InvalidModel(node.Describe(), ": group ", group, " does not divide the ", w->dim(0), " output channels");
  if (node.HasAttr("kernel_shape") && node.GetInts("kernel_shape") != Shape(w->shape().begin() + 2, w->shape().end()))
    return InvalidModel(node.Describe(), ": kernel_shape does not match W ", ShapeToString(w->shape()));
  // Relu / Clip, or SiLU / HardSwish (FuseNhwcConvActivation), which every kernel below
  // applies in its store (or XNNPACK's, over its output).
  ASSIGN_OR_RETURN(FusedActivation act, ParseNhwcConvActivation(node));
  // A second output, the pooled channel means (FuseDepthwiseGlobalPool), only the depthwise
  // kernel makes.
  if (node.outputs.size() > 1) {
    auto dw = MakeNhwcDepthwiseConv(init, *w, b, act);
    if (dw.ok() || dw.status().code() != StatusCode::kUnsupported) return dw;
    return InvalidModel(node.Describe(), ": a pooled second output needs the AVX-512F depthwise conv (",
                        dw.status().message(), ")");
  }
  // Ungrouped convs run on strata's SGEMM (faster than XNNPACK's IGEMM here, and on the
  // session pool, at any thread count); depthwise ones and narrow groups on strata's kernels;
  // other grouped convs on XNNPACK, whose workers ParkXnnWorkers puts to sleep
  // after each operator so that the two pools never spin against each other.
  // RGB stems: where a kernel row spans fewer than 16 floats (3x3 over 3 channels) the direct
  // stem kernel beats the SGEMM's gathered tiles (0.15 vs 0.44 ms on mobilenet_v2's); from 16
  // on (7x7 over 3 channels: 21) the SGEMM reads padded kernel-row segments in place and wins
  // (1.3 vs 1.6-1.9 ms at 1 thread, 0.7 vs 1.6 at 2, `strata_kernel_bench` BM_NhwcConv/stem*).
  if (w->dim(1) * w->dim(3) < kMinRowSegmentFloats) {
    auto stem = MakeNhwcStemConv(init, *w, b, act);
    if (stem.ok() || stem.status().code() != StatusCode::kUnsupported) return stem;
  }
  // 3x3 stride-1 convs on maps of at least 14x14: Winograd (fp32, also in bf16 sessions).
  auto wino = MakeNhwcWinogradConv(init, *w, b, act);
  if (wino.ok() || wino.status().code() != StatusCode::kUnsupported) return wino;
  // bf16 fast-math sessions take the bf16 GEMM for the other ungrouped convs that have at
  // most kBf16ConvMaxConvsAfter convs after them.
  auto bf16 = MakeNhwcBf16Conv(init, *w, b, act);
  if (bf16.ok() || bf16.status().code() != StatusCode::kUnsupported) return bf16;
  auto gemm = MakeNhwcGemmConv(init, *w, b, act);
  *takes_scale = gemm.ok();
  if (gemm.ok() || gemm.status().code() != StatusCode::kUnsupported) return gemm;
  if (init.has_input(3))
    return InvalidModel(node.Describe(), ": a fused residual input needs the SGEMM conv (group 1, AVX-512F)");
  auto dw = MakeNhwcDepthwiseConv(init, *w, b, act);
  if (dw.ok() || dw.status().code() != StatusCode::kUnsupported) return dw;
  auto grouped = MakeNhwcGroupedConv(init, *w, b, act);
  if (grouped.ok() || grouped.status().code() != StatusCode::kUnsupported) return grouped;
  RETURN_IF_ERROR(EnsureXnnpackInitialized());
  auto k = std::make_unique<NhwcConvKernel>(init, *w, b, act);
  if (GroupedConvTooCostlyForXnnpack(group, *w)) k->SetReferenceOnly();
  RETURN_IF_ERROR(k->Init(init));
  return std::unique_ptr<OpKernel>(std::move(k));
}

Result<std::unique_ptr<OpKernel>> MakeNhwcConv(const KernelInit& init) {
  // A fused channel Concat and pre-activation BatchNormalization (FuseNhwcConvInputNorm):
  // the pointwise SGEMM conv applies them to its A tiles; other kernels read them made whole.
  if (HasNhwcConvInputTransform(init.node)) {
    const Tensor* w = init.constant_input(1);
    if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->num_elements() == 0)
      return InvalidModel(init.node.Describe(), ": NhwcConv needs a constant non-empty float32 OIHW weight");
    // X's channels are W's times the groups (at most W's output channels, so no overflow).
    const int64_t group = init.node.GetInt("group", 1);
    if (group <= 0 || group > w->dim(0) || w->dim(0) % group != 0)
      return InvalidModel(init.node.Describe(), ": group ", group, " does not divide the ", w->dim(0),
                          " output channels");
    ASSIGN_OR_RETURN(NhwcConvInputTransform t, ParseNhwcConvInputTransform(init, w->dim(1) * group));
    // A bf16 session's bf16 conv keeps its conv (on the transformed copy).
    if (!NhwcBf16ConvTakes(init) && init.node.outputs.size() == 1) {
      auto k = MakeNhwcInputNormGemmConv(init, *w, init.constant_input(2), t);
      if (k.ok() || k.status().code() != StatusCode::kUnsupported) return k;
    }
    bool takes_scale = false;
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, MakeNhwcConvKernel(init, &takes_scale));
    return WrapNhwcTransformedInput(std::move(inner), std::move(t));
  }
  bool takes_scale = false;
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeNhwcConvKernel(init, &takes_scale));
  // Every other kernel reads X as it is: it gets a scaled copy (FuseNhwcConvInputScale's
  // Mul, as the graph had it).
  if (init.has_input(kNhwcConvInputScale) && !takes_scale) k = WrapNhwcScaledInput(std::move(k));
  return k;
}

// NCHW <-> NHWC for rank-4 float tensors, and uint8/int8 ones (static int8 models' QLinearConv
// regions); the pass only inserts them on such values.
template <bool kToNhwc>
Status LayoutChange(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const bool bytes = x && (x->dtype() == DataType::kUInt8 || x->dtype() == DataType::kInt8);
  if (!x || (x->dtype() != DataType::kFloat && !bytes) || x->rank() != 4)
    return InvalidArgument(node.Describe(), ": expected a rank-4 float32, uint8 or int8 tensor, got ",
                           x ? DataTypeName(x->dtype()) : "nothing", x ? ShapeToString(x->shape()) : "");
  const Shape& s = x->shape();
  Shape out = kToNhwc ? Shape{s[0], s[2], s[3], s[1]} : Shape{s[0], s[3], s[1], s[2]};
  const int64_t n = s[0], c = kToNhwc ? s[1] : s[3], hw = kToNhwc ? s[2] * s[3] : s[1] * s[2];
  // One channel or one pixel: both layouts hold the same bytes, so alias.
  if (c == 1 || hw == 1) {
    ctx.SetOutput(0, Value(x->Reshaped(out)));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
  if (y->num_elements() == 0) return Status::Ok();
  if (bytes) {
    const auto* src = static_cast<const uint8_t*>(x->raw_data());
    auto* dst = static_cast<uint8_t*>(y->raw_mutable_data());
    for (int64_t i = 0; i < n; ++i) {
      if (kToNhwc) {
        int8conv::ToNhwc(src + i * c * hw, c, hw, dst + i * c * hw, ctx.pool());
      } else {
        int8conv::ToNchw(src + i * c * hw, c, hw, dst + i * c * hw, ctx.pool());
      }
    }
    return Status::Ok();
  }
  if (kToNhwc) {
    TransposeNchwToNhwc(x->data<float>(), y->mutable_data<float>(), n, c, hw, ctx.pool());
  } else {
    TransposeNhwcToNchw(x->data<float>(), y->mutable_data<float>(), n, c, hw, ctx.pool());
  }
  return Status::Ok();
}

}  // namespace

void RegisterNhwcConvKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcConv",
              .types = {DataType::kFloat},
              .factory = MakeNhwcConv,
              // A fused residual (input 3) runs only on the SGEMM conv; the residual fusion
              // pass asks the registry this before it fuses.
              .covers =
                  [](const KernelInit& init) {
                    // SiLU / HardSwish: every NhwcConv kernel applies them, the AVX-512 ones in
                    // their stores (XNNPACK's, on other CPUs, only in a scalar pass after it).
                    const std::string act = init.node.GetString("activation", "");
                    if ((act == "Silu" || act == "HardSwish") && !sgemm::Available()) return false;
                    const Tensor* w = init.constant_input(1);
                    // The pooled second output: the depthwise kernel (multiplier 1), AVX-512F.
                    if (init.node.outputs.size() > 1)
                      return dw::Available() && w && w->rank() == 4 && w->dim(1) == 1 &&
                             init.node.GetInt("group", 1) == w->dim(0) && !init.has_input(3);
                    return !init.has_input(3) || (w && NhwcGemmConvApplies(init.node, *w));
                  },
              .reference = false,
              .impl = "nhwc-sgemm|winograd|xnnpack"});
  r.Register({.domain = kInternalDomain,
              .op_type = kInvertedResidualOp,
              .types = {DataType::kFloat},
              .factory = MakeNhwcInvertedResidual,
              // Its 1x1 convs need the AVX-512 SGEMM and its depthwise conv the AVX-512 kernel;
              // the fusion pass asks this before it fuses.
              .covers = [](const KernelInit&) { return sgemm::Available() && dw::Available(); },
              .reference = false,
              .impl = "nhwc-block"});
  r.Register({.domain = kInternalDomain,
              .op_type = "NchwToNhwc",
              .types = {DataType::kFloat, DataType::kUInt8, DataType::kInt8},
              .factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
                return MakeFnKernel(LayoutChange<true>);
              },
              .reference = false,
              .impl = "nhwc"});
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcToNchw",
              .types = {DataType::kFloat, DataType::kUInt8, DataType::kInt8},
              .factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
                return MakeFnKernel(LayoutChange<false>);
              },
              .reference = false,
              .impl = "nhwc"});
}

}  // namespace strata
