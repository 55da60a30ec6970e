// Spatial layout ops of ai.onnx opsets 18-20: Col2Im (18), CenterCropPad (18) and AffineGrid
// (20). Plain loops: each is the reference and the only kernel (none sits on a hot path of the
// benchmark models). Sizes come from input tensors, so every product is checked for overflow
// and every count against the tensors before anything is allocated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
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

using tensorops::IntsAttrOfLength;
using tensorops::ReadInts;
using tensorops::RequireInput;

// a * b, or an error naming `what` when it overflows (or a factor is negative).
Result<int64_t> CheckedMul(int64_t a, int64_t b, const Node& node, const char* what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    return InvalidArgument(node.Describe(), ": ", what, " overflows");
  return r;
}

// ---------------------------------------------------------------- Col2Im

// input [N, C * prod(block), L] -> [N, C, image...]: the inverse of im2col, summing the
// values of overlapping blocks. L must be the number of block positions the image, pads,
// dilations and strides give.
Status Col2ImOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* image_t, RequireInput(ctx, 1, "image_shape"));
  ASSIGN_OR_RETURN(const Tensor* block_t, RequireInput(ctx, 2, "block_shape"));
  ASSIGN_OR_RETURN(std::vector<int64_t> image, ReadInts(*image_t, node, "image_shape"));
  ASSIGN_OR_RETURN(std::vector<int64_t> block, ReadInts(*block_t, node, "block_shape"));
  const size_t nd = image.size();
  if (nd == 0 || block.size() != nd)
    return InvalidArgument(node.Describe(), ": image_shape and block_shape must have the same non-zero length, got ",
                           image.size(), " and ", block.size());
  if (x->rank() != 3)
    return InvalidArgument(node.Describe(), ": input must be [N, C * prod(block_shape), L], got ",
                           ShapeToString(x->shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> dil, IntsAttrOfLength(node, "dilations", nd, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttrOfLength(node, "pads", 2 * nd, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsAttrOfLength(node, "strides", nd, 1));
  int64_t block_size = 1, positions = 1, image_size = 1;
  std::vector<int64_t> counts(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (image[d] <= 0 || block[d] <= 0 || dil[d] <= 0 || strides[d] <= 0 || pads[d] < 0 || pads[d + nd] < 0)
      return InvalidArgument(node.Describe(), ": axis ", d, ": image ", image[d], ", block ", block[d], ", dilation ",
                             dil[d], ", stride ", strides[d], " must be positive and pads non-negative");
    const int64_t span = dil[d] * (block[d] - 1) + 1;  // image[d] > 0 and the factors are small or refused below
    if (span > image[d] + pads[d] + pads[d + nd] || dil[d] > (int64_t{1} << 32) || block[d] > (int64_t{1} << 32))
      return InvalidArgument(node.Describe(), ": axis ", d, ": the block (", block[d], " with dilation ", dil[d],
                             ") does not fit the padded image (", image[d], ")");
    counts[d] = (image[d] + pads[d] + pads[d + nd] - span) / strides[d] + 1;
    ASSIGN_OR_RETURN(block_size, CheckedMul(block_size, block[d], node, "prod(block_shape)"));
    ASSIGN_OR_RETURN(positions, CheckedMul(positions, counts[d], node, "the block count"));
    ASSIGN_OR_RETURN(image_size, CheckedMul(image_size, image[d], node, "prod(image_shape)"));
  }
  const int64_t n = x->dim(0);
  if (x->dim(1) % block_size != 0)
    return InvalidArgument(node.Describe(), ": input dim 1 (", x->dim(1), ") is not a multiple of prod(block_shape) (",
                           block_size, ")");
  if (x->dim(2) != positions)
    return InvalidArgument(node.Describe(), ": input dim 2 (", x->dim(2), ") must be the number of block positions, ",
                           positions);
  const int64_t c = x->dim(1) / block_size;
  Shape out_shape = {n, c};
  out_shape.insert(out_shape.end(), image.begin(), image.end());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  KernelStop stop(node);
  const bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* in = x->data<T>();
    T* out = y->mutable_data<T>();
    std::vector<double> acc(static_cast<size_t>(image_size));
    std::vector<int64_t> kpos(nd), bpos(nd);
    int64_t pending = 0;
    for (int64_t nc = 0; nc < n * c; ++nc) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < block_size; ++k) {
        for (int64_t r = k, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
          kpos[d] = r % block[d];
          r /= block[d];
        }
        const T* row = in + (nc * block_size + k) * positions;
        for (int64_t l = 0; l < positions; ++l) {
          int64_t off = 0;
          bool inside = true;
          for (int64_t r = l, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
            bpos[d] = r % counts[d];
            r /= counts[d];
          }
          for (size_t d = 0; d < nd && inside; ++d) {
            const int64_t p = bpos[d] * strides[d] - pads[d] + kpos[d] * dil[d];
            inside = p >= 0 && p < image[d];
            off = off * image[d] + p;
          }
          if (inside) acc[static_cast<size_t>(off)] += AsDouble(row[l]);
        }
        if (!stop.Continue(pending, positions * static_cast<int64_t>(nd + 1))) return;
      }
      for (int64_t i = 0; i < image_size; ++i) out[nc * image_size + i] = FromDouble<T>(acc[i]);
    }
  });
  if (!ok) return Unsupported(node.Describe(), ": Col2Im does not support dtype ", DataTypeName(x->dtype()));
  return stop.status();
}

// ---------------------------------------------------------------- CenterCropPad

// Each listed axis becomes the given length: centred crops of longer axes (the extra element
// of an odd difference is cut at the end) and zero padding of shorter ones (the extra at the
// end too).
Status CenterCropPadOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input_data"));
  ASSIGN_OR_RETURN(const Tensor* shape_t, RequireInput(ctx, 1, "shape"));
  ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadInts(*shape_t, node, "shape"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  std::vector<int64_t> axes;
  if (node.HasAttr("axes")) {
    axes = node.GetInts("axes");
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (target.size() != axes.size())
    return InvalidArgument(node.Describe(), ": shape has ", target.size(), " values for ", axes.size(), " axes");
  Shape out_shape = x->shape();
  std::vector<int64_t> shift(static_cast<size_t>(rank), 0);  // output index - input index, per axis
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axes[i], rank, node));
    if (seen[a]) return InvalidModel(node.Describe(), ": axis ", axes[i], " appears twice in axes");
    seen[a] = true;
    if (target[i] < 0) return InvalidArgument(node.Describe(), ": shape[", i, "] = ", target[i], " is negative");
    const int64_t len = x->dim(a);
    shift[a] = len >= target[i] ? -((len - target[i]) / 2) : (target[i] - len) / 2;
    out_shape[a] = target[i];
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  const int64_t total = y->num_elements();
  if (total == 0) return Status::Ok();
  const bool ok = DispatchAny(x->dtype(), [&]<typename T>() {
    const T* in = x->data<T>();
    T* out = y->mutable_data<T>();
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (int64_t o = 0; o < total; ++o) {
      int64_t src = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t i = idx[d] - shift[d];
        inside = inside && i >= 0 && i < x->dim(d);
        src = src * x->dim(d) + (inside ? i : 0);
      }
      out[o] = inside ? in[src] : T{};
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < out_shape[d]) break;
        idx[d] = 0;
      }
    }
  });
  if (!ok) return Unsupported(node.Describe(), ": CenterCropPad does not support dtype ", DataTypeName(x->dtype()));
  return Status::Ok();
}

// ---------------------------------------------------------------- AffineGrid

// theta [N, 2, 3] and size [N, C, H, W] -> grid [N, H, W, 2]; theta [N, 3, 4] and size
// [N, C, D, H, W] -> [N, D, H, W, 3]. Each grid point is theta times the normalized
// coordinates (x along W, y along H, z along D, 1): -1..1 at the pixel centres with
// align_corners, else at the edges ((2i + 1) / L - 1).
Status AffineGridOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* theta, RequireInput(ctx, 0, "theta"));
  ASSIGN_OR_RETURN(const Tensor* size_t_, RequireInput(ctx, 1, "size"));
  ASSIGN_OR_RETURN(std::vector<int64_t> size, ReadInts(*size_t_, node, "size"));
  if (size.size() != 4 && size.size() != 5)
    return InvalidArgument(node.Describe(), ": size must have 4 (2-D) or 5 (3-D) values, got ", size.size());
  const int64_t sd = static_cast<int64_t>(size.size()) - 2;  // spatial dims: 2 or 3
  const int64_t n = size[0];
  if (theta->rank() != 3 || theta->dim(0) != n || theta->dim(1) != sd || theta->dim(2) != sd + 1)
    return InvalidArgument(node.Describe(), ": theta must be [N, ", sd, ", ", sd + 1, "] with N = size[0] = ", n,
                           ", got ", ShapeToString(theta->shape()));
  for (size_t d = 2; d < size.size(); ++d)
    if (size[d] < 0) return InvalidArgument(node.Describe(), ": size[", d, "] = ", size[d], " is negative");
  const bool align = node.GetInt("align_corners", 0) != 0;
  Shape out_shape = {n};
  out_shape.insert(out_shape.end(), size.begin() + 2, size.end());
  out_shape.push_back(sd);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, theta->dtype(), out_shape));
  // Normalized coordinates along an axis of length len.
  auto base = [align](int64_t i, int64_t len) -> double {
    if (align) return len > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1) : 0.0;
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  const int64_t D = sd == 3 ? size[2] : 1, H = size[sd == 3 ? 3 : 2], W = size[sd == 3 ? 4 : 3];
  const bool ok = DispatchFloat(theta->dtype(), [&]<typename T>() {
    const T* th = theta->data<T>();
    T* out = y->mutable_data<T>();
    int64_t o = 0;
    for (int64_t b = 0; b < n; ++b) {
      const T* m = th + b * sd * (sd + 1);
      for (int64_t z = 0; z < D; ++z)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const double p[4] = {base(w, W), base(h, H), sd == 3 ? base(z, D) : 1.0, 1.0};
            for (int64_t r = 0; r < sd; ++r) {
              double v = 0;
              for (int64_t k = 0; k <= sd; ++k) v += AsDouble(m[r * (sd + 1) + k]) * p[k];
              out[o++] = FromDouble<T>(v);
            }
          }
    }
  });
  if (!ok) return Unsupported(node.Describe(), ": AffineGrid does not support dtype ", DataTypeName(theta->dtype()));
  return Status::Ok();
}

}  // namespace

void RegisterSpatialKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("Col2Im", 18, Col2ImOp));
  r.Register(UntypedFnDef("CenterCropPad", 18, CenterCropPadOp));
  r.Register(UntypedFnDef("AffineGrid", 20, AffineGridOp));
}

}  // namespace strata
