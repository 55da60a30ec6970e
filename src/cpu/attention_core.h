// One attention head, shared by the com.microsoft Attention, MultiHeadAttention and
// GroupQueryAttention kernels (attention_contrib.cc, mha_contrib.cc, gqa_contrib.cc):
//   scores[S, T] = scale * Q K^T, softcapped (c tanh(x / c)) when c > 0, + mask[S, T]
//   (0, mask_filter_value, or the lowest float for keys a query may not see) + bias[S, T];
//   softmax over T (with a sink: e^x / (e^sink + sum e^x)); out[S, hv] = scores V.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/status.h"

namespace strata::cpu {

// ONNX Runtime's key masks (Attention's mask_index, MultiHeadAttention's key_padding_mask),
// int32: [B] end positions (keys at or after end[b] masked: right padding), [2B] ends then
// starts (keys before start[b] masked too; Attention only), [B, T] or [B, S, T] raw (a value
// > 0 keeps the key). [3B + 2] and 4-D forms are kUnsupported (as on ORT's CPU); other
// shapes, negative ends and other dtypes are kInvalidArgument naming `what`.
struct KeyMask {
  enum Kind { kNone, kEnds, kEndsStarts, kRaw2D, kRaw3D } kind = kNone;
  const int32_t* data = nullptr;
};
Result<KeyMask> ReadKeyMask(const Node& node, const Tensor* m, const char* what, int64_t batch, int64_t seq,
                            int64_t total, bool allow_starts);

// The additive mask rows of batch b's S queries over the T keys, rows[S * T]: 0 where a key
// is kept, mask_filter where the mask drops it, and with `unidirectional` (when seq > 1, as
// ORT) the lowest float for keys after query i's own position past + i. They depend on the
// batch only: the head loops rebuild them when the batch changes, not for every head.
void MaskRows(const KeyMask& m, float mask_filter, bool unidirectional, int64_t b, int64_t batch, int64_t seq,
              int64_t past, int64_t total, float* rows);

struct HeadAttention {
  const float* q = nullptr;  // [S, hq], row stride ldq
  int64_t ldq = 0;
  const float* k = nullptr;  // [T, hq], dense
  const float* v = nullptr;  // [T, hv], dense
  float* out = nullptr;      // [S, hv], row stride ldo
  int64_t ldo = 0;
  int64_t seq = 0, total = 0, hq = 0, hv = 0;
  float scale = 1.0f;
  const float* mask = nullptr;  // [S, T] additive mask, or null
  const float* bias = nullptr;  // [S, T] added to the scores before the softmax, or null
  int64_t ld_bias = 0;          // bias row stride (0: T)
  float softcap = 0;            // > 0: scores = softcap * tanh(scores / softcap) before mask and bias
  const float* sink = nullptr;  // the softmax's extra denominator term e^sink, or null
};

// attention_bias [B or 1, N or 1, S, T], float32 (broadcast over batch or heads): null is
// fine; anything else is kInvalidArgument naming the node. AttentionBiasHead: the [S, T]
// block (row stride T) of batch b, head n.
Status CheckAttentionBias(const Node& node, const Tensor* ab, int64_t batch, int64_t heads, int64_t seq, int64_t total);
const float* AttentionBiasHead(const Tensor& ab, int64_t b, int64_t n);

// Registers com.microsoft `op` twice: the reference kernel, make(init, true), and where the
// AVX-512 SGEMM runs the optimized one, make(init, false), impl "avx512". type_input -1:
// com.microsoft ops often have no inferred input types (libonnx has no schema for them), so
// the kernels check dtypes themselves.
using MakeRefOrSgemm = Result<std::unique_ptr<OpKernel>> (*)(const KernelInit& init, bool reference);
void RegisterRefAndSgemm(KernelRegistry& r, const char* op, MakeRefOrSgemm make);

// Runs task(begin, end) over the `count` (batch, head) pairs, on ctx's pool when it has more
// than one thread, then turns the outcome into the kernel's status: the run's end (`stop`:
// deadline or terminate) or a per-head SGEMM failure a task reported in `gemm_failed`.
template <typename F>
Status RunHeads(KernelContext& ctx, KernelStop& stop, const std::atomic<bool>& gemm_failed, int64_t count, F& task) {
  if (ctx.pool() && ctx.pool()->num_threads() > 1) {
    ctx.pool()->ParallelFor(count, 1, task);
  } else {
    task(0, count);
  }
  RETURN_IF_ERROR(stop.status());
  if (gemm_failed.load()) return MakeStatus(StatusCode::kInternal, ctx.node().Describe(), ": a per-head SGEMM failed");
  return Status::Ok();
}

// The reference softmax of one row in place: max-shifted exp, double sum (the test oracle's;
// also strata.internal MaskedSoftmax's reference, attention.cc).
void SoftmaxRowRef(float* row, int64_t n);

// scores: the caller's scratch of S x T floats. reference: plain loops (the test oracle;
// double sums in the softmax); otherwise the AVX-512 SGEMM and the vectorised softmax row
// (callers check sgemm::Available()). Runs on the calling thread. False only if an SGEMM
// call failed (it cannot for valid sizes).
bool AttendHead(const HeadAttention& h, float* scores, bool reference);

}  // namespace strata::cpu
