#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Dynamic int8 quantization of the activation rows of linear_qi, once per row: row r of x [rows, K]
// becomes a[r] = [scale (float bits), zero point, KW words of four int8 values] (element 4w + i in bits
// 8i.. of word w). K is laid out in groups so that every group starts on a word: element g*G + j goes
// to g*Gp + j (Gp = G rounded up to 4), zeros between groups and up to KW * 4.
// Modes (push 4): 0 = symmetric, scale = max|x[r]| / 127 (at least 1e-12 / 127), values in
// [-127, 127], zero point 0 (VulkanQuantizer's dynamic activations); 1 = asymmetric int8 as torch's
// quantized_decomposed choose_qparams_per_token_asymmetric + quantize_per_token (in fp32 where torch
// uses fp64). push = rows, K, G, Gp, mode, KW. Threads: (64, rows): one workgroup per row.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer A { uint a[]; };
shared float s_lo[64], s_hi[64];

void main() {
  uint r = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  uint K = PU(1), G = PU(2), Gp = PU(3), mode = PU(4), KW = PU(5);
  if (r >= PU(0)) return;  // whole workgroups: the barriers below see every invocation
  uint xb = r * K;
  float lo = 0.0, hi = 0.0;  // min(x, 0), max(x, 0): both modes include zero
  for (uint k = lid; k < K; k += 64u) {
    float v = float(x[xb + k]);
    lo = min(lo, v);
    hi = max(hi, v);
  }
  s_lo[lid] = lo;
  s_hi[lid] = hi;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) {
      s_lo[lid] = min(s_lo[lid], s_lo[lid + s]);
      s_hi[lid] = max(s_hi[lid], s_hi[lid + s]);
    }
    barrier();
  }
  lo = s_lo[0];
  hi = s_hi[0];
  float scale, inv = 0.0, zp = 0.0, qmin = -127.0;
  if (mode == 0u) {
    scale = max(max(-lo, hi), 1e-12) / 127.0;
  } else {
    qmin = -128.0;
    scale = max((hi - lo) / 255.0, 1.1920928955078125e-07);  // torch.finfo(float32).eps
    float dmin = lo / scale, dmax = hi / scale;
    zp = (-128.0 + dmin) + (127.0 + dmax) > 0.0 ? -128.0 - dmin : 127.0 - dmax;
    zp = roundEven(clamp(zp, -128.0, 127.0));
    inv = 1.0 / scale;
  }
  uint ab = r * (KW + 2u);
  if (lid == 0u) {
    a[ab] = floatBitsToUint(scale);
    a[ab + 1u] = uint(int(zp));
  }
  for (uint w = lid; w < KW; w += 64u) {
    uint word = 0u;
    for (uint i = 0u; i < 4u; ++i) {
      uint p = w * 4u + i, g = p / Gp, j = p - g * Gp, k = g * G + j;
      if (j >= G || k >= K) continue;
      float v = float(x[xb + k]);
      // mode 0 divides as the eager reference does (x / s); mode 1 multiplies by 1 / s as torch does
      float q = mode == 0u ? roundEven(v / scale) : roundEven(v * inv) + zp;
      word |= (uint(int(clamp(q, qmin, 127.0))) & 0xffu) << (8u * i);
    }
    a[ab + 2u + w] = word;
  }
}
