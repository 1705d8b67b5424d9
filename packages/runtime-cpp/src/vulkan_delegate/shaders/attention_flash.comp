#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg f16sgcoop
// Fused scaled dot-product attention (flash style): one 64-lane workgroup per block of 4 query rows of
// one (batch, head) streams the keys and values in tiles of 64 keys, keeping a running max and sum per
// row (online softmax) and the output rows in registers; no score matrix beyond the 4 x 64 tile in
// shared memory. fp32 arithmetic (fp16 storage in the f16 variants). Grouped-query attention reads kv
// head h / g (no copy). Masks: additive float (mask_kind 1) or bool as int32 0/1 (2), broadcast through
// strides; causal keeps key j <= query i (torch's is_causal). A row with no kept key is 0, as torch's
// SDPA. push = B*H*QB (workgroups), H, S, KV, D, g, QB (= ceil(S / 4)), scale, causal, mask_kind,
// mask strides (b, h, s, kv; elements). Threads: B*H*QB * 64. D <= 256. The `f16sgcoop` variant (COOPMAT) runs
// attention_flash_coop.glsl's tensor-core body instead, with the same bindings, push words and dispatch.
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 64) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer Q { T q[]; };
layout(std430, binding = 1) readonly buffer K { T k[]; };
layout(std430, binding = 2) readonly buffer V { T v[]; };
layout(std430, binding = 3) readonly buffer MF { T mask_f[]; };
layout(std430, binding = 4) readonly buffer MB { int mask_b[]; };
layout(std430, binding = 5) writeonly buffer Y { T y[]; };

#ifdef COOPMAT
#include "attention_flash_coop.glsl"
#else

#define QROWS 4
#define DCHUNKS 4  // D <= 64 * DCHUNKS
shared float q_tile[QROWS][256];
shared float p_tile[QROWS][64];

void main() {
  uint wg = row_id(), lane = gl_LocalInvocationID.x;
  if (wg >= PU(0)) return;  // the whole workgroup: the barriers below stay uniform
  uint H = PU(1), S = PU(2), KV = PU(3), D = PU(4), G = PU(5), QB = PU(6);
  float scale = PF(7);
  bool causal = PU(8) != 0;
  uint mask_kind = PU(9);
  uint qb = wg % QB, bh = wg / QB, h = bh % H, b = bh / H;
  uint kvh = b * (H / G) + h / G;  // the kv head's index in [B, H_kv]
  uint i0 = qb * QROWS;
  for (uint r = 0; r < QROWS; ++r)
    for (uint c = lane; c < D; c += 64)
      q_tile[r][c] = i0 + r < S ? float(q[((bh * S) + i0 + r) * D + c]) : 0.0;
  barrier();
  float m[QROWS], l[QROWS], acc[QROWS][DCHUNKS];
  for (uint r = 0; r < QROWS; ++r) {
    m[r] = -1.0 / 0.0;
    l[r] = 0.0;
    for (uint c = 0; c < DCHUNKS; ++c) acc[r][c] = 0.0;
  }
  uint kbase = kvh * KV * D;
  for (uint j0 = 0; j0 < KV; j0 += 64) {
    uint j = j0 + lane;
    float s[QROWS];
    for (uint r = 0; r < QROWS; ++r) s[r] = -1.0 / 0.0;
    if (j < KV) {
      for (uint r = 0; r < QROWS; ++r) s[r] = 0.0;
      for (uint c = 0; c < D; ++c) {
        float kc = float(k[kbase + j * D + c]);
        for (uint r = 0; r < QROWS; ++r) s[r] += q_tile[r][c] * kc;
      }
      for (uint r = 0; r < QROWS; ++r) {
        uint i = i0 + r;
        s[r] *= scale;
        uint mi = b * PU(10) + h * PU(11) + i * PU(12) + j * PU(13);
        if (mask_kind == 1 && i < S) s[r] += float(mask_f[mi]);
        if ((mask_kind == 2 && i < S && mask_b[mi] == 0) || (causal && j > i) || i >= S) s[r] = -1.0 / 0.0;
      }
    }
    for (uint r = 0; r < QROWS; ++r) {
      float m_new = max(m[r], row_max(s[r]));
      // all kept scores so far -inf: nothing to add (exp(-inf - -inf) would be NaN)
      float p = m_new == -1.0 / 0.0 ? 0.0 : exp(s[r] - m_new);
      float alpha = m_new == -1.0 / 0.0 ? 1.0 : exp(m[r] - m_new);
      l[r] = l[r] * alpha + row_sum(p);
      m[r] = m_new;
      p_tile[r][lane] = p;
      for (uint c = 0; c < DCHUNKS; ++c) acc[r][c] *= alpha;
    }
    barrier();
    uint n = min(64u, KV - j0);
    for (uint jj = 0; jj < n; ++jj) {
      uint vrow = kbase + (j0 + jj) * D;
      for (uint c = 0; c < DCHUNKS; ++c) {
        uint dd = lane + 64 * c;
        if (dd >= D) break;
        float vv = float(v[vrow + dd]);
        for (uint r = 0; r < QROWS; ++r) acc[r][c] += p_tile[r][jj] * vv;
      }
    }
    barrier();
  }
  for (uint r = 0; r < QROWS; ++r) {
    uint i = i0 + r;
    if (i >= S) break;
    for (uint c = 0; c < DCHUNKS; ++c) {
      uint dd = lane + 64 * c;
      if (dd < D) y[(bh * S + i) * D + dd] = T(l[r] > 0.0 ? acc[r][c] / l[r] : 0.0);
    }
  }
}
#endif
