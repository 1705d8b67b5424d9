#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
// variants: f32 f16
// linear_q for few activation rows (the decode step's one token), 4-bit weights grouped along K in
// multiples of 32: y[r, n] = ep(sum_k x[r, k] * q[n, k] * scale[n, k / G] (+ bias[n])), the same weight
// layout as linear_q (element i of a row in bits 4*(i%8).. of word i/8, low nibble first). Bound by the
// weight bytes, so each thread streams whole 128-bit chunks (32 weights of one row, one group or part of
// one): a workgroup of 128 threads computes ROWS outputs of one activation row, split-K over its
// threads (chunk c = tid, tid + 128, ...). The activations of 128 chunks at a time are staged in shared
// memory by coalesced vec4 loads (a thread reading its own 32 values from global memory touched 32 cache
// lines per warp-wide load: that, not the weight stream, bounded the first version on the H100), padded
// to 9 vec4 per chunk so the per-thread vec4 reads are free of bank conflicts. Nibble m (value + 8) is
// made the float 1 + m/16 by one shift and one mask-or; sum x * value = 16 sum x * (1 + m/16) - 24 sum x.
// Sums in fp32 whatever T is. Epilogue (push 8): 0 none, 1 + other[r, n] (a residual add), 2 * other[r, n],
// 3 silu. An RMS norm of x folded in (push 6: 0 none, 1 without, 2 with a gain; push 9 its eps): the staged
// values are x * gain, each workgroup sums the squares of the raw row as it stages it (every workgroup stages
// the whole row), and the dot product is scaled by 1 / rms before the bias: W (g x / rms) = (W (g x)) / rms.
// Each thread loads its weights and scales of a pass before staging x, so the two loads' latencies overlap.
// push = rows, N, K, G, groups per row, has_bias (linear_q's first six words), norm, bits, epilogue, eps.
// Threads: (ceil(N / ROWS) * 128, rows). linear_q_gemv_words.comp is its word-per-lane twin (same push,
// bindings and grid) for wide outputs (ops/quantized.py chooses).
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
layout(std430, binding = 1) readonly buffer Q { uvec4 q[]; };
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) readonly buffer Other { T other[]; };
layout(std430, binding = 5) readonly buffer Gain { TV4 gain4[]; };
layout(std430, binding = 6) writeonly buffer Y { T y[]; };
shared vec4 xs[WG * 9u];
shared float partial[ROWS + 1u][WG + 1u];  // row ROWS: the sums of squares of a folded RMS norm

#include "linear_q_gemv.glsl"

void main() {
  uint lid = gl_LocalInvocationID.x, r = gl_WorkGroupID.y, n0 = gl_WorkGroupID.x * ROWS;
  uint N = PU(1), K = PU(2), NG = PU(4), norm = PU(6);
  uint chunks = K / 32u, chunks_per_group = PU(3) / 32u;
  bool live = r < PU(0);  // whole workgroups reach the barriers below
  float acc[ROWS];
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) acc[i] = 0.0;
  float squares = 0.0;
  for (uint base = 0u; base < chunks; base += WG) {
    uint here = min(WG, chunks - base);
    bool mine = live && lid < here;
    uint c = base + lid, g = c / chunks_per_group;
    uvec4 w[ROWS];
    float sc[ROWS];
    if (mine)
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
        uint n = min(n0 + i, N - 1u);  // outputs past N repeat row N - 1 and are not stored
        w[i] = q[n * chunks + c];
        sc[i] = float(scale[n * NG + g]);
      }
    if (live)
      for (uint i = lid; i < here * 8u; i += WG) {
        vec4 v = vec4(x4[(r * K + base * 32u) / 4u + i]);
        if (norm != 0u) {
          squares += dot(v, v);
          if (norm == 2u) v *= vec4(gain4[base * 8u + i]);
        }
        xs[(i >> 3) * 9u + (i & 7u)] = v;
      }
    barrier();
    if (mine) {
      vec4 xv[8];
      [[unroll]] for (uint j = 0u; j < 8u; ++j) xv[j] = xs[lid * 9u + j];
      vec4 t = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
      float xsum = (t.x + t.y) + (t.z + t.w);
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
        uvec4 wi = w[i] ^ uvec4(0x88888888u);
        float s = (word_dot(wi.x, xv[0], xv[1]) + word_dot(wi.y, xv[2], xv[3]))
                + (word_dot(wi.z, xv[4], xv[5]) + word_dot(wi.w, xv[6], xv[7]));
        acc[i] += (16.0 * s - 24.0 * xsum) * sc[i];
      }
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < ROWS; ++i) partial[i][lid] = acc[i];
  partial[ROWS][lid] = squares;
  barrier();
  // WG / ROWS threads per output row, each summing ROWS partials, then one thread those; the first 16
  // threads also sum the squares, 8 each
  uint row = lid / (WG / ROWS), part = lid % (WG / ROWS);
  float s = 0.0, sq = 0.0;
  [[unroll]] for (uint j = 0u; j < ROWS; ++j) s += partial[row][part * ROWS + j];
  if (lid < 16u)
    [[unroll]] for (uint j = 0u; j < 8u; ++j) sq += partial[ROWS][lid * 8u + j];
  barrier();
  partial[row][part] = s;
  if (lid < 16u) partial[ROWS][lid] = sq;
  barrier();
  uint n = n0 + lid;
  if (lid < ROWS && n < N && live) {
    float v = 0.0, ss = 0.0;
    [[unroll]] for (uint j = 0u; j < WG / ROWS; ++j) v += partial[lid][j];
    [[unroll]] for (uint j = 0u; j < 16u; ++j) ss += partial[ROWS][j];
    store(r, n, v, ss);
  }
}
