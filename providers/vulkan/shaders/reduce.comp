#version 450
// Sum (op 0) or mean (op 1) of each contiguous row of `len`; one workgroup per row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Params {
  uint rows, len, op;
} p;
shared float red[256];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;
  const uint lid = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint k = lid; k < p.len; k += 256u) s += x[row * p.len + k];
  red[lid] = s;
  barrier();
  for (uint st = 128u; st > 0u; st >>= 1u) {
    if (lid < st) red[lid] += red[lid + st];
    barrier();
  }
  if (lid == 0u) y[row] = p.op == 1u ? red[0] / float(p.len) : red[0];
}
