// Pooling reference kernels (the test oracle): MaxPool (with Indices), AveragePool,
// LpPool, their Global* forms, MaxUnpool and MaxRoiPool; plus registration of the
// optimized fp32 kernels from pool_xnnpack.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/conv_geometry.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/pool_kernels.h"
#include "cpu/register.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// Walks the pooling windows of output positions in row-major order, one position at a
// time, from each axis's first and last in-bounds tap: nothing is stored per window. (A
// table of every window's taps was outputs x kernel entries, on the heap outside the
// session's memory cap: a 1024 x 1024 window over a padded 1024 x 1024 image asked for
// 2^40 of them.)
class WindowWalker {
 public:
  explicit WindowWalker(const SpatialGeometry& g)
      : g_(g), r_(g.rank()), o_(r_, 0), lo_(r_), hi_(r_), padded_(r_), k_(r_), row_stride_(r_), col_stride_(r_) {
    int64_t row = 1, col = 1;
    for (size_t a = r_; a-- > 0;) {
      row_stride_[a] = row;
      row *= g.in[a];
    }
    for (size_t a = 0; a < r_; ++a) {
      col_stride_[a] = col;
      col *= g.in[a];
    }
  }

  // Moves to output position p (row-major over the output's spatial shape).
  void Seek(int64_t p) {
    for (size_t a = r_; a-- > 0;) {
      o_[a] = g_.out[a] > 0 ? p % g_.out[a] : 0;
      p = g_.out[a] > 0 ? p / g_.out[a] : 0;
    }
    Bound();
  }
  // Moves to the next output position.
  void Next() {
    for (size_t a = r_; a-- > 0;) {
      if (++o_[a] < g_.out[a]) break;
      o_[a] = 0;
    }
    Bound();
  }
  // Taps inside the input, and inside the padded input (count_include_pad).
  int64_t taps() const { return taps_; }
  int64_t padded_taps() const { return padded_taps_; }

  // f(row-major offset, column-major offset) for each tap inside the input, in the
  // kernel's row-major order.
  template <typename F>
  void ForTaps(F&& f) {
    if (taps_ == 0) return;
    const size_t last = r_ - 1;
    for (size_t a = 0; a < last; ++a) k_[a] = lo_[a];
    while (true) {
      int64_t row = 0, col = 0;
      for (size_t a = 0; a < last; ++a) {
        const int64_t pos = Start(a) + k_[a] * g_.dilations[a];
        row += pos * row_stride_[a];
        col += pos * col_stride_[a];
      }
      const int64_t d = g_.dilations[last], cs = col_stride_[last];
      for (int64_t k = lo_[last], pos = Start(last) + k * d; k < hi_[last]; ++k, pos += d) f(row + pos, col + pos * cs);
      size_t a = last;
      while (a-- > 0) {
        if (++k_[a] < hi_[a]) break;
        k_[a] = lo_[a];
      }
      if (a == static_cast<size_t>(-1)) return;
    }
  }

 private:
  int64_t Start(size_t a) const { return o_[a] * g_.strides[a] - g_.pad_begin[a]; }
  // Per axis, the taps k in [lo, hi) whose input position start + k * dilation lies in
  // [0, in); and how many lie in [-pad_begin, in + pad_end).
  void Bound() {
    taps_ = 1;
    padded_taps_ = 1;
    for (size_t a = 0; a < r_; ++a) {
      const int64_t start = Start(a), d = g_.dilations[a], kn = g_.kernel[a];
      const int64_t first = start >= 0 ? 0 : (-start + d - 1) / d;
      const int64_t last_in = g_.in[a] - 1 - start;  // k * d <= last_in
      lo_[a] = std::min(first, kn);
      hi_[a] = last_in < 0 ? lo_[a] : std::max(lo_[a], std::min(kn, last_in / d + 1));
      const int64_t last_padded = g_.in[a] + g_.pad_end[a] - 1 - start;
      padded_[a] = last_padded < 0 ? 0 : std::min(kn, last_padded / d + 1);
      taps_ *= hi_[a] - lo_[a];  // at most the input's size
      // Huge pads with a huge kernel can make this product pass int64: saturate (it is only
      // count_include_pad's divisor).
      if (__builtin_mul_overflow(padded_taps_, padded_[a], &padded_taps_)) padded_taps_ = INT64_MAX;
    }
  }

  const SpatialGeometry& g_;
  size_t r_;
  std::vector<int64_t> o_, lo_, hi_, padded_, k_, row_stride_, col_stride_;
  int64_t taps_ = 0, padded_taps_ = 0;
};

// Runs body(i, plane, walker) for every output i of all planes (planes x outputs), the
// walker on output i's window, in parallel chunks of about 2^14 taps (so one large plane
// is split too); returns early once `stop` says the run is over.
template <typename Body>
void ForWindows(ThreadPool* pool, int64_t planes, const SpatialGeometry& g, KernelStop& stop, const Body& body) {
  const int64_t os = g.OutSize(), total = planes * os;
  // An estimate of the taps per output: at most the input's size, or the kernel's.
  int64_t taps = 1;
  for (size_t a = 0; a < g.rank(); ++a)
    taps = std::min<int64_t>(taps * std::min(g.kernel[a], g.in[a]), int64_t{1} << 20);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(taps, 1));
  auto chunk = [&](int64_t b, int64_t e) {
    WindowWalker w(g);
    int64_t pending = 0;
    for (int64_t i = b; i < e; ++i) {
      const int64_t p = i % os;
      if (i == b || p == 0) {
        w.Seek(p);
      } else {
        w.Next();
      }
      // A window's cost is its kernel's, which the input does not bound.
      if (!stop.Continue(pending, w.taps() + 1)) return;
      body(i, i / os, w);
    }
  };
  if (pool) {
    pool->ParallelFor(total, grain, chunk);
  } else {
    chunk(0, total);
  }
}

void ForPlanes(ThreadPool* pool, int64_t planes, ThreadPool::RangeRef fn) {
  if (pool) {
    pool->ParallelFor(planes, 1, fn);
  } else {
    fn(0, planes);
  }
}

// Checks X is [N, C, spatial...] and reads the window attributes.
struct PoolSetup {
  int64_t n = 0, c = 0;
  SpatialGeometry geo;
  Shape out_shape;
};
Result<PoolSetup> SetupPool(const Node& node, const Tensor* x, bool ceil_allowed, bool dilations_allowed) {
  if (!x) return InvalidArgument(node.Describe(), ": missing input X");
  if (x->rank() < 3)
    return InvalidArgument(node.Describe(), ": input X must be [N, C, spatial...] (rank >= 3), got ",
                           ShapeToString(x->shape()));
  size_t r = x->rank() - 2;
  if (!node.HasAttr("kernel_shape")) return InvalidModel(node.Describe(), ": missing required attribute kernel_shape");
  const std::vector<int64_t>* ks = FindInts(node, "kernel_shape");  // in place: no copy per run
  const Shape kernel = ks ? Shape(*ks) : Shape();
  if (kernel.size() != r)
    return InvalidArgument(node.Describe(), ": kernel_shape ", ShapeToString(kernel), " has ", kernel.size(),
                           " dims but X ", ShapeToString(x->shape()), " has ", r, " spatial dims");
  bool ceil_mode = ceil_allowed && node.GetInt("ceil_mode", 0) != 0;
  PoolSetup s;
  s.n = x->dim(0);
  s.c = x->dim(1);
  const Shape in(x->shape().begin() + 2, x->shape().end());
  ASSIGN_OR_RETURN(s.geo, ComputeWindowGeometry(node, in, kernel, ceil_mode, dilations_allowed));
  s.out_shape = {s.n, s.c};
  s.out_shape.insert(s.out_shape.end(), s.geo.out.begin(), s.geo.out.end());
  return s;
}

template <typename T>
void MaxPoolTyped(const T* x, T* y, int64_t* idx, bool col_major, int64_t planes, const SpatialGeometry& g,
                  ThreadPool* pool, KernelStop& stop) {
  const int64_t is = g.InSize();
  ForWindows(pool, planes, g, stop, [&](int64_t i, int64_t pl, WindowWalker& w) {
    const T* xp = x + pl * is;
    // Windows entirely in padding cannot occur with valid pads; -inf/lowest is a safe identity.
    float best = -std::numeric_limits<float>::infinity();
    double bestd = -std::numeric_limits<double>::infinity();
    int64_t arg_row = -1, arg_col = -1;
    w.ForTaps([&](int64_t row, int64_t col) {
      if constexpr (std::is_same_v<T, double> || std::is_integral_v<T>) {
        double v = static_cast<double>(xp[row]);
        if (arg_row < 0 || v > bestd) bestd = v, arg_row = row, arg_col = col;
      } else {
        float v = static_cast<float>(xp[row]);
        if (arg_row < 0 || v > best) best = v, arg_row = row, arg_col = col;
      }
    });
    if constexpr (std::is_same_v<T, double> || std::is_integral_v<T>) {
      y[i] = arg_row < 0 ? std::numeric_limits<T>::lowest() : static_cast<T>(bestd);
    } else {
      y[i] = T(best);
    }
    if (idx) idx[i] = arg_row < 0 ? -1 : pl * is + (col_major ? arg_col : arg_row);
  });
}

class RefMaxPoolKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(PoolSetup s, SetupPool(node, x, /*ceil_allowed=*/true, /*dilations_allowed=*/true));
    int64_t storage = node.GetInt("storage_order", 0);
    if (storage != 0 && storage != 1)
      return InvalidModel(node.Describe(), ": storage_order must be 0 or 1, got ", storage);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), s.out_shape));
    int64_t* idx = nullptr;
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ASSIGN_OR_RETURN(Tensor * it, ctx.AllocateOutput(1, DataType::kInt64, s.out_shape));
      idx = it->mutable_data<int64_t>();
    }
    bool ok = false;
    KernelStop stop(node);
    auto run = [&]<typename T>() {
      MaxPoolTyped<T>(x->data<T>(), y->mutable_data<T>(), idx, storage == 1, s.n * s.c, s.geo, ctx.pool(), stop);
      ok = true;
    };
    if (!DispatchFloat(x->dtype(), run)) {
      if (x->dtype() == DataType::kInt8) run.operator()<int8_t>();
      if (x->dtype() == DataType::kUInt8) run.operator()<uint8_t>();
    }
    if (!ok) return Unsupported(node.Describe(), ": MaxPool does not support dtype ", DataTypeName(x->dtype()));
    return stop.status();
  }
};

// AveragePool (p == 0) and LpPool (p > 0) share the window walk.
template <typename T>
void AvgLpPoolTyped(const T* x, T* y, int64_t planes, const SpatialGeometry& g, bool count_include_pad, double p_norm,
                    ThreadPool* pool, KernelStop& stop) {
  using A = typename AccType<T>::type;
  const int64_t is = g.InSize();
  ForWindows(pool, planes, g, stop, [&](int64_t i, int64_t pl, WindowWalker& w) {
    const T* xp = x + pl * is;
    A acc = 0;
    w.ForTaps([&](int64_t row, int64_t) {
      A v = static_cast<A>(xp[row]);
      if (p_norm > 0) {
        acc += static_cast<A>(std::pow(std::abs(static_cast<double>(v)), p_norm));
      } else {
        acc += v;
      }
    });
    A r;
    if (p_norm > 0) {
      r = static_cast<A>(std::pow(static_cast<double>(acc), 1.0 / p_norm));
    } else {
      int64_t div = count_include_pad ? w.padded_taps() : w.taps();
      r = div > 0 ? acc / static_cast<A>(div) : A(0);
    }
    y[i] = FromAcc<T>(r);
  });
}

class RefAvgLpPoolKernel final : public OpKernel {
 public:
  explicit RefAvgLpPoolKernel(bool lp) : lp_(lp) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    // LpPool gained ceil_mode/dilations in opset 18, AveragePool dilations in 19.
    ASSIGN_OR_RETURN(PoolSetup s, SetupPool(node, x, true, true));
    double p = 0;
    if (lp_) {
      p = static_cast<double>(node.HasAttr("p") && node.FindAttr("p")->type == Attribute::Type::kFloat
                                  ? node.GetFloat("p", 2.0f)
                                  : static_cast<float>(node.GetInt("p", 2)));
      if (!(p > 0)) return InvalidModel(node.Describe(), ": p must be positive, got ", p);
    }
    bool include_pad = node.GetInt("count_include_pad", 0) != 0;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), s.out_shape));
    KernelStop stop(node);
    bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
      AvgLpPoolTyped<T>(x->data<T>(), y->mutable_data<T>(), s.n * s.c, s.geo, include_pad, p, ctx.pool(), stop);
    });
    if (!ok) return Unsupported(node.Describe(), ": does not support dtype ", DataTypeName(x->dtype()));
    return stop.status();
  }

 private:
  bool lp_;
};

enum class GlobalKind { kAverage, kMax, kLp };

template <typename T>
void GlobalPoolTyped(const T* x, T* y, int64_t planes, int64_t is, GlobalKind kind, double p, ThreadPool* pool) {
  using A = typename AccType<T>::type;
  ForPlanes(pool, planes, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * is;
      A acc = kind == GlobalKind::kMax ? static_cast<A>(-std::numeric_limits<double>::infinity()) : A(0);
      for (int64_t i = 0; i < is; ++i) {
        A v = static_cast<A>(xp[i]);
        if (kind == GlobalKind::kMax) {
          acc = std::max(acc, v);
        } else if (kind == GlobalKind::kLp) {
          acc += static_cast<A>(std::pow(std::abs(static_cast<double>(v)), p));
        } else {
          acc += v;
        }
      }
      if (kind == GlobalKind::kAverage) acc = is > 0 ? acc / static_cast<A>(is) : A(0);
      if (kind == GlobalKind::kLp) acc = static_cast<A>(std::pow(static_cast<double>(acc), 1.0 / p));
      y[pl] = FromAcc<T>(acc);
    }
  });
}

class RefGlobalPoolKernel final : public OpKernel {
 public:
  explicit RefGlobalPoolKernel(GlobalKind kind) : kind_(kind) {}
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(node.Describe(), ": missing input X");
    if (x->rank() < 2)
      return InvalidArgument(node.Describe(), ": input X must be [N, C, spatial...], got ", ShapeToString(x->shape()));
    Shape out(x->rank(), 1);
    out[0] = x->dim(0);
    out[1] = x->dim(1);
    int64_t is = 1;
    for (size_t i = 2; i < x->rank(); ++i) is *= x->dim(i);
    if (is == 0 && kind_ == GlobalKind::kMax)
      return InvalidArgument(node.Describe(), ": GlobalMaxPool of an empty spatial extent ", ShapeToString(x->shape()));
    double p = kind_ == GlobalKind::kLp ? static_cast<double>(node.GetInt("p", 2)) : 0.0;
    if (kind_ == GlobalKind::kLp && !(p > 0)) return InvalidModel(node.Describe(), ": p must be positive");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
    bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
      GlobalPoolTyped<T>(x->data<T>(), y->mutable_data<T>(), x->dim(0) * x->dim(1), is, kind_, p, ctx.pool());
    });
    if (!ok) return Unsupported(node.Describe(), ": does not support dtype ", DataTypeName(x->dtype()));
    return Status::Ok();
  }

 private:
  GlobalKind kind_;
};

class RefMaxUnpoolKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    const Tensor* oshape = ctx.input(2);
    if (!x || !ind) return InvalidArgument(node.Describe(), ": MaxUnpool needs inputs X and I");
    if (x->rank() < 3)
      return InvalidArgument(node.Describe(), ": input X must be [N, C, spatial...], got ", ShapeToString(x->shape()));
    if (ind->dtype() != DataType::kInt64 || ind->shape() != x->shape())
      return InvalidArgument(node.Describe(), ": indices I must be int64 with X's shape ", ShapeToString(x->shape()),
                             ", got ", DataTypeName(ind->dtype()), ShapeToString(ind->shape()));
    size_t r = x->rank() - 2;
    std::vector<int64_t> kernel = node.GetInts("kernel_shape");
    if (kernel.size() != r)
      return InvalidArgument(node.Describe(), ": kernel_shape must have ", r, " values, got ", kernel.size());
    ASSIGN_OR_RETURN(Shape strides, SpatialInts(node, "strides", r, 1));
    std::vector<int64_t> pads = node.GetInts("pads", std::vector<int64_t>(2 * r, 0));
    if (pads.size() != 2 * r) return InvalidModel(node.Describe(), ": pads must have ", 2 * r, " values");
    Shape out = {x->dim(0), x->dim(1)};
    for (size_t i = 0; i < r; ++i) out.push_back((x->dim(i + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + r]);
    // Indices address the default (inferred) output shape, as MaxPool produced them; an
    // explicit output_shape only enlarges the canvas they are placed on.
    const Shape def = out;
    if (oshape) {
      if (oshape->dtype() != DataType::kInt64 || oshape->rank() != 1 ||
          oshape->num_elements() != static_cast<int64_t>(x->rank()))
        return InvalidArgument(node.Describe(), ": output_shape must be an int64 vector of ", x->rank(), " values");
      out.assign(oshape->data<int64_t>(), oshape->data<int64_t>() + x->rank());
      if (out[0] != x->dim(0) || out[1] != x->dim(1))
        return InvalidArgument(node.Describe(), ": output_shape ", ShapeToString(out),
                               " must keep X's batch and channels");
    }
    for (int64_t d : out)
      if (d < 0) return InvalidArgument(node.Describe(), ": negative output dimension in ", ShapeToString(out));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), out));
    std::memset(y->raw_mutable_data(), 0, y->byte_size());
    const int64_t total = NumElements(def);
    const int64_t* ip = ind->data<int64_t>();
    const size_t es = DataTypeSize(x->dtype());
    const char* xs = static_cast<const char*>(x->raw_data());
    char* ys = static_cast<char*>(y->raw_mutable_data());
    for (int64_t i = 0, n_elems = x->num_elements(); i < n_elems; ++i) {
      if (ip[i] < 0 || ip[i] >= total)
        return InvalidArgument(node.Describe(), ": index ", ip[i], " at position ", i, " is outside the output of ",
                               total, " elements");
      // Re-address the index from the default shape into the (possibly larger) output.
      int64_t rem = ip[i], dst = 0, stride = 1;
      for (size_t d = def.size(); d-- > 0;) {
        int64_t coord = rem % def[d];
        rem /= def[d];
        if (coord >= out[d])
          return InvalidArgument(node.Describe(), ": index ", ip[i], " is outside the output_shape ",
                                 ShapeToString(out));
        dst += coord * stride;
        stride *= out[d];
      }
      std::memcpy(ys + dst * es, xs + i * es, es);
    }
    return Status::Ok();
  }
};

class RefMaxRoiPoolKernel final : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* rois = ctx.input(1);
    if (!x || !rois) return InvalidArgument(node.Describe(), ": MaxRoiPool needs inputs X and rois");
    if (x->rank() != 4)
      return InvalidArgument(node.Describe(), ": X must be [N, C, H, W], got ", ShapeToString(x->shape()));
    if (rois->rank() != 2 || rois->dim(1) != 5 || rois->dtype() != x->dtype())
      return InvalidArgument(node.Describe(), ": rois must be [num_rois, 5] of X's dtype, got ",
                             DataTypeName(rois->dtype()), ShapeToString(rois->shape()));
    std::vector<int64_t> pooled = node.GetInts("pooled_shape");
    if (pooled.size() != 2 || pooled[0] <= 0 || pooled[1] <= 0)
      return InvalidModel(node.Describe(), ": pooled_shape must be two positive values");
    float scale = node.GetFloat("spatial_scale", 1.0f);
    const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3), nr = rois->dim(0);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), {nr, c, pooled[0], pooled[1]}));
    Status st;
    // Each roi scans its region of the image once per channel: rois x channels x up to the
    // image, bounded by no one operand (8192 whole-image rois over a 2048 x 2048 image: 3 *
    // 10^10 compares); the run's limits are read every 2^20 of them, per output bin.
    KernelStop stop(node);
    int64_t pending = 0;
    bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
      const T* xd = x->data<T>();
      const T* rd = rois->data<T>();
      T* yd = y->mutable_data<T>();
      for (int64_t r = 0; r < nr && st.ok(); ++r) {
        const T* roi = rd + r * 5;
        // Checked as floats: converting NaN or a value past int64 is undefined, and lround's
        // result for one is unspecified (the region arithmetic below would then overflow).
        const float bf = static_cast<float>(roi[0]);
        if (!(bf >= 0 && bf < static_cast<float>(n))) {
          st = InvalidArgument(node.Describe(), ": roi ", r, " has batch index ", bf, " outside [0, ", n, ")");
          return;
        }
        const int64_t bi = static_cast<int64_t>(bf);
        float scaled[4];
        for (int k = 0; k < 4; ++k) {
          scaled[k] = static_cast<float>(roi[1 + k]) * scale;
          if (!(std::fabs(scaled[k]) <= 1e9f)) {
            st =
                InvalidArgument(node.Describe(), ": roi ", r, " coordinate ", k, " is ", static_cast<float>(roi[1 + k]),
                                ", which times spatial_scale ", scale, " is not a number within +-1e9");
            return;
          }
        }
        int64_t x1 = std::lround(scaled[0]), y1 = std::lround(scaled[1]);
        int64_t x2 = std::lround(scaled[2]), y2 = std::lround(scaled[3]);
        int64_t rh = std::max<int64_t>(y2 - y1 + 1, 1), rw = std::max<int64_t>(x2 - x1 + 1, 1);
        float bh = static_cast<float>(rh) / pooled[0], bw = static_cast<float>(rw) / pooled[1];
        for (int64_t ch = 0; ch < c; ++ch) {
          const T* plane = xd + (bi * c + ch) * h * w;
          for (int64_t ph = 0; ph < pooled[0]; ++ph)
            for (int64_t pw = 0; pw < pooled[1]; ++pw) {
              int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(ph * bh)) + y1, 0, h);
              int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((ph + 1) * bh)) + y1, 0, h);
              int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(pw * bw)) + x1, 0, w);
              int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((pw + 1) * bw)) + x1, 0, w);
              if (!stop.Continue(pending,
                                 std::max<int64_t>(1, std::max<int64_t>(0, he - hs) * std::max<int64_t>(0, we - ws)))) {
                st = stop.status();
                return;
              }
              float best = 0;
              if (he > hs && we > ws) {
                best = -std::numeric_limits<float>::infinity();
                for (int64_t yy = hs; yy < he; ++yy)
                  for (int64_t xx = ws; xx < we; ++xx) best = std::max(best, static_cast<float>(plane[yy * w + xx]));
              }
              yd[((r * c + ch) * pooled[0] + ph) * pooled[1] + pw] = static_cast<T>(best);
            }
        }
      }
    });
    if (!ok) return Unsupported(node.Describe(), ": MaxRoiPool does not support dtype ", DataTypeName(x->dtype()));
    return st;
  }
};

template <typename K, typename... Args>
KernelFactory Factory(Args... args) {
  return [=](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(std::make_unique<K>(args...));
  };
}

const std::vector<DataType> kPoolTypes = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeRefMaxPool(const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<RefMaxPoolKernel>());
}
Result<std::unique_ptr<OpKernel>> MakeRefAveragePool(const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<RefAvgLpPoolKernel>(false));
}
Result<std::unique_ptr<OpKernel>> MakeRefGlobalAveragePool(const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<RefGlobalPoolKernel>(GlobalKind::kAverage));
}

void RegisterPoolKernels(KernelRegistry& r) {
  std::vector<DataType> max_types = kPoolTypes;
  max_types.push_back(DataType::kInt8);
  max_types.push_back(DataType::kUInt8);
  r.Register({.domain = "", .op_type = "MaxPool", .types = max_types, .factory = MakeRefMaxPool});
  r.Register({.domain = "", .op_type = "AveragePool", .types = kPoolTypes, .factory = MakeRefAveragePool});
  r.Register({.domain = "", .op_type = "LpPool", .types = kPoolTypes, .factory = Factory<RefAvgLpPoolKernel>(true)});
  r.Register({.domain = "", .op_type = "GlobalAveragePool", .types = kPoolTypes, .factory = MakeRefGlobalAveragePool});
  r.Register({.domain = "",
              .op_type = "GlobalMaxPool",
              .types = kPoolTypes,
              .factory = Factory<RefGlobalPoolKernel>(GlobalKind::kMax)});
  r.Register({.domain = "",
              .op_type = "GlobalLpPool",
              .types = kPoolTypes,
              .factory = Factory<RefGlobalPoolKernel>(GlobalKind::kLp)});
  r.Register({.domain = "", .op_type = "MaxUnpool", .types = kPoolTypes, .factory = Factory<RefMaxUnpoolKernel>()});
  r.Register({.domain = "", .op_type = "MaxRoiPool", .types = kPoolTypes, .factory = Factory<RefMaxRoiPoolKernel>()});
  r.Register({.domain = "",
              .op_type = "MaxPool",
              .types = {DataType::kFloat},
              .factory = MakeXnnMaxPool,
              .reference = false,
              .impl = "xnnpack"});
  r.Register({.domain = "",
              .op_type = "AveragePool",
              .types = {DataType::kFloat},
              .factory = MakeXnnAveragePool,
              .reference = false,
              .impl = "xnnpack"});
  r.Register({.domain = "",
              .op_type = "GlobalAveragePool",
              .types = {DataType::kFloat},
              .factory = MakeFastGlobalAveragePool,
              .reference = false,
              .impl = "cpu-vec"});
  RegisterNhwcPoolKernels(r);
}

}  // namespace strata
