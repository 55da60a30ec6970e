// com.microsoft MultiHeadAttention (ONNX Runtime's attention on separate, already projected
// Q, K and V: its transformer optimizer writes it for ViT/CLIP/Whisper/SAM-style models,
// decoders with a KV cache, and cross-attention), fp32, as ORT's CPU kernel:
//   query [B, S, D]; key/value [B, L, D] / [B, L, Dv], or [B, N, L, H] each (BNSH, a cached
//   cross-attention K/V: bias not added); bias [D + D + Dv]? (Q, K, V parts);
//   key_padding_mask [B] (lengths), [B, T] or [B, S, T] (raw, > 0 keeps);
//   attention_bias [B or 1, N or 1, S, T]; past_key/past_value [B, N, P, H] (self-attention)
//   -> output [B, S, Dv], present_key/present_value [B, N, T, H] (T = P + L).
//   probs = Softmax(mask + scale * Q K^T + attention_bias), out = probs V per head.
// Not supported (errors naming the node): packed QKV/KV inputs (ORT's CPU kernel rejects
// them too), past_sequence_length/cache_indirection (shared-buffer and beam-search
// decoding), the qk output.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/status.h"
#include "cpu/attention_core.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

struct MhaAttrs {
  int64_t heads = 0;
  float scale = 0;  // 0: 1 / sqrt(head size)
  float mask_filter = -10000.0f;
  bool unidirectional = false;
};

Status CheckFloat(const Node& node, const Tensor* t, const char* what) {
  if (t && t->dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": ", what, " must be float32, got ", DataTypeName(t->dtype()));
  return Status::Ok();
}

class MhaKernel final : public OpKernel {
 public:
  MhaKernel(MhaAttrs a, bool reference) : a_(a), reference_(reference) {}
  const char* ImplName() const override { return reference_ ? "ref" : "avx512"; }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* q = ctx.input(0);
    const Tensor* k = ctx.input(1);
    const Tensor* v = ctx.input(2);
    const Tensor* bias = ctx.input(3);
    const Tensor* past_k = ctx.input(6);
    const Tensor* past_v = ctx.input(7);
    if (!q) return InvalidArgument(node.Describe(), ": query is required");
    for (const auto& [t, what] :
         {std::pair{q, "query"}, std::pair{k, "key"}, std::pair{v, "value"}, std::pair{bias, "bias"},
          std::pair{past_k, "past_key"}, std::pair{past_v, "past_value"}, std::pair{ctx.input(5), "attention_bias"}})
      RETURN_IF_ERROR(CheckFloat(node, t, what));
    if (q->rank() == 5) return Unsupported(node.Describe(), ": packed QKV (a 5-D query) is not supported on the CPU");
    if (q->rank() != 3)
      return InvalidArgument(node.Describe(), ": query must be 3-D [batch, sequence, hidden], got ",
                             ShapeToString(q->shape()));
    if (k && k->rank() == 5) return Unsupported(node.Describe(), ": packed KV (a 5-D key) is not supported on the CPU");
    if (!k || !v)
      return InvalidArgument(node.Describe(), ": key and value are required (both or neither is not allowed)");
    const int64_t heads = a_.heads, batch = q->dim(0), seq = q->dim(1), d = q->dim(2);
    if (d % heads)
      return InvalidArgument(node.Describe(), ": query hidden size ", d, " is not a multiple of num_heads ", heads);
    const int64_t h = d / heads;
    const bool bnsh = k->rank() == 4;
    int64_t kv_len = 0, dv = 0;
    if (bnsh) {
      if (k->shape() != Shape{batch, heads, k->dim(2), h} || v->shape() != k->shape())
        return InvalidArgument(node.Describe(), ": 4-D key and value must both be [", batch, ", ", heads,
                               ", kv_length, ", h, "], got key ", ShapeToString(k->shape()), " and value ",
                               ShapeToString(v->shape()));
      kv_len = k->dim(2);
      dv = d;
    } else {
      if (k->rank() != 3 || v->rank() != 3 || k->dim(0) != batch || k->dim(2) != d || v->dim(0) != batch ||
          v->dim(1) != k->dim(1))
        return InvalidArgument(node.Describe(), ": key must be [", batch, ", kv_length, ", d,
                               "] and value [batch, kv_length, v_hidden] (or both 4-D), got key ",
                               ShapeToString(k->shape()), " and value ", ShapeToString(v->shape()));
      kv_len = k->dim(1);
      dv = v->dim(2);
      if (dv % heads)
        return InvalidArgument(node.Describe(), ": value hidden size ", dv, " is not a multiple of num_heads ", heads);
    }
    const int64_t hv = dv / heads;
    if (bias && (bias->rank() != 1 || bias->dim(0) != 2 * d + dv))
      return InvalidArgument(node.Describe(), ": bias must be [", 2 * d + dv, "] (q + k + v hidden), got ",
                             ShapeToString(bias->shape()));
    if ((past_k == nullptr) != (past_v == nullptr))
      return InvalidArgument(node.Describe(), ": past_key and past_value must be given together");
    int64_t past = 0;
    if (past_k) {
      if (bnsh)
        return InvalidArgument(node.Describe(), ": past_key/past_value need 3-D key and value (self-attention)");
      past = past_k->rank() == 4 ? past_k->dim(2) : -1;
      if (past_k->shape() != Shape{batch, heads, past, h} || past_v->shape() != Shape{batch, heads, past, hv})
        return InvalidArgument(node.Describe(), ": past_key must be [", batch, ", ", heads, ", past_length, ", h,
                               "] and past_value [", batch, ", ", heads, ", past_length, ", hv, "], got ",
                               ShapeToString(past_k->shape()), " and ", ShapeToString(past_v->shape()));
    }
    if (ctx.input(8) || ctx.input(9))
      return Unsupported(node.Describe(), ": past_sequence_length and cache_indirection are not supported");
    if (ctx.output_requested(3)) return Unsupported(node.Describe(), ": the qk output is not supported");
    if (past > std::numeric_limits<int64_t>::max() - kv_len)
      return InvalidArgument(node.Describe(), ": past length ", past, " + key length ", kv_len, " overflows");
    const int64_t total = past + kv_len;
    ASSIGN_OR_RETURN(cpu::KeyMask mask,
                     cpu::ReadKeyMask(node, ctx.input(4), "key_padding_mask", batch, seq, total, false));
    const Tensor* ab = ctx.input(5);
    RETURN_IF_ERROR(cpu::CheckAttentionBias(node, ab, batch, heads, seq, total));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {batch, seq, dv}));
    float* present_k = nullptr;
    float* present_v = nullptr;
    int64_t present_n = 0;
    if (ctx.output_requested(1)) {
      ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(1, DataType::kFloat, {batch, heads, total, h}));
      present_k = t->mutable_data<float>();
      present_n += t->num_elements();
    }
    if (ctx.output_requested(2)) {
      ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(2, DataType::kFloat, {batch, heads, total, hv}));
      present_v = t->mutable_data<float>();
      present_n += t->num_elements();
    }
    // The loops below run batch x heads tasks: bounded by y's memory when there is something
    // to attend (heads <= dv), else by the present outputs'. With neither (no queries or
    // zero-width heads, and empty presents) num_heads and the lengths are bounded by no
    // tensor's memory, so nothing may loop over them.
    ASSIGN_OR_RETURN(const int64_t tokens, CheckedNumElements({batch, seq}, "MultiHeadAttention query tokens"));
    const bool attend = tokens > 0 && hv > 0;
    if (!attend && present_n == 0) return Status::Ok();
    ASSIGN_OR_RETURN(const int64_t scores_n, CheckedNumElements({seq, total}, "MultiHeadAttention scores"));
    const float scale = a_.scale != 0.0f ? a_.scale : 1.0f / std::sqrt(static_cast<float>(h));
    const float* qp = q->data<float>();
    const float* kp = k->data<float>();
    const float* vp = v->data<float>();
    const float* bq = bias ? bias->data<float>() : nullptr;
    const float* bk = bias && !bnsh ? bq + d : nullptr;
    const float* bvp = bias && !bnsh ? bq + 2 * d : nullptr;
    float* yp = y->mutable_data<float>();
    const bool masked = mask.kind != cpu::KeyMask::kNone || (a_.unidirectional && seq > 1);
    KernelStop stop(node);
    std::atomic<bool> gemm_failed{false};  // cannot happen for the checked sizes; reported, not ignored
    // One task per (batch, head): its keys/values [T, head] (into present when requested),
    // its queries with bias [S, H], then the shared per-head core.
    auto task = [&](int64_t t0, int64_t t1) {
      std::vector<float> kbuf, vbuf, qbuf, scores, maskbuf;
      int64_t pending = 0, mask_batch = -1;  // maskbuf holds the rows of this batch
      for (int64_t t = t0; t < t1; ++t) {
        if (!stop.Continue(pending, total * (h + hv) + (attend ? scores_n * (h + hv) : 0))) return;
        const int64_t b = t / heads, n = t % heads;
        float* kh = present_k ? present_k + (b * heads + n) * total * h : nullptr;
        float* vh = present_v ? present_v + (b * heads + n) * total * hv : nullptr;
        if (!kh) {
          kbuf.resize(static_cast<size_t>(total * h));
          kh = kbuf.data();
        }
        if (!vh) {
          vbuf.resize(static_cast<size_t>(total * hv));
          vh = vbuf.data();
        }
        if (past) {
          std::memcpy(kh, past_k->data<float>() + (b * heads + n) * past * h, sizeof(float) * past * h);
          std::memcpy(vh, past_v->data<float>() + (b * heads + n) * past * hv, sizeof(float) * past * hv);
        }
        for (int64_t l = 0; l < kv_len; ++l) {
          float* kr = kh + (past + l) * h;
          float* vr = vh + (past + l) * hv;
          if (bnsh) {
            std::memcpy(kr, kp + ((b * heads + n) * kv_len + l) * h, sizeof(float) * h);
            std::memcpy(vr, vp + ((b * heads + n) * kv_len + l) * hv, sizeof(float) * hv);
            continue;
          }
          const float* ks = kp + (b * kv_len + l) * d + n * h;
          const float* vs = vp + (b * kv_len + l) * dv + n * hv;
          for (int64_t e = 0; e < h; ++e) kr[e] = bk ? ks[e] + bk[n * h + e] : ks[e];
          for (int64_t e = 0; e < hv; ++e) vr[e] = bvp ? vs[e] + bvp[n * hv + e] : vs[e];
        }
        if (!attend) continue;
        qbuf.resize(static_cast<size_t>(seq * h));
        for (int64_t s = 0; s < seq; ++s) {
          const float* qs = qp + (b * seq + s) * d + n * h;
          for (int64_t e = 0; e < h; ++e) qbuf[s * h + e] = bq ? qs[e] + bq[n * h + e] : qs[e];
        }
        scores.resize(static_cast<size_t>(scores_n));
        cpu::HeadAttention ha;
        if (masked) {
          if (mask_batch != b) {
            maskbuf.resize(static_cast<size_t>(scores_n));
            cpu::MaskRows(mask, a_.mask_filter, a_.unidirectional, b, batch, seq, past, total, maskbuf.data());
            mask_batch = b;
          }
          ha.mask = maskbuf.data();
        }
        ha.q = qbuf.data();
        ha.ldq = h;
        ha.k = kh;
        ha.v = vh;
        ha.out = yp + b * seq * dv + n * hv;  // row stride dv: heads merged
        ha.ldo = dv;
        ha.seq = seq;
        ha.total = total;
        ha.hq = h;
        ha.hv = hv;
        ha.scale = scale;
        if (ab) ha.bias = cpu::AttentionBiasHead(*ab, b, n);
        if (!cpu::AttendHead(ha, scores.data(), reference_)) {
          gemm_failed.store(true, std::memory_order_relaxed);
          return;
        }
      }
    };
    return cpu::RunHeads(ctx, stop, gemm_failed, batch * heads, task);
  }

 private:
  MhaAttrs a_;
  bool reference_;
};

Result<std::unique_ptr<OpKernel>> MakeMha(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  MhaAttrs a;
  a.heads = node.GetInt("num_heads", 0);
  if (!node.HasAttr("num_heads") || a.heads <= 0)
    return InvalidModel(node.Describe(), ": num_heads must be set and positive, got ", a.heads);
  a.scale = node.GetFloat("scale", 0.0f);
  a.mask_filter = node.GetFloat("mask_filter_value", -10000.0f);
  a.unidirectional = node.GetInt("unidirectional", 0) != 0;
  if (!std::isfinite(a.scale) || std::isnan(a.mask_filter))
    return InvalidModel(node.Describe(), ": scale must be finite and mask_filter_value not NaN");
  return std::unique_ptr<OpKernel>(std::make_unique<MhaKernel>(a, reference || !sgemm::Available()));
}

}  // namespace

void RegisterMsMhaKernels(KernelRegistry& r) { cpu::RegisterRefAndSgemm(r, "MultiHeadAttention", MakeMha); }

}  // namespace strata
