// Node execution for the CUDA provider: shape logic on the host, kernels on the run's
// stream. Errors name the node (op 'name') and carry the CUDA/cuBLAS error text.
#include "cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "../common/shape_util.h"

namespace strata_cuda {
namespace {

using strata_provider_common::Broadcast;
using strata_provider_common::ShapeStr;

StridedShape Contiguous(const std::vector<int64_t>& shape) {
  StridedShape s;
  s.rank = static_cast<int>(shape.size());
  int64_t st = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    s.dims[d] = shape[d];
    s.strides[d] = st;
    st *= shape[d];
  }
  return s;
}

// Strides of `in` broadcast (right-aligned) to `out` of rank r.
StridedShape BroadcastTo(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  StridedShape s;
  s.rank = static_cast<int>(out.size());
  const StridedShape c = Contiguous(in);
  const int skip = s.rank - c.rank;
  for (int d = 0; d < s.rank; ++d) {
    s.dims[d] = out[d];
    s.strides[d] = d < skip || c.dims[d - skip] == 1 ? 0 : c.strides[d - skip];
  }
  return s;
}

bool NormAxis(int64_t axis, int64_t rank, bool allow_rank, int64_t* out) {
  if (axis < -rank - (allow_rank ? 1 : 0) || axis > (allow_rank ? rank : rank - 1)) return false;
  *out = axis < 0 ? axis + rank + (allow_rank ? 1 : 0) : axis;
  return true;
}

const DTensor* In(const CNode& n, std::vector<DTensor>& vals, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0 || !vals[n.inputs[k]].valid()) return nullptr;
  return &vals[n.inputs[k]];
}

bool NeedFloat(RunContext* ctx, const CNode& n, const DTensor* t, const char* what) {
  if (t && t->dtype == kFloat) return true;
  return ctx->Fail(n, std::string(what) + " is missing or not float32");
}

float* F(const DTensor& t) { return reinterpret_cast<float*>(t.data); }
cudaStream_t S(RunContext* ctx) { return ctx->slot->stream; }

bool Cublas(RunContext* ctx, const CNode& n, cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  return ctx->Fail(n, std::string(what) + ": " + CublasErrorText(s));
}

}  // namespace

// Row-major C[b] (m x n) = op(A[b]) (m x k) * op(B[b]) (k x n) + beta * C, in cuBLAS's
// column-major terms: C^T = op(B)^T op(A)^T.
bool Sgemm(RunContext* ctx, const CNode& n, bool ta, bool tb, int64_t m, int64_t nn, int64_t k, float alpha,
           const float* a, int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
           int64_t batch) {
  if (m > std::numeric_limits<int>::max() || nn > std::numeric_limits<int>::max() ||
      k > std::numeric_limits<int>::max() || batch > std::numeric_limits<int>::max())
    return ctx->Fail(n, "matrix dimensions exceed cuBLAS's 32-bit limits");
  if (m == 0 || nn == 0 || batch == 0) return true;
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : nn);
  if (ctx->precision == GemmPrecision::kFp16) {
    // Tensor cores with fp16 inputs and fp32 accumulation; the handle's pedantic mode
    // would forbid the down-conversion, so lift it for this call only (the slot, and so
    // the handle, belongs to this run alone).
    cublasSetMathMode(ctx->slot->cublas, CUBLAS_DEFAULT_MATH);
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        ctx->slot->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(nn),
        static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F, ldb, stride_b, a, CUDA_R_32F, lda, stride_a,
        &beta, c, CUDA_R_32F, static_cast<int>(nn), stride_c, static_cast<int>(batch), CUBLAS_COMPUTE_32F_FAST_16F,
        CUBLAS_GEMM_DEFAULT);
    cublasSetMathMode(ctx->slot->cublas, CUBLAS_PEDANTIC_MATH);
    return Cublas(ctx, n, s, "cublasGemmStridedBatchedEx (fp16 compute)");
  }
  cublasStatus_t s = cublasSgemmStridedBatched(
      ctx->slot->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(nn),
      static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, stride_b, a, lda, stride_a, &beta, c,
      static_cast<int>(nn), stride_c, static_cast<int>(batch));
  return Cublas(ctx, n, s, "cublasSgemmStridedBatched");
}

namespace {

void Activation(const CNode& n, float* lo, float* hi) {
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  const std::string act = n.Str("activation", "");
  if (act.empty()) return;
  *lo = n.Float("activation_min", act == "Relu" ? 0.0f : *lo);
  *hi = n.Float("activation_max", *hi);
}

bool RunMatMul(const CNode& n, const DTensor* a, const DTensor* b, DTensor* out, RunContext* ctx) {
  if (!NeedFloat(ctx, n, a, "input A") || !NeedFloat(ctx, n, b, "input B")) return false;
  if (a->shape.size() < 2 || b->shape.size() < 2 || a->shape.back() != b->shape[b->shape.size() - 2])
    return ctx->Fail(n, "cannot multiply " + ShapeStr(a->shape) + " by " + ShapeStr(b->shape));
  const int64_t M = a->shape[a->shape.size() - 2], K = a->shape.back(), N = b->shape.back();
  std::vector<int64_t> ab(a->shape.begin(), a->shape.end() - 2), bb(b->shape.begin(), b->shape.end() - 2), batch;
  if (!Broadcast(ab, bb, &batch))
    return ctx->Fail(n, "batch dimensions of " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape) + " differ");
  int64_t batches = 1, a_batches = 1, b_batches = 1;
  for (int64_t d : batch) batches *= d;
  for (int64_t d : ab) a_batches *= d;
  for (int64_t d : bb) b_batches *= d;
  std::vector<int64_t> shape = batch;
  shape.push_back(M);
  shape.push_back(N);
  if (!ctx->Alloc(kFloat, shape, out)) return false;
  if (b_batches == 1) {
    // B shared by every batch: one GEMM with the batches folded into M.
    return Sgemm(ctx, n, false, false, a_batches * M, N, K, 1.0f, F(*a), 0, F(*b), 0, 0.0f, F(*out), 0, 1) &&
           (a_batches == batches || ctx->Fail(n, "unsupported batch broadcast"));
  }
  if (a_batches != batches && a_batches != 1) return ctx->Fail(n, "partial batch broadcasting is not handled");
  if (b_batches != batches) return ctx->Fail(n, "partial batch broadcasting is not handled");
  return Sgemm(ctx, n, false, false, M, N, K, 1.0f, F(*a), a_batches == 1 ? 0 : M * K, F(*b), K * N, 0.0f, F(*out),
               M * N, batches);
}

bool RunGemm(const CNode& n, const DTensor* a, const DTensor* b, const DTensor* c, DTensor* out, RunContext* ctx) {
  if (!NeedFloat(ctx, n, a, "input A") || !NeedFloat(ctx, n, b, "input B")) return false;
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return ctx->Fail(n, "A and B must be 2-D, got " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape));
  const bool ta = n.Int("transA", 0) != 0, tb = n.Int("transB", 0) != 0;
  const float alpha = n.Float("alpha", 1.0f);
  float beta = n.Float("beta", 1.0f);
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != Kb) return ctx->Fail(n, "inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  if (!ctx->Alloc(kFloat, {M, N}, out)) return false;
  if (c && beta != 0.0f) {
    if (!NeedFloat(ctx, n, c, "input C")) return false;
    std::vector<int64_t> cs;
    if (c->shape.size() > 2 || !Broadcast(c->shape, {M, N}, &cs) || cs != std::vector<int64_t>{M, N})
      return ctx->Fail(n, "C of shape " + ShapeStr(c->shape) + " does not broadcast to " + ShapeStr({M, N}));
    if (!ctx->Cuda(LaunchStridedCopy(c->data, 0, BroadcastTo(c->shape, {M, N}), out->data, 4, S(ctx)), n,
                   "broadcast C"))
      return false;
  } else {
    beta = 0.0f;
  }
  if (!Sgemm(ctx, n, ta, tb, M, N, K, alpha, F(*a), 0, F(*b), 0, beta, F(*out), 0, 1)) return false;
  float lo, hi;
  Activation(n, &lo, &hi);
  if (n.Has("activation"))
    return ctx->Cuda(LaunchBiasClamp(F(*out), M, N, nullptr, false, 1, lo, hi, S(ctx)), n, "activation");
  return true;
}

// Resolves pads for NOTSET / VALID / SAME_UPPER / SAME_LOWER on one spatial axis.
bool Pads(const CNode& n, int axis, int64_t in, int64_t k, int64_t st, int64_t dl, const std::vector<int64_t>& pads,
          int64_t* begin, int64_t* out_size, bool ceil_mode, RunContext* ctx) {
  const std::string ap = n.Str("auto_pad", "NOTSET");
  const int64_t ek = dl * (k - 1) + 1;
  int64_t pb = 0, pe = 0;
  if (ap == "NOTSET") {
    pb = pads.empty() ? 0 : pads[axis];
    pe = pads.empty() ? 0 : pads[axis + 2];
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t o = (in + st - 1) / st;
    const int64_t total = std::max<int64_t>(0, (o - 1) * st + ek - in);
    pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    pe = total - pb;
  } else if (ap != "VALID") {
    return ctx->Fail(n, "auto_pad " + ap + " is not valid");
  }
  const int64_t span = in + pb + pe - ek;
  if (span < 0) return ctx->Fail(n, "kernel larger than the padded input");
  int64_t o = (ceil_mode ? (span + st - 1) : span) / st + 1;
  if (ceil_mode && (o - 1) * st >= in + pb) --o;  // the last window must start inside the input or left padding
  *begin = pb;
  *out_size = o;
  return true;
}

bool Window(const CNode& n, const std::vector<int64_t>& x, int64_t kh, int64_t kw, bool ceil_mode, Conv2d* p,
            RunContext* ctx) {
  std::vector<int64_t> st = n.Ints("strides"), dl = n.Ints("dilations"), pads = n.Ints("pads");
  if (st.empty()) st = {1, 1};
  if (dl.empty()) dl = {1, 1};
  if (st.size() != 2 || dl.size() != 2 || (!pads.empty() && pads.size() != 4) || st[0] <= 0 || st[1] <= 0 ||
      dl[0] <= 0 || dl[1] <= 0 || kh <= 0 || kw <= 0)
    return ctx->Fail(n, "strides, dilations and pads must have 2, 2 and 4 positive entries");
  for (int64_t v : pads)
    if (v < 0) return ctx->Fail(n, "pads must not be negative");
  p->h = x[2];
  p->w = x[3];
  p->kh = kh;
  p->kw = kw;
  p->sh = st[0];
  p->sw = st[1];
  p->dh = dl[0];
  p->dw = dl[1];
  return Pads(n, 0, p->h, kh, st[0], dl[0], pads, &p->ph, &p->oh, ceil_mode, ctx) &&
         Pads(n, 1, p->w, kw, st[1], dl[1], pads, &p->pw, &p->ow, ceil_mode, ctx);
}

bool RunConv(const CNode& n, const DTensor* x, const DTensor* w, const DTensor* bias, DTensor* out, RunContext* ctx) {
  if (!NeedFloat(ctx, n, x, "input X") || !NeedFloat(ctx, n, w, "weight W")) return false;
  if (x->shape.size() != 4 || w->shape.size() != 4)
    return ctx->Fail(n, "only 2-D convolution is handled (X " + ShapeStr(x->shape) + ", W " + ShapeStr(w->shape) + ")");
  Conv2d p;
  const int64_t N = x->shape[0];
  p.c = x->shape[1];
  p.m = w->shape[0];
  p.group = n.Int("group", 1);
  const int64_t CG = w->shape[1];
  if (p.group <= 0 || p.c != CG * p.group || p.m % p.group != 0)
    return ctx->Fail(n, "X has " + std::to_string(p.c) + " channels but W " + ShapeStr(w->shape) + " expects " +
                            std::to_string(CG) + " x group " + std::to_string(p.group));
  std::vector<int64_t> ks = n.Ints("kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != w->shape[2] || ks[1] != w->shape[3]))
    return ctx->Fail(n, "kernel_shape does not match W " + ShapeStr(w->shape));
  if (!Window(n, x->shape, w->shape[2], w->shape[3], false, &p, ctx)) return false;
  if (bias && (!NeedFloat(ctx, n, bias, "bias B") || bias->numel() != p.m))
    return ctx->Fail(n, "bias must have " + std::to_string(p.m) + " elements");
  if (!ctx->Alloc(kFloat, {N, p.m, p.oh, p.ow}, out)) return false;
  const int64_t spatial = p.oh * p.ow, MG = p.m / p.group, kdim = CG * p.kh * p.kw;
  if (p.group == p.c && p.m == p.c && CG == 1) {
    if (!ctx->Cuda(LaunchDepthwise(F(*x), F(*w), F(*out), N, p, S(ctx)), n, "depthwise convolution")) return false;
  } else {
    const bool pointwise =
        p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0 && p.oh == p.h && p.ow == p.w;
    DTensor col;
    if (!pointwise && !ctx->Alloc(kFloat, {kdim, spatial}, &col)) return false;
    for (int64_t img = 0; img < N; ++img)
      for (int64_t g = 0; g < p.group; ++g) {
        const float* image = F(*x) + img * p.c * p.h * p.w;
        const float* src = image + g * CG * p.h * p.w;
        if (!pointwise) {
          if (!ctx->Cuda(LaunchIm2Col(image, p, g, F(col), S(ctx)), n, "im2col")) return false;
          src = F(col);
        }
        // out_g [MG, spatial] = W_g [MG, kdim] * col [kdim, spatial]
        if (!Sgemm(ctx, n, false, false, MG, spatial, kdim, 1.0f, F(*w) + g * MG * kdim, 0, src, 0, 0.0f,
                   F(*out) + (img * p.m + g * MG) * spatial, 0, 1))
          return false;
      }
  }
  float lo, hi;
  Activation(n, &lo, &hi);
  if (bias || n.Has("activation"))
    return ctx->Cuda(LaunchBiasClamp(F(*out), N * p.m, spatial, bias ? F(*bias) : nullptr, true, p.m, lo, hi, S(ctx)),
                     n, "bias/activation");
  return true;
}

bool RunPool(const CNode& n, const DTensor* x, DTensor* out, RunContext* ctx) {
  if (!NeedFloat(ctx, n, x, "input X")) return false;
  if (x->shape.size() != 4) return ctx->Fail(n, "only 2-D pooling is handled, got X " + ShapeStr(x->shape));
  std::vector<int64_t> k = n.Ints("kernel_shape");
  if (k.size() != 2) return ctx->Fail(n, "kernel_shape must have 2 entries");
  Conv2d w;
  if (!Window(n, x->shape, k[0], k[1], n.Int("ceil_mode", 0) != 0, &w, ctx)) return false;
  Pool2d p;
  p.n = x->shape[0];
  p.c = x->shape[1];
  p.h = w.h;
  p.w = w.w;
  p.oh = w.oh;
  p.ow = w.ow;
  p.kh = w.kh;
  p.kw = w.kw;
  p.sh = w.sh;
  p.sw = w.sw;
  p.ph = w.ph;
  p.pw = w.pw;
  p.dh = w.dh;
  p.dw = w.dw;
  p.count_include_pad = n.Int("count_include_pad", 0) != 0;
  if (!ctx->Alloc(kFloat, {p.n, p.c, p.oh, p.ow}, out)) return false;
  if (n.op == "MaxPool") return ctx->Cuda(LaunchMaxPool(F(*x), F(*out), p, S(ctx)), n, "max pooling");
  return ctx->Cuda(LaunchAvgPool(F(*x), F(*out), p, S(ctx)), n, "average pooling");
}

bool RunElementwise(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  const DTensor* a = In(n, vals, 0);
  if (!NeedFloat(ctx, n, a, "input A")) return false;
  static const std::map<std::string, BinaryOp> kBinary = {{"Add", BinaryOp::kAdd},
                                                          {"Sub", BinaryOp::kSub},
                                                          {"Mul", BinaryOp::kMul},
                                                          {"Div", BinaryOp::kDiv},
                                                          {"Pow", BinaryOp::kPow}};
  auto bin = kBinary.find(n.op);
  if (bin != kBinary.end()) {
    const DTensor* b = In(n, vals, 1);
    if (!NeedFloat(ctx, n, b, "input B")) return false;
    std::vector<int64_t> shape;
    if (!Broadcast(a->shape, b->shape, &shape) || shape.size() > kMaxRank)
      return ctx->Fail(n, "shapes " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape) + " do not broadcast");
    if (!ctx->Alloc(kFloat, shape, out)) return false;
    return ctx->Cuda(LaunchBinary(bin->second, F(*a), BroadcastTo(a->shape, shape), F(*b), BroadcastTo(b->shape, shape),
                                  F(*out), Contiguous(shape), S(ctx)),
                     n, "elementwise kernel");
  }
  static const std::map<std::string, UnaryOp> kUnary = {{"Relu", UnaryOp::kRelu}, {"Sigmoid", UnaryOp::kSigmoid},
                                                        {"Tanh", UnaryOp::kTanh}, {"Erf", UnaryOp::kErf},
                                                        {"Exp", UnaryOp::kExp},   {"Sqrt", UnaryOp::kSqrt},
                                                        {"Clip", UnaryOp::kClip}, {"LeakyRelu", UnaryOp::kLeakyRelu}};
  float p0 = 0.0f, p1 = 0.0f;
  if (n.op == "LeakyRelu") p0 = n.Float("alpha", 0.01f);
  if (n.op == "Clip") {
    p0 = -std::numeric_limits<float>::infinity();
    p1 = std::numeric_limits<float>::infinity();
    if (n.opset < 11) {
      p0 = n.Float("min", p0);
      p1 = n.Float("max", p1);
    } else {
      for (size_t k = 1; k <= 2; ++k) {
        const DTensor* t = In(n, vals, k);
        if (!t) continue;
        if (t->dtype != kFloat || t->numel() != 1) return ctx->Fail(n, "min/max must be float32 scalars");
        float v;
        cudaError_t e = cudaMemcpyAsync(&v, t->data, sizeof(float), cudaMemcpyDeviceToHost, S(ctx));
        if (e == cudaSuccess) e = cudaStreamSynchronize(S(ctx));
        if (!ctx->Cuda(e, n, "reading min/max")) return false;
        (k == 1 ? p0 : p1) = v;
      }
    }
  }
  if (!ctx->Alloc(kFloat, a->shape, out)) return false;
  return ctx->Cuda(LaunchUnary(kUnary.at(n.op), F(*a), F(*out), a->numel(), p0, p1, S(ctx)), n, "elementwise kernel");
}

bool RunRowOp(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx) {
  const DTensor* x = In(n, vals, 0);
  if (!NeedFloat(ctx, n, x, "input")) return false;
  if (x->shape.empty()) return ctx->Fail(n, "input must have rank >= 1");
  const int64_t cols = x->shape.back(), rows = cols ? x->numel() / cols : 0;
  if (n.op == "Softmax" || n.op == "LogSoftmax") {
    if (!ctx->Alloc(kFloat, x->shape, out)) return false;
    return ctx->Cuda(LaunchSoftmax(F(*x), F(*out), rows, cols, n.op == "LogSoftmax", S(ctx)), n, "softmax");
  }
  if (n.op == "LayerNormalization") {
    const DTensor* scale = In(n, vals, 1);
    const DTensor* bias = In(n, vals, 2);
    if (!NeedFloat(ctx, n, scale, "scale") || scale->numel() != cols || (bias && bias->numel() != cols))
      return ctx->Fail(n, "scale and bias must have " + std::to_string(cols) + " elements");
    if (!ctx->Alloc(kFloat, x->shape, out)) return false;
    return ctx->Cuda(LaunchLayerNorm(F(*x), F(*scale), bias ? F(*bias) : nullptr, F(*out), rows, cols,
                                     n.Float("epsilon", 1e-5f), S(ctx)),
                     n, "layer normalization");
  }
  // ReduceMean / ReduceSum over the last axis (checked at compile).
  std::vector<int64_t> shape = x->shape;
  if (n.Int("keepdims", 1) != 0)
    shape.back() = 1;
  else
    shape.pop_back();
  if (!ctx->Alloc(kFloat, shape, out)) return false;
  return ctx->Cuda(LaunchReduceRows(F(*x), F(*out), rows, cols, n.op == "ReduceMean", S(ctx)), n, "reduction");
}

bool RunGlobalAvg(const CNode& n, const DTensor* x, DTensor* out, RunContext* ctx) {
  if (!NeedFloat(ctx, n, x, "input X")) return false;
  if (x->shape.size() < 3) return ctx->Fail(n, "input must have rank >= 3");
  std::vector<int64_t> shape = {x->shape[0], x->shape[1]};
  int64_t spatial = 1;
  for (size_t d = 2; d < x->shape.size(); ++d) {
    spatial *= x->shape[d];
    shape.push_back(1);
  }
  if (!ctx->Alloc(kFloat, shape, out)) return false;
  return ctx->Cuda(LaunchReduceRows(F(*x), F(*out), x->shape[0] * x->shape[1], spatial, true, S(ctx)), n,
                   "global average pooling");
}

}  // namespace

bool RunTensorOp(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx);  // cuda_ops_tensor.cc
bool RunMatMulNBits(const CNode& n, std::vector<DTensor>& vals, DTensor* out, RunContext* ctx);
bool RunLstm(const CNode& n, std::vector<DTensor>& vals, RunContext* ctx);  // cuda_ops_rnn.cc

bool RunContext::Alloc(int32_t dtype, std::vector<int64_t> shape, DTensor* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      error = "negative dimension in " + ShapeStr(shape);
      return false;
    }
    n *= d;
  }
  bool is_oom = false;
  BlockRef b = dev->allocator().Allocate(static_cast<size_t>(n) * DtypeSize(dtype), &error, &is_oom);
  if (!b) {
    oom = is_oom;
    return false;
  }
  hold.push_back(b);
  out->dtype = dtype;
  out->shape = std::move(shape);
  out->data = static_cast<char*>(b->ptr);
  out->block = std::move(b);
  out->host_ints.reset();
  return true;
}

bool RunContext::Cuda(cudaError_t e, const CNode& n, const char* what) {
  if (e == cudaSuccess) return true;
  oom = e == cudaErrorMemoryAllocation;
  return Fail(n, std::string(what) + ": " + CudaErrorText(e));
}

bool RunContext::Fail(const CNode& n, const std::string& msg) {
  error = n.Who() + ": " + msg;
  return false;
}

bool RunContext::HostInts(const CNode& n, const DTensor& t, const char* what, std::vector<int64_t>* out) {
  if (t.host_ints) {
    *out = *t.host_ints;
    return true;
  }
  if (t.dtype != kInt64 && t.dtype != kInt32) return Fail(n, std::string(what) + " must be int64 or int32");
  const int64_t count = t.numel();
  std::vector<int64_t> v(count);
  std::vector<int32_t> v32(t.dtype == kInt32 ? count : 0);
  void* dst = t.dtype == kInt64 ? static_cast<void*>(v.data()) : static_cast<void*>(v32.data());
  cudaError_t e = cudaMemcpyAsync(dst, t.data, t.bytes(), cudaMemcpyDeviceToHost, slot->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(slot->stream);
  if (!Cuda(e, n, what)) return false;
  if (t.dtype == kInt32) std::copy(v32.begin(), v32.end(), v.begin());
  *out = std::move(v);
  return true;
}

bool RunNode(const CNode& n, std::vector<DTensor>& vals, RunContext* ctx) {
  // LSTM has three optional outputs (Y, Y_h, Y_c) and sets them itself.
  if (n.op == "LSTM") {
    if (RunLstm(n, vals, ctx)) return true;
    if (ctx->error.rfind(n.Who(), 0) != 0) ctx->error = n.Who() + ": " + ctx->error;
    return false;
  }
  if (n.outputs.empty() || n.outputs[0] < 0) return true;
  DTensor out;
  bool ok;
  const std::string& op = n.op;
  if (op == "MatMul") {
    ok = RunMatMul(n, In(n, vals, 0), In(n, vals, 1), &out, ctx);
  } else if (op == "Gemm") {
    ok = RunGemm(n, In(n, vals, 0), In(n, vals, 1), In(n, vals, 2), &out, ctx);
  } else if (op == "Conv") {
    ok = RunConv(n, In(n, vals, 0), In(n, vals, 1), In(n, vals, 2), &out, ctx);
  } else if (op == "MaxPool" || op == "AveragePool") {
    ok = RunPool(n, In(n, vals, 0), &out, ctx);
  } else if (op == "GlobalAveragePool") {
    ok = RunGlobalAvg(n, In(n, vals, 0), &out, ctx);
  } else if (op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" || op == "ReduceMean" ||
             op == "ReduceSum") {
    ok = RunRowOp(n, vals, &out, ctx);
  } else if (op == "MatMulNBits") {
    ok = RunMatMulNBits(n, vals, &out, ctx);
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Relu" ||
             op == "Sigmoid" || op == "Tanh" || op == "Erf" || op == "Exp" || op == "Sqrt" || op == "Clip" ||
             op == "LeakyRelu") {
    ok = RunElementwise(n, vals, &out, ctx);
  } else {
    ok = RunTensorOp(n, vals, &out, ctx);
  }
  if (!ok) {
    if (ctx->error.rfind(n.Who(), 0) != 0) ctx->error = n.Who() + ": " + ctx->error;
    return false;
  }
  vals[n.outputs[0]] = std::move(out);
  return true;
}

std::string ParseCudaOptions(const strata_partition_desc* p, GemmPrecision* precision) {
  *precision = GemmPrecision::kFp32;
  const size_t count = strata_partition_option_count(p);
  for (size_t i = 0; i < count; ++i) {
    const std::string key = p->option_keys[i] ? p->option_keys[i] : "";
    const std::string value = p->option_values[i] ? p->option_values[i] : "";
    if (key == "precision") {
      if (value == "fp32") {
        *precision = GemmPrecision::kFp32;
      } else if (value == "fp16") {
        *precision = GemmPrecision::kFp16;
      } else {
        return "option cuda.precision must be 'fp32' or 'fp16', got '" + value + "'";
      }
      continue;
    }
    return "unknown option cuda." + key + " (known: cuda.precision=fp32|fp16)";
  }
  return "";
}

}  // namespace strata_cuda
