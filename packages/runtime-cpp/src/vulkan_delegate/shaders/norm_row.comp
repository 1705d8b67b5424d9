#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg
// Layer norm (mode 0), RMS norm (mode 1) or group norm (G > 0) of contiguous rows, one workgroup per row
// (row_reduce.glsl), sums in fp32 (two passes: mean, then the variance around it). push = rows, cols,
// eps, has_weight, has_bias, mode, hw, G: a group norm's row is (n, group) of C/G channels of hw values,
// weighted per channel ((row % G) * C/G + i / hw); otherwise per column. Threads: rows * 64.
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 64) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint row = row_id(), lane = gl_LocalInvocationID.x;
  if (row >= PU(0)) return;  // the whole workgroup: the barriers below stay uniform
  uint cols = PU(1), base = row * cols, hw = PU(6), G = PU(7);
  bool rms = PU(5) != 0;
  float mean = 0.0;
  if (!rms) {
    for (uint c = lane; c < cols; c += ROW_LANES) mean += float(x[base + c]);
    mean = row_sum(mean) / float(cols);
  }
  float var = 0.0;
  for (uint c = lane; c < cols; c += ROW_LANES) {
    float d = float(x[base + c]) - mean;
    var += d * d;
  }
  float inv = inversesqrt(row_sum(var) / float(cols) + PF(2));
  uint c0 = G > 0 ? (row % G) * (cols / hw) : 0;
  for (uint c = lane; c < cols; c += ROW_LANES) {
    uint ch = G > 0 ? c0 + c / hw : c;
    float v = (float(x[base + c]) - mean) * inv;
    if (PU(3) != 0) v *= float(w[ch]);
    if (PU(4) != 0) v += float(b[ch]);
    y[base + c] = T(v);
  }
}
