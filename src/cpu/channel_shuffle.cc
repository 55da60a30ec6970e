// Channel shuffle (core/channel_shuffle_fusion.cc): internal ops with attributes groups = g
// and shape = Y's NCHW dims [N, C, H, W] (k = C / g channels per group). They compute what
// the fused Reshape -> Transpose (0, 2, 1, 3, 4) -> Reshape did, for any X of N*C*H*W
// elements: X's data read flat as [N, g, k, H*W], Y = [N, k, g, H*W] of shape `shape`.
//   ChannelShuffle      NCHW X and Y: y[n, j * g + i] = x[n, i * k + j], whole planes
//   NhwcChannelShuffle  NHWC twins of X and Y: when X has Y's shape, the same permutation of
//                       each pixel's channels; otherwise (a reshape that reinterprets X,
//                       which the fused graph allowed) element by element through X's
//                       NCHW indices.
#include <cstring>

#include "core/layout_pass.h"
#include "cpu/nhwc_kernels.h"

namespace strata {
namespace {

struct ShuffleGeometry {
  int64_t n, c, h, w, g, k;
};

// Checks the attributes and X (float, as many elements as `shape`; rank 4 for the NHWC twin).
Result<ShuffleGeometry> Geometry(const Node& node, const Tensor* x, bool nhwc) {
  if (!x || x->dtype() != DataType::kFloat || (nhwc && x->rank() != 4))
    return InvalidArgument(node.Describe(), ": input X must be a float32 tensor", nhwc ? " of rank 4" : "");
  const std::vector<int64_t> s = node.GetInts("shape");
  const int64_t g = node.GetInt("groups", 0);
  if (s.size() != 4 || g <= 0 || s[1] % g != 0)
    return InvalidModel(node.Describe(), ": attributes shape (4 dims) and groups (dividing its channels) are ",
                        "malformed");
  if (NumElements(Shape(s.begin(), s.end())) != x->num_elements())
    return InvalidArgument(node.Describe(), ": X of shape ", ShapeToString(x->shape()), " cannot be reshaped to ",
                           ShapeToString(Shape(s.begin(), s.end())), " for the channel shuffle");
  return ShuffleGeometry{s[0], s[1], s[2], s[3], g, s[1] / g};
}

Status ChannelShuffle(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  ASSIGN_OR_RETURN(const ShuffleGeometry sg, Geometry(ctx.node(), x, /*nhwc=*/false));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {sg.n, sg.c, sg.h, sg.w}));
  if (y->num_elements() == 0) return Status::Ok();
  const int64_t hw = sg.h * sg.w;
  const float* xp = x->data<float>();
  float* yp = y->mutable_data<float>();
  for (int64_t b = 0; b < sg.n; ++b)
    for (int64_t i = 0; i < sg.g; ++i)
      for (int64_t j = 0; j < sg.k; ++j)
        std::memcpy(yp + (b * sg.c + j * sg.g + i) * hw, xp + (b * sg.c + i * sg.k + j) * hw,
                    static_cast<size_t>(hw) * sizeof(float));
  return Status::Ok();
}

Status NhwcChannelShuffle(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  ASSIGN_OR_RETURN(const ShuffleGeometry sg, Geometry(ctx.node(), x, /*nhwc=*/true));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {sg.n, sg.h, sg.w, sg.c}));
  if (y->num_elements() == 0) return Status::Ok();
  const float* xp = x->data<float>();
  float* yp = y->mutable_data<float>();
  const int64_t c = sg.c, g = sg.g, k = sg.k;
  if (x->shape() != Shape{sg.n, sg.h, sg.w, sg.c}) {
    // X (NHWC [n', h', w', c']) reinterpreted: Y's element (b, oh, ow, j * g + i) is X's
    // NCHW flat element ((b * g + i) * k + j) * H * W + oh * W + ow.
    const int64_t xh = x->dim(1), xw = x->dim(2), xc = x->dim(3), hw = sg.h * sg.w;
    for (int64_t b = 0; b < sg.n; ++b)
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t i = 0; i < g; ++i) {
            const int64_t f = ((b * g + i) * k + j) * hw + p;
            const int64_t xw0 = f % xw, xh0 = f / xw % xh, xc0 = f / (xw * xh) % xc, xn0 = f / (xw * xh * xc);
            yp[(b * hw + p) * c + j * g + i] = xp[((xn0 * xh + xh0) * xw + xw0) * xc + xc0];
          }
    return Status::Ok();
  }
  const int64_t pixels = sg.n * sg.h * sg.w;
  auto body = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xr = xp + p * c;
      float* yr = yp + p * c;
      if (g == 2) {  // ShuffleNet's: interleave the two halves (vectorises as unpacks)
        const float* lo = xr;
        const float* hi = xr + k;
        for (int64_t j = 0; j < k; ++j) {
          yr[2 * j] = lo[j];
          yr[2 * j + 1] = hi[j];
        }
        continue;
      }
      // Written in order (contiguous stores), read with stride k.
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < g; ++i) yr[j * g + i] = xr[i * k + j];
    }
  };
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1));
  if (ctx.pool() && pixels > grain) {
    ctx.pool()->ParallelFor(pixels, grain, body);
  } else {
    body(0, pixels);
  }
  return Status::Ok();
}

}  // namespace

void RegisterChannelShuffleKernels(KernelRegistry& r) {
  // Named captures, not a structured binding: clang 14 (the fuzz build) cannot capture those.
  const auto reg = [&r](const char* op, Status (*fn)(KernelContext&)) {
    r.Register({.domain = kInternalDomain,
                .op_type = op,
                .types = {DataType::kFloat},
                .factory = [fn](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return MakeFnKernel(fn); },
                .reference = false,
                .impl = "nhwc"});
  };
  reg("ChannelShuffle", &ChannelShuffle);
  reg("NhwcChannelShuffle", &NhwcChannelShuffle);
}

}  // namespace strata
