#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Group norm of NC(HW): one invocation per (n, group) sums in fp32 (two passes: mean, then variance)
// and writes its group, scaled and shifted per channel. push = N*G, C/G, HW, eps, has_weight,
// has_bias, G. Threads: N*G.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint row = linear_id();
  uint rows = PU(0), cpg = PU(1), hw = PU(2), G = PU(6);
  if (row >= rows) return;
  uint cols = cpg * hw, base = row * cols;
  float mean = 0.0;
  for (uint i = 0; i < cols; ++i) mean += float(x[base + i]);
  mean /= float(cols);
  float var = 0.0;
  for (uint i = 0; i < cols; ++i) {
    float d = float(x[base + i]) - mean;
    var += d * d;
  }
  float inv = inversesqrt(var / float(cols) + PF(3));
  uint c0 = (row % G) * cpg;
  for (uint i = 0; i < cols; ++i) {
    uint c = c0 + i / hw;
    float v = (float(x[base + i]) - mean) * inv;
    if (PU(4) != 0) v *= float(w[c]);
    if (PU(5) != 0) v += float(b[c]);
    y[base + i] = T(v);
  }
}
