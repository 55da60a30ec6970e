#version 450
// LayerNormalization over the last `len` elements of each row; one workgroup per row.
// Two passes (mean, then centred variance) for accuracy.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) readonly buffer SBuf { float scale[]; };
layout(std430, binding = 2) readonly buffer BBuf { float bias[]; };
layout(std430, binding = 3) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Params {
  uint rows, len, hasScale, hasBias;
  float eps;
} p;
shared float red[256];

float Reduce(float v) {
  const uint lid = gl_LocalInvocationID.x;
  red[lid] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;
  const uint lid = gl_LocalInvocationID.x, base = row * p.len;
  float s = 0.0;
  for (uint k = lid; k < p.len; k += 256u) s += x[base + k];
  const float mean = Reduce(s) / float(p.len);
  float q = 0.0;
  for (uint k = lid; k < p.len; k += 256u) {
    const float d = x[base + k] - mean;
    q += d * d;
  }
  const float inv = inversesqrt(Reduce(q) / float(p.len) + p.eps);
  for (uint k = lid; k < p.len; k += 256u) {
    float v = (x[base + k] - mean) * inv;
    if (p.hasScale != 0u) v *= scale[k];
    if (p.hasBias != 0u) v += bias[k];
    y[base + k] = v;
  }
}
