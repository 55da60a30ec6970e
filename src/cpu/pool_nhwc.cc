// NHWC pooling for the layout pass (see nhwc_kernels.h).
//  * NhwcMaxPool: strata's own kernel (pool_nhwc_max.cc).
//  * NhwcAveragePool: XNNPACK's NHWC pooling, decided per call like the NCHW
//    XnnPool2dKernel (pool_xnnpack.cc): what XNNPACK cannot express exactly (dilations,
//    count_include_pad with pads, a ceil_mode size XNNPACK's floor sizing cannot reach) runs
//    on the reference kernel through RunNchwFallback.
//  * NhwcGlobalAveragePool: per-image channel means accumulated row by row (contiguous over
//    C, so it vectorises); writes [N, C, 1, 1], which is NHWC [N, 1, 1, C] byte for byte, or
//    [N, C] with keepdims = 0 (a ReduceMean over H and W).
#include <algorithm>

#include "core/layout_pass.h"
#include "cpu/conv_geometry.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/pool_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

class NhwcAveragePoolKernel final : public OpKernel {
 public:
  explicit NhwcAveragePoolKernel(Node nchw_node) : nchw_node_(std::move(nchw_node)) {}

  Status Init(const KernelInit& init) {
    KernelInit ref_init{nchw_node_, init.graph, init.pool, init.config};
    ASSIGN_OR_RETURN(ref_, MakeRefAveragePool(ref_init));
    return EnsureXnnpackInitialized();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
      return InvalidArgument(node.Describe(), ": input X must be a float32 NHWC tensor of rank 4");
    if (!nchw_node_.HasAttr("kernel_shape"))
      return InvalidModel(node.Describe(), ": missing required attribute kernel_shape");
    const std::vector<int64_t>* ks = FindInts(nchw_node_, "kernel_shape");  // in place: no copy per run
    const Shape kernel = ks ? Shape(*ks) : Shape();
    if (kernel.size() != 2)
      return InvalidArgument(node.Describe(), ": kernel_shape ", ShapeToString(kernel), " must have 2 dims");
    const int64_t n = x->dim(0), c = x->dim(3);
    const Shape in = {x->dim(1), x->dim(2)};
    bool ceil_mode = nchw_node_.GetInt("ceil_mode", 0) != 0;
    ASSIGN_OR_RETURN(SpatialGeometry g, ComputeWindowGeometry(nchw_node_, in, kernel, ceil_mode, /*dilations*/ true));
    Shape key = {g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
    bool exact = true;
    bool any_pad = key[0] || key[1] || key[2] || key[3];
    if (g.dilations[0] != 1 || g.dilations[1] != 1) exact = false;
    if (any_pad && nchw_node_.GetInt("count_include_pad", 0) != 0) exact = false;
    for (int a = 0; a < 2 && exact; ++a)
      if (in[a] + key[a] + key[2 + a] < kernel[a] ||
          (in[a] + key[a] + key[2 + a] - kernel[a]) / g.strides[a] + 1 != g.out[a])
        exact = false;
    for (int64_t v : key) exact = exact && v <= UINT32_MAX;
    for (int a = 0; a < 2; ++a) exact = exact && g.strides[a] <= UINT32_MAX;
    // Large windows with much work go to the reference kernel, which can be stopped
    // (PoolWindowTooCostlyForXnnpack, pool_xnnpack.cc).
    if (!exact || PoolWindowTooCostlyForXnnpack(kernel, n * c * g.OutSize()))
      return RunNchwFallback(ctx, *ref_, nchw_node_);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {n, g.out[0], g.out[1], c}));
    if (y->num_elements() == 0) return Status::Ok();
    Status st =
        RunXnnPool2d(cache_, /*is_max=*/false, key, kernel, g, n, c, x->data<float>(), y->mutable_data<float>(), ctx);
    if (st.code() == StatusCode::kUnsupported) return RunNchwFallback(ctx, *ref_, nchw_node_);
    return st;
  }

 private:
  Node nchw_node_;
  std::unique_ptr<OpKernel> ref_;
  XnnOperatorCache cache_;
};

Result<std::unique_ptr<OpKernel>> MakeNhwcAveragePool(const KernelInit& init) {
  auto k = std::make_unique<NhwcAveragePoolKernel>(OriginalNode(init.node, "AveragePool"));
  RETURN_IF_ERROR(k->Init(init));
  return std::unique_ptr<OpKernel>(std::move(k));
}

Status NhwcGlobalAveragePool(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
    return InvalidArgument(node.Describe(), ": input X must be a float32 NHWC tensor of rank 4");
  const int64_t n = x->dim(0), hw = x->dim(1) * x->dim(2), c = x->dim(3);
  // keepdims = 0: a ReduceMean over H and W the layout pass turned into this node ([N, C]).
  const Shape out = node.GetInt("keepdims", 1) != 0 ? Shape{n, c, 1, 1} : Shape{n, c};
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out));
  if (y->num_elements() == 0) return Status::Ok();
  const float* xp = x->data<float>();
  float* yp = y->mutable_data<float>();
  const float scale = hw > 0 ? 1.0f / static_cast<float>(hw) : 0.0f;
  // Work items are (image, block of 64 channels); each sums its columns over all pixels.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (c + kBlock - 1) / kBlock;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      int64_t img = item / blocks, c0 = (item % blocks) * kBlock, c1 = std::min(c, c0 + kBlock);
      float acc[kBlock] = {};
      const float* p = xp + img * hw * c;
      for (int64_t i = 0; i < hw; ++i, p += c)
        for (int64_t ch = c0; ch < c1; ++ch) acc[ch - c0] += p[ch];
      for (int64_t ch = c0; ch < c1; ++ch) yp[img * c + ch] = hw > 0 ? acc[ch - c0] * scale : 0.0f;
    }
  };
  if (ctx.pool() && n * hw * c > 65536) {
    ctx.pool()->ParallelFor(n * blocks, 1, body);
  } else {
    body(0, n * blocks);
  }
  return Status::Ok();
}

}  // namespace

void RegisterNhwcPoolKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcMaxPool",
              .types = {DataType::kFloat, DataType::kUInt8, DataType::kInt8},
              .factory = MakeNhwcMaxPool,
              .reference = false,
              .impl = "nhwc"});
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcAveragePool",
              .types = {DataType::kFloat},
              .factory = MakeNhwcAveragePool,
              .reference = false,
              .impl = "xnnpack-nhwc"});
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcGlobalAveragePool",
              .types = {DataType::kFloat},
              .factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
                return MakeFnKernel(NhwcGlobalAveragePool);
              },
              .reference = false,
              .impl = "nhwc"});
}

}  // namespace strata
