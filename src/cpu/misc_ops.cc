// Miscellaneous ai.onnx ops: Det (opset 11), GridSample (opset 16), and the losses
// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss (opsets 12, 13). The losses have
// ONNX function bodies, but a direct kernel avoids expanding ~10 nodes per loss.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/float_double.h"
#include "cpu/register.h"

namespace strata {
namespace {

// Determinant of the trailing [M, M] matrices by LU decomposition with partial pivoting
// in double precision; a zero pivot column gives 0.
Status DetOp(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": input is missing");
  const size_t rank = x->rank();
  if (rank < 2 || x->dim(rank - 1) != x->dim(rank - 2))
    return InvalidArgument(node.Describe(), ": input must be [*, M, M], got ", ShapeToString(x->shape()));
  if (x->dtype() != DataType::kFloat && x->dtype() != DataType::kDouble && x->dtype() != DataType::kFloat16)
    return InvalidArgument(node.Describe(), ": input must be float, got ", DataTypeName(x->dtype()));
  const Shape out_shape(x->shape().begin(), x->shape().end() - 2);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
  const int64_t m = x->dim(rank - 1);
  const int64_t batch = NumElements(out_shape);
  std::vector<double> a(static_cast<size_t>(m * m));
  // Elimination is M^3 / 3 multiply-adds per matrix, over an input of M^2 (a 4096 x 4096
  // matrix: 15 s): the run's limits are read every 2^20 of them, per pivot column.
  KernelStop stop(node);
  int64_t pending = 0;
  DispatchNumeric(x->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16>) {
      const T* src = x->data<T>();
      T* dst = y->mutable_data<T>();
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < m * m; ++i) a[i] = AsDouble(src[b * m * m + i]);
        double det = 1;
        for (int64_t k = 0; k < m && det != 0; ++k) {
          if (!stop.Continue(pending, (m - k) * (m - k))) return;
          int64_t p = k;
          for (int64_t i = k + 1; i < m; ++i)
            if (std::fabs(a[i * m + k]) > std::fabs(a[p * m + k])) p = i;
          if (a[p * m + k] == 0) {
            det = 0;
            break;
          }
          if (p != k) {
            for (int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[p * m + j]);
            det = -det;
          }
          det *= a[k * m + k];
          for (int64_t i = k + 1; i < m; ++i) {
            const double f = a[i * m + k] / a[k * m + k];
            for (int64_t j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
          }
        }
        dst[b] = FromDouble<T>(det);
      }
    }
  });
  return stop.status();
}

enum class GsMode { kBilinear, kNearest, kBicubic };
enum class GsPad { kZeros, kBorder, kReflection };

// PyTorch's reflect_coordinates: reflects `in` into [twice_low/2, twice_high/2].
double Reflect(double in, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double mn = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  in = std::fabs(in - mn);
  const double extra = std::fmod(in, span);
  const int64_t flips = static_cast<int64_t>(std::floor(in / span));
  return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

class GridSampleKernel final : public OpKernel {
 public:
  GridSampleKernel(GsMode mode, GsPad pad, bool align) : mode_(mode), pad_(pad), align_(align) {}

  double Unnormalize(double c, int64_t size) const {
    return align_ ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
  }
  // Applies the padding mode to a source coordinate (border clip / reflection).
  double Pad(double c, int64_t size) const {
    if (pad_ == GsPad::kBorder) return std::clamp(c, 0.0, static_cast<double>(size - 1));
    if (pad_ == GsPad::kReflection) {
      c = align_ ? Reflect(c, 0, 2 * (size - 1)) : Reflect(c, -1, 2 * size - 1);
      return std::clamp(c, 0.0, static_cast<double>(size - 1));
    }
    return c;
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* grid = ctx.input(1);
    if (!x || !grid) return InvalidArgument(node.Describe(), ": inputs X and grid are required");
    if (x->rank() != 4)
      return InvalidArgument(node.Describe(), ": X must be 4-D NCHW, got ", ShapeToString(x->shape()));
    if (grid->rank() != 4 || grid->dim(0) != x->dim(0) || grid->dim(3) != 2)
      return InvalidArgument(node.Describe(), ": grid must be [N, H_out, W_out, 2] with N = ", x->dim(0), ", got ",
                             ShapeToString(grid->shape()));
    if (grid->dtype() != x->dtype())
      return InvalidArgument(node.Describe(), ": grid dtype ", DataTypeName(grid->dtype()), " differs from X dtype ",
                             DataTypeName(x->dtype()));
    const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3), Ho = grid->dim(1), Wo = grid->dim(2);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {N, C, Ho, Wo}));
    bool ok = false;
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16>) {
        ok = true;
        Run<T>(x->data<T>(), grid->data<T>(), y->mutable_data<T>(), N, C, H, W, Ho, Wo);
      }
    });
    if (!ok) return InvalidArgument(node.Describe(), ": X must be float, got ", DataTypeName(x->dtype()));
    return Status::Ok();
  }

 private:
  template <typename T>
  void Run(const T* x, const T* grid, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo) const {
    auto at = [&](const T* plane, int64_t iy, int64_t ix) -> double {
      return (iy >= 0 && iy < H && ix >= 0 && ix < W) ? AsDouble(plane[iy * W + ix]) : 0.0;
    };
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const T* g = grid + ((n * Ho + oh) * Wo + ow) * 2;
          // Bounding keeps integer conversions defined; anything that far out samples padding.
          const double ux = Bound(Unnormalize(AsDouble(g[0]), W)), uy = Bound(Unnormalize(AsDouble(g[1]), H));
          for (int64_t c = 0; c < C; ++c) {
            const T* plane = x + (n * C + c) * H * W;
            double v = 0;
            if (mode_ == GsMode::kBicubic) {
              // Taps are padded one by one (PyTorch get_value_bounded).
              const double fx = std::floor(ux), fy = std::floor(uy), tx = ux - fx, ty = uy - fy;
              double wx[4], wy[4];
              Cubic(tx, wx);
              Cubic(ty, wy);
              for (int i = 0; i < 4; ++i) {
                double row = 0;
                for (int j = 0; j < 4; ++j) {
                  const double sx = Pad(fx - 1 + j, W), sy = Pad(fy - 1 + i, H);
                  row += wx[j] * at(plane, static_cast<int64_t>(sy), static_cast<int64_t>(sx));
                }
                v += wy[i] * row;
              }
            } else {
              const double sx = Pad(ux, W), sy = Pad(uy, H);
              if (mode_ == GsMode::kNearest) {
                v = at(plane, static_cast<int64_t>(std::nearbyint(sy)), static_cast<int64_t>(std::nearbyint(sx)));
              } else {
                const double x0 = std::floor(sx), y0 = std::floor(sy), lx = sx - x0, ly = sy - y0;
                const int64_t ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
                v = (1 - ly) * ((1 - lx) * at(plane, iy, ix) + lx * at(plane, iy, ix + 1)) +
                    ly * ((1 - lx) * at(plane, iy + 1, ix) + lx * at(plane, iy + 1, ix + 1));
              }
            }
            y[((n * C + c) * Ho + oh) * Wo + ow] = FromDouble<T>(v);
          }
        }
      }
    }
  }

  // NaN -> far outside (zeros padding reads 0; border/reflection clamp it), huge -> bounded.
  static double Bound(double c) { return std::isnan(c) ? -1e12 : std::clamp(c, -1e12, 1e12); }

  static void Cubic(double t, double w[4]) {
    constexpr double A = -0.75;
    auto c1 = [](double v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
    auto c2 = [](double v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
    w[0] = c2(t + 1);
    w[1] = c1(t);
    w[2] = c1(1 - t);
    w[3] = c2(2 - t);
  }

  GsMode mode_;
  GsPad pad_;
  bool align_;
};

Result<std::unique_ptr<OpKernel>> MakeGridSample(const KernelInit& init) {
  const Node& node = init.node;
  const std::string m = node.GetString("mode", "bilinear");
  const std::string p = node.GetString("padding_mode", "zeros");
  GsMode mode;
  if (m == "bilinear" || m == "linear") {
    mode = GsMode::kBilinear;
  } else if (m == "nearest") {
    mode = GsMode::kNearest;
  } else if (m == "bicubic" || m == "cubic") {
    mode = GsMode::kBicubic;
  } else {
    return InvalidModel(node.Describe(), ": unknown mode '", m, "'");
  }
  GsPad pad;
  if (p == "zeros") {
    pad = GsPad::kZeros;
  } else if (p == "border") {
    pad = GsPad::kBorder;
  } else if (p == "reflection") {
    pad = GsPad::kReflection;
  } else {
    return InvalidModel(node.Describe(), ": unknown padding_mode '", p, "'");
  }
  return std::unique_ptr<OpKernel>(std::make_unique<GridSampleKernel>(mode, pad, node.GetInt("align_corners", 0) != 0));
}

// Shared loss core: `logp` holds log-probabilities [N, C, D] (D = product of the extra
// dims), labels [N, D]. Writes per-element losses (reduction none) or the reduced scalar.
Status NllCore(const Node& node, const std::vector<double>& logp, int64_t N, int64_t C, int64_t D, const Tensor& labels,
               const Tensor* weight, Tensor& out) {
  const std::string red = node.GetString("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return InvalidModel(node.Describe(), ": reduction must be none, sum or mean, got '", red, "'");
  const bool has_ii = node.HasAttr("ignore_index");
  const int64_t ii = node.GetInt("ignore_index", 0);
  std::vector<double> loss(static_cast<size_t>(N * D));
  double wsum = 0, lsum = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      const int64_t i = n * D + d;
      const int64_t t = labels.dtype() == DataType::kInt64 ? labels.data<int64_t>()[i] : labels.data<int32_t>()[i];
      if (has_ii && t == ii) {
        loss[i] = 0;
        continue;
      }
      if (t < 0 || t >= C)
        return InvalidArgument(node.Describe(), ": target ", t, " at index ", i, " is outside [0, ", C, ")");
      double w = 1;
      if (weight) {
        w = weight->dtype() == DataType::kDouble    ? weight->data<double>()[t]
            : weight->dtype() == DataType::kFloat16 ? static_cast<float>(weight->data<Float16>()[t])
                                                    : weight->data<float>()[t];
      }
      loss[i] = -logp[(n * C + t) * D + d] * w;
      wsum += w;
      lsum += loss[i];
    }
  }
  auto store = [&](int64_t i, double v) {
    if (out.dtype() == DataType::kDouble) {
      out.mutable_data<double>()[i] = v;
    } else if (out.dtype() == DataType::kFloat16) {
      out.mutable_data<Float16>()[i] = Float16(static_cast<float>(v));
    } else {
      out.mutable_data<float>()[i] = static_cast<float>(v);
    }
  };
  if (red == "none") {
    for (int64_t i = 0; i < N * D; ++i) store(i, loss[i]);
  } else if (red == "sum") {
    store(0, lsum);
  } else {
    store(0, lsum / wsum);  // all targets ignored: 0/0 = NaN, as the spec function body gives
  }
  return Status::Ok();
}

Status CheckLossInputs(const Node& node, const Tensor* x, const Tensor* labels, const Tensor* weight) {
  if (!x || !labels) return InvalidArgument(node.Describe(), ": input and target are required");
  if (x->dtype() != DataType::kFloat && x->dtype() != DataType::kDouble && x->dtype() != DataType::kFloat16)
    return InvalidArgument(node.Describe(), ": input must be float, got ", DataTypeName(x->dtype()));
  if (labels->dtype() != DataType::kInt64 && labels->dtype() != DataType::kInt32)
    return InvalidArgument(node.Describe(), ": target must be int32 or int64, got ", DataTypeName(labels->dtype()));
  if (x->rank() < 2 || labels->rank() != x->rank() - 1 || labels->dim(0) != x->dim(0))
    return InvalidArgument(node.Describe(), ": input ", ShapeToString(x->shape()), " must be [N, C, d...] and target ",
                           ShapeToString(labels->shape()), " [N, d...]");
  for (size_t i = 1; i < labels->rank(); ++i)
    if (labels->dim(i) != x->dim(i + 1))
      return InvalidArgument(node.Describe(), ": target shape ", ShapeToString(labels->shape()),
                             " does not match input shape ", ShapeToString(x->shape()));
  if (weight && (weight->rank() != 1 || weight->dim(0) != x->dim(1) || weight->dtype() != x->dtype()))
    return InvalidArgument(node.Describe(), ": weight must be [C] = [", x->dim(1), "] of the input dtype");
  return Status::Ok();
}

Status LossOp(KernelContext& ctx, bool softmax) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* labels = ctx.input(1);
  const Tensor* weight = ctx.input(2);
  RETURN_IF_ERROR(CheckLossInputs(node, x, labels, weight));
  const int64_t N = x->dim(0), C = x->dim(1), D = C == 0 ? 0 : x->num_elements() / std::max<int64_t>(N * C, 1);
  std::vector<double> v(static_cast<size_t>(x->num_elements()));
  DispatchNumeric(x->dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16>)
      for (size_t i = 0; i < v.size(); ++i) v[i] = AsDouble(x->data<T>()[i]);
  });
  if (softmax) {  // log-softmax over axis 1, max-subtracted for stability
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double mx = -INFINITY, s = 0;
        for (int64_t c = 0; c < C; ++c) mx = std::max(mx, v[(n * C + c) * D + d]);
        for (int64_t c = 0; c < C; ++c) s += std::exp(v[(n * C + c) * D + d] - mx);
        const double lse = mx + std::log(s);
        for (int64_t c = 0; c < C; ++c) v[(n * C + c) * D + d] -= lse;
      }
  }
  const bool none = node.GetString("reduction", "mean") == "none";
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), none ? labels->shape() : Shape{}));
  RETURN_IF_ERROR(NllCore(node, v, N, C, D, *labels, weight, *y));
  if (softmax && ctx.num_outputs() > 1 && ctx.output_requested(1)) {
    ASSIGN_OR_RETURN(Tensor * lp, ctx.AllocateOutput(1, x->dtype(), x->shape()));
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16>)
        for (size_t i = 0; i < v.size(); ++i) lp->mutable_data<T>()[i] = FromDouble<T>(v[i]);
    });
  }
  return Status::Ok();
}

}  // namespace

void RegisterMiscKernels(KernelRegistry& r) {
  KernelDef det;
  det.op_type = "Det";
  det.since_version = 11;
  det.type_input = 0;
  det.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16};
  det.factory = [](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return MakeFnKernel(DetOp); };
  r.Register(det);
  KernelDef gs;
  gs.op_type = "GridSample";
  gs.since_version = 16;
  gs.type_input = 0;
  gs.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16};
  gs.factory = MakeGridSample;
  r.Register(gs);
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    KernelDef d;
    d.op_type = op;
    d.since_version = 12;
    d.type_input = 0;
    d.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16};
    const bool sm = std::string(op) == "SoftmaxCrossEntropyLoss";
    d.factory = [sm](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return MakeFnKernel([sm](KernelContext& ctx) { return LossOp(ctx, sm); });
    };
    r.Register(d);
  }
}

}  // namespace strata
