#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// matmul.comp for a single row (M = 1: a linear layer at batch 1, a decode step): y[b, 0, n] =
// alpha * sum_k a[b, 0, k] b[b, k, n] (+ bias), clamped; the same push words and bindings as matmul.comp
// (push = M, N, K, B1, a strides, b strides, bias kind, alpha, lo, hi). A GEMM tile would give N/64
// workgroups that each walk all of K; here each workgroup computes 4 outputs, 64 invocations per output
// striding K (independent loads, no barrier per step), then a shared-memory tree sum.
// Threads (N, 1, B0*B1): the local size (4, 64) makes the runtime launch ceil(N/4) x 1 x B workgroups;
// inside, invocation i works on output i / 64 with K lane i % 64. Sums in fp32.
#include "common.glsl"
layout(local_size_x = 4, local_size_y = 64) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

shared float partial[4][64];

void main() {
  uint N = PU(1), K = PU(2), bz = gl_WorkGroupID.z, b0 = bz / PU(3), b1 = bz % PU(3);
  uint i = gl_LocalInvocationIndex, o = i / 64u, lane = i % 64u, n = gl_WorkGroupID.x * 4u + o;
  uint abase = b0 * PU(4) + b1 * PU(5), bbase = b0 * PU(8) + b1 * PU(9) + min(n, N - 1u) * PU(11);
  float acc = 0.0;
  for (uint k = lane; k < K; k += 64u) acc = fma(float(a[abase + k * PU(7)]), float(b[bbase + k * PU(10)]), acc);
  partial[o][lane] = acc;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lane < s) partial[o][lane] += partial[o][lane + s];
    barrier();
  }
  if (lane != 0u || n >= N) return;
  float r = PF(13) * partial[o][0] + (PU(12) == 1u ? float(bias[n]) : (PU(12) == 2u ? float(bias[0]) : 0.0));
  y[bz * N + n] = T(nan_clamp(r, PF(14), PF(15)));
}
