#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Direct NCHW convolution (groups, stride, padding, dilation), bias and clamp folded in. push = N, C, H, W,
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
  int G = PI(15), cpg = C / G, g = int(oc) / (OC / G);
  int h0 = oh * PI(9) - PI(11), w0 = ow * PI(10) - PI(12), DH = PI(13), DW = PI(14);
  float acc = PI(16) != 0 ? float(bias[oc]) : 0.0;
  for (int ic = 0; ic < cpg; ++ic) {
    uint xbase = (n * uint(C) + uint(g * cpg + ic)) * uint(H * Wd);
    uint wbase = (oc * uint(cpg) + uint(ic)) * uint(KH * KW);
    for (int kh = 0; kh < KH; ++kh) {
      int ih = h0 + kh * DH;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        int iw = w0 + kw * DW;
        if (iw < 0 || iw >= Wd) continue;
        acc += float(x[xbase + uint(ih * Wd + iw)]) * float(w[wbase + uint(kh * KW + kw)]);
      }
    }
  }
  y[(n * uint(OC) + oc) * uint(OH * OW) + pix] = T(nan_clamp(acc, PF(17), PF(18)));
}
