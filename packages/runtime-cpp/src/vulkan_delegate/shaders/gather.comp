#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// torch.gather: y[..., j, ...] = x[..., idx[..., j, ...], ...] along one dim; y has idx's shape.
// push = n, idx sizes[6], x strides[6] (elements, rank padded to 6), dim (0..5 after padding), xdim.
// An index outside [-xdim, xdim) (torch raises) reads 0.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  int r = idx[i], xdim = PI(14);
  if (r < 0) r += xdim;
  uint rem = i, ix = 0, dim = PU(13);
  for (int d = 5; d >= 0; --d) {
    uint s = PU(1 + d);
    uint c = rem % s;
    rem /= s;
    ix += (uint(d) == dim ? uint(max(r, 0)) : c) * PU(7 + d);
  }
  y[i] = T((r < 0 || r >= xdim) ? VT(0) : VT(x[ix]));
}
