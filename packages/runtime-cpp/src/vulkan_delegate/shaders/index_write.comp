#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// Rows written at the positions an index tensor names (index_copy, index_put with one index tensor:
// a static KV cache's update): x and y viewed as [outer, xdim, inner], src as [outer, nidx, inner];
// y[o, r, k] = src[o, j, k] for the last j with idx[j] == r, else x[o, r, k]. One pass writes all of y
// (no in-place partial write, so y's bytes never depend on dispatch order). A negative index counts
// from the end, as torch. push = n (numel of y), nidx, inner, xdim.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) readonly buffer S { T src[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint nidx = PU(1), inner = PU(2), xdim = PU(3);
  uint k = i % inner, r = (i / inner) % xdim, o = i / (inner * xdim);
  int hit = -1;
  for (uint j = 0; j < nidx; ++j) {
    int v = idx[j];
    if (v < 0) v += int(xdim);
    if (v == int(r)) hit = int(j);
  }
  y[i] = T(hit >= 0 ? VT(src[(o * nidx + uint(hit)) * inner + k]) : VT(x[i]));
}
