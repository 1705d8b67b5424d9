#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// Boolean attention mask: y = m ? x : -inf, m (one byte per element, 0 false) broadcast to x's shape.
// push = n, sizes[6], m strides[6] (elements; 0 where broadcast), m_words (1: m holds one int32 per
// element, as bool tensors do from payload version 3; 0: bytes). x and y are contiguous.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer M { uint m[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint rem = i, im = 0;
  for (int d = 5; d >= 0; --d) {
    uint s = PU(1 + d);
    im += (rem % s) * PU(7 + d);
    rem /= s;
  }
  bool keep = PU(13) != 0u ? m[im] != 0u : ((m[im >> 2] >> ((im & 3u) * 8u)) & 0xffu) != 0u;
  y[i] = T(keep ? VT(x[i]) : VT(-1.0 / 0.0));
}
