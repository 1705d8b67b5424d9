#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// Constant padding (negative pads crop): y[i] = x[i - before] inside x, else value. push = n,
// out sizes[6], in sizes[6], before[6] (elements per dim, may be negative), value. Threads: n.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint rem = i, src = 0, stride = 1;
  bool inside = true;
  for (int d = 5; d >= 0; --d) {
    int s = PI(1 + d), c = int(rem % uint(s)) - PI(13 + d), in_s = PI(7 + d);
    rem /= uint(s);
    inside = inside && c >= 0 && c < in_s;
    src += uint(max(c, 0)) * stride;
    stride *= uint(in_s);
  }
  y[i] = T(inside ? VT(x[src]) : VT(PF(19)));
}
