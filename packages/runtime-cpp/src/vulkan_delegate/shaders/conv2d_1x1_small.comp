#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// A pointwise (1x1, stride 1, no padding) convolution of few pixels (MobileNet's 14x14 and 7x7 layers at batch 1):
// y[n, oc, p] = clamp(sum_c w[oc, c] * x[n, c, p] + bias[oc] + res[n, oc, p], lo, hi), K split inside the
// workgroup. A GEMM tile over such a layer gives the GPU few workgroups, each walking all of K alone; here a
// workgroup computes 4 output channels x 32 pixels with 8 warps-worth of K slices (channel c goes to slice
// c % 8), each invocation 4 channels of one pixel in registers, and sums the 8 slices in shared memory.
// push = N, C, P (= OH * OW), OC, has_bias, lo, hi, has_res. Threads: (ceil(P / 32) * 256, ceil(OC / 4), N).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) readonly buffer Res { T res[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

#define PIX 32u
#define SLICES 8u
#define OCT 4u
shared float partial[SLICES][OCT][PIX];

void main() {
  uint C = PU(1), P = PU(2), OC = PU(3), n = gl_WorkGroupID.z;
  uint lane = gl_LocalInvocationID.x % PIX, slice = gl_LocalInvocationID.x / PIX;
  uint p = gl_WorkGroupID.x * PIX + lane, oc0 = gl_WorkGroupID.y * OCT;
  vec4 acc = vec4(0.0);
  if (p < P) {
    uint xb = n * C * P + p;
    // rows of the 4 channels (clamped to the last one: a partial tile computes it again, never stores it)
    uint w0 = min(oc0, OC - 1u) * C, w1 = min(oc0 + 1u, OC - 1u) * C, w2 = min(oc0 + 2u, OC - 1u) * C,
         w3 = min(oc0 + 3u, OC - 1u) * C;
    for (uint c = slice; c < C; c += SLICES) {
      float v = float(x[xb + c * P]);
      acc += v * vec4(float(w[w0 + c]), float(w[w1 + c]), float(w[w2 + c]), float(w[w3 + c]));
    }
  }
  partial[slice][0][lane] = acc.x;
  partial[slice][1][lane] = acc.y;
  partial[slice][2][lane] = acc.z;
  partial[slice][3][lane] = acc.w;
  barrier();
  uint t = gl_LocalInvocationID.x;
  if (t >= OCT * PIX) return;
  uint j = t / PIX, oc = oc0 + j;
  p = gl_WorkGroupID.x * PIX + t % PIX;
  if (oc >= OC || p >= P) return;
  float r = 0.0;
  for (uint s = 0u; s < SLICES; ++s) r += partial[s][j][t % PIX];
  uint o = (n * OC + oc) * P + p;
  r += (PU(4) != 0u ? float(bias[oc]) : 0.0) + (PU(7) != 0u ? float(res[o]) : 0.0);
  y[o] = T(nan_clamp(r, PF(5), PF(6)));
}
