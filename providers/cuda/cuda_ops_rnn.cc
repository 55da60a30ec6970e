// LSTM on the GPU: per direction, one cuBLAS GEMM projects the whole input sequence
// (X W^T), then each time step does one small GEMM (h R^T) and one fused cell kernel.
// Only what WhyUnsupported accepts reaches here: layout 0, default activations, no
// sequence_lens. Shapes are still checked because inputs arrive at run time.
#include <string>
#include <vector>

#include "cuda_ops.h"

namespace strata_cuda {
namespace {

std::string Dims(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t k = 0; k < s.size(); ++k) {
    if (k) r += ",";
    r += std::to_string(s[k]);
  }
  return r + "]";
}

const DTensor* Input(const CNode& n, std::vector<DTensor>& vals, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0 || !vals[n.inputs[k]].valid()) return nullptr;
  return &vals[n.inputs[k]];
}

float* Ptr(const DTensor& t) { return reinterpret_cast<float*>(t.data); }

bool Expect(RunContext* ctx, const CNode& n, const DTensor* t, const char* what, const std::vector<int64_t>& shape) {
  if (!t) return true;
  if (t->dtype != kFloat) return ctx->Fail(n, std::string(what) + " must be float32");
  if (t->shape != shape)
    return ctx->Fail(n, std::string(what) + " has shape " + Dims(t->shape) + ", expected " + Dims(shape));
  return true;
}

}  // namespace

bool RunLstm(const CNode& n, std::vector<DTensor>& vals, RunContext* ctx) {
  const DTensor* x = Input(n, vals, 0);
  const DTensor* w = Input(n, vals, 1);
  const DTensor* r = Input(n, vals, 2);
  if (!x || !w || !r || x->dtype != kFloat || w->dtype != kFloat || r->dtype != kFloat)
    return ctx->Fail(n, "X, W and R must be float32 tensors");
  if (Input(n, vals, 4)) return ctx->Fail(n, "sequence_lens is not handled by the CUDA provider");
  if (x->shape.size() != 3 || w->shape.size() != 3 || r->shape.size() != 3)
    return ctx->Fail(n,
                     "X, W and R must be 3-D, got " + Dims(x->shape) + ", " + Dims(w->shape) + ", " + Dims(r->shape));
  const std::string dir = n.Str("direction", "forward");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx->Fail(n, "direction '" + dir + "' is not forward, reverse or bidirectional");
  const int64_t S = x->shape[0], B = x->shape[1], I = x->shape[2];
  const int64_t H = n.Int("hidden_size", r->shape.size() == 3 ? r->shape[2] : 0);
  if (H <= 0) return ctx->Fail(n, "hidden_size must be positive");
  if (!Expect(ctx, n, w, "W", {dirs, 4 * H, I}) || !Expect(ctx, n, r, "R", {dirs, 4 * H, H}) ||
      !Expect(ctx, n, Input(n, vals, 3), "B", {dirs, 8 * H}) ||
      !Expect(ctx, n, Input(n, vals, 5), "initial_h", {dirs, B, H}) ||
      !Expect(ctx, n, Input(n, vals, 6), "initial_c", {dirs, B, H}) ||
      !Expect(ctx, n, Input(n, vals, 7), "P", {dirs, 3 * H}))
    return false;
  const DTensor* bias = Input(n, vals, 3);
  const DTensor* h0 = Input(n, vals, 5);
  const DTensor* c0 = Input(n, vals, 6);
  const DTensor* peep = Input(n, vals, 7);
  auto out_id = [&](size_t k) { return k < n.outputs.size() ? n.outputs[k] : -1; };

  // Outputs (allocated even when not requested: Y_h/Y_c double as the running state).
  DTensor y, yh, yc, gx, gh;
  const bool want_y = out_id(0) >= 0;
  if ((want_y && !ctx->Alloc(kFloat, {S, dirs, B, H}, &y)) || !ctx->Alloc(kFloat, {dirs, B, H}, &yh) ||
      !ctx->Alloc(kFloat, {dirs, B, H}, &yc) || !ctx->Alloc(kFloat, {S * B, 4 * H}, &gx) ||
      !ctx->Alloc(kFloat, {B, 4 * H}, &gh))
    return false;
  cudaStream_t stream = ctx->slot->stream;
  const size_t state_bytes = static_cast<size_t>(dirs * B * H) * sizeof(float);
  if (!ctx->Cuda(h0 ? cudaMemcpyAsync(yh.data, h0->data, state_bytes, cudaMemcpyDeviceToDevice, stream)
                    : cudaMemsetAsync(yh.data, 0, state_bytes, stream),
                 n, "initial_h") ||
      !ctx->Cuda(c0 ? cudaMemcpyAsync(yc.data, c0->data, state_bytes, cudaMemcpyDeviceToDevice, stream)
                    : cudaMemsetAsync(yc.data, 0, state_bytes, stream),
                 n, "initial_c"))
    return false;

  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    // gates_x[S*B, 4H] = X[S*B, I] * W_d^T
    if (!Sgemm(ctx, n, false, true, S * B, 4 * H, I, 1.0f, Ptr(*x), 0, Ptr(*w) + d * 4 * H * I, 0, 0.0f, Ptr(gx), 0, 1))
      return false;
    LstmCellArgs a;
    a.bias = bias ? Ptr(*bias) + d * 8 * H : nullptr;
    a.peephole = peep ? Ptr(*peep) + d * 3 * H : nullptr;
    a.h = Ptr(yh) + d * B * H;
    a.c = Ptr(yc) + d * B * H;
    a.batch = B;
    a.hidden = H;
    a.clip = n.Float("clip", 0.0f);
    a.input_forget = n.Int("input_forget", 0) != 0;
    a.gates_h = Ptr(gh);
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      // gates_h[B, 4H] = h[B, H] * R_d^T
      if (!Sgemm(ctx, n, false, true, B, 4 * H, H, 1.0f, a.h, 0, Ptr(*r) + d * 4 * H * H, 0, 0.0f, Ptr(gh), 0, 1))
        return false;
      a.gates_x = Ptr(gx) + t * B * 4 * H;
      a.y = want_y ? Ptr(y) + (t * dirs + d) * B * H : nullptr;
      if (!ctx->Cuda(LaunchLstmCell(a, stream), n, "LSTM cell kernel")) return false;
    }
  }
  if (want_y) vals[out_id(0)] = std::move(y);
  if (out_id(1) >= 0) vals[out_id(1)] = std::move(yh);
  if (out_id(2) >= 0) vals[out_id(2)] = std::move(yc);
  return true;
}

}  // namespace strata_cuda
