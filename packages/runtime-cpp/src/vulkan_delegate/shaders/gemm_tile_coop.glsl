// The tensor-core twin of gemm_tile.glsl (same function, same 16x16 invocations per 64x64 block of C,
// same acc layout, so the includer's epilogue is shared): compiled into matmul's `f16coop` variant, which the
// runtime picks instead of `f16` on a device with VK_KHR_cooperative_matrix offering a subgroup-scope
// 16x16x16 fp16 x fp16 + fp32 shape and 32-wide subgroups (device.cpp, method.cpp select_shader).
// The workgroup's 8 subgroups each own a 16x32 strip of C: two fp32 accumulator matrices. K advances 32
// at a time: the 256 invocations stage A (64 x 32) and B (32 x 64) as fp16 in shared memory (8 elements
// each), then every subgroup multiplies 2 x 2 16x16 tiles per 16 of K. At the end the accumulators go
// through shared memory into each invocation's 4x4 outputs (rows ty + 16 i, columns tx + 16 j).
// Row strides of the shared tiles are multiples of 16 bytes (coopMatLoad/Store alignment).
#define RB 4u  // outputs per invocation per axis, as in gemm_tile.glsl
#define TILE 64u
#define TK 32u
#define ASTR (TK + 8)    // A tile: [64 m][TK k] fp16
#define BSTR (TILE + 8)  // B tile: [TK k][64 n] fp16
#define CSTR (TILE + 4)  // C tile: [64 m][64 n] fp32
shared float16_t As[TILE * ASTR];
shared float16_t Bs[TK * BSTR];
shared float Cs[TILE * CSTR];

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

void gemm_tile(uint m0, uint n0, uint k_begin, uint k_end, out vec4 acc[4]) {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, lid = ty * 16u + tx;
  uint sg = gl_SubgroupID, row = (sg / 2u) * 16u, col = (sg % 2u) * 32u;
  CM_C c0 = CM_C(0.0);  // one declarator per statement: glslang 13 drops the use of a second one
  CM_C c1 = CM_C(0.0);
  for (uint k0 = k_begin; k0 < k_end; k0 += TK) {
    for (uint r = 0u; r < 8u; ++r) {
      uint e = lid + 256u * r;
      // A: 32 invocations along k (row-major A reads 64 contiguous bytes per row); B: 64 along n.
      uint am = e / TK, ak = e % TK, bk = e / TILE, bn = e % TILE;
      As[am * ASTR + ak] = float16_t(LOAD_A(m0 + am, k0 + ak));
      Bs[bk * BSTR + bn] = float16_t(LOAD_B(k0 + bk, n0 + bn));
    }
    barrier();
    for (uint kk = 0u; kk < TK; kk += 16u) {
      CM_A a;
      CM_B b0;
      CM_B b1;
      coopMatLoad(a, As, row * ASTR + kk, ASTR, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b0, Bs, kk * BSTR + col, BSTR, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b1, Bs, kk * BSTR + col + 16u, BSTR, gl_CooperativeMatrixLayoutRowMajor);
      c0 = coopMatMulAdd(a, b0, c0);
      c1 = coopMatMulAdd(a, b1, c1);
    }
    barrier();
  }
  coopMatStore(c0, Cs, row * CSTR + col, CSTR, gl_CooperativeMatrixLayoutRowMajor);
  coopMatStore(c1, Cs, row * CSTR + col + 16u, CSTR, gl_CooperativeMatrixLayoutRowMajor);
  barrier();
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = Cs[(ty + 16u * i) * CSTR + tx + 16u * j];
}
