// com.microsoft GroupQueryAttention (the decoder attention of ONNX Runtime's LLM exports,
// onnxruntime-genai's Llama/Phi/Mistral/Qwen models), fp32, as ORT 1.30's CPU kernel:
//   query [B, S, N*H] (or packed [B, S, (N + 2 Nkv) H] with key/value absent); key/value
//   [B, S, Nkv*H]; past_key/past_value [B, Nkv, P, H]; seqlens_k [B] int32 (each batch's
//   valid total length - 1); total_sequence_length int32 (one value);
//   cos_cache/sin_cache [max_position, R/2] (do_rotary); position_ids int64 [B, >= S];
//   attention_bias [B or 1, N or 1, S, total_sequence_length]; head_sink [N]
//   -> output [B, S, N*H]; present_key/present_value [B, Nkv, max(total_sequence_length, P), H].
// Per batch b: total = seqlens_k[b] + 1; on the first prompt (S == total_sequence_length) no
// past is read and the S new keys/values land at rows [0, S); otherwise at [total - S, total)
// after the past's rows. Query s (at absolute position past + s) sees keys j <= its position
// and j < total, within the last local_window_size keys when that is > 0. Query head n reads
// key/value head n / (N / Nkv). Scores: scale Q K^T, softcap (c tanh(x / c)), + bias;
// softmax (smooth_softmax or head_sink: one more denominator term e^sink, sink 0 or
// head_sink[n]). With do_rotary, Q and the new K are rotated first (RotaryEmbedding's
// rotation; positions: position_ids, else past + s; on the first prompt position_ids[0] + s).
// Not supported (errors naming the node): the output_qk output, quantized caches and q/k
// norms (inputs past head_sink).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/status.h"
#include "cpu/attention_core.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

struct GqaAttrs {
  int64_t heads = 0, kv_heads = 0;
  float scale = 0;  // 0: 1 / sqrt(H)
  float softcap = 0;
  int64_t window = -1;  // local_window_size; <= 0: off
  bool rotary = false, interleaved = false, smooth = false;
};

// RotaryEmbedding's rotation of one head row in place (the first 2 * half dims).
void Rotate(float* x, const float* c, const float* s, int64_t half, bool interleaved) {
  for (int64_t k = 0; k < half; ++k) {
    const int64_t i0 = interleaved ? 2 * k : k, i1 = interleaved ? 2 * k + 1 : k + half;
    const float a = x[i0], b = x[i1];
    x[i0] = a * c[k] - b * s[k];
    x[i1] = b * c[k] + a * s[k];
  }
}

class GqaKernel final : public OpKernel {
 public:
  GqaKernel(GqaAttrs a, bool reference) : a_(a), reference_(reference) {}
  const char* ImplName() const override { return reference_ ? "ref" : "avx512"; }
  Status Compute(KernelContext& ctx) const override;

 private:
  GqaAttrs a_;
  bool reference_;
};

Status GqaKernel::Compute(KernelContext& ctx) const {
  const Node& node = ctx.node();
  auto in = [&](size_t i) { return ctx.input(i); };
  const Tensor* q = in(0);
  const Tensor* k = in(1);
  const Tensor* v = in(2);
  const Tensor* past_k = in(3);
  const Tensor* past_v = in(4);
  const Tensor* seqlens = in(5);
  const Tensor* total_t = in(6);
  const Tensor* cos = in(7);
  const Tensor* sin = in(8);
  const Tensor* pos_ids = in(9);
  const Tensor* ab = in(10);
  const Tensor* sink = in(11);
  for (size_t i = 12; i < ctx.num_inputs(); ++i)
    if (in(i)) return Unsupported(node.Describe(), ": input ", i, " (quantized caches, q/k norms) is not supported");
  if (ctx.output_requested(3)) return Unsupported(node.Describe(), ": the output_qk output is not supported");
  if (!q || !seqlens || !total_t)
    return InvalidArgument(node.Describe(), ": query, seqlens_k and total_sequence_length are required");
  const std::pair<const Tensor*, const char*> floats[] = {
      {q, "query"},       {k, "key"},         {v, "value"},           {past_k, "past_key"}, {past_v, "past_value"},
      {cos, "cos_cache"}, {sin, "sin_cache"}, {ab, "attention_bias"}, {sink, "head_sink"}};
  for (const auto& [t, what] : floats)
    if (t && t->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": ", what, " must be float32, got ", DataTypeName(t->dtype()));
  const int64_t heads = a_.heads, kvh = a_.kv_heads, group = heads / kvh;
  if (q->rank() != 3)
    return InvalidArgument(node.Describe(), ": query must be 3-D [batch, sequence, hidden], got ",
                           ShapeToString(q->shape()));
  const int64_t batch = q->dim(0), seq = q->dim(1);
  if ((k == nullptr) != (v == nullptr))
    return InvalidArgument(node.Describe(), ": key and value must be given together");
  const bool packed = k == nullptr;
  const int64_t qw = q->dim(2), per_token_heads = packed ? heads + 2 * kvh : heads;
  if (qw % per_token_heads)
    return InvalidArgument(node.Describe(), ": query hidden ", qw, " is not a multiple of ", per_token_heads,
                           packed ? " (num_heads + 2 kv_num_heads: packed QKV)" : " (num_heads)");
  const int64_t h = qw / per_token_heads;
  if (!packed && (k->shape() != Shape{batch, seq, kvh * h} || v->shape() != k->shape()))
    return InvalidArgument(node.Describe(), ": key and value must be [", batch, ", ", seq, ", ", kvh * h, "], got ",
                           ShapeToString(k->shape()), " and ", ShapeToString(v->shape()));
  if ((past_k == nullptr) != (past_v == nullptr))
    return InvalidArgument(node.Describe(), ": past_key and past_value must be given together");
  const int64_t past_len = past_k ? (past_k->rank() == 4 ? past_k->dim(2) : -1) : 0;
  if (past_k && (past_k->shape() != Shape{batch, kvh, past_len, h} || past_v->shape() != past_k->shape()))
    return InvalidArgument(node.Describe(), ": past_key and past_value must be [", batch, ", ", kvh, ", past, ", h,
                           "], got ", ShapeToString(past_k->shape()), " and ", ShapeToString(past_v->shape()));
  if (seqlens->dtype() != DataType::kInt32 || seqlens->shape() != Shape{batch})
    return InvalidArgument(node.Describe(), ": seqlens_k must be int32 [", batch, "], got ",
                           DataTypeName(seqlens->dtype()), " ", ShapeToString(seqlens->shape()));
  if (total_t->dtype() != DataType::kInt32 || total_t->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": total_sequence_length must be one int32 value, got ",
                           DataTypeName(total_t->dtype()), " ", ShapeToString(total_t->shape()));
  const int64_t total_len = total_t->data<int32_t>()[0];
  if (total_len < 1) return InvalidArgument(node.Describe(), ": total_sequence_length ", total_len, " must be >= 1");
  const bool first = seq == total_len;
  if (!first && seq > 1 && batch != 1)
    return InvalidArgument(node.Describe(), ": batch must be 1 when a prompt of ", seq,
                           " tokens follows past context (total_sequence_length ", total_len, ")");
  const int64_t present_len = std::max(total_len, past_len);
  // Per batch: valid total length and past length, checked against the buffers.
  const int32_t* sl = seqlens->data<int32_t>();
  std::vector<int64_t> totals(static_cast<size_t>(batch)), pasts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t t = static_cast<int64_t>(sl[b]) + 1;
    if (t < 1 || t > present_len)
      return InvalidArgument(node.Describe(), ": seqlens_k[", b, "] = ", sl[b], " must be in [0, ", present_len, ")");
    if (first && t > seq)
      return InvalidArgument(node.Describe(), ": seqlens_k[", b, "] = ", sl[b], " exceeds the prompt's ", seq,
                             " tokens");
    const int64_t p = first ? 0 : t - seq;
    if (p < 0)
      return InvalidArgument(node.Describe(), ": seqlens_k[", b, "] + 1 = ", t, " is below the ", seq, " new tokens");
    if (p > past_len)
      return InvalidArgument(node.Describe(), ": batch ", b, " needs ", p, " past tokens but past_key holds ",
                             past_len);
    if (ab && t > total_len)
      return InvalidArgument(node.Describe(), ": seqlens_k[", b, "] + 1 = ", t, " exceeds total_sequence_length ",
                             total_len, " (attention_bias's last dim)");
    totals[b] = t;
    pasts[b] = p;
  }
  // Rotary: caches [max_position, R/2], R <= H.
  int64_t half = 0;
  if (a_.rotary) {
    if (!cos || !sin) return InvalidArgument(node.Describe(), ": do_rotary needs cos_cache and sin_cache");
    if (cos->rank() != 2 || cos->shape() != sin->shape() || 2 * cos->dim(1) > h)
      return InvalidArgument(node.Describe(), ": cos_cache and sin_cache must be 2-D of one shape [max_position, R/2] ",
                             "with R <= head size ", h, ", got ", ShapeToString(cos->shape()), " and ",
                             ShapeToString(sin->shape()));
    half = cos->dim(1);
  }
  if (pos_ids && (pos_ids->dtype() != DataType::kInt64 || pos_ids->rank() != 2 || pos_ids->dim(0) != batch ||
                  pos_ids->dim(1) < seq))
    return InvalidArgument(node.Describe(), ": position_ids must be int64 [", batch, ", >= ", seq, "], got ",
                           DataTypeName(pos_ids->dtype()), " ", ShapeToString(pos_ids->shape()));
  // Position of token s of batch b (rotary only).
  auto position = [&](int64_t b, int64_t s) -> int64_t {
    const int64_t* pp = pos_ids ? pos_ids->data<int64_t>() : nullptr;
    if (first) return (pp ? pp[0] : 0) + s;
    return pp ? pp[b * pos_ids->dim(1) + s] : pasts[b] + s;
  };
  if (a_.rotary)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t p = position(b, s);
        if (p < 0 || p >= cos->dim(0))
          return InvalidArgument(node.Describe(), ": position ", p, " of batch ", b, ", token ", s,
                                 " is outside the rotary cache's ", cos->dim(0), " positions");
      }
  RETURN_IF_ERROR(cpu::CheckAttentionBias(node, ab, batch, heads, seq, total_len));
  if (sink && sink->shape() != Shape{heads})
    return InvalidArgument(node.Describe(), ": head_sink must be [", heads, "], got ", ShapeToString(sink->shape()));

  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {batch, seq, heads * h}));
  // Present K/V (or scratch of the same layout when they are not requested).
  ASSIGN_OR_RETURN(const int64_t cache_n,
                   CheckedNumElements({batch, kvh, present_len, h}, "GroupQueryAttention cache"));
  std::vector<float> kscratch, vscratch;
  float* kc = nullptr;
  float* vc = nullptr;
  if (ctx.output_requested(1)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(1, DataType::kFloat, {batch, kvh, present_len, h}));
    kc = t->mutable_data<float>();
  } else {
    kscratch.resize(static_cast<size_t>(cache_n));
    kc = kscratch.data();
  }
  if (ctx.output_requested(2)) {
    ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(2, DataType::kFloat, {batch, kvh, present_len, h}));
    vc = t->mutable_data<float>();
  } else {
    vscratch.resize(static_cast<size_t>(cache_n));
    vc = vscratch.data();
  }
  if (cache_n == 0) return Status::Ok();  // no batch, no heads' width: nothing to attend
  const float* qp = q->data<float>();
  const float* kp = packed ? qp + heads * h : k->data<float>();  // row stride: q_ld or kvh * h
  const float* vp = packed ? qp + (heads + kvh) * h : v->data<float>();
  const int64_t q_ld = qw, kv_ld = packed ? qw : kvh * h;
  const float* cp = a_.rotary ? cos->data<float>() : nullptr;
  const float* sp = a_.rotary ? sin->data<float>() : nullptr;
  KernelStop stop(node);
  // 1. Caches, per (batch, kv head): zeros, the past's rows, then the new (rotated) rows.
  auto fill = [&](int64_t t0, int64_t t1) {
    int64_t pending = 0;
    for (int64_t t = t0; t < t1; ++t) {
      if (!stop.Continue(pending, present_len * h * 2)) return;
      const int64_t b = t / kvh, g = t % kvh;
      float* kr = kc + t * present_len * h;
      float* vr = vc + t * present_len * h;
      std::fill(kr, kr + present_len * h, 0.0f);
      std::fill(vr, vr + present_len * h, 0.0f);
      if (!first && pasts[b] > 0) {
        std::memcpy(kr, past_k->data<float>() + t * past_len * h, sizeof(float) * pasts[b] * h);
        std::memcpy(vr, past_v->data<float>() + t * past_len * h, sizeof(float) * pasts[b] * h);
      }
      for (int64_t s = 0; s < seq; ++s) {
        float* kd = kr + (pasts[b] + s) * h;
        std::memcpy(kd, kp + (b * seq + s) * kv_ld + g * h, sizeof(float) * h);
        std::memcpy(vr + (pasts[b] + s) * h, vp + (b * seq + s) * kv_ld + g * h, sizeof(float) * h);
        if (a_.rotary) Rotate(kd, cp + position(b, s) * half, sp + position(b, s) * half, half, a_.interleaved);
      }
    }
  };
  if (ctx.pool() && ctx.pool()->num_threads() > 1)
    ctx.pool()->ParallelFor(batch * kvh, 1, fill);
  else
    fill(0, batch * kvh);
  RETURN_IF_ERROR(stop.status());
  if (seq == 0 || h == 0) return Status::Ok();
  // 2. Attention per (batch, query head) on the shared core.
  const float scale = a_.scale != 0.0f ? a_.scale : 1.0f / std::sqrt(static_cast<float>(h));
  const float zero_sink = 0.0f;
  const float lowest = std::numeric_limits<float>::lowest();
  float* yp = y->mutable_data<float>();
  std::atomic<bool> gemm_failed{false};
  auto attend = [&](int64_t t0, int64_t t1) {
    std::vector<float> qbuf(static_cast<size_t>(seq * h)), scores, mask;
    int64_t pending = 0, mask_batch = -1;  // mask holds the rows of this batch
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / heads, n = t % heads, g = n / group, total = totals[b], past = pasts[b];
      if (!stop.Continue(pending, seq * total * 2 * h)) return;
      for (int64_t s = 0; s < seq; ++s) {
        float* qr = qbuf.data() + s * h;
        std::memcpy(qr, qp + (b * seq + s) * q_ld + n * h, sizeof(float) * h);
        if (a_.rotary) Rotate(qr, cp + position(b, s) * half, sp + position(b, s) * half, half, a_.interleaved);
      }
      scores.resize(static_cast<size_t>(seq * total));
      if (mask_batch != b) {  // the causal / window mask depends on the batch only
        mask.resize(static_cast<size_t>(seq * total));
        for (int64_t s = 0; s < seq; ++s) {
          const int64_t qpos = past + s;
          const int64_t hi = std::min(qpos, total - 1);
          const int64_t lo = a_.window > 0 ? std::max<int64_t>(0, qpos - a_.window + 1) : 0;
          for (int64_t j = 0; j < total; ++j) mask[s * total + j] = j >= lo && j <= hi ? 0.0f : lowest;
        }
        mask_batch = b;
      }
      cpu::HeadAttention ha;
      ha.q = qbuf.data();
      ha.ldq = h;
      ha.k = kc + (b * kvh + g) * present_len * h;
      ha.v = vc + (b * kvh + g) * present_len * h;
      ha.out = yp + b * seq * heads * h + n * h;  // row stride heads * h
      ha.ldo = heads * h;
      ha.seq = seq;
      ha.total = total;
      ha.hq = ha.hv = h;
      ha.scale = scale;
      ha.softcap = a_.softcap;
      ha.mask = mask.data();
      if (ab) {
        ha.bias = cpu::AttentionBiasHead(*ab, b, n);
        ha.ld_bias = total_len;
      }
      if (sink)
        ha.sink = sink->data<float>() + n;
      else if (a_.smooth)
        ha.sink = &zero_sink;
      if (!cpu::AttendHead(ha, scores.data(), reference_)) {
        gemm_failed.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  return cpu::RunHeads(ctx, stop, gemm_failed, batch * heads, attend);
}

Result<std::unique_ptr<OpKernel>> MakeGqa(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  GqaAttrs a;
  a.heads = node.GetInt("num_heads", 0);
  a.kv_heads = node.GetInt("kv_num_heads", 0);
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads)
    return InvalidModel(node.Describe(), ": num_heads (", a.heads, ") and kv_num_heads (", a.kv_heads,
                        ") must be positive, num_heads a multiple of kv_num_heads");
  a.scale = node.GetFloat("scale", 0.0f);
  a.softcap = node.GetFloat("softcap", 0.0f);
  a.window = node.GetInt("local_window_size", -1);
  a.rotary = node.GetInt("do_rotary", 0) != 0;
  a.interleaved = node.GetInt("rotary_interleaved", 0) != 0;
  a.smooth = node.GetInt("smooth_softmax", 0) != 0;
  if (!std::isfinite(a.scale) || !std::isfinite(a.softcap) || a.softcap < 0)
    return InvalidModel(node.Describe(), ": scale must be finite and softcap finite and >= 0");
  if (node.GetInt("qk_output", 0) != 0) return Unsupported(node.Describe(), ": qk_output is not supported");
  return std::unique_ptr<OpKernel>(std::make_unique<GqaKernel>(a, reference || !sgemm::Available()));
}

}  // namespace

void RegisterMsGqaKernels(KernelRegistry& r) { cpu::RegisterRefAndSgemm(r, "GroupQueryAttention", MakeGqa); }

}  // namespace strata
