#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32_f32 f16_f16 f32_f16 f16_f32 i32_i32 f32_i32 i32_f32 f16_i32 i32_f16 f16_f16math32 f32_f16math32 f16_f32math32 f16_i32math32 i32_f16math32
// Strided copy (permute, slice, expand, cat, split, cast): push = n, sizes[6], src strides[6], src
// offset, dst strides[6], dst offset (elements), to_bool (1: y = x != 0, a cast to bool; 0 in payloads
// before version 3). A float -> int cast truncates toward zero, as torch's does.
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
#ifdef MATH32
  // (math32: every such copy has an fp16 side, moved through fp32 registers, which hold it exactly)
  float v = float(x[is]);
  y[id] = OUT_T(PU(21) != 0u ? (v != 0.0 ? 1.0 : 0.0) : v);
#else
  IN_T v = x[is];
  y[id] = PU(21) != 0u ? OUT_T(v != IN_T(0) ? 1 : 0) : OUT_T(v);
#endif
}
