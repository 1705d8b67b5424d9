#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// Max (mode 0) / average (mode 1) 2-D pooling, NCHW. push = N*C, H, W, OH, OW, KH, KW, SH, SW, PH, PW,
// DH, DW, mode, count_include_pad, divisor_override (0: none). Threads: (OH*OW, N*C).
// The maximum is taken in CT (exact in any type); the average sums in fp32.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint pix = gl_GlobalInvocationID.x, nc = gl_GlobalInvocationID.y;
  int H = PI(1), W = PI(2), OH = PI(3), OW = PI(4), KH = PI(5), KW = PI(6);
  if (pix >= uint(OH * OW) || nc >= PU(0)) return;
  int oh = int(pix) / OW, ow = int(pix) % OW;
  int h0 = oh * PI(7) - PI(9), w0 = ow * PI(8) - PI(10);
  bool is_max = PI(13) == 0;
  CT mx = CT(-1.0 / 0.0);
  float acc = 0.0;
  int count = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int ih = h0 + kh * PI(11);
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = w0 + kw * PI(12);
      if (iw < 0 || iw >= W) continue;
      CT v = CT(x[nc * uint(H * W) + uint(ih * W + iw)]);
      if (is_max) mx = nan_max(mx, v);
      else acc += float(v);
      count++;
    }
  }
  if (!is_max) {
    int hend = min(h0 + KH, H + PI(9)), wend = min(w0 + KW, W + PI(10));
    int padded = (hend - h0) * (wend - w0);
    float div = PI(15) != 0 ? float(PI(15)) : (PI(14) != 0 ? float(padded) : float(count));
    y[nc * uint(OH * OW) + pix] = T(acc / div);
    return;
  }
  y[nc * uint(OH * OW) + pix] = T(mx);
}
