#version 450
// 2-D max (type 0) or average (type 1) pooling, one thread per output element.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Params {
  uint total, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, type, countPad, phEnd, pwEnd;
} p;

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  const uint ow = gid % p.OW, oh = (gid / p.OW) % p.OH, nc = gid / (p.OW * p.OH);
  const int h0 = int(oh * p.sh) - int(p.ph), w0 = int(ow * p.sw) - int(p.pw);
  float m = uintBitsToFloat(0xff800000u), s = 0.0;
  uint n = 0u, npad = 0u;
  for (uint kh = 0u; kh < p.KH; ++kh) {
    const int ih = h0 + int(kh * p.dh);
    for (uint kw = 0u; kw < p.KW; ++kw) {
      const int iw = w0 + int(kw * p.dw);
      // Positions inside the padded input count for count_include_pad.
      if (ih < int(p.H + p.phEnd) && iw < int(p.W + p.pwEnd)) ++npad;
      if (ih < 0 || ih >= int(p.H) || iw < 0 || iw >= int(p.W)) continue;
      const float v = x[(nc * p.H + uint(ih)) * p.W + uint(iw)];
      m = max(m, v);
      s += v;
      ++n;
    }
  }
  if (p.type == 0u) {
    y[gid] = m;
  } else {
    const uint d = p.countPad != 0u ? npad : n;
    y[gid] = d > 0u ? s / float(d) : 0.0;
  }
}
