#version 450
// Elementwise unary ops. op: 0 Relu, 1 Sigmoid, 2 Tanh, 3 Erf, 4 Exp, 5 Sqrt, 6 Neg,
// 7 Clip(alpha=min, beta=max), 8 LeakyRelu(alpha), 9 Gelu (erf), 10 Gelu (tanh),
// 11 Abs, 12 Identity, 13 Reciprocal, 14 Log.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
layout(std430, binding = 1) writeonly buffer YBuf { float y[]; };
layout(push_constant) uniform Params {
  uint total, op;
  float alpha, beta;
} p;

// tanh without overflow for large |v|.
float Tanh(float v) {
  const float t = exp(-2.0 * abs(v));
  return sign(v) * (1.0 - t) / (1.0 + t);
}

// erf: Abramowitz & Stegun 7.1.26 refined (max abs error ~1.2e-7) via erfc's continued
// exponent form (Numerical Recipes erfcc), accurate to float precision.
float Erf(float v) {
  const float z = abs(v);
  const float t = 1.0 / (1.0 + 0.5 * z);
  const float r = t * exp(-z * z - 1.26551223 +
                          t * (1.00002368 +
                               t * (0.37409196 +
                                    t * (0.09678418 +
                                         t * (-0.18628806 +
                                              t * (0.27886807 +
                                                   t * (-1.13520398 +
                                                        t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return v >= 0.0 ? 1.0 - r : r - 1.0;
}

float Sigmoid(float v) {
  if (v >= 0.0) return 1.0 / (1.0 + exp(-v));
  const float e = exp(v);
  return e / (1.0 + e);
}

void main() {
  const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (gid >= p.total) return;
  const float v = x[gid];
  float r;
  switch (p.op) {
    case 0u: r = max(v, 0.0); break;
    case 1u: r = Sigmoid(v); break;
    case 2u: r = Tanh(v); break;
    case 3u: r = Erf(v); break;
    case 4u: r = exp(v); break;
    case 5u: r = sqrt(v); break;
    case 6u: r = -v; break;
    case 7u: r = min(max(v, p.alpha), p.beta); break;
    case 8u: r = v >= 0.0 ? v : p.alpha * v; break;
    case 9u: r = 0.5 * v * (1.0 + Erf(v * 0.70710678118654752)); break;
    case 10u: r = 0.5 * v * (1.0 + Tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))); break;
    case 11u: r = abs(v); break;
    case 13u: r = 1.0 / v; break;
    case 14u: r = log(v); break;
    default: r = v; break;
  }
  y[gid] = r;
}
