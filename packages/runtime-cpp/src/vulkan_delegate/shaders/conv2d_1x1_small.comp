#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// A pointwise (1x1, stride 1, no padding) convolution of few pixels (MobileNet's 14x14 and 7x7 layers at batch 1):
// y[n, oc, p] = clamp(sum_c w[oc, c] * x[n, c, p] + bias[oc] + res[n, oc, p], lo, hi), K split inside the
// workgroup. A GEMM tile over such a layer gives the GPU few workgroups, each walking all of K alone; here a
// workgroup computes OCT (4 or 8) output channels x PIX pixels with SLICES K slices (channel c goes to slice
// c % SLICES; SLICES * PIX = 256), each invocation OCT channels of one pixel in registers, and sums the slices in shared
// memory. SLICES 8 (PIX 32), or 16 / 32 for long K (MobileNetV2's projections, K 384..960: each invocation's
// dependent loop is K / SLICES long).
// push = N, C, P (= OH * OW), OC, has_bias, lo, hi, has_res, SLICES, OCT (output channels per workgroup: 8, else 4;
// 8 reads each input value for twice the channels, halving the input reads of a layer with many channels).
// Threads: (ceil(P / PIX) * 256, ceil(OC / OCT), N).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) readonly buffer Res { T res[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

shared float partial[8][256];  // [channel][slice * PIX + pixel]

// The kernel for SLICES K slices and OCT channels; main calls it with each pair as literals, so the driver's
// compiler can specialize each copy: read from the push, 8 slices ran MobileNetV2's expand convs 1-2 us slower
// each on the H100 than the kernel with 8 written in (bench/results/gpu/README.md, 17:56)
void pointwise(uint SLICES, uint OCT) {
  uint PIX = 256u / SLICES;
  uint C = PU(1), P = PU(2), OC = PU(3), n = gl_WorkGroupID.z;
  uint lid = gl_LocalInvocationID.x, lane = lid % PIX, slice = lid / PIX;
  uint p = gl_WorkGroupID.x * PIX + lane, oc0 = gl_WorkGroupID.y * OCT;
  vec4 acc = vec4(0.0), acc2 = vec4(0.0);
  if (p < P) {
    uint xb = n * C * P + p;
    // rows of the channels (clamped to the last one: a partial tile computes it again, never stores it)
    uint w0 = min(oc0, OC - 1u) * C, w1 = min(oc0 + 1u, OC - 1u) * C, w2 = min(oc0 + 2u, OC - 1u) * C,
         w3 = min(oc0 + 3u, OC - 1u) * C;
    if (OCT == 8u) {
      uint w4 = min(oc0 + 4u, OC - 1u) * C, w5 = min(oc0 + 5u, OC - 1u) * C, w6 = min(oc0 + 6u, OC - 1u) * C,
           w7 = min(oc0 + 7u, OC - 1u) * C;
      for (uint c = slice; c < C; c += SLICES) {
        float v = float(x[xb + c * P]);
        acc += v * vec4(float(w[w0 + c]), float(w[w1 + c]), float(w[w2 + c]), float(w[w3 + c]));
        acc2 += v * vec4(float(w[w4 + c]), float(w[w5 + c]), float(w[w6 + c]), float(w[w7 + c]));
      }
    } else {
      for (uint c = slice; c < C; c += SLICES) {
        float v = float(x[xb + c * P]);
        acc += v * vec4(float(w[w0 + c]), float(w[w1 + c]), float(w[w2 + c]), float(w[w3 + c]));
      }
    }
  }
  partial[0][lid] = acc.x;
  partial[1][lid] = acc.y;
  partial[2][lid] = acc.z;
  partial[3][lid] = acc.w;
  if (OCT == 8u) {
    partial[4][lid] = acc2.x;
    partial[5][lid] = acc2.y;
    partial[6][lid] = acc2.z;
    partial[7][lid] = acc2.w;
  }
  barrier();
  if (lid >= OCT * PIX) return;  // (OCT * PIX <= 8 * 32 = 256: one output per invocation at most)
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

void main() {  // 16 or 32 slices where the push says so, else 8 (a payload from before the word: 0); 8 channels
  bool wide = PU(9) == 8u;  // where it says so, else 4 (before the word: 0)
  if (PU(8) == 32u) {
    if (wide) pointwise(32u, 8u); else pointwise(32u, 4u);
  } else if (PU(8) == 16u) {
    if (wide) pointwise(16u, 8u); else pointwise(16u, 4u);
  } else {
    if (wide) pointwise(8u, 8u); else pointwise(8u, 4u);
  }
}
