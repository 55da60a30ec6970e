// Normalization kernels: BatchNormalization (inference), InstanceNormalization, GroupNormalization,
// LayerNormalization, LpNormalization, MeanVarianceNormalization, LRN and Dropout
// (inference identity). Softmax/LogSoftmax/Hardmax live in norm_softmax.cc and are
// registered from here so the family keeps one entry point.
#include <immintrin.h>

// GCC 12's AVX-512 headers use deliberately undefined vectors (_mm512_undefined_ps) as
// pass-through operands and then warn about them when inlined; the values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/register.h"

namespace strata {

void RegisterSoftmaxKernels(KernelRegistry& r);  // cpu/norm_softmax.cc

namespace {

const std::vector<DataType> kFloatTypes = {DataType::kFloat, DataType::kDouble, DataType::kFloat16,
                                           DataType::kBFloat16};

// Accumulate half types in float and double in double.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

Result<const Tensor*> RequiredInput(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (!t) return InvalidArgument(ctx.node().Describe(), ": required input ", i, " (", what, ") is missing");
  return t;
}

// Reads any floating-point tensor into doubles (parameters are small; this keeps the
// kernels independent of the parameter dtype, which may differ from X since opset 15).
Result<std::vector<double>> ReadAsDouble(const Tensor& t, const Node& node, const char* what) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  bool ok = DispatchFloat(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(static_cast<Acc<T>>(p[i]));
  });
  if (!ok) return InvalidArgument(node.Describe(), ": ", what, " has unsupported dtype ", DataTypeName(t.dtype()));
  return out;
}

Status UnsupportedDtype(const Node& node, DataType dt) {
  return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(dt));
}

// ---------------------------------------------------------------- BatchNormalization

Status BatchNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  const bool training = node.opset >= 14 && node.GetInt("training_mode", 0) != 0;
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.output_requested(i) && !training)
      return Unsupported(node.Describe(), ": output ", i,
                         " (running/saved statistics) is only produced with training_mode=1");
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "X"));
  if (x->rank() < 2)
    return InvalidArgument(node.Describe(), ": X must have rank >= 2 (N x C x ...), got ", ShapeToString(x->shape()));
  // spatial=0 (opset < 9) normalises each activation separately: parameters have shape C x D1 x ...
  bool spatial = node.opset >= 9 || node.GetInt("spatial", 1) != 0;
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t inner = NumElements(Shape(x->shape().begin() + 2, x->shape().end()));
  const int64_t param_size = spatial ? c : c * inner;
  const char* names[] = {"scale", "B", "mean", "var"};
  std::vector<double> p[4];
  for (int i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN(const Tensor* t, RequiredInput(ctx, i + 1, names[i]));
    if (t->num_elements() != param_size)
      return InvalidArgument(node.Describe(), ": ", names[i], " has ", t->num_elements(), " elements (shape ",
                             ShapeToString(t->shape()), ") but ", param_size, " are required for X of shape ",
                             ShapeToString(x->shape()), spatial ? "" : " with spatial=0");
    ASSIGN_OR_RETURN(p[i], ReadAsDouble(*t, node, names[i]));
  }
  const double eps = node.GetFloat("epsilon", 1e-5f);
  if (training) {
    // Normalise with the batch statistics and report updated running statistics:
    // running = input_running * momentum + batch * (1 - momentum).
    if (!spatial) return Unsupported(node.Describe(), ": training_mode=1 with spatial=0");
    ASSIGN_OR_RETURN(std::vector<double> xv, ReadAsDouble(*x, node, "X"));
    std::vector<double> bm(c, 0.0), bv(c, 0.0);
    const double count = static_cast<double>(n * inner);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t k = 0; k < inner; ++k) bm[ch] += xv[(i * c + ch) * inner + k];
    for (int64_t ch = 0; ch < c; ++ch) bm[ch] /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t k = 0; k < inner; ++k) {
          double d = xv[(i * c + ch) * inner + k] - bm[ch];
          bv[ch] += d * d;
        }
    for (int64_t ch = 0; ch < c; ++ch) bv[ch] /= count;
    const double momentum = node.GetFloat("momentum", 0.9f);
    for (size_t o = 1; o <= 2 && o < ctx.num_outputs(); ++o) {
      if (!ctx.output_requested(o)) continue;
      const Tensor* src = ctx.input(o == 1 ? 3 : 4);
      ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(o, src->dtype(), src->shape()));
      const std::vector<double>& run = p[o == 1 ? 2 : 3];
      const std::vector<double>& cur = o == 1 ? bm : bv;
      bool okd = DispatchFloat(t->dtype(), [&]<typename T>() {
        for (int64_t ch = 0; ch < c; ++ch) t->mutable_data<T>()[ch] = T(run[ch] * momentum + cur[ch] * (1 - momentum));
      });
      if (!okd) return UnsupportedDtype(node, t->dtype());
    }
    p[2] = bm;
    p[3] = bv;
  }
  // y = (x - mean) * a + B with a = scale / sqrt(var + eps). Folding the mean into the bias
  // would save one subtraction but cancels badly when var is tiny.
  std::vector<double> a(param_size);
  for (int64_t i = 0; i < param_size; ++i) a[i] = p[0][i] / std::sqrt(p[3][i] + eps);
  const std::vector<double>& b = p[1];
  const std::vector<double>& mu = p[2];
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t ch = nc % c;
        const T* xs = xp + nc * inner;
        T* ys = yp + nc * inner;
        if (spatial) {
          const Acc<T> sa = static_cast<Acc<T>>(a[ch]), sb = static_cast<Acc<T>>(b[ch]);
          const Acc<T> sm = static_cast<Acc<T>>(mu[ch]);
          for (int64_t k = 0; k < inner; ++k) ys[k] = T((static_cast<Acc<T>>(xs[k]) - sm) * sa + sb);
        } else {
          const double* pa = &a[ch * inner];
          const double* pb = &b[ch * inner];
          const double* pm = &mu[ch * inner];
          for (int64_t k = 0; k < inner; ++k)
            ys[k] = T(static_cast<Acc<T>>((static_cast<Acc<T>>(xs[k]) - static_cast<Acc<T>>(pm[k])) *
                                              static_cast<Acc<T>>(pa[k]) +
                                          static_cast<Acc<T>>(pb[k])));
        }
      }
    };
    if (ctx.pool())
      ctx.pool()->ParallelFor(n * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), run);
    else
      run(0, n * c);
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// ---------------------------------------------------------------- InstanceNormalization

Status InstanceNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* scale_t, RequiredInput(ctx, 1, "scale"));
  ASSIGN_OR_RETURN(const Tensor* bias_t, RequiredInput(ctx, 2, "B"));
  if (x->rank() < 3)
    return InvalidArgument(node.Describe(), ": input must have rank >= 3 (N x C x D1 ...), got ",
                           ShapeToString(x->shape()));
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t inner = NumElements(Shape(x->shape().begin() + 2, x->shape().end()));
  if (scale_t->num_elements() != c || bias_t->num_elements() != c)
    return InvalidArgument(node.Describe(), ": scale ", ShapeToString(scale_t->shape()), " and B ",
                           ShapeToString(bias_t->shape()), " must have C=", c, " elements");
  ASSIGN_OR_RETURN(auto scale, ReadAsDouble(*scale_t, node, "scale"));
  ASSIGN_OR_RETURN(auto bias, ReadAsDouble(*bias_t, node, "B"));
  const double eps = node.GetFloat("epsilon", 1e-5f);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const T* xs = xp + nc * inner;
        T* ys = yp + nc * inner;
        // Two passes in double: instance statistics over large images lose precision in float.
        double sum = 0;
        for (int64_t k = 0; k < inner; ++k) sum += static_cast<Acc<T>>(xs[k]);
        const double mean = inner ? sum / inner : 0;
        double sq = 0;
        for (int64_t k = 0; k < inner; ++k) {
          double d = static_cast<Acc<T>>(xs[k]) - mean;
          sq += d * d;
        }
        const double var = inner ? sq / inner : 0;
        // (x - mean) * a + bias rather than x * a + (bias - mean * a): the folded form cancels
        // catastrophically when the variance is tiny and a is large.
        const Acc<T> fa = static_cast<Acc<T>>(scale[nc % c] / std::sqrt(var + eps));
        const Acc<T> fm = static_cast<Acc<T>>(mean), fb = static_cast<Acc<T>>(bias[nc % c]);
        for (int64_t k = 0; k < inner; ++k) ys[k] = T((static_cast<Acc<T>>(xs[k]) - fm) * fa + fb);
      }
    };
    if (ctx.pool())
      ctx.pool()->ParallelFor(n * c, 1, run);
    else
      run(0, n * c);
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// ---------------------------------------------------------------- GroupNormalization

// ai.onnx GroupNormalization: the channels split into num_groups groups, each (sample, group)
// normalized over its channels and spatial positions, then scaled per group (opset 18) or
// per channel (opset 21; stash_type only says the statistics are at least float32, and
// they are double here).
Status GroupNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "X"));
  ASSIGN_OR_RETURN(const Tensor* scale_t, RequiredInput(ctx, 1, "scale"));
  ASSIGN_OR_RETURN(const Tensor* bias_t, RequiredInput(ctx, 2, "bias"));
  if (x->rank() < 2)
    return InvalidArgument(node.Describe(), ": X must have rank >= 2 (N x C x ...), got ", ShapeToString(x->shape()));
  if (!node.HasAttr("num_groups")) return InvalidModel(node.Describe(), ": attribute num_groups is required");
  const int64_t groups = node.GetInt("num_groups", 1);
  const int64_t n = x->dim(0), c = x->dim(1);
  if (groups <= 0 || c % groups != 0)
    return InvalidArgument(node.Describe(), ": num_groups ", groups, " must be positive and divide the ", c,
                           " channels");
  const bool per_channel = node.opset >= 21;
  const int64_t params = per_channel ? c : groups;
  if (scale_t->num_elements() != params || bias_t->num_elements() != params || scale_t->rank() != 1 ||
      bias_t->rank() != 1)
    return InvalidArgument(node.Describe(), ": scale ", ShapeToString(scale_t->shape()), " and bias ",
                           ShapeToString(bias_t->shape()), " must be 1-D with ", params,
                           per_channel ? " (C)" : " (num_groups)", " elements");
  ASSIGN_OR_RETURN(auto scale, ReadAsDouble(*scale_t, node, "scale"));
  ASSIGN_OR_RETURN(auto bias, ReadAsDouble(*bias_t, node, "bias"));
  const double eps = node.GetFloat("epsilon", 1e-5f);
  const int64_t inner = NumElements(Shape(x->shape().begin() + 2, x->shape().end()));
  const int64_t per_group = c / groups;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t ng = begin; ng < end; ++ng) {
        const int64_t g = ng % groups, len = per_group * inner;
        const T* xs = xp + ng * len;
        T* ys = yp + ng * len;
        double sum = 0;
        for (int64_t k = 0; k < len; ++k) sum += static_cast<Acc<T>>(xs[k]);
        const double mean = len ? sum / static_cast<double>(len) : 0;
        double sq = 0;
        for (int64_t k = 0; k < len; ++k) {
          const double d = static_cast<Acc<T>>(xs[k]) - mean;
          sq += d * d;
        }
        const double inv = 1.0 / std::sqrt((len ? sq / static_cast<double>(len) : 0) + eps);
        for (int64_t ch = 0; ch < per_group; ++ch) {
          const int64_t p = per_channel ? g * per_group + ch : g;
          const Acc<T> fa = static_cast<Acc<T>>(scale[p] * inv), fb = static_cast<Acc<T>>(bias[p]);
          const Acc<T> fm = static_cast<Acc<T>>(mean);
          for (int64_t k = ch * inner; k < (ch + 1) * inner; ++k)
            ys[k] = T((static_cast<Acc<T>>(xs[k]) - fm) * fa + fb);
        }
      }
    };
    if (ctx.pool())
      ctx.pool()->ParallelFor(n * groups, 1, run);
    else
      run(0, n * groups);
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// ---------------------------------------------------------------- LayerNormalization

// Expands `t` (unidirectionally broadcastable to `target`) into a dense vector of
// NumElements(target) doubles, so the inner loop indexes parameters directly.
// Checks `t` is unidirectionally broadcastable to `target`.
Status CheckParamShape(const Tensor& t, const Shape& target, const Node& node, const char* what) {
  const Shape& s = t.shape();
  if (s.size() > target.size())
    return InvalidArgument(node.Describe(), ": ", what, " shape ", ShapeToString(s),
                           " cannot be broadcast to the normalized shape ", ShapeToString(target));
  const size_t off = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != target[off + i])
      return InvalidArgument(node.Describe(), ": ", what, " shape ", ShapeToString(s),
                             " cannot be broadcast to the normalized shape ", ShapeToString(target));
  return Status::Ok();
}

Result<std::vector<double>> ExpandParam(const Tensor& t, const Shape& target, const Node& node, const char* what) {
  RETURN_IF_ERROR(CheckParamShape(t, target, node, what));
  const Shape& s = t.shape();
  const size_t off = target.size() - s.size();
  ASSIGN_OR_RETURN(auto src, ReadAsDouble(t, node, what));
  const int64_t total = NumElements(target);
  std::vector<double> out(static_cast<size_t>(total));
  // Source strides with 0 for broadcast dims.
  std::vector<int64_t> sstride(target.size(), 0);
  int64_t st = 1;
  for (size_t i = s.size(); i-- > 0;) {
    sstride[off + i] = s[i] == 1 ? 0 : st;
    st *= s[i];
  }
  std::vector<int64_t> idx(target.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t so = 0;
    for (size_t d = 0; d < target.size(); ++d) so += idx[d] * sstride[d];
    out[e] = src[so];
    for (size_t d = target.size(); d-- > 0;) {
      if (++idx[d] < target[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// LayerNormalization's optional Mean and InvStdDev outputs: float, x's shape with the
// normalized axes set to 1; null pointers for outputs nobody asked for.
Status AllocateLayerNormStats(KernelContext& ctx, const Tensor& x, int64_t axis, float** mean_out, float** inv_out) {
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(x.rank(), 1);
  if (ctx.output_requested(1)) {
    ASSIGN_OR_RETURN(Tensor * m, ctx.AllocateOutput(1, DataType::kFloat, stat_shape));
    *mean_out = m->mutable_data<float>();
  }
  if (ctx.output_requested(2)) {
    ASSIGN_OR_RETURN(Tensor * iv, ctx.AllocateOutput(2, DataType::kFloat, stat_shape));
    *inv_out = iv->mutable_data<float>();
  }
  return Status::Ok();
}

Status LayerNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "X"));
  ASSIGN_OR_RETURN(const Tensor* scale_t, RequiredInput(ctx, 1, "Scale"));
  const Tensor* bias_t = ctx.input(2);
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": X must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", -1), rank, node));
  const double eps = node.GetFloat("epsilon", 1e-5f);
  const int64_t stash = node.GetInt("stash_type", 1);
  if (stash != 1) return Unsupported(node.Describe(), ": stash_type ", stash, " is not supported (only 1 = float32)");
  Shape norm_shape(x->shape().begin() + axis, x->shape().end());
  const int64_t inner = NumElements(norm_shape);
  const int64_t outer = NumElements(Shape(x->shape().begin(), x->shape().begin() + axis));
  // Parameters already dense in X's float/double dtype (the usual [C] Scale and B) are read
  // in place; others are expanded to doubles first (which allocates, per run).
  const bool same_acc = x->dtype() == DataType::kFloat || x->dtype() == DataType::kDouble;
  auto in_place = [&](const Tensor* t) { return same_acc && t->dtype() == x->dtype() && t->num_elements() == inner; };
  const bool scale_in_place = in_place(scale_t), bias_in_place = !bias_t || in_place(bias_t);
  std::vector<double> scale, bias;
  if (scale_in_place) {
    RETURN_IF_ERROR(CheckParamShape(*scale_t, norm_shape, node, "Scale"));
  } else {
    ASSIGN_OR_RETURN(scale, ExpandParam(*scale_t, norm_shape, node, "Scale"));
  }
  if (bias_t && bias_in_place) {
    RETURN_IF_ERROR(CheckParamShape(*bias_t, norm_shape, node, "B"));
  } else if (bias_t) {
    ASSIGN_OR_RETURN(bias, ExpandParam(*bias_t, norm_shape, node, "B"));
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  RETURN_IF_ERROR(AllocateLayerNormStats(ctx, *x, axis, &mean_out, &inv_out));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    using A = Acc<T>;
    std::vector<A> sc, bi;
    const A* sp = nullptr;
    const A* bp = nullptr;  // null: no bias
    if constexpr (std::is_same_v<T, A>) {
      if (scale_in_place) sp = scale_t->data<A>();
      if (bias_t && bias_in_place) bp = bias_t->data<A>();
    }
    if (!sp) {
      sc.assign(scale.begin(), scale.end());
      sp = sc.data();
    }
    if (!bp && !bias.empty()) {
      bi.assign(bias.begin(), bias.end());
      bp = bi.data();
    }
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* xs = xp + o * inner;
        T* ys = yp + o * inner;
        A sum = 0;
        for (int64_t k = 0; k < inner; ++k) sum += static_cast<A>(xs[k]);
        const A mean = inner ? sum / static_cast<A>(inner) : A(0);
        A sq = 0;
        for (int64_t k = 0; k < inner; ++k) {
          A d = static_cast<A>(xs[k]) - mean;
          sq += d * d;
        }
        const A var = inner ? sq / static_cast<A>(inner) : A(0);
        const A inv = A(1) / std::sqrt(var + static_cast<A>(eps));
        if (bp) {
          for (int64_t k = 0; k < inner; ++k) ys[k] = T((static_cast<A>(xs[k]) - mean) * inv * sp[k] + bp[k]);
        } else {
          for (int64_t k = 0; k < inner; ++k) ys[k] = T((static_cast<A>(xs[k]) - mean) * inv * sp[k] + A(0));
        }
        if (mean_out) mean_out[o] = static_cast<float>(mean);
        if (inv_out) inv_out[o] = static_cast<float>(inv);
      }
    };
    if (ctx.pool())
      ctx.pool()->ParallelFor(outer, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1)), run);
    else
      run(0, outer);
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// fp32 LayerNorm over contiguous rows with [inner] float Scale/B, AVX-512: 16-lane partial
// sums instead of the reference loop's serial float reduction (which the compiler may not
// reorder, so it runs at one add per FP-add latency), two passes over the row in L1.
__attribute__((target("avx512f"))) void LayerNormRowAvx512(const float* x, float* y, int64_t n, const float* s,
                                                           const float* b, float eps, float* mean_out, float* inv_out) {
  __m512 acc = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - k)) - 1);
  if (k < n) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail, x + k));
  const float mean = _mm512_reduce_add_ps(acc) / static_cast<float>(n);
  const __m512 vm = _mm512_set1_ps(mean);
  acc = _mm512_setzero_ps();
  for (k = 0; k + 16 <= n; k += 16) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + k), vm);
    acc = _mm512_fmadd_ps(d, d, acc);
  }
  if (k < n) {
    const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + k), vm);
    acc = _mm512_fmadd_ps(d, d, acc);
  }
  const float var = _mm512_reduce_add_ps(acc) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  const __m512 vi = _mm512_set1_ps(inv);
  for (k = 0; k + 16 <= n; k += 16) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm), vi);
    const __m512 bb = b ? _mm512_loadu_ps(b + k) : _mm512_setzero_ps();
    _mm512_storeu_ps(y + k, _mm512_fmadd_ps(d, _mm512_loadu_ps(s + k), bb));
  }
  if (k < n) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + k), vm), vi);
    const __m512 bb = b ? _mm512_maskz_loadu_ps(tail, b + k) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(y + k, tail, _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(tail, s + k), bb));
  }
  if (mean_out) *mean_out = mean;
  if (inv_out) *inv_out = inv;
}

bool HasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

// The optimized LayerNormalization: the AVX-512 rows for fp32 with dense float Scale/B of
// the normalized size (transformers' case); everything else runs the reference kernel.
Status LayerNormFastCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* bias = ctx.input(2);
  if (!HasAvx512() || !x || !scale || x->dtype() != DataType::kFloat || x->rank() == 0 ||
      node.GetInt("stash_type", 1) != 1)
    return LayerNormCompute(ctx);
  auto axis = NormalizeAxis(node.GetInt("axis", -1), static_cast<int64_t>(x->rank()), node);
  if (!axis.ok()) return LayerNormCompute(ctx);
  const Shape norm_shape(x->shape().begin() + *axis, x->shape().end());
  const int64_t inner = NumElements(norm_shape);
  auto dense = [&](const Tensor* t) {
    return t->dtype() == DataType::kFloat && t->num_elements() == inner &&
           CheckParamShape(*t, norm_shape, node, "").ok();
  };
  if (inner == 0 || !dense(scale) || (bias && !dense(bias))) return LayerNormCompute(ctx);
  const int64_t outer = x->num_elements() / inner;
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  RETURN_IF_ERROR(AllocateLayerNormStats(ctx, *x, *axis, &mean_out, &inv_out));
  const float eps = node.GetFloat("epsilon", 1e-5f);
  const float* xp = x->data<float>();
  const float* sp = scale->data<float>();
  const float* bp = bias ? bias->data<float>() : nullptr;
  float* yp = y->mutable_data<float>();
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      LayerNormRowAvx512(xp + o * inner, yp + o * inner, inner, sp, bp, eps, mean_out ? mean_out + o : nullptr,
                         inv_out ? inv_out + o : nullptr);
  };
  if (ctx.pool())
    ctx.pool()->ParallelFor(outer, std::max<int64_t>(1, 8192 / inner), run);
  else
    run(0, outer);
  return Status::Ok();
}

// ---------------------------------------------------------------- LpNormalization

Status LpNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "input"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": input must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", -1), rank, node));
  const int64_t p = node.GetInt("p", 2);
  if (p != 1 && p != 2) return InvalidArgument(node.Describe(), ": p must be 1 or 2, got ", p);
  const int64_t len = x->dim(axis);
  const int64_t inner = NumElements(Shape(x->shape().begin() + axis + 1, x->shape().end()));
  const int64_t outer = NumElements(Shape(x->shape().begin(), x->shape().begin() + axis));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    using A = Acc<T>;
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        A norm = 0;
        for (int64_t k = 0; k < len; ++k) {
          A v = static_cast<A>(xp[base + k * inner]);
          norm += p == 1 ? std::abs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        // A zero vector stays zero instead of becoming NaN (matches ONNX Runtime).
        for (int64_t k = 0; k < len; ++k)
          yp[base + k * inner] = T(norm != A(0) ? static_cast<A>(xp[base + k * inner]) / norm : A(0));
      }
    }
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// ---------------------------------------------------------------- MeanVarianceNormalization

Status MvnCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "X"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  const std::vector<int64_t> axes = node.GetInts("axes", {0, 2, 3});
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t na, NormalizeAxis(a, rank, node));
    reduced[na] = true;
  }
  // Group index of every element = its index with the reduced dims dropped.
  const int64_t total = x->num_elements();
  int64_t groups = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d]) groups *= x->dim(d);
  const int64_t per_group = groups ? total / groups : 0;
  std::vector<int64_t> gid(static_cast<size_t>(total));
  {
    std::vector<int64_t> idx(rank, 0), gstride(rank, 0);
    int64_t gs = 1;
    for (int64_t d = rank; d-- > 0;)
      if (!reduced[d]) {
        gstride[d] = gs;
        gs *= x->dim(d);
      }
    for (int64_t e = 0; e < total; ++e) {
      int64_t g = 0;
      for (int64_t d = 0; d < rank; ++d) g += idx[d] * gstride[d];
      gid[e] = g;
      for (int64_t d = rank; d-- > 0;) {
        if (++idx[d] < x->dim(d)) break;
        idx[d] = 0;
      }
    }
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    std::vector<double> mean(groups, 0.0), var(groups, 0.0);
    for (int64_t e = 0; e < total; ++e) mean[gid[e]] += static_cast<Acc<T>>(xp[e]);
    for (auto& m : mean) m /= static_cast<double>(std::max<int64_t>(per_group, 1));
    for (int64_t e = 0; e < total; ++e) {
      double d = static_cast<Acc<T>>(xp[e]) - mean[gid[e]];
      var[gid[e]] += d * d;
    }
    // The ONNX function body adds 1e-9 to the standard deviation.
    std::vector<double> inv(groups);
    for (int64_t g = 0; g < groups; ++g) inv[g] = 1.0 / (std::sqrt(var[g] / std::max<int64_t>(per_group, 1)) + 1e-9);
    for (int64_t e = 0; e < total; ++e)
      yp[e] = T(static_cast<Acc<T>>((static_cast<Acc<T>>(xp[e]) - mean[gid[e]]) * inv[gid[e]]));
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return Status::Ok();
}

// ---------------------------------------------------------------- LRN

Status LrnCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "X"));
  if (x->rank() < 2)
    return InvalidArgument(node.Describe(), ": X must have rank >= 2, got ", ShapeToString(x->shape()));
  const int64_t size = node.GetInt("size", 0);
  if (size <= 0) return InvalidArgument(node.Describe(), ": attribute 'size' must be a positive integer");
  const double alpha = node.GetFloat("alpha", 1e-4f), beta = node.GetFloat("beta", 0.75f),
               bias = node.GetFloat("bias", 1.0f);
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t inner = NumElements(Shape(x->shape().begin() + 2, x->shape().end()));
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor / ceil of (size-1)/2
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  if (y->num_elements() == 0) return Status::Ok();
  // The cost is the output times the window (size, up to the channel count), which the
  // input does not bound: channel rows run in parallel and check the run's limits.
  KernelStop stop(node);
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    using A = Acc<T>;
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto rows = [&](int64_t begin, int64_t end) {
      std::vector<A> sq(static_cast<size_t>(inner));
      int64_t pending = 0;
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / c, ch = row % c;
        const int64_t j0 = std::max<int64_t>(0, ch - lo), j1 = std::min<int64_t>(c - 1, ch + hi);
        if (!stop.Continue(pending, (j1 - j0 + 2) * inner)) return;
        std::fill(sq.begin(), sq.end(), A(0));
        // Channel by channel over the window, so that each reads a contiguous row.
        for (int64_t j = j0; j <= j1; ++j) {
          const T* xj = xp + (b * c + j) * inner;
          for (int64_t k = 0; k < inner; ++k) {
            const A v = static_cast<A>(xj[k]);
            sq[k] += v * v;
          }
        }
        const int64_t e = row * inner;
        for (int64_t k = 0; k < inner; ++k)
          yp[e + k] = T(static_cast<A>(xp[e + k]) /
                        static_cast<A>(std::pow(bias + alpha / static_cast<double>(size) * sq[k], beta)));
      }
    };
    if (ctx.pool()) {
      ctx.pool()->ParallelFor(n * c, 1, rows);
    } else {
      rows(0, n * c);
    }
  });
  if (!ok) return UnsupportedDtype(node, x->dtype());
  return stop.status();
}

// ---------------------------------------------------------------- Dropout

Status DropoutCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequiredInput(ctx, 0, "data"));
  if (node.opset >= 12 && ctx.input(2)) {
    const Tensor* tm = ctx.input(2);
    if (tm->dtype() != DataType::kBool || tm->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": training_mode must be a bool scalar");
    bool training = tm->data<bool>()[0];
    double ratio = 0.5;
    if (const Tensor* r = ctx.input(1)) {
      if (r->num_elements() != 1) return InvalidArgument(node.Describe(), ": ratio must be a scalar");
      ASSIGN_OR_RETURN(auto rv, ReadAsDouble(*r, node, "ratio"));
      ratio = rv[0];
    }
    if (training && ratio != 0.0)
      return Unsupported(node.Describe(), ": training_mode=true with a non-zero ratio is not supported");
  }
  // Inference: the output aliases the input.
  ctx.SetOutput(0, Value(*x));
  if (ctx.output_requested(1)) {
    // Before opset 10 the mask had the input's dtype; since then it is bool.
    DataType mdt = node.opset < 10 ? x->dtype() : DataType::kBool;
    ASSIGN_OR_RETURN(Tensor * m, ctx.AllocateOutput(1, mdt, x->shape()));
    const int64_t cnt = m->num_elements();
    bool ok = DispatchNumeric(mdt, [&]<typename T>() {
      T* p = m->mutable_data<T>();
      for (int64_t i = 0; i < cnt; ++i) p[i] = static_cast<T>(1.0f);
    });
    if (!ok) return UnsupportedDtype(node, mdt);
  }
  return Status::Ok();
}

// Registers one def per ONNX version range: [v0, v1-1], [v1, v2-1], ..., [vn, INT_MAX].
// The same implementation serves them all; it reads version-specific attributes from node.opset.
void Reg(KernelRegistry& r, const char* op, std::vector<int> versions, KernelFactory f,
         std::vector<DataType> types = kFloatTypes) {
  for (size_t i = 0; i < versions.size(); ++i) {
    KernelDef d;
    d.op_type = op;
    d.since_version = versions[i];
    d.end_version = i + 1 < versions.size() ? versions[i + 1] - 1 : INT_MAX;
    d.types = types;
    d.factory = f;
    r.Register(std::move(d));
  }
}

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  Reg(r, "BatchNormalization", {1, 6, 7, 9, 14, 15}, StatelessFactory(BatchNormCompute));
  RegisterNhwcNormKernels(r);
  Reg(r, "InstanceNormalization", {1, 6}, StatelessFactory(InstanceNormCompute));
  Reg(r, "GroupNormalization", {18, 21}, StatelessFactory(GroupNormCompute));
  // LayerNormalization joined ai.onnx at opset 17. It is deliberately registered from
  // since_version 1 so that the optimizer may fuse decomposed LayerNorm patterns
  // (ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add) into it in models with an older opset.
  Reg(r, "LayerNormalization", {1}, StatelessFactory(LayerNormCompute));
  r.Register({.domain = "",
              .op_type = "LayerNormalization",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = StatelessFactory(LayerNormFastCompute),
              .reference = false,
              .impl = "avx512"});
  Reg(r, "LpNormalization", {1}, StatelessFactory(LpNormCompute));
  Reg(r, "MeanVarianceNormalization", {9, 13}, StatelessFactory(MvnCompute));
  Reg(r, "LRN", {1, 13}, StatelessFactory(LrnCompute));
  Reg(r, "Dropout", {1, 6, 7, 10, 12, 13}, StatelessFactory(DropoutCompute), {});
  RegisterSoftmaxKernels(r);
}

}  // namespace strata
