#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// y = op(a, alpha * b) with broadcast: push = op, n, out sizes[6], a strides[6], b strides[6], alpha
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(1)) return;
  uint rem = i, ia = 0, ib = 0;
  for (int d = 5; d >= 0; --d) {
    uint s = PU(2 + d);
    uint c = rem % s;
    rem /= s;
    ia += c * PU(8 + d);
    ib += c * PU(14 + d);
  }
  float x = float(a[ia]), z = float(b[ib]);
  int op = PI(0);
  float r;
  if (op == 0) r = x + PF(20) * z;
  else if (op == 1) r = x - PF(20) * z;
  else if (op == 2) r = x * z;
  else if (op == 3) r = x / z;
  else if (op == 4) r = max(x, z);
  else if (op == 5) r = min(x, z);
  else r = pow_signed(x, z);
  y[i] = T(r);
}
