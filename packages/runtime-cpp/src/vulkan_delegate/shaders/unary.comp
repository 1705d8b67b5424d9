#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// y = f(x; alpha, beta): push = op, n, alpha, beta (op codes: opcodes.glsl)
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

float erf_approx(float v) {  // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
  float s = sign(v), t = 1.0 / (1.0 + 0.3275911 * abs(v));
  float e = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
            * exp(-v * v);
  return s * e;
}

void main() {
  uint i = linear_id();
  if (i >= PU(1)) return;
  float v = float(x[i]), a = PF(2), b = PF(3), r;
  switch (PI(0)) {
    case UNARY_AFFINE: r = a * v + b; break;
    case UNARY_CLAMP: r = clamp(v, a, b); break;
    case UNARY_SIGMOID: r = 1.0 / (1.0 + exp(-v)); break;
    case UNARY_TANH: r = tanh(clamp(v, -15.0, 15.0)); break;
    case UNARY_GELU: r = 0.5 * v * (1.0 + erf_approx(v * 0.7071067811865476)); break;
    case UNARY_GELU_TANH:
      r = 0.5 * v * (1.0 + tanh(clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0)));
      break;
    case UNARY_SILU: r = v / (1.0 + exp(-v)); break;
    case UNARY_HARDSWISH: r = v * clamp(v + 3.0, 0.0, 6.0) / 6.0; break;
    case UNARY_HARDSIGMOID: r = clamp(v + 3.0, 0.0, 6.0) / 6.0; break;
    case UNARY_EXP: r = exp(v); break;
    case UNARY_RSQRT: r = inversesqrt(v); break;
    case UNARY_SQRT: r = sqrt(v); break;
    case UNARY_POW: r = pow_signed(v, a); break;
    case UNARY_ABS: r = abs(v); break;
    case UNARY_LOG: r = log(v); break;
    case UNARY_RECIPROCAL: r = 1.0 / v; break;
    case UNARY_SIN: r = sin(v); break;
    case UNARY_COS: r = cos(v); break;
    case UNARY_LEAKY_RELU: r = v > 0.0 ? v : a * v; break;
    case UNARY_ROUND: r = roundEven(v); break;  // torch.round: half to even
    case UNARY_FLOOR: r = floor(v); break;
    case UNARY_CEIL: r = ceil(v); break;
    case UNARY_TRUNC: r = trunc(v); break;
    case UNARY_SIGN: r = sign(v); break;
    case UNARY_ERF: r = erf_approx(v); break;
    default: r = UNKNOWN_OP_NAN; break;
  }
  y[i] = T(r);
}
