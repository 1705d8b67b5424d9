#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// 2-D upsampling of NCHW as torch computes it: nearest (mode 0: src = min(floor(dst * scale), in - 1))
// or bilinear (mode 1: src = scale * dst with align_corners, else max(scale * (dst + 0.5) - 0.5, 0)).
// The scales are the host's fp32 values (torch's: 1 / scale_factor, in / out, or (in - 1) / (out - 1)).
// push = N*C, H, W, OH, OW, scale_h, scale_w, mode, align_corners. Threads: (OH*OW, N*C).
// Source coordinates and weights in fp32 (an fp16 coordinate loses whole pixels past 2048); the blend in CT.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint pix = gl_GlobalInvocationID.x, nc = gl_GlobalInvocationID.y;
  int H = PI(1), W = PI(2), OH = PI(3), OW = PI(4);
  if (pix >= uint(OH * OW) || nc >= PU(0)) return;
  int oh = int(pix) / OW, ow = int(pix) % OW;
  float sh = PF(5), sw = PF(6);
  uint base = nc * uint(H * W);
  CT r;
  if (PI(7) == 0) {
    int ih = min(int(floor(float(oh) * sh)), H - 1), iw = min(int(floor(float(ow) * sw)), W - 1);
    r = CT(x[base + uint(ih * W + iw)]);
  } else {
    bool ac = PI(8) != 0;
    float fh = ac ? sh * float(oh) : max(sh * (float(oh) + 0.5) - 0.5, 0.0);
    float fw = ac ? sw * float(ow) : max(sw * (float(ow) + 0.5) - 0.5, 0.0);
    int h0 = min(int(fh), H - 1), w0 = min(int(fw), W - 1);
    int h1 = h0 + (h0 < H - 1 ? 1 : 0), w1 = w0 + (w0 < W - 1 ? 1 : 0);
    CT lh = CT(clamp(fh - float(h0), 0.0, 1.0)), lw = CT(clamp(fw - float(w0), 0.0, 1.0));
    CT one = CT(1.0);
    CT top = (one - lw) * CT(x[base + uint(h0 * W + w0)]) + lw * CT(x[base + uint(h0 * W + w1)]);
    CT bot = (one - lw) * CT(x[base + uint(h1 * W + w0)]) + lw * CT(x[base + uint(h1 * W + w1)]);
    r = (one - lh) * top + lh * bot;
  }
  y[nc * uint(OH * OW) + pix] = T(r);
}
