#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: f16bigcoop keeps its accumulators in registers
#ifdef COOPMAT2
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#endif
// variants: f32 f16 f16coop f32small f16small f16smallsplit f16smallsplitcoop f16big f16bigcoop f32big f16bigcoop2
// tile: 4 4 1
// tile small: 1 1 1
// tile big: 8 8 1
// tile bigcoop2: 16 8 1
// y[b0,b1,m,n] = alpha * sum_k a[..,m,k] b[..,k,n] (+ bias[n]), clamped. push = M, N, K, B1, a strides
// (b0, b1, m, k), b strides (b0, b1, k, n), bias (0 none, 1 per n, 2 per m), alpha, lo, hi.
// Threads (N, M, B0*B1) as the payload gives them; "tile: 4 4 1" = each invocation computes 4x4 of
// them (gemm_tile.glsl), so the runtime launches ceil(N/64) x ceil(M/64) x B workgroups; the `small`
// variants compute 1 each (16x16 per workgroup; `f16smallsplit`, which the lowering names where that
// gives few workgroups, is the same tile, and on tensor cores `f16smallsplitcoop` with K split over the
// subgroups: gemm_tile_small_coop.glsl), `f16coop` the same 64x64 on tensor cores; `f16big` 8x8
// each (128x128 per workgroup): on tensor cores as `f16bigcoop` (gemm_tile_big_coop.glsl, reading A and B
// through second, 128-bit views of the same buffers where the strides allow), else gemm_tile_big.glsl;
// `f32big` 8x8 each in fp32 (gemm_tile_big32.glsl, vec4 views of A and B where the strides allow);
// `f16bigcoop2`, the `f16big` twin on a device with VK_NV_cooperative_matrix2, 16x8 each (128 m x 256 n per
// workgroup, one workgroup-scope matrix: gemm_tile_coop2.glsl; compiled by slang_glslang.py).
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

uint abase, bbase;
#define LOAD_A(m, k) ((m) < PU(0) && (k) < PU(2) ? a[abase + (m) * PU(6) + (k) * PU(7)] : T(0))
#define LOAD_B(k, n) ((k) < PU(2) && (n) < PU(1) ? b[bbase + (k) * PU(10) + (n) * PU(11)] : T(0))
#ifdef BIG_TILE
uint ybase;
float emit_value(uint m, uint n, float v) {
  float r = PF(13) * v + (PU(12) == 1u ? float(bias[n]) : (PU(12) == 2u ? float(bias[m]) : 0.0));
  return nan_clamp(r, PF(14), PF(15));
}
void emit(uint m, uint n, float v) { y[ybase + m * PU(1) + n] = T(emit_value(m, n, v)); }
#ifdef COOPMAT2
#include "gemm_tile_coop2.glsl"
#elif defined(COOPMAT)
// 128-bit loads (8 fp16): the A rows (k contiguous) / B rows (n contiguous) / B columns (k contiguous)
// start on a whole uvec4 when the row stride and the batch offset are multiples of 8
#define A_VEC (PU(7) == 1u && PU(6) % 8u == 0u && abase % 8u == 0u)
#define B_NVEC (PU(11) == 1u && PU(10) % 8u == 0u && bbase % 8u == 0u)
#define B_KVEC (PU(10) == 1u && PU(11) % 8u == 0u && bbase % 8u == 0u)
layout(std430, binding = 0) readonly buffer A8 { uvec4 a8[]; };
layout(std430, binding = 1) readonly buffer B8 { uvec4 b8[]; };
#define LOAD_A8(m, k) a8[(abase + (m) * PU(6) + (k)) / 8u]
#define LOAD_B8(k, n) b8[(bbase + (k) * PU(10) + (n) * PU(11)) / 8u]
#include "gemm_tile_big_coop.glsl"
#elif !defined(FP16)
// vec4 loads (4 fp32), as above: rows (or B's columns) a multiple of 4 apart from a multiple of 4
#define A_VEC4 (PU(7) == 1u && PU(6) % 4u == 0u && abase % 4u == 0u)
#define B_NVEC4 (PU(11) == 1u && PU(10) % 4u == 0u && bbase % 4u == 0u)
#define B_KVEC4 (PU(10) == 1u && PU(11) % 4u == 0u && bbase % 4u == 0u)
layout(std430, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer B4 { vec4 b4[]; };
#define LOAD_A4(m, k) a4[(abase + (m) * PU(6) + (k)) / 4u]
#define LOAD_B4(k, n) b4[(bbase + (k) * PU(10) + (n) * PU(11)) / 4u]
#include "gemm_tile_big32.glsl"  // f32big
#else
#include "gemm_tile_big.glsl"  // f16big without tensor cores: the 64x64 tile over the 2 x 2 quarters
#endif
#elif defined(COOPMAT) && defined(SMALL_TILE)
#include "gemm_tile_small_coop.glsl"  // f16smallsplitcoop
#elif defined(COOPMAT)
#include "gemm_tile_coop.glsl"  // f16coop: tensor cores (the device has VK_KHR_cooperative_matrix)
#else
#include "gemm_tile.glsl"
#endif

void main() {
  uint M = PU(0), N = PU(1), bz = gl_WorkGroupID.z, b0 = bz / PU(3), b1 = bz % PU(3);
  abase = b0 * PU(4) + b1 * PU(5);
  bbase = b0 * PU(8) + b1 * PU(9);
#ifdef BIG_TILE
  ybase = bz * M * N;
#ifdef COOPMAT2
  gemm_coop2(gl_WorkGroupID.y * uint(C2_BM), gl_WorkGroupID.x * uint(C2_BN), M, N, PU(2));
#else
  gemm_big(gl_WorkGroupID.y * BIG, gl_WorkGroupID.x * BIG, 0u, PU(2), M, N);
#endif
#else
  uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  vec4 acc[4];
  gemm_tile(m0, n0, 0u, PU(2), acc);
  for (uint i = 0u; i < RB; ++i) {
    uint m = m0 + gl_LocalInvocationID.y + 16u * i;
    if (m >= M) break;
    for (uint j = 0u; j < RB; ++j) {
      uint n = n0 + gl_LocalInvocationID.x + 16u * j;
      if (n >= N) break;
      float r = PF(13) * acc[i][j] + (PU(12) == 1u ? float(bias[n]) : (PU(12) == 2u ? float(bias[m]) : 0.0));
      y[(bz * M + m) * N + n] = T(nan_clamp(r, PF(14), PF(15)));
    }
  }
#endif
}
