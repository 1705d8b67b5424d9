#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// Rows picked by an index tensor along one dim (embedding, index_select, index.Tensor with one index):
// x viewed as [outer, xdim, inner], y as [outer, nidx, inner], y[o, j, k] = x[o, idx[j], k].
// push = n, outer, nidx, inner, xdim. A negative index counts from the end (as torch); one outside
// [-xdim, xdim) (torch raises) reads 0 rather than another buffer's bytes.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint inner = PU(3), nidx = PU(2);
  uint k = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
  int r = idx[j], xdim = PI(4);
  if (r < 0) r += xdim;
  y[i] = T((r < 0 || r >= xdim) ? VT(0) : VT(x[(o * uint(xdim) + uint(r)) * inner + k]));
}
