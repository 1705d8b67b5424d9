#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// y[b0,b1,m,n] = alpha * sum_k a[..,m,k] b[..,k,n] (+ bias[n]), clamped. 16x16 tiles in shared memory.
// push = M, N, K, B1, a strides (b0, b1, m, k), b strides (b0, b1, k, n), bias (0 none, 1 per n, 2 per m),
// alpha, lo, hi.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };
shared float As[16][17];
shared float Bs[16][17];

void main() {
  uint n = gl_GlobalInvocationID.x, m = gl_GlobalInvocationID.y, bz = gl_GlobalInvocationID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint M = PU(0), N = PU(1), K = PU(2), B1 = PU(3);
  uint b0 = bz / B1, b1 = bz % B1;
  uint abase = b0 * PU(4) + b1 * PU(5), bbase = b0 * PU(8) + b1 * PU(9);
  uint am = PU(6), ak = PU(7), bk = PU(10), bn = PU(11);
  float acc = 0.0;
  for (uint k0 = 0; k0 < K; k0 += 16) {
    uint ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (m < M && ka < K) ? float(a[abase + m * am + ka * ak]) : 0.0;
    Bs[ty][tx] = (n < N && kb < K) ? float(b[bbase + kb * bk + n * bn]) : 0.0;
    barrier();
    for (uint kk = 0; kk < 16; ++kk) acc += As[ty][kk] * Bs[kk][tx];
    barrier();
  }
  if (m >= M || n >= N) return;
  float r = PF(13) * acc + (PU(12) == 1 ? float(bias[n]) : (PU(12) == 2 ? float(bias[m]) : 0.0));
  y[(bz * M + m) * N + n] = T(clamp(r, PF(14), PF(15)));
}
