// Optimized fp32 pooling.
//  * MaxPool / AveragePool 2-D: XNNPACK NHWC operators around NCHW<->NHWC transposes.
//    Cases XNNPACK cannot express exactly run on the reference kernel, decided per call
//    because they can depend on the input size: the Indices output, AveragePool with
//    dilations, count_include_pad with non-zero pads, or ceil_mode changing the output size.
//    MaxPool's ceil_mode is expressed as extra end padding, which max pooling ignores.
//  * GlobalAveragePool: a plane mean over contiguous NCHW memory needs no transpose, so a
//    vectorisable loop beats XNNPACK's NWC global pooling (which would need one).
#include <algorithm>
#include <limits>

#include "cpu/conv_geometry.h"
#include "cpu/pool_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

class XnnPool2dKernel final : public OpKernel {
 public:
  XnnPool2dKernel(bool is_max, std::unique_ptr<OpKernel> ref) : is_max_(is_max), ref_(std::move(ref)) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4 || !node.HasAttr("kernel_shape") ||
        (ctx.num_outputs() > 1 && ctx.output_requested(1)))
      return ref_->Compute(ctx);
    const std::vector<int64_t>* ks = FindInts(node, "kernel_shape");  // in place: no copy per run
    const Shape kernel = ks ? Shape(*ks) : Shape();
    const Shape in = {x->dim(2), x->dim(3)};
    if (kernel.size() != 2) return ref_->Compute(ctx);
    bool ceil_mode = node.GetInt("ceil_mode", 0) != 0;
    auto geo_or = ComputeWindowGeometry(node, in, kernel, ceil_mode);
    if (!geo_or.ok()) return ref_->Compute(ctx);  // the reference kernel reports the precise error
    const SpatialGeometry& g = *geo_or;
    Shape key = {g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
    if (is_max_) {
      // Pad the end so that XNNPACK's floor-mode size equals ONNX's (ceil-mode) size.
      for (int a = 0; a < 2; ++a)
        key[2 + a] = (g.out[a] - 1) * g.strides[a] + (kernel[a] - 1) * g.dilations[a] + 1 - in[a] - g.pad_begin[a];
      if (key[2] < 0 || key[3] < 0) return ref_->Compute(ctx);
    } else {
      bool any_pad = key[0] || key[1] || key[2] || key[3];
      if (g.dilations[0] != 1 || g.dilations[1] != 1) return ref_->Compute(ctx);
      if (any_pad && node.GetInt("count_include_pad", 0) != 0) return ref_->Compute(ctx);
      for (int a = 0; a < 2; ++a)
        if ((in[a] + key[a] + key[2 + a] - kernel[a]) / g.strides[a] + 1 != g.out[a]) return ref_->Compute(ctx);
    }
    for (int64_t v : key)
      if (v > UINT32_MAX) return ref_->Compute(ctx);
    const int64_t n = x->dim(0), c = x->dim(1), hw = in[0] * in[1], ohw = g.OutSize();
    if (PoolWindowTooCostlyForXnnpack(kernel, n * c * ohw)) return ref_->Compute(ctx);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, c, g.out[0], g.out[1]}));
    if (y->num_elements() == 0) return Status::Ok();
    bool direct = c == 1;  // NCHW == NHWC with one channel
    Tensor in_s, out_s;
    const float* in_nhwc = x->data<float>();
    float* out_nhwc = y->mutable_data<float>();
    if (!direct) {
      ASSIGN_OR_RETURN(in_s, AllocateScratch(n * hw * c, ctx.allocator(), node));
      ASSIGN_OR_RETURN(out_s, AllocateScratch(n * ohw * c, ctx.allocator(), node));
      TransposeNchwToNhwc(x->data<float>(), in_s.mutable_data<float>(), n, c, hw, ctx.pool());
      in_nhwc = in_s.data<float>();
      out_nhwc = out_s.mutable_data<float>();
    }
    Status st = RunXnnPool2d(cache_, is_max_, key, kernel, g, n, c, in_nhwc, out_nhwc, ctx);
    if (st.code() == StatusCode::kUnsupported) return ref_->Compute(ctx);
    RETURN_IF_ERROR(st);
    if (!direct) TransposeNhwcToNchw(out_nhwc, y->mutable_data<float>(), n, c, ohw, ctx.pool());
    return Status::Ok();
  }

 private:
  bool is_max_;
  std::unique_ptr<OpKernel> ref_;
  XnnOperatorCache cache_;
};

// Mean of one contiguous plane; 8 independent partial sums let the compiler vectorise
// without -ffast-math reassociation.
float PlaneMean(const float* p, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  float s = 0;
  for (; i < n; ++i) s += p[i];
  for (int j = 0; j < 8; ++j) s += acc[j];
  return n > 0 ? s / static_cast<float>(n) : 0.0f;
}

class FastGlobalAveragePoolKernel final : public OpKernel {
 public:
  explicit FastGlobalAveragePoolKernel(std::unique_ptr<OpKernel> ref) : ref_(std::move(ref)) {}
  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() < 3) return ref_->Compute(ctx);
    Shape out(x->rank(), 1);
    out[0] = x->dim(0);
    out[1] = x->dim(1);
    int64_t is = 1;
    for (size_t i = 2; i < x->rank(); ++i) is *= x->dim(i);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out));
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) yp[pl] = PlaneMean(xp + pl * is, is);
    };
    int64_t planes = x->dim(0) * x->dim(1);
    if (ctx.pool() && planes * is > 65536) {
      ctx.pool()->ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, is)), body);
    } else {
      body(0, planes);
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<OpKernel> ref_;
};

}  // namespace

bool PoolWindowTooCostlyForXnnpack(const Shape& kernel, int64_t outputs) {
  constexpr double kMaxWindow = 1024;  // taps (32 x 32)
  constexpr double kMaxWork = 0x1p27;  // taps over all outputs: ~30-100 ms
  double window = 1;
  for (int64_t k : kernel) window *= static_cast<double>(k);
  return window > kMaxWindow && window * static_cast<double>(outputs) > kMaxWork;
}

Status RunXnnPool2d(const XnnOperatorCache& cache, bool is_max, const Shape& pads, const Shape& kernel,
                    const SpatialGeometry& g, int64_t n, int64_t c, const float* in, float* out, KernelContext& ctx) {
  Shape key = pads;
  key.push_back(c);  // XNNPACK fixes the channel count at creation
  const float inf = std::numeric_limits<float>::infinity();
  auto create = [&](xnn_operator_t* op) {
    uint32_t t = key[0], l = key[1], b = key[2], r = key[3];
    if (is_max)
      return xnn_create_max_pooling2d_nhwc_f32(t, r, b, l, kernel[0], kernel[1], g.strides[0], g.strides[1],
                                               g.dilations[0], g.dilations[1], c, c, c, -inf, inf, 0, op);
    return xnn_create_average_pooling2d_nhwc_f32(t, r, b, l, kernel[0], kernel[1], g.strides[0], g.strides[1], c, c, c,
                                                 -inf, inf, 0, op);
  };
  pthreadpool_t tp = ctx.pool() ? ctx.pool()->handle() : nullptr;
  auto setup = [&](xnn_operator_t op) {
    return is_max ? xnn_setup_max_pooling2d_nhwc_f32(op, n, g.in[0], g.in[1], in, out, tp)
                  : xnn_setup_average_pooling2d_nhwc_f32(op, n, g.in[0], g.in[1], in, out, tp);
  };
  return cache.Run(key, create, setup, tp, ctx.node(), is_max ? "max pooling" : "average pooling");
}

Result<std::unique_ptr<OpKernel>> MakeXnnMaxPool(const KernelInit& init) {
  ASSIGN_OR_RETURN(auto ref, MakeRefMaxPool(init));
  if (!EnsureXnnpackInitialized().ok()) return ref;
  return std::unique_ptr<OpKernel>(std::make_unique<XnnPool2dKernel>(true, std::move(ref)));
}

Result<std::unique_ptr<OpKernel>> MakeXnnAveragePool(const KernelInit& init) {
  ASSIGN_OR_RETURN(auto ref, MakeRefAveragePool(init));
  if (!EnsureXnnpackInitialized().ok()) return ref;
  return std::unique_ptr<OpKernel>(std::make_unique<XnnPool2dKernel>(false, std::move(ref)));
}

Result<std::unique_ptr<OpKernel>> MakeFastGlobalAveragePool(const KernelInit& init) {
  ASSIGN_OR_RETURN(auto ref, MakeRefGlobalAveragePool(init));
  return std::unique_ptr<OpKernel>(std::make_unique<FastGlobalAveragePoolKernel>(std::move(ref)));
}

}  // namespace strata
