// Softmax, LogSoftmax and Hardmax.
//
// Opset < 13 coerces the input to 2-D at `axis` (default 1): rows are the flattened
// dims before axis, the row is everything from axis on. Opset >= 13 normalises along
// the single dimension `axis` (default -1). Both views become (outer, n, inner); the
// legacy one always has inner == 1.
//
// The reference kernel handles every float dtype and layout. The optimised fp32
// kernel covers inner == 1 (contiguous rows), runs rows in parallel and uses an
// AVX-512/AVX2 exp (Cephes polynomial, ~2 ulp, well within 1e-6 relative) chosen at
// run time; other layouts fall back to the reference loop.
#include <immintrin.h>

// GCC 12's AVX-512 headers use deliberately undefined vectors (_mm512_undefined_ps) as
// pass-through operands and then warn about them when inlined; the values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernel.h"
#include "cpu/simd_exp.h"
#include "cpu/transformer_kernels.h"

namespace strata {

void RegisterSoftmaxKernels(KernelRegistry& r);

namespace {

enum class Mode { kSoftmax, kLogSoftmax, kHardmax };

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

struct Geometry {
  int64_t outer = 1, n = 1, inner = 1;
};

Result<Geometry> GetGeometry(const Node& node, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  Geometry g;
  if (node.opset < 13) {
    // Rank-0 input: treat as a single 1-element row.
    if (rank == 0) return g;
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 1), rank, node));
    g.outer = NumElements(Shape(shape.begin(), shape.begin() + axis));
    g.n = NumElements(Shape(shape.begin() + axis, shape.end()));
    return g;
  }
  if (rank == 0) return InvalidArgument(node.Describe(), ": input must have rank >= 1 (opset >= 13)");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", -1), rank, node));
  g.outer = NumElements(Shape(shape.begin(), shape.begin() + axis));
  g.n = shape[axis];
  g.inner = NumElements(Shape(shape.begin() + axis + 1, shape.end()));
  return g;
}

template <typename T>
void ReferenceRows(Mode mode, const Geometry& g, const T* x, T* y, int64_t begin, int64_t end) {
  using A = Acc<T>;
  std::vector<A> tmp(static_cast<size_t>(g.n));
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r / g.inner, i = r % g.inner;
    const int64_t base = o * g.n * g.inner + i;
    if (g.n == 0) continue;
    A mx = -std::numeric_limits<A>::infinity();
    int64_t arg = 0;
    for (int64_t k = 0; k < g.n; ++k) {
      A v = static_cast<A>(x[base + k * g.inner]);
      tmp[k] = v;
      if (v > mx) {
        mx = v;
        arg = k;
      }
    }
    if (mode == Mode::kHardmax) {
      for (int64_t k = 0; k < g.n; ++k) y[base + k * g.inner] = T(static_cast<A>(k == arg ? 1 : 0));
      continue;
    }
    A sum = 0;
    for (int64_t k = 0; k < g.n; ++k) sum += std::exp(tmp[k] - mx);
    if (mode == Mode::kSoftmax) {
      const A inv = A(1) / sum;
      for (int64_t k = 0; k < g.n; ++k) y[base + k * g.inner] = T(std::exp(tmp[k] - mx) * inv);
    } else {
      // (x - max) - log(sum) avoids the cancellation of x - (max + log(sum)) for large x.
      const A ls = std::log(sum);
      for (int64_t k = 0; k < g.n; ++k) y[base + k * g.inner] = T((tmp[k] - mx) - ls);
    }
  }
}

// ---- fp32 row kernels: scalar, AVX2 and AVX-512 ----

void RowScalar(Mode mode, const float* x, float* y, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < n; ++k) mx = std::max(mx, x[k]);
  float sum = 0;
  if (mode == Mode::kSoftmax) {
    for (int64_t k = 0; k < n; ++k) {
      y[k] = std::exp(x[k] - mx);
      sum += y[k];
    }
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  } else {
    for (int64_t k = 0; k < n; ++k) sum += std::exp(x[k] - mx);
    const float ls = std::log(sum);
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mx) - ls;
  }
}

// Cephes-style expf for x <= 0 (softmax arguments after subtracting the max).
// Inputs below ~-87.3 underflow to 0.
__attribute__((target("avx2,fma"))) inline __m256 Exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  return _mm256_andnot_ps(under, simd_exp::ExpClamped256(_mm256_max_ps(x, lo)));
}

__attribute__((target("avx2,fma"))) float HMax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
__attribute__((target("avx2,fma"))) float HSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) void RowAvx2(Mode mode, const float* x, float* y, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + k));
  float mx = HMax256(vmax);
  for (; k < n; ++k) mx = std::max(mx, x[k]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  float sum = 0;
  k = 0;
  if (mode == Mode::kSoftmax) {
    for (; k + 8 <= n; k += 8) {
      __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + k), vm));
      _mm256_storeu_ps(y + k, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    for (; k < n; ++k) {
      y[k] = std::exp(x[k] - mx);
      sum += y[k];
    }
    sum += HSum256(vsum);
    const float inv = 1.0f / sum;
    const __m256 vi = _mm256_set1_ps(inv);
    for (k = 0; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, _mm256_mul_ps(_mm256_loadu_ps(y + k), vi));
    for (; k < n; ++k) y[k] *= inv;
  } else {
    for (; k + 8 <= n; k += 8) vsum = _mm256_add_ps(vsum, Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + k), vm)));
    for (; k < n; ++k) sum += std::exp(x[k] - mx);
    sum += HSum256(vsum);
    const float ls = std::log(sum);
    const __m256 vl = _mm256_set1_ps(ls);
    for (k = 0; k + 8 <= n; k += 8)
      _mm256_storeu_ps(y + k, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k), vm), vl));
    for (; k < n; ++k) y[k] = (x[k] - mx) - ls;
  }
}

__attribute__((target("avx512f"))) inline __m512 Exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  return _mm512_maskz_mov_ps(keep, simd_exp::ExpClamped512(_mm512_max_ps(x, lo)));
}

__attribute__((target("avx512f"))) void RowAvx512(Mode mode, const float* x, float* y, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + k));
  if (k < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, x + k));
  }
  const float mx = _mm512_reduce_max_ps(vmax);
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  if (mode == Mode::kSoftmax) {
    for (k = 0; k + 16 <= n; k += 16) {
      __m512 e = Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm));
      _mm512_storeu_ps(y + k, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    if (k < n) {
      __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
      __m512 e = _mm512_maskz_mov_ps(m, Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), vm)));
      _mm512_mask_storeu_ps(y + k, m, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    const __m512 vi = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (k = 0; k + 16 <= n; k += 16) _mm512_storeu_ps(y + k, _mm512_mul_ps(_mm512_loadu_ps(y + k), vi));
    if (k < n) {
      __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
      _mm512_mask_storeu_ps(y + k, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + k), vi));
    }
  } else {
    for (k = 0; k + 16 <= n; k += 16) vsum = _mm512_add_ps(vsum, Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm)));
    if (k < n) {
      __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
      vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), vm))));
    }
    const __m512 vl = _mm512_set1_ps(std::log(_mm512_reduce_add_ps(vsum)));
    for (k = 0; k + 16 <= n; k += 16)
      _mm512_storeu_ps(y + k, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm), vl));
    if (k < n) {
      __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
      _mm512_mask_storeu_ps(y + k, m, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), vm), vl));
    }
  }
}

using RowFn = void (*)(Mode, const float*, float*, int64_t);

struct RowImpl {
  RowFn fn;
  const char* name;
};

// STRATA_FORCE_ISA=avx2|scalar caps the chosen ISA (to test the fallbacks on AVX-512 hosts).
RowImpl SelectRowImpl() {
  __builtin_cpu_init();
  const char* env = std::getenv("STRATA_FORCE_ISA");
  const std::string force = env ? env : "";
  if (force != "avx2" && force != "scalar" && __builtin_cpu_supports("avx512f")) return {RowAvx512, "avx512"};
  if (force != "scalar" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {RowAvx2, "avx2"};
  return {RowScalar, "scalar"};
}

const RowImpl& Impl() {
  static const RowImpl impl = SelectRowImpl();
  return impl;
}

Status Compute(KernelContext& ctx, Mode mode, bool optimized) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return InvalidArgument(node.Describe(), ": required input 0 (input) is missing");
  ASSIGN_OR_RETURN(Geometry g, GetGeometry(node, x->shape()));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->shape()));
  const int64_t rows = g.outer * g.inner;
  if (rows == 0 || g.n == 0) return Status::Ok();
  // Rows of ~4K elements or more are worth a task each.
  const int64_t grain = std::max<int64_t>(1, 4096 / g.n);
  if (optimized && x->dtype() == DataType::kFloat && g.inner == 1 && mode != Mode::kHardmax) {
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    const RowFn fn = Impl().fn;
    auto run = [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) fn(mode, xp + r * g.n, yp + r * g.n, g.n);
    };
    if (ctx.pool())
      ctx.pool()->ParallelFor(rows, grain, run);
    else
      run(0, rows);
    return Status::Ok();
  }
  bool ok = DispatchFloat(x->dtype(), [&]<typename T>() {
    const T* xp = x->data<T>();
    T* yp = y->mutable_data<T>();
    auto run = [&](int64_t b, int64_t e) { ReferenceRows<T>(mode, g, xp, yp, b, e); };
    if (ctx.pool())
      ctx.pool()->ParallelFor(rows, grain, run);
    else
      run(0, rows);
  });
  if (!ok) return Unsupported(node.Describe(), ": unsupported input dtype ", DataTypeName(x->dtype()));
  return Status::Ok();
}

void RegisterOp(KernelRegistry& r, const char* op, Mode mode) {
  const std::vector<int> versions = {1, 11, 13};
  for (size_t i = 0; i < versions.size(); ++i) {
    const int since = versions[i];
    const int end = i + 1 < versions.size() ? versions[i + 1] - 1 : INT_MAX;
    KernelDef ref;
    ref.op_type = op;
    ref.since_version = since;
    ref.end_version = end;
    ref.types = {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16};
    ref.factory = [mode](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return MakeFnKernel([mode](KernelContext& ctx) { return Compute(ctx, mode, false); });
    };
    r.Register(ref);
    if (mode == Mode::kHardmax) continue;
    KernelDef opt = ref;
    opt.types = {DataType::kFloat};
    opt.reference = false;
    opt.impl = Impl().name;
    opt.factory = [mode](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> {
      return MakeFnKernel([mode](KernelContext& ctx) { return Compute(ctx, mode, true); });
    };
    r.Register(std::move(opt));
  }
}

}  // namespace

namespace cpu {
void SoftmaxRowInPlace(float* row, int64_t n) { Impl().fn(Mode::kSoftmax, row, row, n); }
}  // namespace cpu

void RegisterSoftmaxKernels(KernelRegistry& r) {
  RegisterOp(r, "Softmax", Mode::kSoftmax);
  RegisterOp(r, "LogSoftmax", Mode::kLogSoftmax);
  RegisterOp(r, "Hardmax", Mode::kHardmax);
}

}  // namespace strata
