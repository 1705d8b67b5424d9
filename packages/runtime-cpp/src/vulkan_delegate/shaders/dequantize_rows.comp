#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// The float values of quantize_rows's int8 rows: y[r, k] = (xq[r, k] - zero point[r]) * scale[r], for
// dynamically quantized activations read by something other than an integer linear (a PT2E
// dequantize_per_token whose value is also used elsewhere). a: rows of [scale bits, zero point, KW
// words], element k of group g = k / G at g*Gp + k % G. push = rows, K, G, Gp, KW. Threads: (K, rows).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint k = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  uint K = PU(1), G = PU(2), Gp = PU(3), KW = PU(4);
  if (k >= K || r >= PU(0)) return;
  uint ab = r * (KW + 2u), p = (k / G) * Gp + k % G;
  int q = bitfieldExtract(int(a[ab + 2u + p / 4u]), int(8u * (p % 4u)), 8);
  y[r * K + k] = T(float(q - int(a[ab + 1u])) * uintBitsToFloat(a[ab]));
}
