// The 128x128 GEMM block of `f16big` on a device without cooperative matrices (lavapipe, VKDG_COOPMAT=0):
// the 64x64 tile of gemm_tile.glsl over the block's 2 x 2 quarters, one after the other, so a lowering can
// name `f16big` (the tensor-core twin f16bigcoop, gemm_tile_big_coop.glsl, where the device has it) and
// every device computes the same 128x128 blocks per workgroup.
// gemm_big(m0, n0, k_begin, k_end, M, N) calls the includer's emit(m, n, v) once for every m < M, n < N of
// the block C[m0 .. m0+128, n0 .. n0+128] with v = sum_k A[m, k] B[k, n] over k_begin <= k < k_end.
// (A 128x128 tile with an 8x8 register block per invocation and vec4 loads ran 16x slower than this on the
// H100, driver 580.159: bench/results/gpu/README.md, 05:16 run.)
#include "gemm_tile.glsl"

#define BIG 128u

void gemm_big(uint m0, uint n0, uint k_begin, uint k_end, uint M, uint N) {
  for (uint q = 0u; q < 4u; ++q) {
    uint bm = m0 + 64u * (q / 2u), bn = n0 + 64u * (q % 2u);
    if (bm >= M || bn >= N) continue;  // the same for the whole workgroup
    vec4 acc[4];
    gemm_tile(bm, bn, k_begin, k_end, acc);
    for (uint i = 0u; i < RB; ++i) {
      uint m = bm + gl_LocalInvocationID.y + 16u * i;
      for (uint j = 0u; j < RB; ++j) {
        uint n = bn + gl_LocalInvocationID.x + 16u * j;
        if (m < M && n < N) emit(m, n, acc[i][j]);
      }
    }
  }
}
