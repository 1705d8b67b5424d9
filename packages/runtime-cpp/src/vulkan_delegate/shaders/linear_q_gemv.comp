#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
// variants: f32 f16
// linear_q for few activation rows (the decode step's one token), 4-bit weights grouped along K in
// multiples of 32: y[r, n] = sum_k x[r, k] * q[n, k] * scale[n, k / G] (+ bias[n]), the same weight
// layout as linear_q (element i of a row in bits 4*(i%8).. of word i/8, low nibble first). Bound by the
// weight bytes, so each thread streams whole 128-bit chunks (32 weights of one row, one group or part of
// one): a workgroup of 128 threads computes ROWS outputs of one activation row, split-K over its
// threads (chunk c = tid, tid + 128, ...), each thread's 32 activations loaded once for the ROWS weight
// rows, partial sums reduced in shared memory. Sums in fp32 whatever T is. push = rows, N, K, G, groups
// per row, has_bias (linear_q's first six words). Threads: (ceil(N / ROWS) * 128, rows).
#include "common.glsl"
#define ROWS 8u
#define WG 128u
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Q { uvec4 q[]; };
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };
shared float partial[ROWS][WG];

void main() {
  uint lid = gl_LocalInvocationID.x, r = gl_WorkGroupID.y, n0 = gl_WorkGroupID.x * ROWS;
  uint N = PU(1), K = PU(2), NG = PU(4);
  uint chunks = K / 32u, chunks_per_group = PU(3) / 32u;
  float acc[ROWS];
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) acc[i] = 0.0;
  if (r < PU(0)) {  // whole workgroups reach the barriers below
    for (uint c = lid; c < chunks; c += WG) {
      float xv[32];
      uint xb = r * K + c * 32u;
      [[unroll]] for (uint j = 0u; j < 32u; ++j) xv[j] = float(x[xb + j]);
      uint g = c / chunks_per_group;
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
        uint n = min(n0 + i, N - 1u);  // outputs past N repeat row N - 1 and are not stored
        uvec4 w = q[n * chunks + c];
        float s = 0.0;
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
          // nibble ^ 8 = value + 8, as the mantissa of 2^23: float(value) exactly with integer ops and one
          // subtraction (an int-to-float conversion runs at a quarter of the FMA rate, the bound here)
          uint word = w[j] ^ 0x88888888u;
          [[unroll]] for (uint e = 0u; e < 8u; ++e)
            s += xv[j * 8u + e] * (uintBitsToFloat(0x4B000000u | ((word >> (e * 4u)) & 0xfu)) - 8388616.0);
        }
        acc[i] += s * float(scale[n * NG + g]);
      }
    }
  }
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) partial[i][lid] = acc[i];
  barrier();
  for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1) {
    if (lid < half_)
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) partial[i][lid] += partial[i][lid + half_];
    barrier();
  }
  uint n = n0 + lid;
  if (lid < ROWS && n < N && r < PU(0))
    y[r * N + n] = T(partial[lid][0] + (PU(5) != 0u ? float(bias[n]) : 0.0));
}
