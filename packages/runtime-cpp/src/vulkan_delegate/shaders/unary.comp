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
#include "elementwise.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(1)) return;
  CT h = CT(x[i]), ha = CT(PF(2)), hb = CT(PF(3)), hr;
  switch (PI(0)) {  // the ops exact in CT
    case UNARY_CLAMP: hr = nan_clamp(h, ha, hb); break;
    case UNARY_ABS: hr = abs(h); break;
    case UNARY_FLOOR: hr = floor(h); break;
    case UNARY_CEIL: hr = ceil(h); break;
    case UNARY_TRUNC: hr = trunc(h); break;
    case UNARY_SIGN: hr = sign(h); break;
    case UNARY_ROUND: hr = roundEven(h); break;  // torch.round: half to even
    default: {
      y[i] = T(unary_f32(PI(0), float(x[i]), PF(2), PF(3)));
      return;
    }
  }
  y[i] = T(hr);
}
