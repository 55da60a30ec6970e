// ONNX Runtime's transformer contrib ops, as its transformer optimizer
// (onnxruntime.transformers.optimizer) and ORT's saved optimized models write them:
//   com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu,
//   EmbedLayerNormalization, RotaryEmbedding; SimplifiedLayerNormalization (ORT registers it in
//   ai.onnx).
// ORT's CPU kernels define them; strata's kernels follow them (checked output for output by
// bench/compare-ort/contrib_parity.py). Accumulation is in double: the row statistics are
// exact to float rounding whatever the row length. Attention and FusedMatMul of the same
// domain are in attention_contrib.cc and fused_matmul_contrib.cc.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/status.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

constexpr char kMs[] = "com.microsoft";

// Input i, which must be present and float32; `what` names it in errors.
Result<const Tensor*> FloatIn(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (!t) return InvalidArgument(ctx.node().Describe(), ": input ", i, " (", what, ") is required");
  if (t->dtype() != DataType::kFloat)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be float32, got ",
                           DataTypeName(t->dtype()));
  return t;
}

// An optional float32 input that must be 1-D of length n (gamma, beta, bias); null if absent.
Result<const float*> VectorIn(const KernelContext& ctx, size_t i, const char* what, int64_t n, bool required) {
  const Tensor* t = ctx.input(i);
  if (!t) {
    if (required) return InvalidArgument(ctx.node().Describe(), ": input ", i, " (", what, ") is required");
    return static_cast<const float*>(nullptr);
  }
  if (t->dtype() != DataType::kFloat)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be float32, got ",
                           DataTypeName(t->dtype()));
  if (t->rank() != 1 || t->shape()[0] != n)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be 1-D of the hidden size ", n, ", got ",
                           ShapeToString(t->shape()));
  return t->data<float>();
}

// Rows [begin, end) of a row-wise kernel, split over the pool when there is one.
template <typename F>
void ForRows(KernelContext& ctx, int64_t rows, int64_t row_len, F&& f) {
  if (ctx.pool())
    ctx.pool()->ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(row_len, 1)), f);
  else
    f(0, rows);
}

// One normalized row: y = (x - mean) * inv * gamma + beta (LayerNorm), or x * inv * gamma
// (simplified: RMS, no mean). Returns (mean, inv). x and y may alias.
struct RowStats {
  float mean, inv;
};
RowStats NormalizeRow(const float* x, float* y, int64_t n, const float* gamma, const float* beta, double eps,
                      bool simplified) {
  double mean = 0;
  if (!simplified) {
    for (int64_t k = 0; k < n; ++k) mean += x[k];
    mean = n ? mean / static_cast<double>(n) : 0.0;
  }
  double sq = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double d = x[k] - mean;
    sq += d * d;
  }
  const double var = n ? sq / static_cast<double>(n) : 0.0;
  const double inv = 1.0 / std::sqrt(var + eps);
  for (int64_t k = 0; k < n; ++k) {
    const double v = (x[k] - mean) * inv * gamma[k];
    y[k] = static_cast<float>(beta ? v + beta[k] : v);
  }
  return {static_cast<float>(mean), static_cast<float>(inv)};
}

// NormalizeRow for the optimized kernels, AVX-512: 16-lane float partial sums (the reference
// accumulates serially in double), two passes over the row in L1. Same results within
// float rounding (tests/unit/transformer_contrib_test.cc compares the two).
__attribute__((target("avx512f"))) RowStats NormalizeRowAvx512(const float* x, float* y, int64_t n, const float* gamma,
                                                               const float* beta, float eps, bool simplified) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  const int64_t body = n - n % 16;
  float mean = 0;
  if (!simplified) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < body; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
    if (tail) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail, x + body));
    mean = _mm512_reduce_add_ps(acc) / static_cast<float>(n);
  }
  const __m512 vm = _mm512_set1_ps(mean);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < body; k += 16) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + k), vm);
    acc = _mm512_fmadd_ps(d, d, acc);
  }
  if (tail) {
    const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + body), vm);
    acc = _mm512_fmadd_ps(d, d, acc);
  }
  const float inv = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / static_cast<float>(n) + eps);
  const __m512 vi = _mm512_set1_ps(inv);
  for (int64_t k = 0; k < body; k += 16) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + k), vm), vi);
    const __m512 bb = beta ? _mm512_loadu_ps(beta + k) : _mm512_setzero_ps();
    _mm512_storeu_ps(y + k, _mm512_fmadd_ps(d, _mm512_loadu_ps(gamma + k), bb));
  }
  if (tail) {
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + body), vm), vi);
    const __m512 bb = beta ? _mm512_maskz_loadu_ps(tail, beta + body) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(y + body, tail, _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(tail, gamma + body), bb));
  }
  return {mean, inv};
}

bool CpuHasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

// ------------------------------------------------ SkipLayerNormalization (+ Simplified)
// Inputs: input [..., H], skip (input's shape, or a suffix of it with leading 1s: one skip
// for every batch), gamma [H], then beta [H]? and bias [H]? (SkipLayerNormalization) or
// bias [H]? (the simplified form). Outputs: output, mean?, inv_std_var? (input's shape with
// H -> 1; the simplified form has no mean and writes 0), input_skip_bias_sum?.
Status SkipNormCompute(KernelContext& ctx, bool simplified, bool fast) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, FloatIn(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* skip, FloatIn(ctx, 1, "skip"));
  if (x->rank() < 2 || x->rank() > 3)
    return InvalidArgument(node.Describe(), ": input must be 2-D or 3-D [batch, sequence, hidden], got ",
                           ShapeToString(x->shape()));
  const int64_t hidden = x->shape().back();
  // skip: input's shape, or input's trailing dims after leading 1s (broadcast over batch).
  {
    const Shape& s = skip->shape();
    bool ok = s.size() <= x->rank() && !s.empty();
    for (size_t i = 0; ok && i < s.size(); ++i) {
      const int64_t want = x->shape()[x->rank() - s.size() + i];
      ok = s[i] == want || (s[i] == 1 && std::all_of(s.begin(), s.begin() + i, [](int64_t d) { return d == 1; }));
    }
    if (!ok)
      return InvalidArgument(node.Describe(), ": skip ", ShapeToString(s), " must have input's shape ",
                             ShapeToString(x->shape()), " or its trailing dims (leading 1s broadcast)");
  }
  ASSIGN_OR_RETURN(const float* gamma, VectorIn(ctx, 2, "gamma", hidden, true));
  const float* beta = nullptr;
  const float* bias = nullptr;
  if (simplified) {
    ASSIGN_OR_RETURN(bias, VectorIn(ctx, 3, "bias", hidden, false));
  } else {
    ASSIGN_OR_RETURN(beta, VectorIn(ctx, 3, "beta", hidden, false));
    ASSIGN_OR_RETURN(bias, VectorIn(ctx, 4, "bias", hidden, false));
  }
  const float eps = node.GetFloat("epsilon", 1e-12f);
  if (!(eps >= 0) || !std::isfinite(eps))
    return InvalidModel(node.Describe(), ": epsilon must be finite and non-negative, got ", eps);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  Shape stat_shape = x->shape();
  stat_shape.back() = 1;
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  float* sum_out = nullptr;
  if (ctx.output_requested(1)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(1, DataType::kFloat, stat_shape));
    mean_out = t->mutable_data<float>();
  }
  if (ctx.output_requested(2)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(2, DataType::kFloat, stat_shape));
    inv_out = t->mutable_data<float>();
  }
  if (ctx.output_requested(3)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(3, DataType::kFloat, x->shape()));
    sum_out = t->mutable_data<float>();
  }
  const int64_t rows = hidden ? x->num_elements() / hidden : 0;
  const int64_t skip_rows = hidden ? skip->num_elements() / hidden : 1;
  const float* xp = x->data<float>();
  const float* sp = skip->data<float>();
  float* yp = y->mutable_data<float>();
  ForRows(ctx, rows, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * hidden;
      const float* sr = sp + (r % skip_rows) * hidden;
      // The sum goes to its output when asked for, else to y (normalized in place).
      float* s = sum_out ? sum_out + r * hidden : yp + r * hidden;
      for (int64_t k = 0; k < hidden; ++k) s[k] = bias ? xr[k] + sr[k] + bias[k] : xr[k] + sr[k];
      const RowStats st = fast ? NormalizeRowAvx512(s, yp + r * hidden, hidden, gamma, beta, eps, simplified)
                               : NormalizeRow(s, yp + r * hidden, hidden, gamma, beta, eps, simplified);
      if (mean_out) mean_out[r] = st.mean;
      if (inv_out) inv_out[r] = st.inv;
    }
  });
  return Status::Ok();
}

// ------------------------------------------------ SimplifiedLayerNormalization (RMS norm)
// Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale; output 1 (optional)
// inv_std_var has X's shape with the normalized axes set to 1.
Status SimplifiedNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, FloatIn(ctx, 0, "X"));
  ASSIGN_OR_RETURN(const Tensor* scale, FloatIn(ctx, 1, "scale"));
  const int64_t rank = static_cast<int64_t>(x->rank());
  if (rank == 0) return InvalidArgument(node.Describe(), ": X must have rank >= 1");
  int64_t axis = node.GetInt("axis", -1);
  if (axis < -rank || axis >= rank)
    return InvalidModel(node.Describe(), ": axis ", axis, " is out of range for X of rank ", rank);
  if (axis < 0) axis += rank;
  if (node.GetInt("stash_type", 1) != 1)
    return Unsupported(node.Describe(), ": stash_type ", node.GetInt("stash_type", 1),
                       " is not supported (only 1 = float32)");
  const float eps = node.GetFloat("epsilon", 1e-5f);
  if (!(eps >= 0) || !std::isfinite(eps))
    return InvalidModel(node.Describe(), ": epsilon must be finite and non-negative, got ", eps);
  const Shape norm_shape(x->shape().begin() + axis, x->shape().end());
  const int64_t inner = NumElements(norm_shape);
  // scale: the normalized dims, optionally with leading 1s (e.g. [H] or [1, H]).
  {
    const Shape& s = scale->shape();
    bool ok = scale->num_elements() == inner && s.size() <= x->rank();
    for (size_t i = 0; ok && i < s.size(); ++i) {
      const size_t xi = x->rank() - s.size() + i;
      ok = xi >= static_cast<size_t>(axis) ? s[i] == x->shape()[xi] : s[i] == 1;
    }
    if (!ok)
      return InvalidArgument(node.Describe(), ": scale ", ShapeToString(s), " must have the normalized shape ",
                             ShapeToString(norm_shape));
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  float* inv_out = nullptr;
  if (ctx.output_requested(1)) {
    Shape stat(x->shape().begin(), x->shape().begin() + axis);
    stat.resize(x->rank(), 1);
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(1, DataType::kFloat, stat));
    inv_out = t->mutable_data<float>();
  }
  const int64_t rows = inner ? x->num_elements() / inner : 0;
  const float* xp = x->data<float>();
  const float* sp = scale->data<float>();
  float* yp = y->mutable_data<float>();
  ForRows(ctx, rows, inner, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowStats st = NormalizeRow(xp + r * inner, yp + r * inner, inner, sp, nullptr, eps, true);
      if (inv_out) inv_out[r] = st.inv;
    }
  });
  return Status::Ok();
}

// ------------------------------------------------ BiasGelu: C = Gelu(A + B), erf form
Status BiasGeluCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* a, FloatIn(ctx, 0, "A"));
  ASSIGN_OR_RETURN(const Tensor* b, FloatIn(ctx, 1, "B"));
  if (a->rank() == 0 || b->rank() != 1 || b->shape()[0] != a->shape().back())
    return InvalidArgument(node.Describe(), ": bias B ", ShapeToString(b->shape()),
                           " must be 1-D of A's last dimension (A is ", ShapeToString(a->shape()), ")");
  ASSIGN_OR_RETURN(Tensor * c, ctx.AllocateOutput(0, DataType::kFloat, a->shape()));
  const int64_t n = b->shape()[0];
  const int64_t rows = n ? a->num_elements() / n : 0;
  const float* ap = a->data<float>();
  const float* bp = b->data<float>();
  float* cp = c->mutable_data<float>();
  ForRows(ctx, rows, n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = cp + r * n;
      for (int64_t k = 0; k < n; ++k) row[k] = ap[r * n + k] + bp[k];
      cpu::GeluInPlace(row, n, /*tanh_form=*/false);
    }
  });
  return Status::Ok();
}

// ------------------------------------------------ EmbedLayerNormalization
// Inputs: input_ids [B,S] int32, segment_ids [B,S] int32?, word_embedding [V,H],
// position_embedding [P,H], segment_embedding [G,H]?, gamma [H], beta [H], mask [B,S]
// int32?, position_ids int32? ([B,S] or [1,S]; absent: 0..S-1). Ids outside their table
// are an error (ONNX Runtime leaves negative position ids unchecked). Outputs: output [B,S,H] =
// LayerNorm(word + position + segment), mask_index [B] int32 (the number of 1s in each mask
// row; zeros without a mask), embedding_sum [B,S,H]? (the sum before the norm).
Result<const int32_t*> IdsIn(const KernelContext& ctx, size_t i, const char* what, int64_t b, int64_t s,
                             bool allow_one_batch) {
  const Tensor* t = ctx.input(i);
  if (!t) return static_cast<const int32_t*>(nullptr);
  if (t->dtype() != DataType::kInt32)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be int32, got ", DataTypeName(t->dtype()));
  const bool ok =
      t->rank() == 2 && t->shape()[1] == s && (t->shape()[0] == b || (allow_one_batch && t->shape()[0] == 1));
  if (!ok)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' ", ShapeToString(t->shape()),
                           " must be [batch, sequence] = [", b, ",", s, "]",
                           allow_one_batch ? " or [1, sequence]" : "");
  return t->data<int32_t>();
}

Result<const float*> TableIn(const KernelContext& ctx, size_t i, const char* what, int64_t hidden, int64_t* rows) {
  const Tensor* t = ctx.input(i);
  if (!t) return static_cast<const float*>(nullptr);
  if (t->dtype() != DataType::kFloat)
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' must be float32, got ",
                           DataTypeName(t->dtype()));
  if (t->rank() != 2 || (hidden >= 0 && t->shape()[1] != hidden))
    return InvalidArgument(ctx.node().Describe(), ": input '", what, "' ", ShapeToString(t->shape()),
                           " must be 2-D [rows, hidden]", hidden >= 0 ? " with hidden " + std::to_string(hidden) : "");
  *rows = t->shape()[0];
  return t->data<float>();
}

Status EmbedLayerNormCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* ids = ctx.input(0);
  if (!ids) return InvalidArgument(node.Describe(), ": input 0 (input_ids) is required");
  if (ids->dtype() != DataType::kInt32 || ids->rank() != 2)
    return InvalidArgument(node.Describe(), ": input_ids must be int32 [batch, sequence], got ",
                           DataTypeName(ids->dtype()), " ", ShapeToString(ids->shape()));
  const int64_t batch = ids->shape()[0], seq = ids->shape()[1];
  int64_t vocab = 0, positions = 0, segments = 0;
  if (!ctx.input(2)) return InvalidArgument(node.Describe(), ": input 2 (word_embedding) is required");
  if (!ctx.input(3)) return InvalidArgument(node.Describe(), ": input 3 (position_embedding) is required");
  ASSIGN_OR_RETURN(const float* word, TableIn(ctx, 2, "word_embedding", -1, &vocab));
  const int64_t hidden = ctx.input(2)->shape()[1];
  ASSIGN_OR_RETURN(const float* pos, TableIn(ctx, 3, "position_embedding", hidden, &positions));
  ASSIGN_OR_RETURN(const float* seg, TableIn(ctx, 4, "segment_embedding", hidden, &segments));
  ASSIGN_OR_RETURN(const int32_t* seg_ids, IdsIn(ctx, 1, "segment_ids", batch, seq, false));
  // As ONNX Runtime: segment_ids need the table; a table without ids adds its row 0.
  if (seg_ids && !seg) return InvalidArgument(node.Describe(), ": segment_ids given without segment_embedding");
  if (seg && !seg_ids && segments == 0 && batch * seq > 0)
    return InvalidArgument(node.Describe(), ": segment_embedding has no rows (row 0 is added without segment_ids)");
  ASSIGN_OR_RETURN(const float* gamma, VectorIn(ctx, 5, "gamma", hidden, true));
  ASSIGN_OR_RETURN(const float* beta, VectorIn(ctx, 6, "beta", hidden, true));
  ASSIGN_OR_RETURN(const int32_t* mask, IdsIn(ctx, 7, "mask", batch, seq, false));
  ASSIGN_OR_RETURN(const int32_t* pos_ids, IdsIn(ctx, 8, "position_ids", batch, seq, true));
  const bool pos_one_batch = pos_ids && ctx.input(8)->shape()[0] == 1 && batch != 1;
  if (!pos_ids && seq > positions)
    return InvalidArgument(node.Describe(), ": sequence length ", seq, " exceeds position_embedding's ", positions,
                           " rows");
  const float eps = node.GetFloat("epsilon", 1e-12f);
  if (!(eps >= 0) || !std::isfinite(eps))
    return InvalidModel(node.Describe(), ": epsilon must be finite and non-negative, got ", eps);
  // Every id is checked before anything is written: a bad id names its place and range.
  auto check = [&](const int32_t* p, int64_t n, int64_t limit, const char* what) -> Status {
    for (int64_t i = 0; i < n; ++i)
      if (p[i] < 0 || p[i] >= limit)
        return InvalidArgument(node.Describe(), ": ", what, "[", i / seq, ",", i % seq, "] = ", p[i],
                               " is outside [0, ", limit, ")");
    return Status::Ok();
  };
  RETURN_IF_ERROR(check(ids->data<int32_t>(), batch * seq, vocab, "input_ids"));
  if (seg_ids) RETURN_IF_ERROR(check(seg_ids, batch * seq, segments, "segment_ids"));
  if (pos_ids) RETURN_IF_ERROR(check(pos_ids, (pos_one_batch ? 1 : batch) * seq, positions, "position_ids"));
  ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataType::kFloat, {batch, seq, hidden}));
  if (ctx.output_requested(1)) {
    ASSIGN_OR_RETURN(Tensor * mi, ctx.AllocateOutput(1, DataType::kInt32, {batch}));
    int32_t* m = mi->mutable_data<int32_t>();
    for (int64_t b = 0; b < batch; ++b) {
      int32_t n = 0;
      if (mask)
        for (int64_t s = 0; s < seq; ++s) n += mask[b * seq + s] == 1;
      m[b] = n;
    }
  }
  float* sum_out = nullptr;
  if (ctx.output_requested(2)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(2, DataType::kFloat, {batch, seq, hidden}));
    sum_out = t->mutable_data<float>();
  }
  const int32_t* idp = ids->data<int32_t>();
  float* op = out->mutable_data<float>();
  ForRows(ctx, batch * seq, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t s = r % seq;
      const float* w = word + static_cast<int64_t>(idp[r]) * hidden;
      const int64_t pid = pos_ids ? pos_ids[pos_one_batch ? s : r] : s;
      const float* p = pos + pid * hidden;
      const float* g = seg ? seg + (seg_ids ? static_cast<int64_t>(seg_ids[r]) * hidden : 0) : nullptr;
      float* e = sum_out ? sum_out + r * hidden : op + r * hidden;
      for (int64_t k = 0; k < hidden; ++k) e[k] = g ? w[k] + p[k] + g[k] : w[k] + p[k];
      NormalizeRow(e, op + r * hidden, hidden, gamma, beta, eps, false);
    }
  });
  return Status::Ok();
}

// ------------------------------------------------ RotaryEmbedding
// input [B, S, N*H] or [B, N, S, H]; position_ids int64 [B, S], or one value p (token s at
// p + s); cos_cache/sin_cache [max_position, R/2]. Per head, the first R dims rotate (R =
// rotary_embedding_dim, or H = 2 * cache width when 0), the rest are copied:
//   halves (interleaved 0): y[k] = x[k] c - x[k + R/2] s, y[k + R/2] = x[k + R/2] c + x[k] s;
//   pairs (interleaved 1):  y[2k] = x[2k] c - x[2k+1] s,  y[2k+1] = x[2k+1] c + x[2k] s.
// Positions outside the cache are an error naming the place (ORT 1.30 leaves them unchecked).
//
// ai.onnx RotaryEmbedding (opset 23) is the same math with the inputs (X, cos_cache,
// sin_cache, position_ids) and position_ids optional: without it the caches are
// [B, S, R/2], one row per token.
Status RotaryRun(KernelContext& ctx, bool onnx23) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, FloatIn(ctx, 0, onnx23 ? "X" : "input"));
  const Tensor* pos = ctx.input(onnx23 ? 3 : 1);
  ASSIGN_OR_RETURN(const Tensor* cos, FloatIn(ctx, onnx23 ? 1 : 2, "cos_cache"));
  ASSIGN_OR_RETURN(const Tensor* sin, FloatIn(ctx, onnx23 ? 2 : 3, "sin_cache"));
  if (!pos && !onnx23) return InvalidArgument(node.Describe(), ": input 1 (position_ids) is required");
  if (pos && pos->dtype() != DataType::kInt64)
    return InvalidArgument(node.Describe(), ": position_ids must be int64, got ", DataTypeName(pos->dtype()));
  if (x->rank() != 3 && x->rank() != 4)
    return InvalidArgument(node.Describe(), ": input must be [batch, sequence, hidden] or [batch, heads, sequence, ",
                           "head_size], got ", ShapeToString(x->shape()));
  const bool bnsh = x->rank() == 4;
  const int64_t batch = x->dim(0), seq = bnsh ? x->dim(2) : x->dim(1);
  const size_t cache_rank = pos ? 2 : 3;
  if (cos->rank() != cache_rank || cos->shape() != sin->shape())
    return InvalidArgument(node.Describe(), ": cos_cache and sin_cache must be ", cache_rank, "-D of one shape",
                           pos ? "" : " ([batch, sequence, rotary dim / 2] without position_ids)", ", got ",
                           ShapeToString(cos->shape()), " and ", ShapeToString(sin->shape()));
  if (!pos && (cos->dim(0) != batch || cos->dim(1) != seq))
    return InvalidArgument(node.Describe(), ": without position_ids the caches must be [", batch, ", ", seq,
                           ", rotary dim / 2], got ", ShapeToString(cos->shape()));
  const int64_t hidden = bnsh ? x->dim(1) * x->dim(3) : x->dim(2);
  const int64_t max_pos = pos ? cos->dim(0) : batch * seq, half = cos->dim(cache_rank - 1);
  const int64_t rot_attr = node.GetInt("rotary_embedding_dim", 0);
  int64_t heads = node.GetInt("num_heads", 0), head = 0, rot = 0;
  if (rot_attr < 0 || heads < 0)
    return InvalidModel(node.Describe(), ": rotary_embedding_dim and num_heads must not be negative");
  if (bnsh && heads == 0) heads = x->dim(1);  // [batch, heads, sequence, head_size] says it
  if (rot_attr > 0) {
    if (heads == 0) return InvalidModel(node.Describe(), ": rotary_embedding_dim needs num_heads");
    if (hidden % heads)
      return InvalidArgument(node.Describe(), ": hidden ", hidden, " is not a multiple of num_heads ", heads);
    head = hidden / heads;
    rot = rot_attr;
  } else {
    head = rot = 2 * half;
    if (head == 0 || hidden % head)
      return InvalidArgument(node.Describe(), ": hidden ", hidden, " is not a multiple of the head size ", head,
                             " (twice the cache width)");
    if (heads == 0) heads = hidden / head;
  }
  if (bnsh && (x->dim(1) != heads || x->dim(3) != head))
    return InvalidArgument(node.Describe(), ": 4-D input ", ShapeToString(x->shape()), " must be [batch, ", heads,
                           ", sequence, ", head, "]");
  if (heads * head != hidden)
    return InvalidArgument(node.Describe(), ": num_heads ", heads, " x head size ", head, " != hidden ", hidden);
  if (rot > head || rot % 2 || half * 2 != rot)
    return InvalidArgument(node.Describe(), ": rotary dim ", rot, " must be even, at most the head size ", head,
                           ", and twice the cache width ", half);
  const bool one_pos = pos && pos->num_elements() == 1 && pos->rank() <= 1;
  if (pos && !one_pos && pos->shape() != Shape{batch, seq})
    return InvalidArgument(node.Describe(), ": position_ids ", ShapeToString(pos->shape()), " must be [", batch, ",",
                           seq, "] or one value");
  const int64_t* pp = pos ? pos->data<int64_t>() : nullptr;
  // The cache row of token s of batch b.
  auto position = [&](int64_t b, int64_t s) { return !pp ? b * seq + s : one_pos ? pp[0] + s : pp[b * seq + s]; };
  for (int64_t b = 0; pp && b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t p = one_pos ? pp[0] : pp[b * seq + s];
      if (p < 0 || p >= max_pos || (one_pos && s >= max_pos - p))
        return InvalidArgument(node.Describe(), ": position ", one_pos ? p : position(b, s), (one_pos ? " + " : ""),
                               one_pos ? std::to_string(s) : std::string(), " of batch ", b, ", token ", s,
                               " is outside the cache's ", max_pos, " positions");
    }
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  const bool interleaved = node.GetInt("interleaved", 0) != 0;
  const float* xp = x->data<float>();
  const float* cp = cos->data<float>();
  const float* sp = sin->data<float>();
  float* yp = y->mutable_data<float>();
  // One row = one head of one token: offset of (b, n, s) in either layout.
  auto offset = [&](int64_t b, int64_t n, int64_t s) {
    return bnsh ? ((b * heads + n) * seq + s) * head : (b * seq + s) * hidden + n * head;
  };
  ForRows(ctx, batch * heads * seq, head, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / (heads * seq), n = (r / seq) % heads, s = r % seq;
      const float* xr = xp + offset(b, n, s);
      float* yr = yp + offset(b, n, s);
      const float* c = cp + position(b, s) * half;
      const float* sn = sp + position(b, s) * half;
      for (int64_t k = 0; k < half; ++k) {
        const int64_t i0 = interleaved ? 2 * k : k, i1 = interleaved ? 2 * k + 1 : k + half;
        const float a = xr[i0], bb = xr[i1];
        yr[i0] = a * c[k] - bb * sn[k];
        yr[i1] = bb * c[k] + a * sn[k];
      }
      for (int64_t k = rot; k < head; ++k) yr[k] = xr[k];
    }
  });
  return Status::Ok();
}

// type_input -1: these ops' inputs often have no inferred type (libonnx has no schema for
// com.microsoft), so the kernels check dtypes themselves at run time.
void RegMs(KernelRegistry& r, const char* domain, const char* op, KernelFactory f) {
  KernelDef d;
  d.domain = domain;
  d.op_type = op;
  d.type_input = -1;
  d.factory = std::move(f);
  r.Register(std::move(d));
}

}  // namespace

void RegisterTransformerContribKernels(KernelRegistry& r) {
  for (bool simplified : {false, true}) {
    const char* op = simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
    RegMs(r, kMs, op,
          StatelessFactory([simplified](KernelContext& ctx) { return SkipNormCompute(ctx, simplified, false); }));
    KernelDef fast;
    fast.domain = kMs;
    fast.op_type = op;
    fast.type_input = -1;
    fast.factory =
        StatelessFactory([simplified](KernelContext& ctx) { return SkipNormCompute(ctx, simplified, true); });
    fast.covers = [](const KernelInit&) { return CpuHasAvx512(); };
    fast.reference = false;
    fast.impl = "avx512";
    r.Register(std::move(fast));
  }
  // ORT registers SimplifiedLayerNormalization in the ONNX domain (version 1); ONNX itself
  // has no op of that name, so the entry cannot shadow a standard one.
  RegMs(r, "", "SimplifiedLayerNormalization", StatelessFactory(SimplifiedNormCompute));
  RegMs(r, kMs, "BiasGelu", StatelessFactory(BiasGeluCompute));
  RegMs(r, kMs, "EmbedLayerNormalization", StatelessFactory(EmbedLayerNormCompute));
  RegMs(r, kMs, "RotaryEmbedding", StatelessFactory([](KernelContext& ctx) { return RotaryRun(ctx, false); }));
  // The ai.onnx opset-23 versions of two ORT contrib ops: the same kernels.
  KernelDef rope = UntypedFnDef("RotaryEmbedding", 23, [](KernelContext& ctx) { return RotaryRun(ctx, true); });
  r.Register(std::move(rope));
  r.Register(UntypedFnDef("RMSNormalization", 23, SimplifiedNormCompute));
}

}  // namespace strata
