#version 450
// Strided copy: dst[dst_off + sum(i_d * ds_d)] = src[src_off + sum(i_d * ss_d)] over an
// index space of rank <= 6. Serves Transpose, Slice (negative steps use the offset and a
// wrapped stride), Concat and realigning inputs.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer SBuf { float s[]; };
layout(std430, binding = 1) writeonly buffer DBuf { float d[]; };
layout(push_constant) uniform Params {
  uint total, rank, srcOff, dstOff;
  uint dims[6];
  int ss[6];
  uint ds[6];
} p;

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  uint r = gid, od = p.dstOff;
  int os = int(p.srcOff);
  for (int k = int(p.rank) - 1; k >= 0; --k) {
    const uint i = r % p.dims[k];
    r /= p.dims[k];
    os += int(i) * p.ss[k];
    od += i * p.ds[k];
  }
  d[od] = s[uint(os)];
}
