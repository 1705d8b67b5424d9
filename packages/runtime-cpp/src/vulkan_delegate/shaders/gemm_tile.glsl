// Register-blocked GEMM tile, shared by matmul.comp and conv2d_gemm.comp (the includer declares the
// 16x16 local size, where embed_shaders.py reads it, and defines
// LOAD_A(m, k) and LOAD_B(k, n): element loads that return 0 outside the matrix). A 16x16 workgroup
// computes a TILE x TILE block of C, each invocation an RB x RB sub-block at rows ty + 16 i and columns
// tx + 16 j (bank-conflict-free shared reads, coalesced stores); K advances 16 at a time through shared
// memory, each invocation loading RB elements of A and RB of B per step.
// RB = 4 (64x64 blocks) by default; the `small` variants (SMALL_TILE) take RB = 1, 16x16 blocks, for
// GEMMs whose output gives a 64x64 tile too few workgroups (batch-1 late layers, GEMV-like shapes).
//
// fp32 variant: fp32 multiply-adds. fp16 variant (FP16, device with shaderFloat16): tiles held as
// fp16, products summed in fp16 by packed f16vec4 FMAs over 4 consecutive k (GEMM_F16_CHUNK; 8 put MobileNetV2 fp16 past its bound), each
// chunk then added into an fp32 accumulator: fp16 arithmetic with fp32 accumulation over K.
#ifdef SMALL_TILE
#define RB 1u
#else
#define RB 4u
#endif
#define TILE (16u * RB)
#define TK 16u
#ifdef FP16
#define ST float16_t
#define GEMM_F16_CHUNK 4
#else
#define ST float
#endif
shared ST As[TK][TILE + 4];
shared ST Bs[TK][TILE + 4];

// acc[i][j] = sum_k A[m0 + ty + 16 i, k] * B[k, n0 + tx + 16 j] for k_begin <= k < k_end (the loads
// return 0 from k_end on), i, j < RB. No parameter may share a name with the includer's globals:
// LOAD_A/LOAD_B expand in here.
void gemm_tile(uint m0, uint n0, uint k_begin, uint k_end, out vec4 acc[4]) {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, lid = ty * 16u + tx;
  for (int i = 0; i < 4; ++i) acc[i] = vec4(0.0);
  for (uint k0 = k_begin; k0 < k_end; k0 += TK) {
    for (uint r = 0u; r < RB; ++r) {
      uint e = lid + 256u * r;
      // A: 16 threads along k (row-major A reads 64 contiguous bytes per row); B: TILE along n.
      uint am = e / TK, ak = e % TK, bk = e / TILE, bn = e % TILE;
      As[ak][am] = ST(LOAD_A(m0 + am, k0 + ak));
      Bs[bk][bn] = ST(LOAD_B(k0 + bk, n0 + bn));
    }
    barrier();
#ifdef SMALL_TILE
    float part = 0.0;  // one output: a plain dot product over this K step, in the tile's type
    for (uint kk = 0u; kk < TK; ++kk) part = fma(float(As[kk][ty]), float(Bs[kk][tx]), part);
    acc[0][0] += part;
#elif defined(FP16)
    for (uint c = 0u; c < TK; c += GEMM_F16_CHUNK) {
      f16vec4 part[4];
      for (int i = 0; i < 4; ++i) part[i] = f16vec4(0.0hf);
      for (uint kk = c; kk < c + GEMM_F16_CHUNK; ++kk) {
        f16vec4 b = f16vec4(Bs[kk][tx], Bs[kk][tx + 16u], Bs[kk][tx + 32u], Bs[kk][tx + 48u]);
        for (int i = 0; i < 4; ++i) part[i] = fma(f16vec4(As[kk][ty + 16u * uint(i)]), b, part[i]);
      }
      for (int i = 0; i < 4; ++i) acc[i] += vec4(part[i]);
    }
#else
    for (uint kk = 0u; kk < TK; ++kk) {
      vec4 b = vec4(Bs[kk][tx], Bs[kk][tx + 16u], Bs[kk][tx + 32u], Bs[kk][tx + 48u]);
      for (int i = 0; i < 4; ++i) acc[i] = fma(vec4(As[kk][ty + 16u * uint(i)]), b, acc[i]);
    }
#endif
    barrier();
  }
}
