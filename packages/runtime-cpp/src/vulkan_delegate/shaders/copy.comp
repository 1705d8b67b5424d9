#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32_f32 f16_f16 f32_f16 f16_f32
// Strided copy (permute, slice, expand, cat, split, cast): push = n, sizes[6], src strides[6], src
// offset, dst strides[6], dst offset (elements).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { IN_T x[]; };
layout(std430, binding = 1) writeonly buffer Y { OUT_T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint rem = i, is = PU(13), id = PU(20);
  for (int d = 5; d >= 0; --d) {
    uint s = PU(1 + d);
    uint c = rem % s;
    rem /= s;
    is += c * PU(7 + d);
    id += c * PU(14 + d);
  }
  y[id] = OUT_T(x[is]);
}
