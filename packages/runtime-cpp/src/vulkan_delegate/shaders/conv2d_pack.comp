#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// The channel-last input copy of a packed implicit-GEMM convolution (conv2d_gemm.comp, push word 21):
// y[n][h][w][c] (sizes N, HP, WP, CP) = x[n][c][h SH - PH][w SW - PW] (NCHW, sizes N, C, H, W), 0 in the
// padding border and for c >= C (CP is C rounded up to 8, so the GEMM loads 8 channels of a tap as one
// 128-bit word and never tests a bound). push = total (N*HP*WP*CP), C, H, W, CP, HP, WP, PH, PW, SH, SW.
// SH = SW = 1 but for a strided 1x1 convolution, whose pack keeps only the pixels it reads (HP x WP = its
// OH x OW), so that the GEMM runs it as a 1x1 stride-1 one.
// Threads: total; consecutive invocations write consecutive channels.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  uint C = PU(1), H = PU(2), W = PU(3), CP = PU(4), HP = PU(5), WP = PU(6);
  uint c = i % CP, pix = i / CP, w = pix % WP, h = (pix / WP) % HP, n = pix / (WP * HP);
  // (max: a payload lowered before the strides has no words 9 and 10, which then read 0)
  int ih = int(h * max(PU(9), 1u)) - PI(7), iw = int(w * max(PU(10), 1u)) - PI(8);
  bool inside = c < C && ih >= 0 && ih < int(H) && iw >= 0 && iw < int(W);
  y[i] = inside ? x[((n * C + c) * H + uint(ih)) * W + uint(iw)] : T(0);
}
