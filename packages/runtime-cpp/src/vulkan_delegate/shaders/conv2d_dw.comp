#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// Depthwise NCHW convolution (groups == C == OC), bias (a folded batch norm) and clamp folded in: each
// invocation computes 4 adjacent outputs of one channel row as a CT4 (f16vec4 in the f16 variant: fp16
// arithmetic, 2 lanes per instruction where the GPU packs them), loading each weight once for the 4 and,
// for 3-wide windows at stride 1 or 2 (MobileNet's), each input once into registers (6 or 9 for 4
// outputs instead of 12). push = total (invocations), C, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW,
// has_bias, lo, hi, OWQ (= ceil(OW / 4)). Threads: N*C*OH*OWQ (1-D).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

int H, Wd;
uint xbase;

CT at(int ih, int iw) {  // 0 in the padding
  return (ih < 0 || ih >= H || iw < 0 || iw >= Wd) ? CT(0.0) : CT(x[xbase + uint(ih * Wd + iw)]);
}

void main() {
  uint t = linear_id();
  if (t >= PU(0)) return;
  int C = PI(1), OH = PI(4), OW = PI(5), KH = PI(6), KW = PI(7), SH = PI(8), SW = PI(9);
  int DH = PI(12), DW = PI(13), OWQ = PI(17);
  H = PI(2);
  Wd = PI(3);
  int owq = int(t % uint(OWQ)), oh = int((t / uint(OWQ)) % uint(OH));
  uint nc = t / uint(OWQ * OH);
  int c = int(nc % uint(C));
  xbase = nc * uint(H * Wd);
  int ow0 = owq * 4, h0 = oh * SH - PI(10), w0 = ow0 * SW - PI(11);
  CT4 acc = CT4(PI(14) != 0 ? CT(bias[c]) : CT(0.0));
  uint wbase = uint(c * KH * KW);
  for (int kh = 0; kh < KH; ++kh) {
    int ih = h0 + kh * DH;
    if (ih < 0 || ih >= H) continue;
    uint wrow = wbase + uint(kh * KW);
    if (KW == 3 && DW == 1 && SW == 1) {  // outputs j read inputs j .. j + 2
      CT r0 = at(ih, w0), r1 = at(ih, w0 + 1), r2 = at(ih, w0 + 2), r3 = at(ih, w0 + 3), r4 = at(ih, w0 + 4),
         r5 = at(ih, w0 + 5);
      acc += CT4(r0, r1, r2, r3) * CT(w[wrow]) + CT4(r1, r2, r3, r4) * CT(w[wrow + 1]) +
             CT4(r2, r3, r4, r5) * CT(w[wrow + 2]);
    } else if (KW == 3 && DW == 1 && SW == 2) {  // outputs j read inputs 2j .. 2j + 2
      CT r0 = at(ih, w0), r1 = at(ih, w0 + 1), r2 = at(ih, w0 + 2), r3 = at(ih, w0 + 3), r4 = at(ih, w0 + 4),
         r5 = at(ih, w0 + 5), r6 = at(ih, w0 + 6), r7 = at(ih, w0 + 7), r8 = at(ih, w0 + 8);
      acc += CT4(r0, r2, r4, r6) * CT(w[wrow]) + CT4(r1, r3, r5, r7) * CT(w[wrow + 1]) +
             CT4(r2, r4, r6, r8) * CT(w[wrow + 2]);
    } else {
      for (int kw = 0; kw < KW; ++kw) {
        int iw = w0 + kw * DW;
        acc += CT4(at(ih, iw), at(ih, iw + SW), at(ih, iw + 2 * SW), at(ih, iw + 3 * SW)) * CT(w[wrow + uint(kw)]);
      }
    }
  }
  CT lo = CT(PF(15)), hi = CT(PF(16));  // (NaN-propagating: GLSL's clamp of a NaN is undefined)
  acc = CT4(nan_clamp(acc.x, lo, hi), nan_clamp(acc.y, lo, hi), nan_clamp(acc.z, lo, hi), nan_clamp(acc.w, lo, hi));
  uint ybase = (nc * uint(OH) + uint(oh)) * uint(OW) + uint(ow0);
  int left = OW - ow0;
  y[ybase] = T(acc.x);
  if (left > 1) y[ybase + 1] = T(acc.y);
  if (left > 2) y[ybase + 2] = T(acc.z);
  if (left > 3) y[ybase + 3] = T(acc.w);
}
