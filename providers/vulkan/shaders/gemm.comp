#version 450
// Batched tiled GEMM: C[b] = act(alpha * op(A[b]) * op(B[b]) + beta * Bias[b]).
// A 64x64 output tile per workgroup, 16x16 threads computing 4x4 each, K in steps of
// 16 staged through shared memory. Operands are addressed through strides, so
// transposes, broadcast batches and im2col layouts need no copies. Per-batch element
// offsets (A, B, C, Bias) come from a small buffer the host fills.
layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, binding = 2) writeonly buffer CBuf { float c[]; };
layout(std430, binding = 3) readonly buffer BiasBuf { float bias[]; };
layout(std430, binding = 4) readonly buffer OffBuf { uint off[]; };
layout(push_constant) uniform Params {
  uint M, N, K, sAm, sAk, sBk, sBn, ldc, sBiasM, sBiasN, hasBias, act;
  float alpha, beta, lo, hi;
} p;

shared float As[16][68];
shared float Bs[16][68];

void main() {
  const uint batch = gl_WorkGroupID.z;
  const uint oa = off[batch * 4u], ob = off[batch * 4u + 1u], oc = off[batch * 4u + 2u], obias = off[batch * 4u + 3u];
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint m0 = gl_WorkGroupID.y * 64u, n0 = gl_WorkGroupID.x * 64u;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (uint k0 = 0u; k0 < p.K; k0 += 16u) {
    for (uint l = 0u; l < 4u; ++l) {
      const uint e = tid + l * 256u;
      const uint mm = e >> 4u, kk = e & 15u;
      const uint gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] = (gm < p.M && gk < p.K) ? a[oa + gm * p.sAm + gk * p.sAk] : 0.0;
      const uint kb = e >> 6u, nn = e & 63u;
      const uint gkb = k0 + kb, gn = n0 + nn;
      Bs[kb][nn] = (gkb < p.K && gn < p.N) ? b[ob + gkb * p.sBk + gn * p.sBn] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < 16u; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; ++i) {
    const uint gm = m0 + ty + 16u * i;
    if (gm >= p.M) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint gn = n0 + tx + 16u * j;
      if (gn >= p.N) continue;
      float v = p.alpha * acc[i][j];
      if (p.hasBias != 0u) v += p.beta * bias[obias + gm * p.sBiasM + gn * p.sBiasN];
      if (p.act != 0u) v = min(max(v, p.lo), p.hi);
      c[oc + gm * p.ldc + gn] = v;
    }
  }
}
