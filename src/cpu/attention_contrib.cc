// com.microsoft Attention (ONNX Runtime's fused BERT / GPT-2 self-attention, written by its
// transformer optimizer), fp32:
//   QKV = input x weights + bias; per batch b and head n:
//   probs = Softmax(mask + scale * Q K^T + attention_bias) over the keys, out = probs V,
// the heads merged back into [batch, sequence, v_hidden]. With `past` [2, B, N, P, H] the
// keys and values are the past's followed by this step's (T = P + S keys), and `present`
// holds them. Masks, as ONNX Runtime's CPU kernel reads them (a masked key gets
// mask_filter_value added; a key after the query under `unidirectional` gets the lowest
// float instead):
//   [B] keys at or after end[b] are masked (right padding); [2B] also keys before start[b];
//   [B, T] or [B, S, T] raw: a value > 0 keeps the key.
// Not supported (each an error naming the node): do_rotary, past_present_share_buffer,
// 4-D masks and the [3B + 2] index form.
//
// Two kernels: the reference (plain loops, the test oracle) and, with AVX-512, the SGEMM
// one (the projection on weights packed at creation, Q K^T and probs V per head).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/status.h"
#include "cpu/attention_core.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

struct Geometry {
  int64_t heads = 0;
  int64_t dq = -1, dk = -1, dv = -1;  // -1: a third of weights' columns each
  float scale = 0;                    // 0: 1 / sqrt(head size of Q)
  bool unidirectional = false;
  float mask_filter = -10000.0f;
};

class MsAttentionKernel final : public OpKernel, public PacksConstantInputs {
 public:
  MsAttentionKernel(Geometry g, bool reference) : g_(g), reference_(reference) {}

  // Constant weights are packed once for the SGEMM (and released by the session).
  Status PackWeights(const Node& node, const Tensor& w, ThreadPool* pool) {
    auto packed = sgemm::PackB(sgemm::WeightRows::Of(w), w.dim(0), w.dim(1), pool);
    if (!packed.ok()) return Status(packed.status().code(), node.Describe() + ": " + packed.status().message());
    packed_ = std::move(packed).value();
    has_packed_ = true;
    return Status::Ok();
  }
  std::vector<size_t> PackedConstantInputs() const override {
    return has_packed_ ? std::vector<size_t>{1} : std::vector<size_t>{};
  }
  const char* ImplName() const override { return reference_ ? "ref" : "avx512"; }

  Status Compute(KernelContext& ctx) const override;

 private:
  Status Project(KernelContext& ctx, const float* x, const Tensor& w, const float* bias, int64_t rows, int64_t din,
                 int64_t dtot, float* qkv) const;

  Geometry g_;
  bool reference_;
  bool has_packed_ = false;
  sgemm::PackedB packed_;
};

// qkv[rows, dtot] = x[rows, din] x W + bias.
Status MsAttentionKernel::Project(KernelContext& ctx, const float* x, const Tensor& w, const float* bias, int64_t rows,
                                  int64_t din, int64_t dtot, float* qkv) const {
  const Node& node = ctx.node();
  if (!reference_) {
    sgemm::Epilogue ep;
    ep.bias = bias;
    Status st = has_packed_ ? sgemm::Gemm(rows, x, din, packed_, qkv, dtot, ep, ctx.pool())
                            : sgemm::GemmUnpacked(rows, dtot, din, x, din, w.data<float>(), dtot, false, qkv, dtot, ep,
                                                  ctx.pool());
    if (!st.ok()) return Status(st.code(), node.Describe() + ": " + st.message());
    return Status::Ok();
  }
  const float* wp = w.data<float>();
  KernelStop stop(node);
  int64_t pending = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!stop.Continue(pending, din * dtot)) break;
    float* out = qkv + r * dtot;
    for (int64_t j = 0; j < dtot; ++j) out[j] = bias ? bias[j] : 0.0f;
    for (int64_t k = 0; k < din; ++k) {
      const float a = x[r * din + k];
      const float* wr = wp + k * dtot;
      for (int64_t j = 0; j < dtot; ++j) out[j] += a * wr[j];
    }
  }
  return stop.status();
}

Status MsAttentionKernel::Compute(KernelContext& ctx) const {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  if (!x || !w) return InvalidArgument(node.Describe(), ": Attention needs input and weights");
  for (const auto& [t, name] : {std::pair{x, "input"}, std::pair{w, "weights"}})
    if (t->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": '", name, "' must be float32, got ", DataTypeName(t->dtype()));
  if (x->rank() != 3)
    return InvalidArgument(node.Describe(), ": input must be 3-D [batch, sequence, hidden], got ",
                           ShapeToString(x->shape()));
  const int64_t batch = x->dim(0), seq = x->dim(1), din = x->dim(2);
  // batch x seq can overflow when din is 0 (an empty input of absurd dims).
  ASSIGN_OR_RETURN(const int64_t tokens, CheckedNumElements({batch, seq}, "Attention input tokens"));
  if (w->rank() != 2 || w->dim(0) != din)
    return InvalidArgument(node.Describe(), ": weights ", ShapeToString(w->shape()), " must be [", din,
                           ", q + k + v hidden] for input ", ShapeToString(x->shape()));
  const int64_t dtot = w->dim(1);
  int64_t dq = g_.dq, dk = g_.dk, dv = g_.dv;
  if (dq < 0) {
    if (dtot % 3 != 0)
      return InvalidArgument(node.Describe(), ": weights have ", dtot,
                             " columns, not a multiple of 3 (set qkv_hidden_sizes for unequal Q, K, V)");
    dq = dk = dv = dtot / 3;
  }
  if (dq + dk + dv != dtot)
    return InvalidArgument(node.Describe(), ": qkv_hidden_sizes sum to ", dq + dk + dv, " but weights have ", dtot,
                           " columns");
  if (dq % g_.heads || dv % g_.heads)
    return InvalidArgument(node.Describe(), ": hidden sizes ", dq, " and ", dv, " must be multiples of num_heads ",
                           g_.heads);
  const int64_t heads = g_.heads, hq = dq / heads, hv = dv / heads;
  const Tensor* bias_t = ctx.input(2);
  if (bias_t && (bias_t->dtype() != DataType::kFloat || bias_t->rank() != 1 || bias_t->dim(0) != dtot))
    return InvalidArgument(node.Describe(), ": bias must be float32 [", dtot, "], got ", DataTypeName(bias_t->dtype()),
                           " ", ShapeToString(bias_t->shape()));
  // past [2, B, N, P, head]: keys and values of earlier steps (needs equal K and V sizes).
  const Tensor* past_t = ctx.input(4);
  int64_t past = 0;
  if (past_t) {
    if (dk != dv) return InvalidArgument(node.Describe(), ": past needs equal K and V hidden sizes");
    if (past_t->dtype() != DataType::kFloat || past_t->rank() != 5 || past_t->dim(0) != 2 || past_t->dim(1) != batch ||
        past_t->dim(2) != heads || past_t->dim(4) != hv)
      return InvalidArgument(node.Describe(), ": past must be float32 [2, ", batch, ", ", heads, ", past_len, ", hv,
                             "], got ", DataTypeName(past_t->dtype()), " ", ShapeToString(past_t->shape()));
    past = past_t->dim(3);
  }
  if (past > std::numeric_limits<int64_t>::max() - seq)
    return InvalidArgument(node.Describe(), ": past length ", past, " + sequence length ", seq, " overflows");
  const int64_t total = past + seq;
  ASSIGN_OR_RETURN(cpu::KeyMask mask, cpu::ReadKeyMask(node, ctx.input(3), "mask_index", batch, seq, total, true));
  // attention_bias [B or 1, N or 1, S, T], added to the scores.
  const Tensor* ab = ctx.input(5);
  RETURN_IF_ERROR(cpu::CheckAttentionBias(node, ab, batch, heads, seq, total));

  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {batch, seq, dv}));
  float* present = nullptr;
  if (ctx.output_requested(1)) {
    if (dk != dv) return InvalidArgument(node.Describe(), ": present needs equal K and V hidden sizes");
    ASSIGN_OR_RETURN(Tensor * p, ctx.AllocateOutput(1, DataType::kFloat, {2, batch, heads, total, hv}));
    present = p->mutable_data<float>();
  }
  // dv == 0: nothing to compute (and heads, past and mask lengths are then unbounded by
  // any tensor's memory, so the loops below must not see them).
  if (tokens == 0 || dv == 0) return Status::Ok();

  ASSIGN_OR_RETURN(int64_t qkv_elems, CheckedNumElements({tokens, dtot}, "Attention QKV"));
  std::vector<float> qkv(static_cast<size_t>(qkv_elems));
  RETURN_IF_ERROR(
      Project(ctx, x->data<float>(), *w, bias_t ? bias_t->data<float>() : nullptr, tokens, din, dtot, qkv.data()));
  const float scale = g_.scale != 0.0f ? g_.scale : 1.0f / std::sqrt(static_cast<float>(hq));
  const float* pastp = past_t ? past_t->data<float>() : nullptr;
  float* yp = y->mutable_data<float>();
  const bool masked = mask.kind != cpu::KeyMask::kNone || (g_.unidirectional && seq > 1);
  KernelStop stop(node);
  std::atomic<bool> gemm_failed{false};  // cannot happen for the checked sizes; reported, not ignored
  // One task per (batch, head): gather its keys/values [T, head], scores [S, T], out.
  auto task = [&](int64_t t0, int64_t t1) {
    std::vector<float> kbuf, vbuf, scores(static_cast<size_t>(seq * total)), maskbuf;
    int64_t pending = 0, mask_batch = -1;  // maskbuf holds the rows of this batch
    for (int64_t t = t0; t < t1; ++t) {
      if (!stop.Continue(pending, seq * total * (hq + hv))) return;
      const int64_t b = t / heads, n = t % heads;
      // K and V of this head, [T, head]: into present when it is requested, else scratch.
      float* kh;
      float* vh;
      if (present) {
        kh = present + ((0 * batch + b) * heads + n) * total * hv;
        vh = present + ((1 * batch + b) * heads + n) * total * hv;
      } else {
        kbuf.resize(static_cast<size_t>(total * hq));
        vbuf.resize(static_cast<size_t>(total * hv));
        kh = kbuf.data();
        vh = vbuf.data();
      }
      if (past) {
        std::memcpy(kh, pastp + ((0 * batch + b) * heads + n) * past * hv, sizeof(float) * past * hv);
        std::memcpy(vh, pastp + ((1 * batch + b) * heads + n) * past * hv, sizeof(float) * past * hv);
      }
      for (int64_t s = 0; s < seq; ++s) {
        const float* row = qkv.data() + (b * seq + s) * dtot;
        std::memcpy(kh + (past + s) * hq, row + dq + n * hq, sizeof(float) * hq);
        std::memcpy(vh + (past + s) * hv, row + dq + dk + n * hv, sizeof(float) * hv);
      }
      cpu::HeadAttention h;
      if (masked) {
        if (mask_batch != b) {
          maskbuf.resize(static_cast<size_t>(seq * total));
          cpu::MaskRows(mask, g_.mask_filter, g_.unidirectional, b, batch, seq, past, total, maskbuf.data());
          mask_batch = b;
        }
        h.mask = maskbuf.data();
      }
      h.q = qkv.data() + b * seq * dtot + n * hq;  // row stride dtot
      h.ldq = dtot;
      h.k = kh;
      h.v = vh;
      h.out = yp + b * seq * dv + n * hv;  // row stride dv
      h.ldo = dv;
      h.seq = seq;
      h.total = total;
      h.hq = hq;
      h.hv = hv;
      h.scale = scale;
      if (ab) h.bias = cpu::AttentionBiasHead(*ab, b, n);
      if (!cpu::AttendHead(h, scores.data(), reference_)) {
        gemm_failed.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  return cpu::RunHeads(ctx, stop, gemm_failed, batch * heads, task);
}

Result<std::unique_ptr<OpKernel>> MakeMsAttention(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  Geometry g;
  g.heads = node.GetInt("num_heads", 0);
  if (!node.HasAttr("num_heads") || g.heads <= 0)
    return InvalidModel(node.Describe(), ": num_heads must be set and positive, got ", g.heads);
  if (node.GetInt("do_rotary", 0) != 0)
    return Unsupported(node.Describe(), ": do_rotary is not supported (as in ONNX Runtime's CPU kernel)");
  if (node.GetInt("past_present_share_buffer", 0) != 0)
    return Unsupported(node.Describe(), ": past_present_share_buffer is not supported");
  g.unidirectional = node.GetInt("unidirectional", 0) != 0;
  g.scale = node.GetFloat("scale", 0.0f);
  g.mask_filter = node.GetFloat("mask_filter_value", -10000.0f);
  if (!std::isfinite(g.scale) || std::isnan(g.mask_filter))
    return InvalidModel(node.Describe(), ": scale must be finite and mask_filter_value not NaN");
  if (node.HasAttr("qkv_hidden_sizes")) {
    const std::vector<int64_t> s = node.GetInts("qkv_hidden_sizes");
    if (s.size() != 3 || s[0] <= 0 || s[1] != s[0] || s[2] <= 0 || s[0] % g.heads || s[2] % g.heads)
      return InvalidModel(node.Describe(), ": qkv_hidden_sizes must be 3 positive sizes, Q's equal to K's, each a ",
                          "multiple of num_heads ", g.heads);
    g.dq = s[0];
    g.dk = s[1];
    g.dv = s[2];
  }
  if (init.has_input(4) && init.has_input(5))
    return InvalidModel(node.Describe(), ": past and attention_bias cannot be used together");
  reference = reference || !sgemm::Available();
  auto k = std::make_unique<MsAttentionKernel>(g, reference);
  const Tensor* w = init.constant_input(1);
  if (!reference && w && w->dtype() == DataType::kFloat && w->rank() == 2)
    RETURN_IF_ERROR(k->PackWeights(node, *w, init.pool));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

void RegisterMsAttentionKernels(KernelRegistry& r) { cpu::RegisterRefAndSgemm(r, "Attention", MakeMsAttention); }

}  // namespace strata
