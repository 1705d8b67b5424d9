// The tensor-core twin of attention_flash.comp's body (its `f16sgcoop` variant, which the runtime picks instead of
// `f16sg` on a device with VK_KHR_cooperative_matrix's 16x16x16 fp16 x fp16 + fp32 shape and 32-wide subgroups:
// device.cpp, shader_select.cpp). Same bindings, push words and dispatch (one 64-invocation workgroup per 4 query
// rows): the workgroup of every fourth block takes 16 rows (one 16-row matrix tile), the other three return at once.
// Two passes over the keys in tiles of 32 (each of the 2 subgroups scores 16 keys: Q K^T on tensor cores, fp32
// accumulators): the first finds each row's max and sum (online, 4 invocations per row), the second writes
// P = exp(s - max) / sum in fp16 and accumulates P V on tensor cores, each subgroup owning every other 16-column
// slice of the output. Scoring twice costs less than rescaling accumulator matrices, whose rows a KHR cooperative
// matrix does not expose. Scale, masks and causality are applied element by element as in the scalar body; a row
// with no kept key is 0. Causal: key tiles past the last row are not visited. Operands are staged in shared memory
// with zero fill past S, KV and D (head dims that are not multiples of 16 pad to the next one), 128 bits per load
// where D is a multiple of 8 (on the H100 the Llama block's attention took 40 us with fp16 loads). D <= DMAXP.
#extension GL_KHR_shader_subgroup_basic : require
#define CQ 16u      // query rows per workgroup
#define CK 32u      // keys per tile: 16 per subgroup
#define DMAXP 256u  // largest head dim (FLASH_MAX_D in ops/attention.py)
// row strides, multiples of 16 bytes (coopMatLoad/Store alignment)
#define QSTR (DMAXP + 8u)  // fp16 Q, K, V rows
#define SSTR (CK + 4u)     // fp32 scores (and the output slices on the way out)
#define PSTR (CK + 8u)     // fp16 probabilities
shared float16_t Qs[CQ * QSTR];
shared float16_t Ks[CK * QSTR];
shared float16_t Vs[CK * QSTR];
shared float Ss[CQ * SSTR];
shared float16_t Ps[CQ * PSTR];
shared float part[64];  // per-invocation partial max / sum, 4 per row

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define NEG_INF (-1.0 / 0.0)

// second, 128-bit views of Q, K and V (8 fp16 each): with D a multiple of 8 every row starts 16-byte aligned
layout(std430, binding = 0) readonly buffer Q8 { uvec4 q8[]; };
layout(std430, binding = 1) readonly buffer K8 { uvec4 k8[]; };
layout(std430, binding = 2) readonly buffer V8 { uvec4 v8[]; };

// 8 fp16 of a 128-bit load into a shared row at `at` (macro: GLSL passes no shared arrays)
#define PUT8(DST, at, w)                                         \
  for (uint h = 0u; h < 4u; ++h) {                               \
    f16vec2 pair = unpackFloat2x16(w[h]);                        \
    DST[(at) + 2u * h] = pair.x;                                 \
    DST[(at) + 2u * h + 1u] = pair.y;                            \
  }

// keys j0 .. j0 + CK - 1 (and their values) into shared memory, zero past KV and D: 128-bit loads where D is a
// multiple of 8 (the Llama block's 64), else one fp16 at a time
void load_keys(uint base, uint j0, uint KV, uint D, uint DP, bool values, uint lane) {
  if (D % 8u == 0u) {
    uint cw = DP / 8u;
    for (uint e = lane; e < CK * cw; e += 64u) {
      uint r = e / cw, c = (e % cw) * 8u;
      bool inside = j0 + r < KV && c < D;
      uint src = (base + (j0 + r) * D + c) / 8u;
      uvec4 kw = inside ? k8[src] : uvec4(0u);
      PUT8(Ks, r * QSTR + c, kw)
      if (values) {
        uvec4 vw = inside ? v8[src] : uvec4(0u);
        PUT8(Vs, r * QSTR + c, vw)
      }
    }
    return;
  }
  for (uint e = lane; e < CK * DP; e += 64u) {
    uint r = e / DP, c = e % DP;
    bool inside = j0 + r < KV && c < D;
    uint src = base + (j0 + r) * D + c;
    Ks[r * QSTR + c] = inside ? k[src] : float16_t(0.0);
    if (values) Vs[r * QSTR + c] = inside ? v[src] : float16_t(0.0);
  }
}

// Q K^T of the tile into Ss: subgroup sg scores keys sg * 16 .. sg * 16 + 15 (K read column-major: its transpose)
void score_tile(uint sg, uint chunks) {
  CM_C s = CM_C(0.0);
  for (uint c = 0u; c < chunks; ++c) {
    CM_A a;
    CM_B kt;
    coopMatLoad(a, Qs, c * 16u, QSTR, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(kt, Ks, sg * 16u * QSTR + c * 16u, QSTR, gl_CooperativeMatrixLayoutColumnMajor);
    s = coopMatMulAdd(a, kt, s);
  }
  coopMatStore(s, Ss, sg * 16u, SSTR, gl_CooperativeMatrixLayoutRowMajor);
}

// the scaled, masked score of query row i and key j (-inf: not kept), as the scalar body computes it
float kept_score(float s, uint b, uint h, uint i, uint j, uint S, uint KV) {
  if (i >= S || j >= KV) return NEG_INF;
  s *= PF(7);
  uint mask_kind = PU(9), mi = b * PU(10) + h * PU(11) + i * PU(12) + j * PU(13);
  if (mask_kind == 1u) s += float(mask_f[mi]);
  if ((mask_kind == 2u && mask_b[mi] == 0) || (PU(8) != 0u && j > i)) s = NEG_INF;
  return s;
}

// the 4 invocations of a row combine their partials (every invocation of the workgroup calls it: barriers)
float row_combine(float x, uint lane, bool is_max) {
  part[lane] = x;
  barrier();
  uint r0 = lane & ~3u;
  float a = part[r0], b = part[r0 + 1u], c = part[r0 + 2u], d = part[r0 + 3u];
  barrier();
  return is_max ? max(max(a, b), max(c, d)) : (a + b) + (c + d);
}

void main() {
  uint wg = row_id(), lane = gl_LocalInvocationID.x, sg = gl_SubgroupID;
  if (wg >= PU(0)) return;  // whole workgroups return: the barriers below stay uniform
  uint H = PU(1), S = PU(2), KV = PU(3), D = PU(4), G = PU(5), QB = PU(6);
  uint qb = wg % QB;
  if (qb % 4u != 0u) return;  // rows 4 qb .. 4 qb + 15 belong to the workgroup of block qb - qb % 4
  uint bh = wg / QB, h = bh % H, b = bh / H;
  uint kvh = b * (H / G) + h / G;  // the kv head's index in [B, H_kv]
  uint i0 = qb * 4u, DP = (D + 15u) & ~15u, chunks = DP / 16u, base = kvh * KV * D;
  if (D % 8u == 0u) {
    uint cw = DP / 8u;
    for (uint e = lane; e < CQ * cw; e += 64u) {
      uint r = e / cw, c = (e % cw) * 8u;
      uvec4 qw = i0 + r < S && c < D ? q8[((bh * S + i0 + r) * D + c) / 8u] : uvec4(0u);
      PUT8(Qs, r * QSTR + c, qw)
    }
  } else {
    for (uint e = lane; e < CQ * DP; e += 64u) {
      uint r = e / DP, c = e % DP;
      Qs[r * QSTR + c] = i0 + r < S && c < D ? q[(bh * S + i0 + r) * D + c] : float16_t(0.0);
    }
  }
  // causal: no row of the tile keeps a key past its last row
  uint kv_end = PU(8) != 0u ? min(KV, min(i0 + CQ, S)) : KV;
  uint r = lane >> 2u, qtr = lane & 3u, i = i0 + r;  // this invocation's row and quarter of the tile's keys
  float m = NEG_INF, l = 0.0;
  for (uint j0 = 0u; j0 < kv_end; j0 += CK) {  // pass 1: row max and sum
    load_keys(base, j0, KV, D, DP, false, lane);
    barrier();
    score_tile(sg, chunks);
    barrier();
    float sv[8], tmax = NEG_INF;
    for (uint t = 0u; t < 8u; ++t) {
      uint jj = qtr * 8u + t;
      sv[t] = kept_score(Ss[r * SSTR + jj], b, h, i, j0 + jj, S, KV);
      tmax = max(tmax, sv[t]);
    }
    float m_new = max(m, row_combine(tmax, lane, true));
    float psum = 0.0;
    if (m_new != NEG_INF)
      for (uint t = 0u; t < 8u; ++t) psum += exp(sv[t] - m_new);
    psum = row_combine(psum, lane, false);
    l = m_new == NEG_INF ? 0.0 : l * exp(m - m_new) + psum;  // exp(-inf) = 0 drops an empty start
    m = m_new;
  }
  CM_C o[DMAXP / 32u];  // this subgroup's output slices: columns 16 (2 s + sg) .. + 15
  for (uint s = 0u; s < DMAXP / 32u; ++s) o[s] = CM_C(0.0);
  for (uint j0 = 0u; j0 < kv_end; j0 += CK) {  // pass 2: P = exp(s - max) / sum, O += P V
    load_keys(base, j0, KV, D, DP, true, lane);
    barrier();
    score_tile(sg, chunks);
    barrier();
    for (uint t = 0u; t < 8u; ++t) {
      uint jj = qtr * 8u + t;
      float sc = kept_score(Ss[r * SSTR + jj], b, h, i, j0 + jj, S, KV);
      Ps[r * PSTR + jj] = float16_t(m == NEG_INF ? 0.0 : exp(sc - m) / l);
    }
    barrier();
    for (uint s = 0u; s < DMAXP / 32u; ++s) {
      uint c = 2u * s + sg;
      if (c < chunks) {
        CM_A p0;
        CM_A p1;
        CM_B v0;
        CM_B v1;
        coopMatLoad(p0, Ps, 0u, PSTR, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(p1, Ps, 16u, PSTR, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(v0, Vs, c * 16u, QSTR, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(v1, Vs, 16u * QSTR + c * 16u, QSTR, gl_CooperativeMatrixLayoutRowMajor);
        o[s] = coopMatMulAdd(p0, v0, o[s]);
        o[s] = coopMatMulAdd(p1, v1, o[s]);
      }
    }
    barrier();
  }
  // each subgroup's slices leave through its own 16 columns of Ss, rows past S and columns past D dropped
  uint sl = gl_SubgroupInvocationID;
  for (uint s = 0u; s < DMAXP / 32u; ++s) {
    uint c = 2u * s + sg;
    if (c >= chunks) break;
    coopMatStore(o[s], Ss, sg * 16u, SSTR, gl_CooperativeMatrixLayoutRowMajor);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = sl; e < 256u; e += gl_SubgroupSize) {
      uint rr = e / 16u, d = c * 16u + e % 16u;
      if (i0 + rr < S && d < D) y[(bh * S + i0 + rr) * D + d] = T(Ss[rr * SSTR + sg * 16u + e % 16u]);
    }
    subgroupBarrier();
  }
}
