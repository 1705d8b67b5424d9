#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
// variants: f32 f16 f32sg f16sg
// linear_q for few activation rows (the decode step's one token), 4-bit weights grouped along K in
// multiples of 32: y[r, n] = ep(sum_k x[r, k] * q[n, k] * scale[n, k / G] (+ bias[n])). Bound by the
// weight bytes. Each row's weights are 128-bit chunks of 32 nibbles (element i of a chunk in bits 4*(i%8)
// of word i/8), chunk c of row n at q[n * K/32 + c], so 32 lanes reading chunks b..b+31 of one row read
// 512 contiguous bytes. The lowering permutes K inside each block of 32 chunks (ops/quantized.py
// gemv_order): element p of chunk l of a block of L chunks is k = block start + 4 L (p / 4) + 4 l + p % 4,
// so the lane's 8 x vec4s (t = p / 4) are x4[block / 4 + L t + l]: every x load of the 32 lanes is one
// coalesced 512-byte read (L1/L2), with no shared-memory staging or barriers in the loop. The 4 elements of
// one vec4 share a scale group (G is a multiple of 32), so each lane applies 8 scales per chunk.
// A workgroup is 4 x 32 lanes, each 32 lanes computing ROWS_PER_LANES outputs of one activation row over
// all of K: x is read once for both rows. Nibble m (value + 8) is made the float 1 + m/16 by one shift and
// one mask-or; sum x * value = 16 sum x * (1 + m/16) - 24 sum x. Sums in fp32 whatever T is.
// The 32 lanes' sums: the `sg` variants (device with subgroup arithmetic) add with subgroupAdd, and where
// the subgroup is 32 lanes (NVIDIA) the first lane stores, with no shared memory at all; smaller subgroups
// (lavapipe: 8) add their leaders' sums through shared memory, as the plain variants add all 32.
// Epilogue (push 8): 0 none, 1 + other[r, n] (a residual add), 2 * other[r, n], 3 silu. An RMS norm of x
// folded in (push 6: 0 none, 1 without, 2 with a gain; push 9 its eps): the dot product runs on x * gain,
// every 32 lanes sum the squares of the raw row as they read it, and the dot product is scaled by 1 / rms
// before the bias: W (g x / rms) = (W (g x)) / rms.
// push = rows, N, K, G, groups per row, has_bias (linear_q's first six words), norm, bits, epilogue, eps.
// Threads: (ceil(N / 8) * 128, rows).
#include "common.glsl"
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#define WG 128u
#define LANES 32u
#define ROWS_PER_LANES 2u
#define ROWS (WG / LANES * ROWS_PER_LANES)  // 8 outputs per workgroup: the lowering's grid
layout(local_size_x = 128) in;
#ifdef FP16
#define TV4 f16vec4
#else
#define TV4 vec4
#endif
layout(std430, binding = 0) readonly buffer X { TV4 x4[]; };
layout(std430, binding = 1) readonly buffer Q { uvec4 q[]; };
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) readonly buffer Other { T other[]; };
layout(std430, binding = 5) readonly buffer Gain { TV4 gain4[]; };
layout(std430, binding = 6) writeonly buffer Y { T y[]; };
shared float partial[ROWS][LANES + 1u];
shared float square_partial[WG / LANES][LANES + 1u];

// one of a word's nibbles (m = value + 8 after the caller's xor), moved to mantissa bits 19..22 of 1.0
#define NIB(bits) uintBitsToFloat(0x3F800000u | ((bits) & 0x00780000u))

// sum over the word's 4 low nibbles of v * (1 + m / 16)
float quad_dot(uint w, vec4 v) {
  return (v.x * NIB(w << 19) + v.y * NIB(w << 15)) + (v.z * NIB(w << 11) + v.w * NIB(w << 7));
}

void store(uint r, uint n, float v, float squares) {
  uint N = PU(1);
  if (PU(6) != 0u) v *= inversesqrt(squares / float(PU(2)) + PF(9));
  if (PU(5) != 0u) v += float(bias[n]);
  uint ep = PU(8);
  if (ep == 1u) v += float(other[r * N + n]);
  else if (ep == 2u) v *= float(other[r * N + n]);
  else if (ep == 3u) v = v / (1.0 + exp(-v));
  y[r * N + n] = T(v);
}

void main() {
  uint lid = gl_LocalInvocationID.x, r = gl_WorkGroupID.y;
  uint lane = lid % LANES, team = lid / LANES;
  uint N = PU(1), K = PU(2), G = PU(3), NG = PU(4), norm = PU(6);
  uint chunks = K / 32u, n0 = gl_WorkGroupID.x * ROWS + team * ROWS_PER_LANES;
  bool live = r < PU(0);  // whole workgroups reach the barrier below
  uint row[ROWS_PER_LANES];
  float acc[ROWS_PER_LANES];
  [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) {
    row[i] = min(n0 + i, N - 1u);  // outputs past N repeat row N - 1 and are not stored
    acc[i] = 0.0;
  }
  float squares = 0.0;
  uint xbase = r * (K / 4u);
  for (uint b = 0u; live && b < chunks; b += LANES) {
    uint L = min(LANES, chunks - b);
    if (lane >= L) continue;
    uvec4 w[ROWS_PER_LANES];
    [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) w[i] = q[row[i] * chunks + b + lane];
    uint k0 = b * 32u + 4u * lane;
    float sc[ROWS_PER_LANES][8];
    [[unroll]] for (uint t = 0u; t < 8u; ++t) {
      uint g = (k0 + 4u * L * t) / G;
      [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) sc[i][t] = float(scale[row[i] * NG + g]);
    }
    vec4 xv[8];
    float xsum[8];
    [[unroll]] for (uint t = 0u; t < 8u; ++t) {
      uint j = b * 8u + L * t + lane;
      vec4 v = vec4(x4[xbase + j]);
      if (norm != 0u) {
        squares += dot(v, v);
        if (norm == 2u) v *= vec4(gain4[j]);
      }
      xv[t] = v;
      xsum[t] = (v.x + v.y) + (v.z + v.w);
    }
    [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) {
      uvec4 wi = w[i] ^ uvec4(0x88888888u);
      float s = 0.0;
      [[unroll]] for (uint t = 0u; t < 8u; ++t) {
        uint word = wi[t >> 1];
        if ((t & 1u) != 0u) word >>= 16;
        s += sc[i][t] * (16.0 * quad_dot(word, xv[t]) - 24.0 * xsum[t]);
      }
      acc[i] += s;
    }
  }
#ifdef SUBGROUP
  if (gl_SubgroupSize <= LANES) {  // uniform: subgroups of lanes that share their rows
    [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) acc[i] = subgroupAdd(acc[i]);
    squares = subgroupAdd(squares);
    if (gl_SubgroupSize == LANES) {
      if (lane == 0u && live)
        [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i)
          if (n0 + i < N) store(r, n0 + i, acc[i], squares);
      return;
    }
    if (!subgroupElect()) {  // only each subgroup's first lane keeps its sum for the shared-memory sum
      [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) acc[i] = 0.0;
      squares = 0.0;
    }
  }
#endif
  [[unroll]] for (uint i = 0u; i < ROWS_PER_LANES; ++i) partial[team * ROWS_PER_LANES + i][lane] = acc[i];
  square_partial[team][lane] = squares;
  barrier();
  uint n = gl_WorkGroupID.x * ROWS + lid;
  if (lid < ROWS && n < N && live) {
    float v = 0.0, ss = 0.0;
    [[unroll]] for (uint j = 0u; j < LANES; ++j) {
      v += partial[lid][j];
      ss += square_partial[lid / ROWS_PER_LANES][j];
    }
    store(r, n, v, ss);
  }
}
