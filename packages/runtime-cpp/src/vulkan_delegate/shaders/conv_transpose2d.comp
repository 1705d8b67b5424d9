#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Transposed NCHW convolution (groups, stride, padding, dilation; output_padding only sizes the
// output), bias and clamp folded in, computed as a gather: each output reads the inputs whose
// stride-spread taps land on it. Weight [C, OC/groups, KH, KW] (torch's layout). push = N, C, H, W,
// OC, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, groups, has_bias, lo, hi. Threads: (OH*OW, OC, N).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer W { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint pix = gl_GlobalInvocationID.x, oc = gl_GlobalInvocationID.y, n = gl_GlobalInvocationID.z;
  int C = PI(1), H = PI(2), Wd = PI(3), OC = PI(4), OH = PI(5), OW = PI(6), KH = PI(7), KW = PI(8);
  if (pix >= uint(OH * OW) || oc >= uint(OC)) return;
  int oh = int(pix) / OW, ow = int(pix) % OW;
  int SH = PI(9), SW = PI(10), DH = PI(13), DW = PI(14);
  int G = PI(15), cpg = C / G, ocpg = OC / G, g = int(oc) / ocpg, ocg = int(oc) % ocpg;
  float acc = PI(16) != 0 ? float(bias[oc]) : 0.0;
  for (int ic = 0; ic < cpg; ++ic) {
    int c = g * cpg + ic;
    uint xbase = (n * uint(C) + uint(c)) * uint(H * Wd);
    uint wbase = (uint(c) * uint(ocpg) + uint(ocg)) * uint(KH * KW);
    for (int kh = 0; kh < KH; ++kh) {
      int th = oh + PI(11) - kh * DH;  // = ih * SH when input row ih reaches this output row
      if (th < 0 || th % SH != 0) continue;
      int ih = th / SH;
      if (ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        int tw = ow + PI(12) - kw * DW;
        if (tw < 0 || tw % SW != 0) continue;
        int iw = tw / SW;
        if (iw >= Wd) continue;
        acc += float(x[xbase + uint(ih * Wd + iw)]) * float(w[wbase + uint(kh * KW + kw)]);
      }
    }
  }
  y[(n * uint(OC) + oc) * uint(OH * OW) + pix] = T(nan_clamp(acc, PF(17), PF(18)));
}
