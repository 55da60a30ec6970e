#version 450
// im2col for 2-D convolution: col[n][c][kh][kw][oh*OW+ow] = x[n][c][ih][iw] (0 outside).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer ColBuf { float col[]; };
layout(push_constant) uniform Params {
  uint total, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
} p;

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  const uint ohw = p.OH * p.OW;
  const uint pix = gid % ohw;
  uint r = gid / ohw;
  const uint kw = r % p.KW;
  r /= p.KW;
  const uint kh = r % p.KH;
  const uint nc = r / p.KH;  // n * C + c
  const int ih = int((pix / p.OW) * p.sh + kh * p.dh) - int(p.ph);
  const int iw = int((pix % p.OW) * p.sw + kw * p.dw) - int(p.pw);
  float v = 0.0;
  if (ih >= 0 && ih < int(p.H) && iw >= 0 && iw < int(p.W)) v = x[(nc * p.H + uint(ih)) * p.W + uint(iw)];
  col[gid] = v;
}
