#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// y = c ? a : b with broadcast (c a bool tensor: int32 0/1). push = n, out sizes[6], c strides[6],
// a strides[6], b strides[6] (elements; 0 where broadcast; a scalar operand is a 1-element constant).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer C { int c[]; };
layout(std430, binding = 1) readonly buffer A { T a[]; };
layout(std430, binding = 2) readonly buffer B { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint rem = i, ic = 0, ia = 0, ib = 0;
  for (int d = 5; d >= 0; --d) {
    uint s = PU(1 + d);
    uint k = rem % s;
    rem /= s;
    ic += k * PU(7 + d);
    ia += k * PU(13 + d);
    ib += k * PU(19 + d);
  }
  y[i] = T(c[ic] != 0 ? VT(a[ia]) : VT(b[ib]));
}
