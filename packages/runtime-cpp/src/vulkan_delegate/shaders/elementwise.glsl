// The fp32 functions of the elementwise ops (op codes: opcodes.glsl), shared by unary.comp, binary.comp and
// ewise_expr.comp (a fused tree of them), so a fused op computes exactly what its own dispatch would.
#ifndef VKDG_ELEMENTWISE_GLSL
#define VKDG_ELEMENTWISE_GLSL

float erf_approx(float v) {  // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
  float s = sign(v), t = 1.0 / (1.0 + 0.3275911 * abs(v));
  float e = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
            * exp(-v * v);
  return s * e;
}

// y = f(v; a, b) for every UNARY_* code
float unary_f32(int op, float v, float a, float b) {
  switch (op) {
    case UNARY_AFFINE: return a * v + b;
    case UNARY_CLAMP: return nan_clamp(v, a, b);
    case UNARY_ABS: return abs(v);
    case UNARY_FLOOR: return floor(v);
    case UNARY_CEIL: return ceil(v);
    case UNARY_TRUNC: return trunc(v);
    case UNARY_SIGN: return sign(v);
    case UNARY_ROUND: return roundEven(v);  // torch.round: half to even
    case UNARY_HARDSWISH: return v * nan_clamp(v + 3.0, 0.0, 6.0) / 6.0;
    case UNARY_HARDSIGMOID: return nan_clamp(v + 3.0, 0.0, 6.0) / 6.0;
    case UNARY_LEAKY_RELU: return v > 0.0 ? v : a * v;
    case UNARY_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case UNARY_TANH: return tanh(nan_clamp(v, -15.0, 15.0));
    case UNARY_GELU: return 0.5 * v * (1.0 + erf_approx(v * 0.7071067811865476));
    case UNARY_GELU_TANH:
      return 0.5 * v * (1.0 + tanh(nan_clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0)));
    case UNARY_SILU: return v / (1.0 + exp(-v));
    case UNARY_EXP: return exp(v);
    case UNARY_RSQRT: return inversesqrt(v);
    case UNARY_SQRT: return sqrt(v);
    case UNARY_POW: return pow_signed(v, a);
    case UNARY_LOG: return log(v);
    case UNARY_RECIPROCAL: return 1.0 / v;
    case UNARY_SIN: return sin(v);
    case UNARY_COS: return cos(v);
    case UNARY_ERF: return erf_approx(v);
    default: return UNKNOWN_OP_NAN;
  }
}

// y = op(x, z) for every BINARY_* code (alpha is applied by the caller)
float binary_f32(int op, float x, float z) {
  switch (op) {
    case BINARY_ADD: return x + z;
    case BINARY_SUB: return x - z;
    case BINARY_MUL: return x * z;
    case BINARY_DIV: return x / z;
    case BINARY_MAXIMUM: return nan_max(x, z);
    case BINARY_MINIMUM: return nan_min(x, z);
    case BINARY_POW: return pow_signed(x, z);
    case BINARY_FMOD: {  // C fmod (sign of x); NaN for z == 0, as torch
      float r = x - z * trunc(x / z);
      // x / z rounded up to the next integer leaves r one |z| past zero, with the wrong sign
      if (x > 0.0 && r < 0.0) r += abs(z);
      if (x < 0.0 && r > 0.0) r -= abs(z);
      return r;
    }
    default: return UNKNOWN_OP_NAN;
  }
}
#endif
