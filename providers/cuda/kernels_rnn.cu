// LSTM cell kernel: one time step of one direction, after the two GEMMs (input and
// recurrent projections) have been done by cuBLAS.
#include <cuda_runtime.h>

#include "cuda_kernels.h"

namespace strata_cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Clip(float v, float clip) { return clip > 0.0f ? fminf(fmaxf(v, -clip), clip) : v; }
__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// One thread per (batch row, hidden unit). Gate order is ONNX's: i, o, f, c.
__global__ void LstmCellKernel(LstmCellArgs a) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.batch * a.hidden) return;
  const int64_t b = idx / a.hidden, j = idx % a.hidden, H = a.hidden;
  const float* gx = a.gates_x + b * 4 * H;
  const float* gh = a.gates_h + b * 4 * H;
  float pre[4];
  for (int g = 0; g < 4; ++g) {
    float v = gx[g * H + j] + gh[g * H + j];
    if (a.bias) v += a.bias[g * H + j] + a.bias[4 * H + g * H + j];
    pre[g] = v;
  }
  const float c_prev = a.c[idx];
  float pi = pre[0], pf = pre[2];
  if (a.peephole) {
    pi += a.peephole[j] * c_prev;
    pf += a.peephole[2 * H + j] * c_prev;
  }
  const float i = Sigmoid(Clip(pi, a.clip));
  const float f = a.input_forget ? 1.0f - i : Sigmoid(Clip(pf, a.clip));
  const float cand = tanhf(Clip(pre[3], a.clip));
  const float c = f * c_prev + i * cand;
  float po = pre[1];
  if (a.peephole) po += a.peephole[H + j] * c;
  const float o = Sigmoid(Clip(po, a.clip));
  const float h = o * tanhf(c);
  a.c[idx] = c;
  a.h[idx] = h;
  if (a.y) a.y[idx] = h;
}

}  // namespace

cudaError_t LaunchLstmCell(const LstmCellArgs& args, cudaStream_t stream) {
  const int64_t n = args.batch * args.hidden;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  LstmCellKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace strata_cuda
