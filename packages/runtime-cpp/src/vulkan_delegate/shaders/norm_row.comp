#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// norm.comp for wide rows (the decode step's one token of thousands of features): one workgroup of 256
// per row, each sum reduced in shared memory, where norm.comp runs a row on one thread (~300 us for a
// row of 4096 on an H100). push = rows, cols, eps, has_weight, has_bias, mode (as norm.comp).
// Threads: (256, rows).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };
shared float red[256];

// The workgroup's sum of v (every invocation gets it).
float row_sum(float v) {
  uint lid = gl_LocalInvocationID.x;
  red[lid] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  float total = red[0];
  barrier();  // red is written again by the next sum
  return total;
}

void main() {
  uint row = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  uint rows = PU(0), cols = PU(1);
  if (row >= rows) return;  // the whole workgroup: the barriers stay uniform
  uint base = row * cols;
  float mean = 0.0;
  if (PU(5) == 0u) {  // layer norm (uniform branch)
    float s = 0.0;
    for (uint c = lid; c < cols; c += 256u) s += float(x[base + c]);
    mean = row_sum(s) / float(cols);
  }
  float var = 0.0;
  for (uint c = lid; c < cols; c += 256u) {
    float d = float(x[base + c]) - mean;
    var += d * d;
  }
  float inv = inversesqrt(row_sum(var) / float(cols) + PF(2));
  for (uint c = lid; c < cols; c += 256u) {
    float v = (float(x[base + c]) - mean) * inv;
    if (PU(3) != 0u) v *= float(w[c]);
    if (PU(4) != 0u) v += float(b[c]);
    y[base + c] = T(v);
  }
}
