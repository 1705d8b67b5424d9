#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// Scaled dot-product attention for few query rows over a short cache (the decode step: one token's
// heads over its KV cache), one 128-lane workgroup per query row: the matmul, mask, softmax and matmul
// of the unfused path (4 dispatches, each at the per-dispatch floor) in one. Scores: 8 lanes per key, each
// a contiguous eighth of the head dim (a key row is read by consecutive lanes), summed through shared
// memory; all KV scores stay in shared memory (KV <= 1024); softmax there (NaN-propagating max); the
// output: lane e of each of 128 / D lane groups sums p * v over every (128 / D)-th key, the groups' sums
// are added. The same push as attention_flash (its mask and causal semantics; a row with no kept key is 0,
// as torch's SDPA; a NaN score gives a NaN row, as torch), QB = S: push = B*H*S (workgroups), H, S, KV, D,
// g, S, scale, causal, mask_kind, mask strides (b, h, s, kv; elements). Threads: B*H*S * 128. D <= 256.
// fp32 arithmetic.
#include "common.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Q { T q[]; };
layout(std430, binding = 1) readonly buffer K { T k[]; };
layout(std430, binding = 2) readonly buffer V { T v[]; };
layout(std430, binding = 3) readonly buffer MF { T mask_f[]; };
layout(std430, binding = 4) readonly buffer MB { int mask_b[]; };
layout(std430, binding = 5) writeonly buffer Y { T y[]; };

#define LANES 128u
#define KEY_LANES 8u   // lanes per key in the score pass
#define MAX_KV 1024u
shared float q_row[256];
shared float sc[MAX_KV];
shared float red[LANES * 2u];

void main() {
  uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, lane = gl_LocalInvocationID.x;
  if (wg >= PU(0)) return;  // the whole workgroup: the barriers below stay uniform
  uint H = PU(1), S = PU(2), KV = PU(3), D = PU(4), G = PU(5);
  float scale = PF(7);
  bool causal = PU(8) != 0u;
  uint mask_kind = PU(9);
  uint i = wg % S, bh = wg / S, h = bh % H, b = bh / H;
  uint kbase = (b * (H / G) + h / G) * KV * D;  // the kv head's rows in [B, H_kv, KV, D]
  for (uint c = lane; c < D; c += LANES) q_row[c] = float(q[(bh * S + i) * D + c]) * scale;
  barrier();
  // scores: key j = pass + lane / KEY_LANES, dims part * span .. of it
  uint part = lane % KEY_LANES, span = (D + KEY_LANES - 1u) / KEY_LANES;
  uint c0 = part * span, c1 = min(c0 + span, D);
  for (uint j0 = 0u; j0 < KV; j0 += LANES / KEY_LANES) {
    uint j = j0 + lane / KEY_LANES;
    float s = 0.0;
    if (j < KV)
      for (uint c = c0; c < c1; ++c) s += q_row[c] * float(k[kbase + j * D + c]);
    red[lane] = s;
    barrier();
    if (part == 0u && j < KV) {
      float t = 0.0;
      for (uint p = 0u; p < KEY_LANES; ++p) t += red[lane + p];
      uint mi = b * PU(10) + h * PU(11) + i * PU(12) + j * PU(13);
      if (mask_kind == 1u) t += float(mask_f[mi]);
      if ((mask_kind == 2u && mask_b[mi] == 0) || (causal && j > i)) t = -1.0 / 0.0;
      sc[j] = t;
    }
    barrier();
  }
  // softmax over sc[0, KV)
  float m = -1.0 / 0.0;
  for (uint j = lane; j < KV; j += LANES) m = nan_max(m, sc[j]);
  red[lane] = m;
  barrier();
  for (uint w = LANES / 2u; w > 0u; w >>= 1) {
    if (lane < w) red[lane] = nan_max(red[lane], red[lane + w]);
    barrier();
  }
  m = red[0];
  barrier();
  float l = 0.0;
  for (uint j = lane; j < KV; j += LANES) {
    float p = m == -1.0 / 0.0 ? 0.0 : exp(sc[j] - m);  // no kept key: every p is 0 (not exp(-inf + inf))
    sc[j] = p;
    l += p;
  }
  red[lane] = l;
  barrier();
  for (uint w = LANES / 2u; w > 0u; w >>= 1) {
    if (lane < w) red[lane] += red[lane + w];
    barrier();
  }
  l = red[0];
  barrier();
  // out[e] = sum_j p[j] v[j, e] / l: groups of D lanes (D <= 128) take every groups-th key
  uint groups = max(1u, LANES / D), grp = lane / D;
  float acc0 = 0.0, acc1 = 0.0;  // dims lane % D and (D > 128) lane + 128
  if (grp < groups)
    for (uint j = grp; j < KV; j += groups) {
      float p = sc[j];
      uint row = kbase + j * D;
      acc0 += p * float(v[row + lane % D]);
      if (lane + LANES < D) acc1 += p * float(v[row + lane + LANES]);
    }
  red[lane] = acc0;
  red[LANES + lane] = acc1;
  barrier();
  if (lane < min(D, LANES)) {
    float o = 0.0;
    for (uint g2 = 0u; g2 < groups; ++g2) o += red[g2 * D + lane];
    uint yo = (bh * S + i) * D;
    // no kept key: 0 (m is -inf only then; a NaN score makes m, l and the output NaN, as torch)
    bool empty = m == -1.0 / 0.0;
    y[yo + lane] = T(empty ? 0.0 : o / l);
    if (lane + LANES < D) y[yo + lane + LANES] = T(empty ? 0.0 : red[LANES + lane] / l);
  }
}
