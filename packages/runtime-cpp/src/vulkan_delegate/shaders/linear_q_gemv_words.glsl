// linear_q_gemv's subgroup twin (the `sg` variants, run where the device has subgroup arithmetic): the same
// push, bindings, grid and results, one 32-bit word of 8 weights per lane and step instead of a 128-bit
// chunk. Lane t of the workgroup takes words t, t + 128, ... of each of the workgroup's ROWS rows, so a
// warp's weight loads are 128 contiguous bytes per row and its activation loads (two vec4 per word) 1 KB
// contiguous: x comes straight from global memory (L1/L2), with no shared-memory staging, no barrier in
// the loop, and every lane busy at K = 2048 (the chunk kernel keeps half its 128 threads idle there: 64
// chunks per row). Each lane loads two words per row (2 x ROWS weight and scale loads) before computing
// either; x is loaded once per word and used for all ROWS rows. Partial sums: subgroupAdd, then one
// shared-memory slot per subgroup (any subgroup size: NVIDIA 32, lavapipe 4-16) and one barrier.
layout(std430, binding = 0) readonly buffer X { TV4 x4[]; };
layout(std430, binding = 1) readonly buffer Q { uint q[]; };
layout(std430, binding = 2) readonly buffer S { T scale[]; };
layout(std430, binding = 3) readonly buffer Bias { T bias[]; };
layout(std430, binding = 4) readonly buffer Other { T other[]; };
layout(std430, binding = 5) readonly buffer Gain { TV4 gain4[]; };
layout(std430, binding = 6) writeonly buffer Y { T y[]; };
shared float partial[ROWS + 1u][WG];  // per subgroup; row ROWS: the sums of squares of a folded RMS norm

#define NIB(bits) uintBitsToFloat(0x3F800000u | ((bits) & 0x00780000u))

float word_dot(uint w, vec4 lo, vec4 hi) {
  float s = lo.x * NIB(w << 19);
  s += lo.y * NIB(w << 15);
  s += lo.z * NIB(w << 11);
  s += lo.w * NIB(w << 7);
  s += hi.x * NIB(w << 3);
  s += hi.y * NIB(w >> 1);
  s += hi.z * NIB(w >> 5);
  s += hi.w * NIB(w >> 9);
  return s;
}

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
    if (norm != 0u) v *= inversesqrt(ss / float(K) + PF(9));
    if (PU(5) != 0u) v += float(bias[n]);
    uint ep = PU(8);
    if (ep == 1u) v += float(other[r * N + n]);
    else if (ep == 2u) v *= float(other[r * N + n]);
    else if (ep == 3u) v = v / (1.0 + exp(-v));
    y[r * N + n] = T(v);
  }
}
