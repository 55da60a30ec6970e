#version 450
// Elementwise binary op with numpy broadcasting (rank <= 6 after the host merges dims;
// a broadcast dim has stride 0). op: 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Pow.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, binding = 2) writeonly buffer OBuf { float o[]; };
layout(push_constant) uniform Params {
  uint total, rank, op, pad;
  uint dims[6];
  uint sa[6];
  uint sb[6];
} p;

float Pow(float x, float y) {
  if (y == 0.0) return 1.0;
  if (x == 0.0) return y > 0.0 ? 0.0 : 1.0 / 0.0;
  if (x > 0.0) return exp2(y * log2(x));
  if (y != floor(y)) return uintBitsToFloat(0x7fc00000u);  // NaN, like std::pow
  const float m = exp2(y * log2(-x));
  return (mod(y, 2.0) != 0.0) ? -m : m;
}

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  uint r = gid, ia = 0u, ib = 0u;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint i = r % p.dims[d];
    r /= p.dims[d];
    ia += i * p.sa[d];
    ib += i * p.sb[d];
  }
  const float x = a[ia], y = b[ib];
  float v;
  switch (p.op) {
    case 0u: v = x + y; break;
    case 1u: v = x - y; break;
    case 2u: v = x * y; break;
    case 3u: v = x / y; break;
    default: v = Pow(x, y); break;
  }
  o[gid] = v;
}
