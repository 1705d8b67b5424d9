#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// y = f(x; alpha, beta): push = op, n, alpha, beta (op codes: opcodes.glsl)
// Ops exact in any float type (clamp, abs, floor, ...) compute in CT (fp16 in the f16 variant); the rest
// in fp32 (the GPU's special-function units are fp32, and an fp16 exp/tanh overflows inside where the
// result would not). Ops with a scalar operand (affine, leaky_relu) and hardswish/hardsigmoid's 1/6 are
// fp32 too, rounded once at the store as torch's fp16 does: an fp16 scalar loses a small factor
// (x * 1e-7: fp16's nearest subnormal is 1.19e-7, a 19% error) and biases every output by the same
// relative amount (fp16 1/6 is 2.4e-4 low, compounding through MobileNetV3's hardswish layers).
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
  CT h = CT(x[i]), ha = CT(PF(2)), hb = CT(PF(3)), hr;
  switch (PI(0)) {  // the ops exact in CT
    case UNARY_CLAMP: hr = clamp(h, ha, hb); break;
    case UNARY_ABS: hr = abs(h); break;
    case UNARY_FLOOR: hr = floor(h); break;
    case UNARY_CEIL: hr = ceil(h); break;
    case UNARY_TRUNC: hr = trunc(h); break;
    case UNARY_SIGN: hr = sign(h); break;
    case UNARY_ROUND: hr = roundEven(h); break;  // torch.round: half to even
    default: {
      float v = float(x[i]), a = PF(2), r;
      switch (PI(0)) {
        case UNARY_AFFINE: r = a * v + PF(3); break;
        case UNARY_HARDSWISH: r = v * clamp(v + 3.0, 0.0, 6.0) / 6.0; break;
        case UNARY_HARDSIGMOID: r = clamp(v + 3.0, 0.0, 6.0) / 6.0; break;
        case UNARY_LEAKY_RELU: r = v > 0.0 ? v : a * v; break;
        case UNARY_SIGMOID: r = 1.0 / (1.0 + exp(-v)); break;
        case UNARY_TANH: r = tanh(clamp(v, -15.0, 15.0)); break;
        case UNARY_GELU: r = 0.5 * v * (1.0 + erf_approx(v * 0.7071067811865476)); break;
        case UNARY_GELU_TANH:
          r = 0.5 * v * (1.0 + tanh(clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0)));
          break;
        case UNARY_SILU: r = v / (1.0 + exp(-v)); break;
        case UNARY_EXP: r = exp(v); break;
        case UNARY_RSQRT: r = inversesqrt(v); break;
        case UNARY_SQRT: r = sqrt(v); break;
        case UNARY_POW: r = pow_signed(v, a); break;
        case UNARY_LOG: r = log(v); break;
        case UNARY_RECIPROCAL: r = 1.0 / v; break;
        case UNARY_SIN: r = sin(v); break;
        case UNARY_COS: r = cos(v); break;
        case UNARY_ERF: r = erf_approx(v); break;
        default: r = UNKNOWN_OP_NAN; break;
      }
      y[i] = T(r);
      return;
    }
  }
  y[i] = T(hr);
}
