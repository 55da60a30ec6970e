// Resize (ai.onnx opsets 10, 11, 13, 18, 19): nearest, linear and cubic interpolation over
// any rank. The math follows the ONNX reference (onnx/backend/test/case/node/resize.py):
// the interpolation is a tensor product of 1-D filters, so it is applied one axis at a
// time, each pass mapping an axis of length in -> out with precomputed taps. Values are
// carried in double between passes so the result matches the float64 reference.
// Opset 18 adds `axes` (scales, sizes and roi then list only those axes) and
// keep_aspect_ratio_policy and antialias (linear and cubic downsampling with the filter
// widened by 1 / scale, as the ONNX reference defines it); opset 19 the half_pixel_symmetric
// coordinates.
//
// Upsample opset 7-9 lives in tensor_ops.cc and is not registered here.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeAttrs {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;  // opset 18: downsampling filters widened by 1 / scale
  bool has_axes = false;
  std::vector<int64_t> axes;  // as given (may be negative); has_axes says whether given
  AspectPolicy policy = AspectPolicy::kStretch;
};

// One output position along an axis: weighted input indices, or the extrapolation value.
struct AxisTaps {
  int taps = 1;
  std::vector<int64_t> idx;          // out_len * taps
  std::vector<double> w;             // out_len * taps
  std::vector<uint8_t> extrapolate;  // out_len
};

Result<ResizeAttrs> ParseAttrs(const Node& node) {
  ResizeAttrs a;
  const std::string mode = node.GetString("mode", "nearest");
  if (mode == "nearest") {
    a.mode = Mode::kNearest;
  } else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") {
    a.mode = Mode::kLinear;
  } else if (mode == "cubic" || mode == "bicubic") {
    a.mode = Mode::kCubic;
  } else {
    return InvalidModel(node.Describe(), ": unknown mode '", mode, "' (expected nearest, linear or cubic)");
  }
  if (node.opset < 11) {
    // Opset 10 has no coordinate attributes: it behaves like Upsample (asymmetric, and
    // nearest truncates when upsampling / ceils when downsampling, as ORT does).
    if (a.mode == Mode::kCubic) return InvalidModel(node.Describe(), ": cubic mode needs opset 11 or later");
    a.coord = Coord::kAsymmetric;
    a.nearest = Nearest::kSimple;
    return a;
  }
  const std::string ct = node.GetString("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel") {
    a.coord = Coord::kHalfPixel;
  } else if (ct == "half_pixel_symmetric" && node.opset >= 19) {
    a.coord = Coord::kHalfPixelSymmetric;
  } else if (ct == "pytorch_half_pixel") {
    a.coord = Coord::kPytorchHalfPixel;
  } else if (ct == "align_corners") {
    a.coord = Coord::kAlignCorners;
  } else if (ct == "asymmetric") {
    a.coord = Coord::kAsymmetric;
  } else if (ct == "tf_half_pixel_for_nn") {
    a.coord = Coord::kTfHalfPixelForNn;
  } else if (ct == "tf_crop_and_resize") {
    a.coord = Coord::kTfCropAndResize;
  } else {
    return InvalidModel(node.Describe(), ": unknown coordinate_transformation_mode '", ct, "'");
  }
  const std::string nm = node.GetString("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") {
    a.nearest = Nearest::kRoundPreferFloor;
  } else if (nm == "round_prefer_ceil") {
    a.nearest = Nearest::kRoundPreferCeil;
  } else if (nm == "floor") {
    a.nearest = Nearest::kFloor;
  } else if (nm == "ceil") {
    a.nearest = Nearest::kCeil;
  } else {
    return InvalidModel(node.Describe(), ": unknown nearest_mode '", nm, "'");
  }
  a.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
  a.exclude_outside = node.GetInt("exclude_outside", 0) != 0;
  a.extrapolation = node.GetFloat("extrapolation_value", 0.0f);
  if (node.opset >= 18) {
    // Nearest ignores antialias (the spec applies it to linear and cubic only).
    a.antialias = node.GetInt("antialias", 0) != 0 && a.mode != Mode::kNearest;
    a.has_axes = node.HasAttr("axes");
    if (a.has_axes) a.axes = node.GetInts("axes");
    const std::string policy = node.GetString("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger") {
      a.policy = AspectPolicy::kNotLarger;
    } else if (policy == "not_smaller") {
      a.policy = AspectPolicy::kNotSmaller;
    } else if (policy != "stretch") {
      return InvalidModel(node.Describe(), ": unknown keep_aspect_ratio_policy '", policy,
                          "' (expected stretch, not_larger or not_smaller)");
    }
  }
  return a;
}

// Reads a float tensor (float/double/float16) as doubles.
Result<std::vector<double>> ReadFloats(const Tensor& t, const Node& node, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  bool ok = true;
  if (t.dtype() == DataType::kFloat) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
  } else if (t.dtype() == DataType::kDouble) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<double>()[i];
  } else if (t.dtype() == DataType::kFloat16) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<Float16>()[i]);
  } else {
    ok = false;
  }
  if (!ok)
    return InvalidArgument(node.Describe(), ": ", what, " must be a float tensor, got ", DataTypeName(t.dtype()));
  return v;
}

AxisTaps MakeTaps(const ResizeAttrs& a, int64_t in_len, int64_t out_len, double scale, bool from_sizes,
                  double roi_start, double roi_end) {
  AxisTaps t;
  t.taps = a.mode == Mode::kCubic ? 4 : 2;
  // Antialiased downsampling (the ONNX reference's _linear/_cubic_coeffs_antialias): the
  // filter is stretched by 1 / scale, so it spans taps from floor(x) + start, start =
  // floor(-support / scale) + 1, to floor(x) - start + 1, and its weights are normalized.
  // The tap count is at most 2 * in_len / out_len + 4, so taps * out_len stays O(in + out).
  const bool wide = a.antialias && scale < 1.0;
  const double support = a.mode == Mode::kCubic ? 2.0 : 1.0;
  const int64_t wide_start = wide ? static_cast<int64_t>(std::floor(-support / scale)) + 1 : 0;
  if (wide) t.taps = static_cast<int>(2 - 2 * wide_start);
  t.idx.resize(static_cast<size_t>(out_len * t.taps));
  t.w.resize(t.idx.size());
  t.extrapolate.assign(static_cast<size_t>(out_len), 0);
  // With `scales`, the reference uses the unrounded output length scale * in_len in its
  // formulas (ORT's integer length fails those ONNX cases); with `sizes` it is exact.
  const double out_f = from_sizes ? static_cast<double>(out_len) : scale * static_cast<double>(in_len);
  const double in_last = static_cast<double>(in_len - 1);
  for (int64_t o = 0; o < out_len; ++o) {
    const double x = static_cast<double>(o);
    double xo = 0;
    switch (a.coord) {
      case Coord::kHalfPixel:
        xo = (x + 0.5) / scale - 0.5;
        break;
      case Coord::kHalfPixelSymmetric: {
        // Centres the output on the input when out_len was rounded down from scale * in_len.
        const double adjustment = static_cast<double>(out_len) / out_f;
        const double offset = static_cast<double>(in_len) / 2 * (1 - adjustment);
        xo = offset + (x + 0.5) / scale - 0.5;
        break;
      }
      case Coord::kPytorchHalfPixel:
        xo = out_f <= 1.0 ? 0.0 : (x + 0.5) / scale - 0.5;  // spec (and ORT): 0 for length 1
        break;
      case Coord::kAlignCorners:
        xo = out_f == 1.0 ? 0.0 : x * in_last / (out_f - 1);
        break;
      case Coord::kAsymmetric:
        xo = x / scale;
        break;
      case Coord::kTfHalfPixelForNn:
        xo = (x + 0.5) / scale;
        break;
      case Coord::kTfCropAndResize:
        xo = out_f == 1.0 ? (roi_end - roi_start) * in_last / 2 : x * (roi_end - roi_start) * in_last / (out_f - 1);
        xo += roi_start * in_last;
        if (xo < 0 || xo > in_last) t.extrapolate[o] = 1;
        break;
    }
    if (!std::isfinite(xo)) {  // NaN roi or a vanishing scale
      if (a.coord == Coord::kTfCropAndResize) t.extrapolate[o] = 1;
      xo = xo > 0 ? in_last : 0.0;
    }
    // Far outside the input every tap clamps to an edge, so bounding xo changes nothing
    // but keeps the integer conversions defined.
    xo = std::clamp(xo, -1e12, 1e12);
    int64_t* idx = &t.idx[static_cast<size_t>(o * t.taps)];
    double* w = &t.w[static_cast<size_t>(o * t.taps)];
    if (a.nearest == Nearest::kSimple && a.mode == Mode::kNearest) {
      // Opset-10 rule: truncate when upsampling, ceil when downsampling.
      int64_t i = scale < 1.0 ? static_cast<int64_t>(std::ceil(xo)) : static_cast<int64_t>(xo);
      idx[0] = std::clamp<int64_t>(i, 0, in_len - 1);
      w[0] = 1;
      idx[1] = idx[0];
      w[1] = 0;
      continue;
    }
    if (wide) {
      const double fl = std::floor(xo), ratio = xo - fl;
      double sum = 0;
      for (int k = 0; k < t.taps; ++k) {
        const int64_t off = wide_start + k;
        const double u = std::abs(scale * (static_cast<double>(off) - ratio));
        double wk = 0;
        if (a.mode == Mode::kLinear) {
          wk = std::max(0.0, 1 - u);
        } else {
          const double A = a.cubic_a;
          wk = u <= 1 ? ((A + 2) * u - (A + 3)) * u * u + 1 : u < 2 ? ((A * u - 5 * A) * u + 8 * A) * u - 4 * A : 0.0;
        }
        const int64_t i = static_cast<int64_t>(fl) + off;
        if (a.exclude_outside && (i < 0 || i >= in_len)) wk = 0;
        w[k] = wk;
        sum += wk;
        idx[k] = std::clamp<int64_t>(i, 0, in_len - 1);  // edge padding
      }
      if (sum != 0)
        for (int k = 0; k < t.taps; ++k) w[k] /= sum;
      continue;
    }
    // Left neighbour x0 with ratio in (0, 1]: an integer coordinate uses the right tap.
    const double fl = std::floor(xo);
    const int64_t x0 = xo == fl ? static_cast<int64_t>(fl) - 1 : static_cast<int64_t>(fl);
    const double r = xo - static_cast<double>(x0);
    int64_t first = x0;
    if (a.mode == Mode::kNearest) {
      bool right = true;
      if (r != 1.0) {
        switch (a.nearest) {
          case Nearest::kRoundPreferFloor:
            right = r > 0.5;
            break;
          case Nearest::kRoundPreferCeil:
            right = r >= 0.5;
            break;
          case Nearest::kFloor:
            right = false;
            break;
          case Nearest::kCeil:
            right = true;
            break;
          case Nearest::kSimple:
            break;
        }
      }
      w[0] = right ? 0 : 1;
      w[1] = right ? 1 : 0;
    } else if (a.mode == Mode::kLinear) {
      w[0] = 1 - r;
      w[1] = r;
    } else {
      const double A = a.cubic_a, s = 1 - r;
      w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
      w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
      w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
      w[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
      first = x0 - 1;
    }
    double sum = 0;
    for (int k = 0; k < t.taps; ++k) {
      const int64_t i = first + k;
      if (a.exclude_outside && (i < 0 || i >= in_len)) w[k] = 0;
      sum += w[k];
      idx[k] = std::clamp<int64_t>(i, 0, in_len - 1);  // edge padding
    }
    if (a.exclude_outside && sum != 0)
      for (int k = 0; k < t.taps; ++k) w[k] /= sum;
  }
  return t;
}

// Resizes axis `axis` of `in` (shape `shape`) into `out`; updates shape.
void ResizeAxis(const std::vector<double>& in, Shape& shape, size_t axis, int64_t out_len, const AxisTaps& taps,
                double extrapolation, std::vector<double>& out, ThreadPool* pool) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t in_len = shape[axis];
  out.assign(static_cast<size_t>(outer * out_len * inner), 0.0);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t ob = b; ob < e; ++ob) {
      const double* src = in.data() + ob * in_len * inner;
      double* dst = out.data() + ob * out_len * inner;
      for (int64_t o = 0; o < out_len; ++o) {
        double* d = dst + o * inner;
        if (taps.extrapolate[o]) {
          std::fill(d, d + inner, extrapolation);
          continue;
        }
        for (int k = 0; k < taps.taps; ++k) {
          const double w = taps.w[o * taps.taps + k];
          if (w == 0) continue;
          const double* s = src + taps.idx[o * taps.taps + k] * inner;
          for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
        }
      }
    }
  };
  if (pool) {
    pool->ParallelFor(outer, 1, body);
  } else {
    body(0, outer);
  }
  shape[axis] = out_len;
}

class ResizeKernel final : public OpKernel {
 public:
  explicit ResizeKernel(ResizeAttrs a) : a_(a) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(node.Describe(), ": input X is missing");
    const size_t rank = x->rank();
    const bool v10 = node.opset < 11;
    const Tensor* roi_t = v10 ? nullptr : ctx.input(1);
    const Tensor* scales_t = ctx.input(v10 ? 1 : 2);
    const Tensor* sizes_t = v10 ? nullptr : ctx.input(3);
    // Empty tensors stand for absent inputs.
    if (roi_t && roi_t->num_elements() == 0) roi_t = nullptr;
    if (scales_t && scales_t->num_elements() == 0) scales_t = nullptr;
    if (sizes_t && sizes_t->num_elements() == 0) sizes_t = nullptr;
    if (!scales_t && !sizes_t) return InvalidArgument(node.Describe(), ": one of 'scales' or 'sizes' must be given");
    if (scales_t && sizes_t) return InvalidArgument(node.Describe(), ": only one of 'scales' and 'sizes' may be given");

    // The axes scales, sizes and roi refer to: all of them, or `axes` (opset 18).
    std::vector<size_t> axes;
    if (a_.has_axes) {
      std::vector<bool> seen(rank, false);
      for (int64_t ax : a_.axes) {
        const int64_t r = static_cast<int64_t>(rank);
        if (ax < -r || ax >= r)
          return InvalidModel(node.Describe(), ": axes value ", ax, " is out of range for X of rank ", rank);
        const size_t d = static_cast<size_t>(ax < 0 ? ax + r : ax);
        if (seen[d]) return InvalidModel(node.Describe(), ": axis ", ax, " appears twice in axes");
        seen[d] = true;
        axes.push_back(d);
      }
    } else {
      for (size_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    const size_t k = axes.size();
    const char* count_what = a_.has_axes ? "the number of axes" : "X's rank";

    std::vector<double> scales(rank, 1.0);
    Shape out_shape = x->shape();
    bool from_sizes = false;
    if (scales_t) {
      ASSIGN_OR_RETURN(std::vector<double> given, ReadFloats(*scales_t, node, "scales"));
      if (given.size() != k)
        return InvalidArgument(node.Describe(), ": 'scales' has ", given.size(), " values but ", count_what, " is ", k);
      for (size_t j = 0; j < k; ++j) {
        const size_t d = axes[j];
        if (!(given[j] > 0))
          return InvalidArgument(node.Describe(), ": scales[", j, "] = ", given[j], " must be positive");
        const double len = given[j] * static_cast<double>(x->dim(d));
        if (!(len < 9.0e15))  // also rejects inf/NaN before the integer conversion
          return InvalidArgument(node.Describe(), ": scales[", j, "] = ", given[j], " gives an output too large");
        scales[d] = given[j];
        out_shape[d] = static_cast<int64_t>(len);
      }
    } else {
      if (sizes_t->dtype() != DataType::kInt64)
        return InvalidArgument(node.Describe(), ": 'sizes' must be int64, got ", DataTypeName(sizes_t->dtype()));
      if (static_cast<size_t>(sizes_t->num_elements()) != k)
        return InvalidArgument(node.Describe(), ": 'sizes' has ", sizes_t->num_elements(), " values but ", count_what,
                               " is ", k);
      const int64_t* sizes = sizes_t->data<int64_t>();
      for (size_t j = 0; j < k; ++j) {
        const size_t d = axes[j];
        if (sizes[j] < 0) return InvalidArgument(node.Describe(), ": sizes[", j, "] is negative");
        if (x->dim(d) == 0 && sizes[j] > 0)
          return InvalidArgument(node.Describe(), ": cannot resize an empty axis ", d, " to ", sizes[j]);
      }
      if (a_.policy == AspectPolicy::kStretch) {
        from_sizes = true;
        for (size_t j = 0; j < k; ++j) {
          const size_t d = axes[j];
          out_shape[d] = sizes[j];
          scales[d] = x->dim(d) == 0 ? 1.0 : static_cast<double>(sizes[j]) / static_cast<double>(x->dim(d));
        }
      } else {
        // One scale for all the axes, the largest that fits (not_larger) or the smallest
        // that covers (not_smaller) the requested sizes; each length is then rounded.
        const bool not_larger = a_.policy == AspectPolicy::kNotLarger;
        double scale = not_larger ? std::numeric_limits<double>::infinity() : 0.0;
        for (size_t j = 0; j < k; ++j) {
          if (x->dim(axes[j]) == 0) continue;
          const double r = static_cast<double>(sizes[j]) / static_cast<double>(x->dim(axes[j]));
          scale = not_larger ? std::min(scale, r) : std::max(scale, r);
        }
        if (!std::isfinite(scale) || !(scale > 0))
          return InvalidArgument(node.Describe(), ": keep_aspect_ratio_policy gives no positive scale for sizes");
        for (size_t j = 0; j < k; ++j) {
          const size_t d = axes[j];
          const double len = std::round(scale * static_cast<double>(x->dim(d)));
          if (!(len < 9.0e15)) return InvalidArgument(node.Describe(), ": sizes give an output too large");
          out_shape[d] = static_cast<int64_t>(len);
          scales[d] = scale;
        }
      }
    }
    std::vector<double> roi;
    if (a_.coord == Coord::kTfCropAndResize) {
      if (!roi_t) return InvalidArgument(node.Describe(), ": tf_crop_and_resize needs the 'roi' input");
      ASSIGN_OR_RETURN(std::vector<double> given, ReadFloats(*roi_t, node, "roi"));
      if (given.size() != 2 * k)
        return InvalidArgument(node.Describe(), ": 'roi' has ", given.size(), " values, expected 2 * ", k, " (",
                               count_what, ")");
      roi.assign(2 * rank, 0.0);
      for (size_t d = 0; d < rank; ++d) roi[d + rank] = 1.0;
      for (size_t j = 0; j < k; ++j) {
        roi[axes[j]] = given[j];
        roi[axes[j] + rank] = given[j + k];
      }
    }

    // The antialias filter spans about 2 * support / scale taps per output.
    for (size_t d = 0; a_.antialias && d < rank; ++d)
      if (scales[d] < 1.0 && out_shape[d] > 0 && (a_.mode == Mode::kCubic ? 2.0 : 1.0) / scales[d] > double(1 << 24))
        return InvalidArgument(node.Describe(), ": antialias with scale ", scales[d], " on axis ", d,
                               " would need a filter over 2^24 taps wide");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_shape));
    if (y->num_elements() == 0) return Status::Ok();

    std::vector<double> cur(static_cast<size_t>(x->num_elements()));
    const int64_t n = x->num_elements();
    const bool supported = DispatchNumeric(x->dtype(), [&]<typename T>() {
      const T* p = x->data<T>();
      for (int64_t i = 0; i < n; ++i) cur[i] = static_cast<double>(static_cast<float>(p[i]));
      if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>)
        for (int64_t i = 0; i < n; ++i) cur[i] = static_cast<double>(p[i]);
    });
    if (!supported || x->dtype() == DataType::kBool)
      return Unsupported(node.Describe(), ": Resize does not support dtype ", DataTypeName(x->dtype()));

    Shape shape = x->shape();
    std::vector<double> next;
    for (size_t d = 0; d < rank; ++d) {
      const bool crop = a_.coord == Coord::kTfCropAndResize;
      // An axis kept at its size with an identity mapping needs no pass.
      if (!crop && out_shape[d] == shape[d] && scales[d] == 1.0 && a_.coord != Coord::kTfHalfPixelForNn) continue;
      AxisTaps taps =
          MakeTaps(a_, shape[d], out_shape[d], scales[d], from_sizes, crop ? roi[d] : 0.0, crop ? roi[d + rank] : 1.0);
      ResizeAxis(cur, shape, d, out_shape[d], taps, a_.extrapolation, next, ctx.pool());
      cur.swap(next);
    }

    const int64_t m = y->num_elements();
    DispatchNumeric(x->dtype(), [&]<typename T>() {
      T* q = y->mutable_data<T>();
      for (int64_t i = 0; i < m; ++i) {
        if constexpr (std::is_integral_v<T>) {
          // Integers round to nearest and saturate, as ORT does for uint8/int8 images.
          double v = std::nearbyint(cur[i]);
          v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                         static_cast<double>(std::numeric_limits<T>::max()));
          q[i] = static_cast<T>(v);
        } else if constexpr (std::is_same_v<T, double>) {
          q[i] = cur[i];
        } else {
          q[i] = T(static_cast<float>(cur[i]));
        }
      }
    });
    return Status::Ok();
  }

 private:
  ResizeAttrs a_;
};

KernelDef ResizeDef(int since, int end) {
  KernelDef d;
  d.op_type = "Resize";
  d.since_version = since;
  d.end_version = end;
  d.type_input = 0;
  d.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16,
             DataType::kUInt8, DataType::kInt8,   DataType::kInt32,   DataType::kInt64};
  d.factory = [](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    ASSIGN_OR_RETURN(ResizeAttrs a, ParseAttrs(init.node));
    return std::unique_ptr<OpKernel>(std::make_unique<ResizeKernel>(a));
  };
  return d;
}

}  // namespace

void RegisterResizeKernels(KernelRegistry& r) {
  r.Register(ResizeDef(10, 10));
  r.Register(ResizeDef(11, 12));
  r.Register(ResizeDef(13, 17));
  r.Register(ResizeDef(18, INT_MAX));
}

}  // namespace strata
