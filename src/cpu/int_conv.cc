// ConvInteger and QLinearConv: N-D grouped convolution of 8-bit integers with exact int32
// (mod 2^32) accumulation after subtracting the zero points. QLinearConv adds the int32 bias
// and requantizes with the float multiplier x_scale * w_scale[m] / y_scale, rounding half to
// even and saturating, like ONNX Runtime's reference path.
//
// Per (image, group): im2col of x - x_zero_point into int16 columns (padding reads 0, i.e. the
// zero point), then a GEMM whose inner loop runs over contiguous output positions. W is
// packed as int16 w - w_zero_point[m]: once at session creation when W and its zero point
// are constant, else per run. Per-run buffers (columns, QLinearConv's accumulators, a
// run-time W's packing) come from the session allocator: Compute makes no heap allocation in
// the steady state.
//
// The optimized entry runs ungrouped convs on the VNNI GEMM (int_conv_vnni.h) and depthwise
// ones on the int8 depthwise kernel (int_conv_depthwise.h), both with a constant W.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/layout_pass.h"
#include "cpu/conv_geometry.h"
#include "cpu/int8_gemm.h"
#include "cpu/int_conv_depthwise.h"
#include "cpu/int_conv_vnni.h"
#include "cpu/quantize_common.h"
#include "cpu/scratch_slots.h"
#include "cpu/target_clones.h"

namespace strata {
namespace {

// acc[i] += w * c[i] (mod 2^32); |w * c[i]| <= 255 * 255 fits int32. Cloned so that the loop
// vectorises where the CPU allows (baseline x86-64 has no packed 32-bit multiply).
STRATA_TARGET_CLONES("avx512f", "avx2", "default")
void AxpyI16(uint32_t* acc, int32_t w, const int16_t* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<uint32_t>(w * static_cast<int32_t>(c[i]));
}

// Validated shapes of one call: x [N, C, in...], w [M, C/group, kernel...], y [N, M, out...].
struct IntConvShape {
  int64_t N = 0, C = 0, M = 0, group = 1, cg = 0, mg = 0;
  int64_t in_size = 0, k_size = 0, out_size = 0, rows = 0;  // rows: cg * k_size
  SpatialGeometry g;
  Shape out;
};

// x_shape is NCHW-ordered ([N, C, spatial...]) also for the NHWC kernel, which passes its
// x's dims in that order.
Result<IntConvShape> ComputeIntConvShape(const Node& node, const Shape& xs, const Shape& ws) {
  if (xs.size() < 3 || ws.size() != xs.size())
    return InvalidArgument(node.Describe(), ": x ", ShapeToString(xs), " and w ", ShapeToString(ws),
                           " must be [N, C, spatial...] and [M, C/group, kernel...] of equal rank >= 3");
  IntConvShape s;
  s.N = xs[0];
  s.C = xs[1];
  s.M = ws[0];
  s.group = node.GetInt("group", 1);
  if (s.group <= 0 || s.C % s.group != 0 || s.M % s.group != 0 || ws[1] != s.C / s.group)
    return InvalidArgument(node.Describe(), ": channels do not match: x has ", s.C, ", w ", ShapeToString(ws),
                           ", group ", s.group);
  const Shape in(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
  if (const std::vector<int64_t>* ks = FindInts(node, "kernel_shape"); ks && Shape(*ks) != kernel)
    return InvalidArgument(node.Describe(), ": kernel_shape ", ShapeToString(Shape(*ks)), " differs from w ",
                           ShapeToString(kernel));
  ASSIGN_OR_RETURN(s.g, ComputeWindowGeometry(node, in, kernel, /*ceil_mode=*/false));
  s.cg = s.C / s.group;
  s.mg = s.M / s.group;
  s.in_size = s.g.InSize();
  s.k_size = s.g.KernelSize();
  s.out_size = s.g.OutSize();
  s.rows = s.cg * s.k_size;
  s.out = Shape{s.N, s.M};
  s.out.insert(s.out.end(), s.g.out.begin(), s.g.out.end());
  return s;
}

// wp[m][r] = w[m][r] - w_zero_point[m], for W [M, rows].
template <typename T>
void PackWTyped(const T* w, const Tensor* wzp, int64_t M, int64_t rows, int16_t* wp) {
  for (int64_t m = 0; m < M; ++m) {
    const int32_t z = ZeroPointAt(wzp, m);
    for (int64_t r = 0; r < rows; ++r)
      wp[m * rows + r] = static_cast<int16_t>(static_cast<int32_t>(w[m * rows + r]) - z);
  }
}
void PackW(const Tensor& w, const Tensor* wzp, int64_t M, int64_t rows, int16_t* wp) {
  if (w.dtype() == DataType::kUInt8) {
    PackWTyped(w.data<uint8_t>(), wzp, M, rows, wp);
  } else {
    PackWTyped(w.data<int8_t>(), wzp, M, rows, wp);
  }
}

// col[(c * k_size + k) * out_size + o] = x[c][input position of (o, k)] - xz, or 0 in the
// padding, for channels [c0, c1) of one image and group (x points at its first channel).
// The last spatial axis is handled as a run: its in-range outputs are computed once per row.
template <typename TX>
void Im2Col(const TX* x, int32_t xz, const IntConvShape& s, int64_t c0, int64_t c1, int16_t* col) {
  const SpatialGeometry& g = s.g;
  const size_t sp = g.rank(), last = sp - 1;
  const int64_t ow = g.out[last], iw = g.in[last], st = g.strides[last], dl = g.dilations[last], pb = g.pad_begin[last];
  const int64_t outer = ow > 0 ? s.out_size / ow : 0;
  Shape kc(sp, 0), oc(sp, 0);
  for (int64_t c = c0; c < c1; ++c) {
    const TX* xc = x + c * s.in_size;
    for (int64_t k = 0; k < s.k_size; ++k) {
      int64_t rem = k;
      for (size_t d = sp; d-- > 0;) {
        kc[d] = rem % g.kernel[d];
        rem /= g.kernel[d];
      }
      // Outputs [lo, hi) of the last axis read inside the input: ix = ox * st - pb + kx * dl.
      const int64_t shift = pb - kc[last] * dl;
      const int64_t lo = std::min(ow, shift > 0 ? (shift + st - 1) / st : 0);
      const int64_t hi = std::max(lo, std::min(ow, iw - 1 + shift >= 0 ? (iw - 1 + shift) / st + 1 : 0));
      int16_t* dst = col + (c * s.k_size + k) * s.out_size;
      std::fill(oc.begin(), oc.end(), 0);
      for (int64_t row = 0; row < outer; ++row, dst += ow) {
        // Input row of this output row (all axes but the last), or -1 in the padding.
        int64_t base = 0;
        for (size_t d = 0; d < last && base >= 0; ++d) {
          const int64_t p = oc[d] * g.strides[d] - g.pad_begin[d] + kc[d] * g.dilations[d];
          base = p < 0 || p >= g.in[d] ? -1 : base * g.in[d] + p;
        }
        if (base < 0) {
          std::fill(dst, dst + ow, int16_t{0});
        } else {
          const TX* xr = xc + base * iw;
          std::fill(dst, dst + lo, int16_t{0});
          for (int64_t o = lo; o < hi; ++o)
            dst[o] = static_cast<int16_t>(static_cast<int32_t>(xr[o * st - shift]) - xz);
          std::fill(dst + hi, dst + ow, int16_t{0});
        }
        for (size_t d = last; d-- > 0;) {  // next output row
          if (++oc[d] < g.out[d]) break;
          oc[d] = 0;
        }
      }
    }
  }
}

// RunVnni's im2col as the GEMM's tile producer: each call gathers through a free slot's tile
// buffer.
struct Im2RowProducer {
  const uint8_t* xt = nullptr;
  int64_t C = 0;
  const SpatialGeometry* g = nullptr;
  uint8_t pad = 0;
  bool a_signed = false;
  int64_t kp = 0;
  uint32_t* tiles = nullptr;
  int32_t* rowsum = nullptr;
  ScratchSlots* busy = nullptr;
  uint8_t* bufs = nullptr;
  int64_t buf_bytes = 0;

  static void Produce(void* ctx, int64_t t0, int64_t t1) {
    auto& p = *static_cast<Im2RowProducer*>(ctx);
    const int64_t slot = p.busy->Acquire();
    int8conv::Im2RowTiles(p.xt, p.C, *p.g, p.pad, p.a_signed, p.kp, p.tiles, p.rowsum, p.bufs + slot * p.buf_bytes, t0,
                          t1);
    p.busy->Release(slot);
  }
};

class IntConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  // QLinearConv's inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
  // y_zero_point, B; ConvInteger's: x, w, x_zero_point, w_zero_point.
  // nhwc: strata.internal NhwcQLinearConv (x and y NHWC, the layout pass's; VNNI only).
  IntConvKernel(bool qlinear, bool vnni, bool nhwc = false)
      : qlinear_(qlinear), vnni_ok_(vnni), nhwc_(nhwc), w_(qlinear ? 3 : 1), xzp_(2), wzp_(qlinear ? 5 : 3) {}

  // Packs a constant W whose zero point is constant or absent. Any problem with them is left
  // for Compute to report, with the same message as for a run-time W.
  void Init(const KernelInit& init) {
    const Tensor* w = init.constant_input(w_);
    if (!w || !IsQuant8(w->dtype()) || w->rank() < 3) return;
    const Tensor* wzp = init.has_input(wzp_) ? init.constant_input(wzp_) : nullptr;
    if (init.has_input(wzp_) && !wzp) return;
    const int64_t M = w->dim(0), rows = M > 0 ? w->num_elements() / M : 0;
    if (!CheckZeroPoint(wzp, w->dtype(), M, init.node, "w_zero_point").ok()) return;
    if (vnni_ok_ && int8gemm::Available() && init.node.GetInt("group", 1) == 1) PackVnni(*w, wzp, M, rows, init);
    if (vnni_ok_ && int8dw::Covers(w->shape(), init.node.GetInt("group", 1))) dw_.emplace(int8dw::Pack(*w, wzp));
    // The int16 packing only where neither the VNNI GEMM nor the depthwise kernel takes this W.
    if (!vnni_ && !dw_) {
      packed_w_.resize(static_cast<size_t>(M * rows));
      PackW(*w, wzp, M, rows, packed_w_.data());
    }
    packed_shape_ = w->shape();
    packed_dtype_ = w->dtype();
    packed_ = true;
    // x's geometry for the shape the graph gives x, when it is fully known and valid: a run
    // with x of that shape skips re-reading the node's attributes (map lookups by name).
    if (init.has_input(0)) {
      const TypeInfo& t = init.input_type(0);
      Shape xs;
      for (size_t i = 0; t.has_shape && i < t.dims.size() && t.dims[i].known(); ++i) xs.push_back(t.dims[i].value);
      if (t.has_shape && xs.size() == t.dims.size() && xs.size() >= 3) {
        auto shape = ComputeIntConvShape(init.node, NchwOrder(xs), w->shape());
        if (shape.ok()) {
          known_x_ = xs;
          known_ = std::move(shape).value();
        }
      }
    }
    // QLinearConv's multipliers, when its three scales are constants (as in every QDQ model):
    // computed per run they were ~2% of mobilenet_v2_qdq's time (52 convs).
    const Tensor* xs = init.constant_input(1);
    const Tensor* ws = init.constant_input(4);
    const Tensor* ys = init.constant_input(6);
    if (qlinear_ && xs && ws && ys && CheckScale(xs, init.node, "x_scale").ok() &&
        CheckScale(ws, init.node, "w_scale").ok() && CheckScale(ys, init.node, "y_scale").ok() &&
        xs->num_elements() == 1 && ys->num_elements() == 1 && (ws->num_elements() == 1 || ws->num_elements() == M)) {
      mult_.resize(static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m)
        mult_[static_cast<size_t>(m)] =
            LoadScale(*xs, 0) * LoadScale(*ws, ws->num_elements() == 1 ? 0 : m) / LoadScale(*ys, 0);
    }
  }

  // A packed W's data is not read again (its zero point is, for validation only).
  std::vector<size_t> PackedConstantInputs() const override {
    if (packed_) return {w_};
    return {};
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* w = ctx.input(w_);
    if (!x || !w) return InvalidArgument(node.Describe(), ": inputs x and w are required");
    if (!IsQuant8(x->dtype()) || !IsQuant8(w->dtype()))
      return InvalidArgument(node.Describe(), ": x and w must be uint8 or int8, got ", DataTypeName(x->dtype()),
                             " and ", DataTypeName(w->dtype()));
    IntConvShape s;
    if (known_ && x->shape() == known_x_ && w->shape() == packed_shape_) {
      s = *known_;
    } else {
      ASSIGN_OR_RETURN(s, ComputeIntConvShape(node, NchwOrder(x->shape()), w->shape()));
    }
    const Tensor* xzp = ctx.input(xzp_);
    const Tensor* wzp = ctx.input(wzp_);
    if (xzp && xzp->num_elements() > 1)
      return InvalidArgument(node.Describe(), ": x_zero_point must be a scalar, got shape ",
                             ShapeToString(xzp->shape()));
    RETURN_IF_ERROR(CheckZeroPoint(xzp, x->dtype(), 1, node, "x_zero_point"));
    RETURN_IF_ERROR(CheckZeroPoint(wzp, w->dtype(), s.M, node, "w_zero_point"));
    if (qlinear_) RETURN_IF_ERROR(CheckQLinearParams(ctx, s));

    const bool w_packed = packed_ && w->shape() == packed_shape_ && w->dtype() == packed_dtype_;
    // NhwcQLinearConv with a residual sum in its store (qdq_fusion.cc's FuseNhwcQConvAdd): the
    // VNNI GEMM's path only.
    if (HasSkip(node) && !(w_packed && vnni_ && s.group == 1))
      return InvalidArgument(node.Describe(), ": a residual input needs an ungrouped conv with a constant W");
    if (w_packed && vnni_ && s.group == 1) return RunVnni(ctx, *x, s);
    if (w_packed && dw_ && s.group == s.C && s.g.rank() == 2) return RunDepthwise(ctx, *x, s);
    // The layout pass makes NhwcQLinearConv only where the optimized entry covers the node.
    if (nhwc_)
      return InternalError(node.Describe(),
                           ": needs a constant W packed for the VNNI GEMM (ungrouped conv) or the depthwise kernel");
    const int16_t* wp = nullptr;
    Tensor w_scratch;
    if (w_packed && !vnni_) {
      wp = packed_w_.data();
    } else {
      ASSIGN_OR_RETURN(w_scratch, AllocateIntScratch(DataType::kInt16, s.M * s.rows, ctx.allocator(), node));
      PackW(*w, wzp, s.M, s.rows, w_scratch.mutable_data<int16_t>());
      wp = w_scratch.data<int16_t>();
    }
    if (x->dtype() == DataType::kUInt8) return Run(ctx, x->data<uint8_t>(), s, wp);
    return Run(ctx, x->data<int8_t>(), s, wp);
  }

 private:
  // QLinearConv: x_scale and y_scale scalars, w_scale scalar or [M], y_zero_point a scalar,
  // B int32 [M].
  Status CheckQLinearParams(KernelContext& ctx, const IntConvShape& s) const {
    const Node& node = ctx.node();
    RETURN_IF_ERROR(CheckScale(ctx.input(1), node, "x_scale"));
    RETURN_IF_ERROR(CheckScale(ctx.input(4), node, "w_scale"));
    RETURN_IF_ERROR(CheckScale(ctx.input(6), node, "y_scale"));
    if (ctx.input(1)->num_elements() != 1 || ctx.input(6)->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": x_scale and y_scale must be scalars, got shapes ",
                             ShapeToString(ctx.input(1)->shape()), " and ", ShapeToString(ctx.input(6)->shape()));
    const Tensor* yzp = ctx.input(7);
    if (!yzp || !IsQuant8(yzp->dtype()) || yzp->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": y_zero_point must be a uint8/int8 scalar");
    const int64_t ws = ctx.input(4)->num_elements();
    if (ws != 1 && ws != s.M)
      return InvalidArgument(node.Describe(), ": w_scale must be a scalar or have ", s.M, " values, got shape ",
                             ShapeToString(ctx.input(4)->shape()));
    const Tensor* bias = ctx.input(8);
    if (bias && (bias->dtype() != DataType::kInt32 || bias->num_elements() != s.M))
      return InvalidArgument(node.Describe(), ": B must be int32 with ", s.M, " values, got ",
                             DataTypeName(bias->dtype()), " ", ShapeToString(bias->shape()));
    return Status::Ok();
  }

  template <typename TX>
  Status Run(KernelContext& ctx, const TX* x, const IntConvShape& s, const int16_t* wp) const {
    const Node& node = ctx.node();
    const DataType yt = qlinear_ ? ctx.input(7)->dtype() : DataType::kInt32;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, yt, s.out));
    if (s.N == 0 || s.M == 0 || s.out_size == 0) return Status::Ok();
    ASSIGN_OR_RETURN(Tensor col_t, AllocateIntScratch(DataType::kInt16, s.rows * s.out_size, ctx.allocator(), node));
    int16_t* col = col_t.mutable_data<int16_t>();
    // ConvInteger sums straight into its int32 output; QLinearConv into one group's rows.
    Tensor acc_t;
    if (qlinear_) {
      ASSIGN_OR_RETURN(acc_t, AllocateIntScratch(DataType::kInt32, s.mg * s.out_size, ctx.allocator(), node));
    }
    const int32_t xz = ZeroPointAt(ctx.input(xzp_), 0);
    ThreadPool* pool = ctx.pool();

    // Requantization (QLinearConv only).
    const Tensor* ws = qlinear_ ? ctx.input(4) : nullptr;
    const Tensor* bias = qlinear_ ? ctx.input(8) : nullptr;
    const float xs = qlinear_ ? LoadScale(*ctx.input(1), 0) : 0.0f, ys = qlinear_ ? LoadScale(*ctx.input(6), 0) : 1.0f;
    const float z = qlinear_ ? static_cast<float>(LoadQ(*ctx.input(7), 0)) : 0.0f;
    // Each output channel sums its kernel's taps over every position: the im2col's size times
    // the channels, bounded by no one operand; the run's limits are read every 2^20 of them.
    KernelStop stop(node);

    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        if (stop.stopped()) return stop.status();
        const TX* xg = x + (n * s.C + grp * s.cg) * s.in_size;
        auto im2col = [&](int64_t c0, int64_t c1) { Im2Col(xg, xz, s, c0, c1, col); };
        const int64_t col_grain =
            std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, s.k_size * s.out_size));
        if (pool && s.cg > col_grain) {
          pool->ParallelFor(s.cg, col_grain, im2col);
        } else {
          im2col(0, s.cg);
        }
        auto body = [&](int64_t b, int64_t e) {
          int64_t pending = 0;
          for (int64_t mm = b; mm < e; ++mm) {
            if (!stop.Continue(pending, s.rows * s.out_size)) return;
            const int64_t m = grp * s.mg + mm;
            uint32_t* acc = qlinear_
                                ? reinterpret_cast<uint32_t*>(acc_t.mutable_data<int32_t>()) + mm * s.out_size
                                : reinterpret_cast<uint32_t*>(y->mutable_data<int32_t>()) + (n * s.M + m) * s.out_size;
            std::fill(acc, acc + s.out_size, 0u);
            const int16_t* wm = wp + m * s.rows;
            for (int64_t r = 0; r < s.rows; ++r)
              if (wm[r] != 0) AxpyI16(acc, wm[r], col + r * s.out_size, s.out_size);
            if (!qlinear_) continue;
            const float mult = xs * LoadScale(*ws, ws->num_elements() == 1 ? 0 : m) / ys;
            const uint32_t b32 = bias ? static_cast<uint32_t>(bias->data<int32_t>()[m]) : 0u;
            const int64_t base = (n * s.M + m) * s.out_size;
            for (int64_t o = 0; o < s.out_size; ++o) {
              const int32_t v = static_cast<int32_t>(acc[o] + b32);
              StoreQ(*y, base + o, Saturate(std::nearbyint(static_cast<float>(v) * mult) + z, yt));
            }
          }
        };
        if (pool) {
          pool->ParallelFor(s.mg, 1, body);
        } else {
          body(0, s.mg);
        }
      }
    }
    return stop.status();
  }

  // The residual inputs of a fused NhwcQLinearConv: 9 skip, 10 / 11 its scale and zero point,
  // 12 / 13 the scale and zero point by which the sum reads the conv's own output, 14 / 15 the
  // sum's (the output's) scale and zero point; attribute residual_relu.
  static constexpr size_t kSkip = 9, kSkipInputs = 7;
  bool HasSkip(const Node& node) const { return nhwc_ && qlinear_ && node.inputs.size() > kSkip; }

  // QuantOut's residual fields from the inputs above, every one checked here, and the output's
  // type (the sum's zero point's). The skip's shape is checked against y's once y is made.
  Status PrepareSkip(KernelContext& ctx, int8gemm::QuantOut* qo, DataType* yt) const {
    const Node& node = ctx.node();
    if (node.inputs.size() != kSkip + kSkipInputs)
      return InvalidArgument(node.Describe(), ": a residual sum takes ", kSkipInputs, " inputs after the bias, got ",
                             node.inputs.size() - kSkip);
    const Tensor* skip = ctx.input(kSkip);
    if (!skip || !IsQuant8(skip->dtype()))
      return InvalidArgument(node.Describe(), ": the residual input must be uint8/int8, got ",
                             skip ? DataTypeName(skip->dtype()) : "nothing");
    static const char* kNames[] = {"residual scale",
                                   "residual zero point",
                                   "sum's scale of the conv output",
                                   "sum's zero point of the conv output",
                                   "sum's output scale",
                                   "sum's output zero point"};
    for (size_t i = 0; i < 6; ++i) {
      const Tensor* t = ctx.input(kSkip + 1 + i);
      const bool scale = i % 2 == 0;
      if (!t || t->num_elements() != 1 || (scale && t->dtype() != DataType::kFloat) ||
          (!scale && !IsQuant8(t->dtype())))
        return InvalidArgument(node.Describe(), ": the ", kNames[i], " must be a ", scale ? "float" : "uint8/int8",
                               " scalar");
    }
    if (ctx.input(kSkip + 2)->dtype() != skip->dtype() || ctx.input(kSkip + 4)->dtype() != ctx.input(7)->dtype())
      return InvalidArgument(node.Describe(), ": the residual sum's zero points must have their tensors' types");
    qo->skip_signed = skip->dtype() == DataType::kInt8;
    qo->ldskip = qo->ldy;
    qo->add_sb = ctx.input(kSkip + 1)->data<float>()[0];
    qo->add_zb = LoadQ(*ctx.input(kSkip + 2), 0);
    qo->add_sa = ctx.input(kSkip + 3)->data<float>()[0];
    qo->add_za = static_cast<float>(LoadQ(*ctx.input(kSkip + 4), 0));
    qo->add_so = ctx.input(kSkip + 5)->data<float>()[0];
    qo->add_zo = static_cast<float>(LoadQ(*ctx.input(kSkip + 6), 0));
    qo->add_out_signed = ctx.input(kSkip + 6)->dtype() == DataType::kInt8;
    qo->add_relu = node.GetInt("residual_relu", 0) != 0;
    *yt = ctx.input(kSkip + 6)->dtype();
    return Status::Ok();
  }

  // QLinearConv's output stage: the multipliers x_scale * w_scale[m] / y_scale in `mult`.
  Status PrepareRequant(KernelContext& ctx, const IntConvShape& s, Tensor* mult, int8conv::Requant* rq) const {
    if (mult_.size() == static_cast<size_t>(s.M)) {
      rq->mult = mult_.data();
    } else {
      ASSIGN_OR_RETURN(*mult, AllocateIntScratch(DataType::kFloat, s.M, ctx.allocator(), ctx.node()));
      const Tensor& ws = *ctx.input(4);
      const float xs = LoadScale(*ctx.input(1), 0), ys = LoadScale(*ctx.input(6), 0);
      for (int64_t m = 0; m < s.M; ++m)
        mult->mutable_data<float>()[m] = xs * LoadScale(ws, ws.num_elements() == 1 ? 0 : m) / ys;
      rq->mult = mult->data<float>();
    }
    rq->bias = ctx.input(8) ? ctx.input(8)->data<int32_t>() : nullptr;
    rq->z = static_cast<float>(LoadQ(*ctx.input(7), 0));
    rq->y_signed = ctx.input(7)->dtype() == DataType::kInt8;
    return Status::Ok();
  }

  // The output of RunDepthwise / RunVnni: NCHW s.out, or its NHWC order for the NHWC kernel.
  Result<Tensor*> AllocateOptimizedOutput(KernelContext& ctx, const IntConvShape& s, DataType yt) const {
    Shape out = s.out;
    if (nhwc_) {
      out.push_back(out[1]);
      out.erase(out.begin() + 1);
    }
    return ctx.AllocateOutput(0, yt, out);
  }

  // A depthwise conv with a constant W (int_conv_depthwise.h): NHWC in and out; the NCHW
  // kernels move each image to NHWC and the result back.
  Status RunDepthwise(KernelContext& ctx, const Tensor& x, const IntConvShape& s) const {
    const Node& node = ctx.node();
    const DataType yt = qlinear_ ? ctx.input(7)->dtype() : DataType::kInt32;
    ASSIGN_OR_RETURN(Tensor * y, AllocateOptimizedOutput(ctx, s, yt));
    if (s.N == 0 || s.M == 0 || s.out_size == 0) return Status::Ok();
    ThreadPool* pool = ctx.pool();
    Tensor mult;
    int8conv::Requant rq;
    if (qlinear_) RETURN_IF_ERROR(PrepareRequant(ctx, s, &mult, &rq));
    int8dw::Problem p;
    p.x_signed = x.dtype() == DataType::kInt8;
    p.xz = ZeroPointAt(ctx.input(xzp_), 0);
    p.n = nhwc_ ? s.N : 1;
    p.h = s.g.in[0];
    p.w = s.g.in[1];
    p.c = s.C;
    p.g = s.g;
    p.rq = qlinear_ ? &rq : nullptr;
    ASSIGN_OR_RETURN(Tensor scratch,
                     AllocateIntScratch(DataType::kFloat, int8dw::ScratchFloats(p, *dw_, pool), ctx.allocator(), node));
    const auto* xb = static_cast<const uint8_t*>(x.raw_data());
    auto* yb = static_cast<uint8_t*>(y->raw_mutable_data());
    if (nhwc_) {
      p.x = xb;
      if (qlinear_) {
        p.yq = yb;
      } else {
        p.y32 = y->mutable_data<int32_t>();
      }
      int8dw::Run(p, *dw_, scratch.mutable_data<float>(), pool);
      return Status::Ok();
    }
    // One NHWC image in, one out (bytes, or int32 for ConvInteger).
    ASSIGN_OR_RETURN(Tensor xt, AllocateIntScratch(DataType::kUInt8, s.C * s.in_size, ctx.allocator(), node));
    ASSIGN_OR_RETURN(Tensor yt_nhwc, AllocateIntScratch(qlinear_ ? DataType::kUInt8 : DataType::kInt32,
                                                        s.M * s.out_size, ctx.allocator(), node));
    p.x = xt.data<uint8_t>();
    if (qlinear_) {
      p.yq = yt_nhwc.mutable_data<uint8_t>();
    } else {
      p.y32 = yt_nhwc.mutable_data<int32_t>();
    }
    for (int64_t n = 0; n < s.N; ++n) {
      int8conv::ToNhwc(xb + n * s.C * s.in_size, s.C, s.in_size, xt.mutable_data<uint8_t>(), pool);
      int8dw::Run(p, *dw_, scratch.mutable_data<float>(), pool);
      if (qlinear_) {
        int8conv::ToNchw(p.yq, s.M, s.out_size, yb + n * s.M * s.out_size, pool);
      } else {
        int8conv::StoreTransposed(p.y32, s.out_size, s.M, y->mutable_data<int32_t>() + n * s.M * s.out_size, pool);
      }
    }
    return Status::Ok();
  }

  // The VNNI GEMM's B for a constant W (group 1): b[k * C + c][m] = w[m][c][k], kernel tap
  // major and channel minor as Im2Row lays out A, with w's zero point per tensor or per
  // output channel (a column of B). Leaves vnni_ empty when packing fails (the int16 loops
  // serve instead).
  void PackVnni(const Tensor& w, const Tensor* wzp, int64_t M, int64_t rows, const KernelInit& init) {
    const int64_t C = w.dim(1), taps = C > 0 ? rows / C : 0;
    const auto* wb = static_cast<const uint8_t*>(w.raw_data());
    // Each output channel's row to (tap, c) order, then [M][K] -> [K][M] by blocked transposes
    // (a scatter straight into [K][M] was most of a QDQ resnet50's session creation).
    // Uninitialized buffers: every byte is written (a zeroing pass cost as much as the copies).
    std::unique_ptr<uint8_t[]> wk;
    if (taps > 1) {
      wk.reset(new uint8_t[static_cast<size_t>(rows * M)]);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < taps; ++k) wk[static_cast<size_t>(m * rows + k * C + c)] = wb[(m * C + c) * taps + k];
    }
    std::unique_ptr<uint8_t[]> b(new uint8_t[static_cast<size_t>(rows * M)]);
    int8conv::ToNhwc(taps > 1 ? wk.get() : wb, M, rows, b.get(), init.pool);
    auto p = int8gemm::Pack(b.get(), w.dtype() == DataType::kInt8, rows, M, wzp ? wzp->raw_data() : nullptr,
                            wzp ? wzp->num_elements() : 0, init.pool);
    if (p.ok()) vnni_.emplace(std::move(p).value());
  }

  // One image at a time: x to NHWC, im2col rows (a 1x1 stride-1 unpadded conv reads the NHWC
  // image itself), the VNNI GEMM into int32 [positions, M], then the NCHW output. The NHWC
  // kernel reads x as it is and writes y in the GEMM's order.
  Status RunVnni(KernelContext& ctx, const Tensor& x, const IntConvShape& s) const {
    const Node& node = ctx.node();
    const bool skip = HasSkip(node);
    DataType yt = !qlinear_ ? DataType::kInt32 : ctx.input(7)->dtype();
    int8gemm::QuantOut qo;
    if (skip) {  // the output is the sum's, of its zero point's type
      qo.ldy = s.M;
      RETURN_IF_ERROR(PrepareSkip(ctx, &qo, &yt));
    }
    ASSIGN_OR_RETURN(Tensor * y, AllocateOptimizedOutput(ctx, s, yt));
    if (skip && ctx.input(kSkip)->shape() != y->shape())
      return InvalidArgument(node.Describe(), ": the residual input must have the output's shape ",
                             ShapeToString(y->shape()), ", got ", ShapeToString(ctx.input(kSkip)->shape()));
    if (s.N == 0 || s.M == 0 || s.out_size == 0) return Status::Ok();
    bool direct = s.k_size == 1;
    for (size_t d = 0; d < s.g.rank(); ++d)
      direct = direct && s.g.strides[d] == 1 && s.g.pad_begin[d] == 0 && s.g.pad_end[d] == 0;
    const int32_t xz = ZeroPointAt(ctx.input(xzp_), 0);
    // The NHWC QLinearConv requantizes in the GEMM's store; the others go through int32.
    const bool direct_out = nhwc_ && qlinear_;
    // A 2-D conv (dilation 1, kernel > 1x1) of 8-bit NHWC rows against a W without column
    // offsets, requantized in the store, runs as an implicit GEMM over its input padded once with
    // x's zero point and split by stride phase (PhaseLayout): GEMM row r = oy * Wq + ox at the
    // phase planes' width Wq, whose tap (ky, kx) lies in plane (ky % sy, kx % sx) at
    // ((ky / sy) * Wq + kx / sx) * C bytes after row r's pixel, so the GEMM reads every tap where
    // it lies (no im2col, which was a third of a 56x56x64 3x3 conv's time at 1 thread); the store
    // drops the Wq - Wo positions per row past the output's width (QuantOut::row_group). Those
    // cost (Wq - Wo) / Wq of the GEMM, the im2col it saves about 32 / M of it (ResNet's 14x14
    // 256 -> 256 3x3 measured level, 0.30-0.32 vs 0.32-0.34 ms): padded where the first is under
    // half the second. An int8 x is padded as x ^ 0x80 (= x + 128 as uint8, its zero point
    // likewise): the GEMM's in-place read takes unsigned bytes.
    bool padded = !direct && direct_out && s.g.rank() == 2 && s.k_size > 1 && s.C % 4 == 0 && !vnni_->any_offset() &&
                  s.g.dilations[0] == 1 && s.g.dilations[1] == 1;
    PhaseLayout ph;
    if (padded) {
      ph = PhaseLayout::Make(s);
      padded = (ph.Wq - s.g.out[1]) * s.M <= 16 * ph.Wq;
    }
    int8gemm::AMatrix am;
    am.a_signed = x.dtype() == DataType::kInt8 && !padded;
    am.rows = padded ? (s.g.out[0] - 1) * ph.Wq + s.g.out[1] : s.out_size;
    am.lda = direct || padded ? s.C : s.rows;
    const bool flip = padded && x.dtype() == DataType::kInt8;
    am.za = flip ? xz + 128 : xz;
    am.read_in_place = direct || padded;
    Tensor taps, xpad;
    if (padded) {
      int64_t plane = 0, pad_bytes = 0;
      if (__builtin_mul_overflow(ph.Hq, ph.Wq, &plane) || __builtin_mul_overflow(plane, s.C, &plane) ||
          __builtin_mul_overflow(plane, int64_t{ph.count}, &pad_bytes))
        return InvalidArgument(node.Describe(), ": the padded input ", ph.Hq, " x ", ph.Wq, " x ", s.C, " x ", ph.count,
                               " is too large");
      ph.plane = plane;
      // Per-run scratch like the buffers below: the caching allocator serves it without malloc.
      ASSIGN_OR_RETURN(taps, AllocateIntScratch(DataType::kInt64, s.k_size, ctx.allocator(), node));
      int64_t* tap = taps.mutable_data<int64_t>();
      for (int64_t ky = 0; ky < s.g.kernel[0]; ++ky)
        for (int64_t kx = 0; kx < s.g.kernel[1]; ++kx)
          *tap++ = ph.index(ky % ph.sy, kx % ph.sx) * plane + ((ky / ph.sy) * ph.Wq + kx / ph.sx) * s.C;
      am.tap_offsets = taps.data<int64_t>();
      am.taps = static_cast<int>(s.k_size);
      ASSIGN_OR_RETURN(xpad, AllocateIntScratch(DataType::kUInt8, pad_bytes, ctx.allocator(), node));
    }
    ASSIGN_OR_RETURN(int64_t gemm_bytes, int8gemm::ScratchBytes(am, *vnni_));
    Tensor xt;
    if (!nhwc_) {
      ASSIGN_OR_RETURN(xt, AllocateIntScratch(DataType::kUInt8, s.C * s.in_size, ctx.allocator(), node));
    }
    // Im2col rows go straight into the GEMM's packed A (in gs, laid out as Gemm would pack it:
    // tiles, then the row sums), made by the GEMM's own threads (AMatrix::produce) through one
    // tile of rows per concurrent chunk in `tile_rows`.
    Tensor tile_rows;
    const int64_t slots = SlotsFor(ctx.pool()), slot_bytes = int8gemm::kTileRows * s.rows + int8conv::kIm2RowSlack;
    if (!direct && !padded) {
      ASSIGN_OR_RETURN(tile_rows, AllocateIntScratch(DataType::kUInt8, slots * slot_bytes, ctx.allocator(), node));
    }
    ScratchSlots busy(direct || padded ? 1 : slots);
    Im2RowProducer producer;
    Tensor acc;
    if (!direct_out) {
      ASSIGN_OR_RETURN(acc, AllocateIntScratch(DataType::kInt32, s.out_size * s.M, ctx.allocator(), node));
    }
    ASSIGN_OR_RETURN(Tensor gs, AllocateIntScratch(DataType::kUInt8, gemm_bytes, ctx.allocator(), node));
    Tensor mult;
    int8conv::Requant rq;
    if (qlinear_) RETURN_IF_ERROR(PrepareRequant(ctx, s, &mult, &rq));
    ThreadPool* pool = ctx.pool();
    const auto* xb = static_cast<const uint8_t*>(x.raw_data());
    for (int64_t n = 0; n < s.N; ++n) {
      const uint8_t* xtp = xb + n * s.C * s.in_size;
      if (!nhwc_) {
        int8conv::ToNhwc(xtp, s.C, s.in_size, xt.mutable_data<uint8_t>(), pool);
        xtp = xt.data<uint8_t>();
      }
      if (direct) {
        am.a = xtp;
      } else if (padded) {
        PadPhases(xtp, s, ph, static_cast<uint8_t>(am.za), flip, xpad.mutable_data<uint8_t>(), pool);
        am.a = xpad.data<uint8_t>();
      } else {
        const int64_t kp = vnni_->kp(), tiles = (s.out_size + int8gemm::kTileRows - 1) / int8gemm::kTileRows;
        auto* packed = reinterpret_cast<uint32_t*>(gs.mutable_data<uint8_t>());
        int32_t* rowsum = vnni_->any_offset()
                              ? reinterpret_cast<int32_t*>(gs.mutable_data<uint8_t>() +
                                                           (tiles * int8gemm::kTileRows * kp + 63) / 64 * 64)
                              : nullptr;
        producer = Im2RowProducer{xtp,    s.C,    &s.g,  static_cast<uint8_t>(xz),          am.a_signed, kp,
                                  packed, rowsum, &busy, tile_rows.mutable_data<uint8_t>(), slot_bytes};
        am.packed = packed;
        am.packed_rowsum = rowsum;
        am.produce = Im2RowProducer::Produce;
        am.produce_ctx = &producer;
      }
      uint8_t* yb = !qlinear_                ? nullptr
                    : yt == DataType::kUInt8 ? y->mutable_data<uint8_t>()
                                             : reinterpret_cast<uint8_t*>(y->mutable_data<int8_t>());
      if (direct_out) {
        if (skip) qo.skip = static_cast<const uint8_t*>(ctx.input(kSkip)->raw_data()) + n * s.out_size * s.M;
        qo.y = yb + n * s.out_size * s.M;
        qo.ldy = s.M;
        qo.mult = rq.mult;
        qo.bias = rq.bias;
        qo.z = rq.z;
        qo.y_signed = rq.y_signed;  // the conv's own byte: the sum, if any, reads it with this range
        qo.row_group = padded ? ph.Wq : 0;
        qo.row_valid = padded ? s.g.out[1] : 0;
        RETURN_IF_ERROR(int8gemm::Gemm(am, *vnni_, nullptr, s.M, gs.mutable_data<uint8_t>(), pool, nullptr, &qo));
        continue;
      }
      int32_t* accp = acc.mutable_data<int32_t>();
      RETURN_IF_ERROR(int8gemm::Gemm(am, *vnni_, accp, s.M, gs.mutable_data<uint8_t>(), pool));
      if (qlinear_) {
        int8conv::StoreRequantized(accp, s.out_size, s.M, rq, yb + n * s.M * s.out_size, pool);
      } else {
        int8conv::StoreTransposed(accp, s.out_size, s.M, y->mutable_data<int32_t>() + n * s.M * s.out_size, pool);
      }
    }
    return Status::Ok();
  }

  // x padded with s's pads ([Hp, Wp, C]) and split by stride phase: plane (py, px) holds the
  // padded pixels (py + sy * i, px + sx * j), i < Hq = ceil(Hp / sy), j < Wq = ceil(Wp / sx), so
  // a stride-s conv is a stride-1 conv in each plane. Only the planes some tap reads are made
  // (`index`: their order, -1 for none; one plane at stride 1).
  struct PhaseLayout {
    int64_t sy = 1, sx = 1, Hq = 0, Wq = 0, plane = 0;  // plane: bytes per plane
    int64_t ky = 1, kx = 1;                             // planes made: phases py < ky, px < kx
    int count = 0;
    static PhaseLayout Make(const IntConvShape& s) {
      PhaseLayout p;
      p.sy = s.g.strides[0];
      p.sx = s.g.strides[1];
      const int64_t Hp = s.g.in[0] + s.g.pad_begin[0] + s.g.pad_end[0];
      const int64_t Wp = s.g.in[1] + s.g.pad_begin[1] + s.g.pad_end[1];
      p.Hq = (Hp + p.sy - 1) / p.sy;
      p.Wq = (Wp + p.sx - 1) / p.sx;
      p.ky = std::min(s.g.kernel[0], p.sy);
      p.kx = std::min(s.g.kernel[1], p.sx);
      p.count = static_cast<int>(p.ky * p.kx);
      return p;
    }
    // Plane of phase (py, px) in the buffer's order, or -1 when no tap reads that phase.
    int64_t index(int64_t py, int64_t px) const { return py < ky && px < kx ? py * kx + px : -1; }
  };

  // The NHWC image xt [H, W, C] into the phase planes of `ph` at xp, the padding (and the
  // planes' positions past the padded image) the zero point z; `flip`: every byte of x ^ 0x80
  // (an int8 x read as uint8).
  static void PadPhases(const uint8_t* xt, const IntConvShape& s, const PhaseLayout& ph, uint8_t z, bool flip,
                        uint8_t* xp, ThreadPool* pool) {
    const int64_t H = s.g.in[0], W = s.g.in[1], C = s.C, top = s.g.pad_begin[0], left = s.g.pad_begin[1];
    const auto copy = [&](uint8_t* dst, const uint8_t* src, int64_t n) {
      if (flip) {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ^ 0x80;
      } else {
        std::memcpy(dst, src, static_cast<size_t>(n));
      }
    };
    // Row i of every plane of phase row py: work item py * Hq + i.
    const auto rows = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t py = r / ph.Hq, i = r % ph.Hq, iy = py + ph.sy * i - top;
        for (int64_t px = 0; px < ph.sx; ++px) {
          const int64_t idx = ph.index(py, px);
          if (idx < 0) continue;
          uint8_t* dst = xp + idx * ph.plane + i * ph.Wq * C;
          if (iy < 0 || iy >= H) {
            std::memset(dst, z, static_cast<size_t>(ph.Wq * C));
            continue;
          }
          const uint8_t* src = xt + iy * W * C;
          if (ph.sx == 1) {  // the row as one run
            std::memset(dst, z, static_cast<size_t>(left * C));
            copy(dst + left * C, src, W * C);
            std::memset(dst + (left + W) * C, z, static_cast<size_t>((ph.Wq - left - W) * C));
            continue;
          }
          for (int64_t j = 0; j < ph.Wq; ++j) {
            const int64_t ix = px + ph.sx * j - left;
            if (ix < 0 || ix >= W) {
              std::memset(dst + j * C, z, static_cast<size_t>(C));
            } else {
              copy(dst + j * C, src + ix * C, C);
            }
          }
        }
      }
    };
    const int64_t items = ph.sy * ph.Hq;
    if (pool && pool->num_threads() > 1 && ph.count * ph.plane > (int64_t{64} << 10)) {
      pool->Run(items, 8, rows);
    } else {
      rows(0, items);
    }
  }

  // The NHWC kernel's x is [N, spatial..., C]: its dims in NCHW order for the geometry.
  Shape NchwOrder(Shape xs) const {
    if (nhwc_ && xs.size() >= 3) {
      xs.insert(xs.begin() + 1, xs.back());
      xs.pop_back();
    }
    return xs;
  }

  bool qlinear_, vnni_ok_, nhwc_;
  size_t w_, xzp_, wzp_;
  Shape known_x_;                          // x's static shape, as x lies
  std::optional<IntConvShape> known_;      // its geometry (Init), or none
  std::optional<int8gemm::PackedB> vnni_;  // a constant W on the VNNI GEMM (group 1 only)
  std::optional<int8dw::Weights> dw_;      // a constant depthwise W (int_conv_depthwise.h)
  bool packed_ = false;
  Shape packed_shape_;
  DataType packed_dtype_ = DataType::kUndefined;
  std::vector<int16_t> packed_w_;  // [M, C/group * kernel]: w - w_zero_point[m]
  std::vector<float> mult_;        // QLinearConv's multipliers from constant scales, or empty
};

// The optimized entry covers ungrouped convs (the VNNI GEMM) and depthwise ones (the depthwise
// kernel) whose W is a constant, packed once; the reference entry, the int16 loops, every
// other node and reference sessions.
KernelDef IntConvDef(const char* op, bool qlinear, bool vnni, bool nhwc = false) {
  KernelDef d;
  d.op_type = op;
  d.since_version = nhwc ? 1 : 10;
  if (nhwc) d.domain = kInternalDomain;
  d.type_input = -1;
  d.factory = [qlinear, vnni, nhwc](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<IntConvKernel>(qlinear, vnni, nhwc);
    k->Init(init);
    return std::unique_ptr<OpKernel>(std::move(k));
  };
  if (vnni) {
    const size_t w = qlinear ? 3 : 1;
    d.covers = [w](const KernelInit& init) {
      const Tensor* wc = init.constant_input(w);
      const int64_t group = init.node.GetInt("group", 1);
      return wc && ((int8gemm::Available() && group == 1) || int8dw::Covers(wc->shape(), group));
    };
    d.reference = false;
    d.impl = "avx512_vnni";
  }
  return d;
}

}  // namespace

void RegisterIntConvKernels(KernelRegistry& r) {
  for (bool vnni : {false, true}) {
    r.Register(IntConvDef("ConvInteger", false, vnni));
    r.Register(IntConvDef("QLinearConv", true, vnni));
  }
  // The layout pass's NHWC form of a QLinearConv the VNNI entry covers.
  r.Register(IntConvDef(kNhwcQLinearConvOp, true, true, true));
}

}  // namespace strata
