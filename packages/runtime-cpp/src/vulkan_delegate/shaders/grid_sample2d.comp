#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// torch's grid_sampler_2d on NCHW: grid [N, OH, OW, 2] holds (x, y) in [-1, 1]; bilinear (mode 0) or
// nearest (mode 1, half to even as torch's nearbyint), zeros (padding 0) or border (1) padding.
// push = N, C, H, W, OH, OW, mode, padding, align_corners. Threads: (OH*OW, C, N).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Grid { T grid[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

float source(float g, int size) {
  float s = PI(8) != 0 ? (g + 1.0) * 0.5 * float(size - 1) : ((g + 1.0) * float(size) - 1.0) * 0.5;
  // zeros: any coordinate beyond one pixel outside reads only zeros (clamped so int() stays defined)
  return PI(7) == 1 ? clamp(s, 0.0, float(size - 1)) : clamp(s, -2.0, float(size + 1));
}

float at(uint base, int iy, int ix, int H, int W) {
  return (iy < 0 || iy >= H || ix < 0 || ix >= W) ? 0.0 : float(x[base + uint(iy * W + ix)]);
}

void main() {
  uint pix = gl_GlobalInvocationID.x, c = gl_GlobalInvocationID.y, n = gl_GlobalInvocationID.z;
  int C = PI(1), H = PI(2), W = PI(3), OH = PI(4), OW = PI(5);
  if (pix >= uint(OH * OW) || c >= uint(C)) return;
  uint g = (n * uint(OH * OW) + pix) * 2u;
  float ix = source(float(grid[g]), W), iy = source(float(grid[g + 1u]), H);
  uint base = (n * uint(C) + c) * uint(H * W);
  float r;
  if (PI(6) == 1) {
    r = at(base, int(roundEven(iy)), int(roundEven(ix)), H, W);
  } else {
    float x0 = floor(ix), y0 = floor(iy);
    float wx = ix - x0, wy = iy - y0;
    int xi = int(x0), yi = int(y0);
    r = (1.0 - wy) * ((1.0 - wx) * at(base, yi, xi, H, W) + wx * at(base, yi, xi + 1, H, W)) +
        wy * ((1.0 - wx) * at(base, yi + 1, xi, H, W) + wx * at(base, yi + 1, xi + 1, H, W));
  }
  y[(n * uint(C) + c) * uint(OH * OW) + pix] = T(r);
}
