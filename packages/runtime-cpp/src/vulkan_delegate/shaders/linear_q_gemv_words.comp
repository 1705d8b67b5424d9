#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// variants: f32 f16
// linear_q_gemv's word-per-lane twin (same push, bindings, grid and results), for wide outputs with short K
// (ops/quantized.py's GEMV_WORDS_MIN_N / GEMV_WORDS_MAX_K; where the device lacks subgroup arithmetic, or
// under VKDG_GEMV_SG=0, the runtime runs linear_q_gemv instead: variant_select.cpp): one 32-bit word of 8
// weights per lane and step instead of a 128-bit chunk. Lane t of the workgroup takes words t, t + 128, ... of each of the workgroup's ROWS rows, so a
// warp's weight loads are 128 contiguous bytes per row and its activation loads (two vec4 per word) 1 KB
// contiguous: x comes straight from global memory (L1/L2), with no shared-memory staging, no barrier in the
// loop, and every lane busy at K = 2048 (the chunk kernel keeps half its 128 threads idle there: 64 chunks per
// row). Each lane loads two words per row (2 x ROWS weight and scale loads) before computing either; x is
// loaded once per word and used for all ROWS rows. Partial sums: subgroupAdd, then one shared-memory slot per
// subgroup (any subgroup size: NVIDIA 32, lavapipe 4-16) and one barrier. On the H100 (decode of the
// Llama-3.2-1B-shaped config, bench/results/gpu/README.md) it beat the chunk kernel with many workgroups
// (8192 x 2048: 12.5 against 17.2 us) and loses with few or with long K (2048 x 2048: 10.2 / 7.9 us,
// 2048 x 8192: 22.8 / 13.6 us): it has half the bytes in flight per round trip. K = 4096 was not measured.
#include "common.glsl"
#define ROWS 8u
#define WG 128u
layout(local_size_x = 128) in;
#ifdef FP16
#define TV4 f16vec4
#else
#define TV4 vec4
#endif
layout(std430, binding = 0) readonly buffer X { TV4 x4[]; };
layout(std430, binding = 1) readonly buffer Q { uint q[]; };  // linear_q_gemv's uvec4s, word by word
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) readonly buffer Other { T other[]; };
layout(std430, binding = 5) readonly buffer Gain { TV4 gain4[]; };
layout(std430, binding = 6) writeonly buffer Y { T y[]; };
shared float partial[ROWS + 1u][WG];  // per subgroup; row ROWS: the sums of squares of a folded RMS norm
#include "linear_q_gemv.glsl"

void main() {
  uint lid = gl_LocalInvocationID.x, r = gl_WorkGroupID.y, n0 = gl_WorkGroupID.x * ROWS;
  uint N = PU(1), K = PU(2), NG = PU(4), norm = PU(6);
  uint words = K / 8u, words_per_group = PU(3) / 8u, xbase = r * K / 4u;
  bool live = r < PU(0);  // whole workgroups reach the barrier below
  uint nrow[ROWS];
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) nrow[i] = min(n0 + i, N - 1u);  // past N: row N - 1, not stored
  float acc[ROWS];
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) acc[i] = 0.0;
  float squares = 0.0;
  for (uint w0 = lid; live && w0 < words; w0 += 2u * WG) {
    uint w1 = min(w0 + WG, words - 1u);  // the second word of the step (a repeat of the last one when past)
    bool has1 = w0 + WG < words;  // selected, not multiplied by 0: an inf in x stays inf, not NaN
    uint g0 = w0 / words_per_group, g1 = w1 / words_per_group;
    uint q0[ROWS], q1[ROWS];
    float s0[ROWS], s1[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
      q0[i] = q[nrow[i] * words + w0];
      q1[i] = q[nrow[i] * words + w1];
      s0[i] = float(scale[nrow[i] * NG + g0]);
      s1[i] = float(scale[nrow[i] * NG + g1]);
    }
    vec4 a0 = vec4(x4[xbase + 2u * w0]), b0 = vec4(x4[xbase + 2u * w0 + 1u]);
    vec4 a1 = vec4(x4[xbase + 2u * w1]), b1 = vec4(x4[xbase + 2u * w1 + 1u]);
    if (norm != 0u) {
      squares += (dot(a0, a0) + dot(b0, b0)) + (has1 ? dot(a1, a1) + dot(b1, b1) : 0.0);
      if (norm == 2u) {
        a0 *= vec4(gain4[2u * w0]);
        b0 *= vec4(gain4[2u * w0 + 1u]);
        a1 *= vec4(gain4[2u * w1]);
        b1 *= vec4(gain4[2u * w1 + 1u]);
      }
    }
    vec4 t0 = a0 + b0, t1 = a1 + b1;
    float xsum0 = (t0.x + t0.y) + (t0.z + t0.w), xsum1 = (t1.x + t1.y) + (t1.z + t1.w);
    [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
      float d0 = 16.0 * word_dot(q0[i] ^ 0x88888888u, a0, b0) - 24.0 * xsum0;
      float d1 = 16.0 * word_dot(q1[i] ^ 0x88888888u, a1, b1) - 24.0 * xsum1;
      acc[i] += d0 * s0[i] + (has1 ? d1 * s1[i] : 0.0);
    }
  }
  uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
    float v = subgroupAdd(acc[i]);
    if (subgroupElect()) partial[i][sg] = v;
  }
  float sq = subgroupAdd(squares);
  if (subgroupElect()) partial[ROWS][sg] = sq;
  barrier();
  uint n = n0 + lid;
  if (lid < ROWS && n < N && live) {
    float v = 0.0, ss = 0.0;
    for (uint j = 0u; j < nsg; ++j) {
      v += partial[lid][j];
      ss += partial[ROWS][j];
    }
    store(r, n, v, ss);
  }
}
