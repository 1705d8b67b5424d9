#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// A pointwise (1x1, stride 1, no padding) convolution of few pixels (MobileNet's 14x14 and 7x7 layers at batch 1):
// y[n, oc, p] = clamp(sum_c w[oc, c] * x[n, c, p] + bias[oc] + res[n, oc, p], lo, hi), K split inside the
// workgroup. A GEMM tile over such a layer gives the GPU few workgroups, each walking all of K alone; here a
// workgroup computes 4 output channels x PIX pixels with SLICES K slices (channel c goes to slice c % SLICES;
// SLICES * PIX = 256), each invocation 4 channels of one pixel in registers, and sums the slices in shared
// memory. SLICES 8 (PIX 32), or 16 / 32 for long K (MobileNetV2's projections, K 384..960: each invocation's
// dependent loop is K / SLICES long).
// push = N, C, P (= OH * OW), OC, has_bias, lo, hi, has_res, SLICES. Threads: (ceil(P / PIX) * 256, ceil(OC / 4), N).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) readonly buffer Res { T res[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

#define OCT 4u
shared float partial[OCT][256];  // [channel][slice * PIX + pixel]

// The kernel for SLICES K slices; main calls it with each count as a literal, so the driver's compiler can
// specialize each copy: read from the push, 8 slices ran MobileNetV2's expand convs 1-2 us slower each on the
// H100 than the kernel with 8 written in (bench/results/gpu/README.md, 17:56)
void pointwise(uint SLICES) {
  uint PIX = 256u / SLICES;
  uint C = PU(1), P = PU(2), OC = PU(3), n = gl_WorkGroupID.z;
  uint lid = gl_LocalInvocationID.x, lane = lid % PIX, slice = lid / PIX;
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
  partial[0][lid] = acc.x;
  partial[1][lid] = acc.y;
  partial[2][lid] = acc.z;
  partial[3][lid] = acc.w;
  barrier();
  if (lid >= OCT * PIX) return;
  uint j = lid / PIX, oc = oc0 + j;
  lane = lid % PIX;
  p = gl_WorkGroupID.x * PIX + lane;
  if (oc >= OC || p >= P) return;
  float r = 0.0;
  for (uint s = 0u; s < SLICES; ++s) r += partial[j][s * PIX + lane];
  uint o = (n * OC + oc) * P + p;
  r += (PU(4) != 0u ? float(bias[oc]) : 0.0) + (PU(7) != 0u ? float(res[o]) : 0.0);
  y[o] = T(nan_clamp(r, PF(5), PF(6)));
}

void main() {  // 16 or 32 slices where the push says so, else 8 (a payload from before the word: 0)
  if (PU(8) == 32u)
    pointwise(32u);
  else if (PU(8) == 16u)
    pointwise(16u);
  else
    pointwise(8u);
}
