// The tensor-core twin of gemm_tile.glsl's `small` tile (matmul's `f16smallsplitcoop`, which the runtime picks
// for `f16smallsplit` as it picks f16coop for f16, shader_select.cpp; the lowering names `f16smallsplit` where
// the small tile gives at most ops/matmul.py's SPLIT_MAX_GROUPS workgroups): the same 16x16 invocations per
// 16x16 block of C, one output each in acc[0][0], so the includer's epilogue and group counts are shared.
// The `small` tile walks all of K 16 at a time with two workgroup barriers per step, latency-bound (the Llama
// block's w_down, 128 x 256 over K = 688: 22.7 us on the H100, the same in fp16 and fp32). Here the 8 subgroups
// split K: subgroup s sums the 32-deep slices s, s + 8, s + 16, ..., each staged through its own shared region
// (A 16 x 32, B 32 x 16 fp16; subgroup barriers only) and multiplied as two 16x16x16 products in fp32; at the
// end the 8 partial 16x16 accumulators meet in shared memory and each invocation adds its output's 8.
// Row strides of the regions are multiples of 16 bytes (coopMatLoad alignment).
#define RB 1u
#define TILE 16u
#define SK 32u                // K slice per subgroup step
#define NSG 8u                // subgroups (256 invocations of 32)
#define SASTR (SK + 8u)       // A region: [16 m][SK k] fp16
#define SBSTR (TILE + 8u)     // B region: [SK k][16 n] fp16
shared float16_t Sa[NSG * TILE * SASTR];
shared float16_t Sb[NSG * SK * SBSTR];
shared float Sc[NSG * 256u];  // the partial accumulators

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

void gemm_tile(uint m0, uint n0, uint k_begin, uint k_end, out vec4 acc[4]) {
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, ab = sg * TILE * SASTR, bb = sg * SK * SBSTR;
  for (int i = 0; i < 4; ++i) acc[i] = vec4(0.0);
  CM_C c = CM_C(0.0);
  for (uint k0 = k_begin + sg * SK; k0 < k_end; k0 += NSG * SK) {  // uniform within the subgroup
    for (uint r = 0u; r < 16u; ++r) {
      uint e = lane + 32u * r;  // A: a row of 32 k per pass (64 contiguous bytes); B: two rows of 16 n
      Sa[ab + (e / SK) * SASTR + e % SK] = float16_t(LOAD_A(m0 + e / SK, k0 + e % SK));
      Sb[bb + (e / TILE) * SBSTR + e % TILE] = float16_t(LOAD_B(k0 + e / TILE, n0 + e % TILE));
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint kk = 0u; kk < SK; kk += 16u) {
      CM_A a;
      CM_B b;
      coopMatLoad(a, Sa, ab + kk, SASTR, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b, Sb, bb + kk * SBSTR, SBSTR, gl_CooperativeMatrixLayoutRowMajor);
      c = coopMatMulAdd(a, b, c);
    }
    subgroupMemoryBarrierShared();  // every lane has read the region before the next slice overwrites it
    subgroupBarrier();
  }
  coopMatStore(c, Sc, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
  barrier();
  uint at = gl_LocalInvocationID.y * 16u + gl_LocalInvocationID.x;
  float sum = 0.0;
  for (uint g = 0u; g < NSG; ++g) sum += Sc[g * 256u + at];
  acc[0][0] = sum;
}
