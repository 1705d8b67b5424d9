#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Layer norm (mode 0) or RMS norm (mode 1) of each row: push = rows, cols, eps, has_weight, has_bias, mode.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint row = linear_id();
  uint rows = PU(0), cols = PU(1);
  if (row >= rows) return;
  uint base = row * cols;
  bool rms = PU(5) != 0;
  float mean = 0.0;
  if (!rms) {
    for (uint c = 0; c < cols; ++c) mean += float(x[base + c]);
    mean /= float(cols);
  }
  float var = 0.0;
  for (uint c = 0; c < cols; ++c) {
    float d = float(x[base + c]) - mean;
    var += d * d;
  }
  float inv = inversesqrt(var / float(cols) + PF(2));
  for (uint c = 0; c < cols; ++c) {
    float v = (float(x[base + c]) - mean) * inv;
    if (PU(3) != 0) v *= float(w[c]);
    if (PU(4) != 0) v += float(b[c]);
    y[base + c] = T(v);
  }
}
