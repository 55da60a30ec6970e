#version 450
// Softmax over `len` elements spaced `inner` apart; one workgroup per (outer, inner) row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Params {
  uint rows, len, inner;
} p;
shared float red[256];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;  // uniform per workgroup
  const uint lid = gl_LocalInvocationID.x;
  const uint base = (row / p.inner) * p.len * p.inner + row % p.inner;
  float m = uintBitsToFloat(0xff800000u);  // -inf
  for (uint k = lid; k < p.len; k += 256u) m = max(m, x[base + k * p.inner]);
  red[lid] = m;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) red[lid] = max(red[lid], red[lid + s]);
    barrier();
  }
  m = red[0];
  barrier();
  float sum = 0.0;
  for (uint k = lid; k < p.len; k += 256u) sum += exp(x[base + k * p.inner] - m);
  red[lid] = sum;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  const float inv = 1.0 / red[0];
  for (uint k = lid; k < p.len; k += 256u) y[base + k * p.inner] = exp(x[base + k * p.inner] - m) * inv;
}
