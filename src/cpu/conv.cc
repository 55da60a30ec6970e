// Conv and ConvTranspose: reference kernels (N-D, any group/stride/dilation/pad;
// the test oracle) and registration of the XNNPACK fp32 Conv.
#include <algorithm>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/conv_kernels.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/register.h"
#include "cpu/xnnpack_util.h"

namespace strata {

Result<ConvShapes> CheckConvShapes(const Node& node, const Shape& x, const Shape& w, const Tensor* b) {
  if (x.size() < 3)
    return InvalidArgument(node.Describe(), ": input X must be [N, C, spatial...] (rank >= 3), got ", ShapeToString(x));
  if (w.size() != x.size())
    return InvalidArgument(node.Describe(), ": weight W ", ShapeToString(w), " must have the same rank as X ",
                           ShapeToString(x));
  ConvShapes s;
  s.batch = x[0];
  s.in_channels = x[1];
  s.out_channels = w[0];
  s.group = node.GetInt("group", 1);
  if (s.group <= 0) return InvalidModel(node.Describe(), ": group ", s.group, " must be positive");
  if (w[1] * s.group != s.in_channels)
    return InvalidArgument(node.Describe(), ": channel mismatch: X has ", s.in_channels, " channels but W ",
                           ShapeToString(w), " with group=", s.group, " expects ", w[1] * s.group);
  if (s.out_channels % s.group != 0)
    return InvalidArgument(node.Describe(), ": W has ", s.out_channels, " output channels, not divisible by group ",
                           s.group);
  Shape kernel(w.begin() + 2, w.end());
  const std::vector<int64_t>* ks = FindInts(node, "kernel_shape");  // in place: this runs per Compute
  if (node.HasAttr("kernel_shape") && (!ks || Shape(*ks) != kernel))
    return InvalidArgument(node.Describe(), ": kernel_shape attribute ", ShapeToString(node.GetInts("kernel_shape")),
                           " does not match W's spatial dims ", ShapeToString(kernel));
  if (b && (b->rank() != 1 || b->dim(0) != s.out_channels))
    return InvalidArgument(node.Describe(), ": bias B ", ShapeToString(b->shape()), " must be [", s.out_channels, "]");
  Shape in(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(s.geo, ComputeWindowGeometry(node, in, kernel, /*ceil_mode=*/false));
  return s;
}

Result<FloatConvIo> StartFloatConv(KernelContext& ctx, const Shape& w_shape) {
  const Node& node = ctx.node();
  FloatConvIo io;
  io.x = ctx.input(0);
  if (!io.x) return InvalidArgument(node.Describe(), ": Conv needs input X");
  if (io.x->dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": X dtype ", DataTypeName(io.x->dtype()), " differs from W's float32");
  ASSIGN_OR_RETURN(io.shapes, CheckConvShapes(node, io.x->shape(), w_shape, nullptr));
  Shape out = {io.shapes.batch, io.shapes.out_channels};
  out.insert(out.end(), io.shapes.geo.out.begin(), io.shapes.geo.out.end());
  ASSIGN_OR_RETURN(io.y, ctx.AllocateOutput(0, DataType::kFloat, std::move(out)));
  return io;
}

namespace {

// Per-axis input offset of every kernel tap (k*dilation - pad_begin) and its flat index.
struct Taps {
  std::vector<std::vector<int64_t>> offset;  // [tap][axis]
};
Taps MakeTaps(const SpatialGeometry& g) {
  Taps t;
  size_t r = g.rank();
  int64_t ks = g.KernelSize();
  t.offset.resize(ks, std::vector<int64_t>(r));
  std::vector<int64_t> k(r, 0);
  for (int64_t i = 0; i < ks; ++i) {
    for (size_t a = 0; a < r; ++a) t.offset[i][a] = k[a] * g.dilations[a] - g.pad_begin[a];
    for (size_t a = r; a-- > 0;) {
      if (++k[a] < g.kernel[a]) break;
      k[a] = 0;
    }
  }
  return t;
}

template <typename T>
void RefConvTyped(const T* x, const T* w, const T* b, T* y, const ConvShapes& s, const FusedActivation& act,
                  ThreadPool* pool, KernelStop& stop) {
  using A = typename AccType<T>::type;
  const SpatialGeometry& g = s.geo;
  const size_t r = g.rank();
  const int64_t is = g.InSize(), os = g.OutSize(), ks = g.KernelSize();
  const int64_t cig = s.in_channels / s.group, cog = s.out_channels / s.group;
  const Taps taps = MakeTaps(g);
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(r);
    int64_t pending = 0;
    for (int64_t item = begin; item < end; ++item) {
      int64_t n = item / s.out_channels, oc = item % s.out_channels, grp = oc / cog;
      const T* xg = x + (n * s.in_channels + grp * cig) * is;
      const T* wo = w + oc * cig * ks;
      T* yo = y + (n * s.out_channels + oc) * os;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t p = 0; p < os; ++p) {
        // The kernel's size, not the input's, sets the cost: the run's limits are checked.
        if (!stop.Continue(pending, ks * (cig + 1))) return;
        A acc = b ? static_cast<A>(b[oc]) : A(0);
        for (int64_t t = 0; t < ks; ++t) {
          int64_t off = 0;
          bool inside = true;
          for (size_t a = 0; a < r && inside; ++a) {
            int64_t pos = o[a] * g.strides[a] + taps.offset[t][a];
            inside = pos >= 0 && pos < g.in[a];
            off = off * g.in[a] + pos;
          }
          if (!inside) continue;
          for (int64_t ic = 0; ic < cig; ++ic)
            acc += static_cast<A>(xg[ic * is + off]) * static_cast<A>(wo[ic * ks + t]);
        }
        yo[p] = FromAcc<T>(acc);
        for (size_t a = r; a-- > 0;) {
          if (++o[a] < g.out[a]) break;
          o[a] = 0;
        }
      }
      ApplyActivation(yo, os, act);
    }
  };
  int64_t items = s.batch * s.out_channels;
  if (pool) {
    pool->ParallelFor(items, 1, body);
  } else {
    body(0, items);
  }
}

Status CheckFloatInputs(const Node& node, const Tensor& x, const Tensor& w, const Tensor* b) {
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype()))
    return InvalidArgument(node.Describe(), ": X, W and B must share a dtype, got ", DataTypeName(x.dtype()), ", ",
                           DataTypeName(w.dtype()), (b ? ", " : ""), (b ? DataTypeName(b->dtype()) : ""));
  return Status::Ok();
}

class RefConvKernel final : public OpKernel {
 public:
  explicit RefConvKernel(FusedActivation act) : act_(act) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* w = ctx.input(1);
    const Tensor* b = ctx.input(2);
    if (!x || !w) return InvalidArgument(node.Describe(), ": Conv needs inputs X and W");
    RETURN_IF_ERROR(CheckFloatInputs(node, *x, *w, b));
    ASSIGN_OR_RETURN(ConvShapes s, CheckConvShapes(node, x->shape(), w->shape(), b));
    Shape out = {s.batch, s.out_channels};
    out.insert(out.end(), s.geo.out.begin(), s.geo.out.end());
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
    KernelStop stop(node);
    bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
      RefConvTyped<T>(x->data<T>(), w->data<T>(), b ? b->data<T>() : nullptr, y->mutable_data<T>(), s, act_, ctx.pool(),
                      stop);
    });
    if (!ok) return Unsupported(node.Describe(), ": Conv does not support dtype ", DataTypeName(x->dtype()));
    return stop.status();
  }

 private:
  FusedActivation act_;
};

template <typename T>
void RefConvTransposeTyped(const T* x, const T* w, const T* b, T* y, int64_t batch, int64_t cin, int64_t group,
                           int64_t cog, const SpatialGeometry& g, ThreadPool* pool, KernelStop& stop) {
  using A = typename AccType<T>::type;
  const size_t r = g.rank();
  const int64_t is = g.InSize(), os = g.OutSize(), ks = g.KernelSize();
  const int64_t cig = cin / group, cout = cog * group;
  const Taps taps = MakeTaps(g);
  // Each work item owns one output channel of one image: a scatter from its group's inputs.
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<A> acc(os);
    std::vector<int64_t> ip(r);
    int64_t pending = 0;
    for (int64_t item = begin; item < end; ++item) {
      int64_t n = item / cout, oc_g = item % cout, grp = oc_g / cog, oc = oc_g % cog;
      std::fill(acc.begin(), acc.end(), b ? static_cast<A>(b[oc_g]) : A(0));
      for (int64_t ic = 0; ic < cig; ++ic) {
        const T* xc = x + (n * cin + grp * cig + ic) * is;
        const T* wc = w + ((grp * cig + ic) * cog + oc) * ks;
        std::fill(ip.begin(), ip.end(), 0);
        for (int64_t p = 0; p < is; ++p) {
          if (!stop.Continue(pending, ks + 1)) return;
          A xv = static_cast<A>(xc[p]);
          for (int64_t t = 0; t < ks; ++t) {
            int64_t off = 0;
            bool inside = true;
            for (size_t a = 0; a < r && inside; ++a) {
              int64_t pos = ip[a] * g.strides[a] + taps.offset[t][a];
              inside = pos >= 0 && pos < g.out[a];
              off = off * g.out[a] + pos;
            }
            if (inside) acc[off] += xv * static_cast<A>(wc[t]);
          }
          for (size_t a = r; a-- > 0;) {
            if (++ip[a] < g.in[a]) break;
            ip[a] = 0;
          }
        }
      }
      T* yo = y + (n * cout + oc_g) * os;
      for (int64_t p = 0; p < os; ++p) yo[p] = FromAcc<T>(acc[p]);
    }
  };
  int64_t items = batch * cout;
  if (pool) {
    pool->ParallelFor(items, 1, body);
  } else {
    body(0, items);
  }
}

class RefConvTransposeKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* w = ctx.input(1);
    const Tensor* b = ctx.input(2);
    if (!x || !w) return InvalidArgument(node.Describe(), ": ConvTranspose needs inputs X and W");
    RETURN_IF_ERROR(CheckFloatInputs(node, *x, *w, b));
    const Shape& xs = x->shape();
    const Shape& ws = w->shape();
    if (xs.size() < 3)
      return InvalidArgument(node.Describe(), ": input X must be [N, C, spatial...], got ", ShapeToString(xs));
    if (ws.size() != xs.size())
      return InvalidArgument(node.Describe(), ": weight W ", ShapeToString(ws), " must have the same rank as X ",
                             ShapeToString(xs));
    int64_t group = node.GetInt("group", 1);
    if (group <= 0) return InvalidModel(node.Describe(), ": group ", group, " must be positive");
    if (ws[0] != xs[1] || xs[1] % group != 0)
      return InvalidArgument(node.Describe(), ": channel mismatch: X has ", xs[1], " channels but W ",
                             ShapeToString(ws), " expects ", ws[0], " (group=", group, ")");
    int64_t cog = ws[1], cout = cog * group;
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    if (node.HasAttr("kernel_shape") && node.GetInts("kernel_shape") != kernel)
      return InvalidArgument(node.Describe(), ": kernel_shape attribute does not match W's spatial dims ",
                             ShapeToString(kernel));
    if (b && (b->rank() != 1 || b->dim(0) != cout))
      return InvalidArgument(node.Describe(), ": bias B ", ShapeToString(b->shape()), " must be [", cout, "]");
    ASSIGN_OR_RETURN(SpatialGeometry g,
                     ComputeTransposeGeometry(node, std::vector<int64_t>(xs.begin() + 2, xs.end()), kernel));
    Shape out = {xs[0], cout};
    out.insert(out.end(), g.out.begin(), g.out.end());
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
    KernelStop stop(node);
    bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
      RefConvTransposeTyped<T>(x->data<T>(), w->data<T>(), b ? b->data<T>() : nullptr, y->mutable_data<T>(), xs[0],
                               xs[1], group, cog, g, ctx.pool(), stop);
    });
    if (!ok) return Unsupported(node.Describe(), ": ConvTranspose does not support dtype ", DataTypeName(x->dtype()));
    return stop.status();
  }
};

const std::vector<DataType> kConvTypes = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeRefConv(const KernelInit& init) {
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  return std::unique_ptr<OpKernel>(std::make_unique<RefConvKernel>(act));
}

Result<std::unique_ptr<OpKernel>> MakeRefConvTranspose(const KernelInit& init) {
  return std::unique_ptr<OpKernel>(std::make_unique<RefConvTransposeKernel>());
}

void RegisterConvKernels(KernelRegistry& r) {
  r.Register({.domain = "", .op_type = "Conv", .since_version = 1, .types = kConvTypes, .factory = MakeRefConv});
  r.Register({.domain = "",
              .op_type = "ConvTranspose",
              .since_version = 1,
              .types = kConvTypes,
              .factory = MakeRefConvTranspose});
  r.Register({.domain = "",
              .op_type = "Conv",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = MakeXnnConv,
              .reference = false,
              .impl = "xnnpack"});
  r.Register({.domain = "",
              .op_type = "ConvTranspose",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = MakeXnnConvTranspose,
              .reference = false,
              .impl = "xnnpack"});
  RegisterNhwcConvKernels(r);
}

}  // namespace strata
