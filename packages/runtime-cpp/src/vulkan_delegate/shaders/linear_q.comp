#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// y[r, n] = sum_k act(x[r, k]) * q[n, k] * scale[n, k / group] (+ bias[n]). q: [N, K] row-major, two's
// complement, 8-bit values four per 32-bit word, or 4-bit values eight per word (element i in bits
// 4*(i%8).., low nibble first). act: identity, or int8 per-row dynamic quantization (scale =
// max|x[r]| / 127). push = rows, N, K, group, groups per row, has_bias, dynamic, bits (4; anything
// else: 8, which payload v1 implies). Threads: (N, rows). Sums in fp32 whatever T is.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Q { uint q[]; };
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

void main() {
  uint n = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  uint N = PU(1), K = PU(2), G = PU(3), NG = PU(4);
  if (n >= N || r >= PU(0)) return;
  uint xb = r * K;
  float xs = 1.0;
  bool dyn = PU(6) != 0, q4 = PU(7) == 4u;
  if (dyn) {
    float m = 0.0;
    for (uint k = 0; k < K; ++k) m = max(m, abs(float(x[xb + k])));
    xs = max(m, 1e-12) / 127.0;
  }
  float acc = 0.0;
  for (uint g = 0; g < NG; ++g) {
    float part = 0.0;
    for (uint k = g * G; k < (g + 1) * G; ++k) {
      uint idx = n * K + k;
      int b;
      if (q4) {
        b = int((q[idx >> 3] >> ((idx & 7u) * 4u)) & 0xfu);
        b = b > 7 ? b - 16 : b;
      } else {
        b = int((q[idx >> 2] >> ((idx & 3u) * 8u)) & 0xffu);
        b = b > 127 ? b - 256 : b;
      }
      float v = float(x[xb + k]);
      if (dyn) v = clamp(roundEven(v / xs), -127.0, 127.0) * xs;  // torch.round: half to even
      part += v * float(b);
    }
    acc += part * float(scale[n * NG + g]);
  }
  y[r * N + n] = T(acc + (PU(5) != 0 ? float(bias[n]) : 0.0));
}
