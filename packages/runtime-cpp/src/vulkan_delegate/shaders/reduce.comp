#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Reduce the middle of [outer, red, inner]: push = op (opcodes.glsl), outer, red, inner.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  uint outer = PU(1), red = PU(2), inner = PU(3);
  if (i >= outer * inner) return;
  uint o = i / inner, j = i % inner, base = o * red * inner + j;
  int op = PI(0);
  float acc = op == REDUCE_MAX ? -1.0 / 0.0 : (op == REDUCE_MIN ? 1.0 / 0.0 : 0.0);
  for (uint r = 0; r < red; ++r) {
    float v = float(x[base + r * inner]);
    acc = op == REDUCE_MAX ? nan_max(acc, v) : (op == REDUCE_MIN ? nan_min(acc, v) : acc + v);
  }
  if (op == REDUCE_MEAN) acc /= float(red);
  else if (op != REDUCE_SUM && op != REDUCE_MAX && op != REDUCE_MIN) acc = UNKNOWN_OP_NAN;
  y[i] = T(acc);
}
