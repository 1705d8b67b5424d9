#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Rotary position embedding in the half-split layout (Llama's rotate_half), one dispatch for the chain
// x * cos + cat(-x[..., h:], x[..., :h]) * sin that exir leaves as 8 (slices, neg, cat copies, muls, add):
// y[..., j] = x[..., j] * cos + (j < h ? -x[..., j + h] : x[..., j - h]) * sin, x contiguous with last
// dim 2h, cos and sin read through broadcast strides. fp32 arithmetic. push = n, out sizes[6],
// cos strides[6], sin strides[6], h. Threads: n.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer C { T cs[]; };
layout(std430, binding = 2) readonly buffer Sn { T sn[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint rem = i, ic = 0, is_ = 0;
  for (int d = 5; d >= 0; --d) {
    uint s = PU(1 + d);
    uint c = rem % s;
    rem /= s;
    ic += c * PU(7 + d);
    is_ += c * PU(13 + d);
  }
  uint h = PU(19), j = i % (2u * h);
  float rot = j < h ? -float(x[i + h]) : float(x[i - h]);
  y[i] = T(float(x[i]) * float(cs[ic]) + rot * float(sn[is_]));
}
