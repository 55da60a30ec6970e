#version 450
// Gather along an axis: out[o][j][i] = data[o][idx[j]][i]. Indices are int64 (read as
// two words, little-endian) or int32; negative ones count from the end. An index out of
// range writes 0 and raises the error flag, which the host turns into an error.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer DBuf { float data[]; };
layout(std430, binding = 1) readonly buffer IBuf { uint idx[]; };
layout(std430, binding = 2) writeonly buffer OBuf { float o[]; };
layout(std430, binding = 3) buffer EBuf { uint err[]; };
layout(push_constant) uniform Params {
  uint total, axisLen, inner, nidx, idx64;
} p;

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  const uint i = gid % p.inner;
  const uint j = (gid / p.inner) % p.nidx;
  const uint outer = gid / (p.inner * p.nidx);
  int k;
  bool bad = false;
  if (p.idx64 != 0u) {
    const uint lo = idx[2u * j], hi = idx[2u * j + 1u];
    // Only values representable in 32 bits are meaningful here.
    bad = !((hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u));
    k = int(lo);
  } else {
    k = int(idx[j]);
  }
  if (k < 0) k += int(p.axisLen);
  if (bad || k < 0 || k >= int(p.axisLen)) {
    err[0] = 1u;
    o[gid] = 0.0;
    return;
  }
  o[gid] = data[(outer * p.axisLen + uint(k)) * p.inner + i];
}
