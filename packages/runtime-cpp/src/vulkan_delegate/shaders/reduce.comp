#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Reduce the middle of [outer, red, inner]: push = op (0 sum, 1 mean, 2 max, 3 min), outer, red, inner.
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
  float acc = op == 2 ? -1.0 / 0.0 : (op == 3 ? 1.0 / 0.0 : 0.0);
  for (uint r = 0; r < red; ++r) {
    float v = float(x[base + r * inner]);
    acc = op == 2 ? max(acc, v) : (op == 3 ? min(acc, v) : acc + v);
  }
  y[i] = T(op == 1 ? acc / float(red) : acc);
}
