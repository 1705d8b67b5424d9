// The fp32 128x128 GEMM block (matmul's `f32big`): gemm_big(m0, n0, k_begin, k_end, M, N) calls the
// includer's emit(m, n, v) once for every m < M, n < N of C[m0 .. m0+128, n0 .. n0+128] with
// v = sum_k A[m, k] B[k, n] over k_begin <= k < k_end, fp32 multiply-adds.
//
// 256 invocations (tx = lid % 16, ty = lid / 16), each an 8x8 register block: rows 4 ty + {0..3} and
// 64 + 4 ty + {0..3}, columns 4 tx + {0..3} and 64 + 4 tx + {0..3}, held as 16 named vec4 accumulators
// c<row><half> and read by constant swizzles: no array and no dynamic component index anywhere in the K
// loop. (A first form with a [[unroll]]ed vec4 acc[16] and a0[r] ran 2.0 TFLOP/s on the H100, as an
// earlier float acc[8][8] tile did: an accumulator array the driver keeps in local memory is the suspect.
// This form: 33.1 TFLOP/s at 4096^3 on the H100, 128 registers and 16 bytes of local memory per the driver's
// VKDG_PIPELINE_STATS; bench/results/gpu/README.md.)
// K advances 8 at a time through two shared buffers, [k][m] and [k][n] as vec4 rows, read as vec4
// (4 rows / 4 columns per load): while one slice is multiplied, each invocation holds its share of the next
// (4 values of A, 4 of B) in registers and stores it into the other buffer before the one barrier per step.
// Global loads are vec4 where the includer says the operand allows it (A_VEC4: A row-major, rows a multiple
// of 4 elements apart; B_NVEC4 likewise for row-major B; B_KVEC4: B column-major, as Linear's weight) and
// the 4 values lie inside the matrix; else element loads (LOAD_A / LOAD_B return 0 outside the matrix).
// The includer defines LOAD_A(m, k), LOAD_B(k, n), LOAD_A4(m, k) (vec4 from (m, k) on along k),
// LOAD_B4(k, n) (along n, or along k with B_KVEC4), A_VEC4, B_NVEC4, B_KVEC4 (bools) and emit().
#define BIG 128u
#define BK32 8u
shared vec4 As32[2u * BK32 * 32u];  // [buf][k][m / 4]
shared vec4 Bs32[2u * BK32 * 32u];  // [buf][k][n / 4]

// this invocation's 4 values of A's K slice at k0: row lid / 2, k from k0 + 4 (lid % 2)
vec4 big32_load_a(uint lid, uint m0, uint k0, uint k_end, uint M) {
  uint m = m0 + lid / 2u, k = k0 + 4u * (lid % 2u);
  if (A_VEC4 && m < M && k + 4u <= k_end) return LOAD_A4(m, k);
  vec4 v;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) v[i] = m < M && k + i < k_end ? float(LOAD_A(m, k + i)) : 0.0;
  return v;
}

// B's: row-major, k = lid / 32 and n from 4 (lid % 32); column-major (kmajor), n = lid / 2, k from 4 (lid % 2)
vec4 big32_load_b(uint lid, uint n0, uint k0, uint k_end, uint N, bool kmajor) {
  uint k = k0 + (kmajor ? 4u * (lid % 2u) : lid / 32u), n = n0 + (kmajor ? lid / 2u : 4u * (lid % 32u));
  if (kmajor && n < N && k + 4u <= k_end) return LOAD_B4(k, n);
  if (!kmajor && B_NVEC4 && k < k_end && n + 4u <= N) return LOAD_B4(k, n);
  vec4 v;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint kk = kmajor ? k + i : k, nn = kmajor ? n : n + i;
    v[i] = kk < k_end && nn < N ? float(LOAD_B(kk, nn)) : 0.0;
  }
  return v;
}

void big32_store_a(uint lid, uint buf, vec4 v) {  // 4 k of row m: one component in 4 [k] rows
  uint m = lid / 2u, k = 4u * (lid % 2u), at = (buf * BK32 + k) * 32u + m / 4u, c = m % 4u;
  As32[at][c] = v.x;
  As32[at + 32u][c] = v.y;
  As32[at + 64u][c] = v.z;
  As32[at + 96u][c] = v.w;
}

void big32_store_b(uint lid, uint buf, vec4 v, bool kmajor) {
  if (!kmajor) {
    Bs32[(buf * BK32 + lid / 32u) * 32u + lid % 32u] = v;
    return;
  }
  uint n = lid / 2u, k = 4u * (lid % 2u), at = (buf * BK32 + k) * 32u + n / 4u, c = n % 4u;
  Bs32[at][c] = v.x;
  Bs32[at + 32u][c] = v.y;
  Bs32[at + 64u][c] = v.z;
  Bs32[at + 96u][c] = v.w;
}

// row m of the block (4 + 4 columns: 4 tx + {0..3} and 64 + 4 tx + {0..3}) through the includer's emit()
void big32_emit_row(uint m, uint n, vec4 lo, vec4 hi, uint M, uint N) {
  if (m >= M) return;
  if (n < N) emit(m, n, lo.x);
  if (n + 1u < N) emit(m, n + 1u, lo.y);
  if (n + 2u < N) emit(m, n + 2u, lo.z);
  if (n + 3u < N) emit(m, n + 3u, lo.w);
  if (n + 64u < N) emit(m, n + 64u, hi.x);
  if (n + 65u < N) emit(m, n + 65u, hi.y);
  if (n + 66u < N) emit(m, n + 66u, hi.z);
  if (n + 67u < N) emit(m, n + 67u, hi.w);
}

// the 2 accumulators of block row r += a (one component of an A vec4) times the two B vec4s
#define BIG32_FMA(r, a) c##r##0 = fma(vec4(a), b0, c##r##0); c##r##1 = fma(vec4(a), b1, c##r##1);

void gemm_big(uint m0, uint n0, uint k_begin, uint k_end, uint M, uint N) {
  uint lid = gl_LocalInvocationIndex, tx = lid % 16u, ty = lid / 16u;
  bool kmajor = B_KVEC4 && !B_NVEC4;
  // c<r><h>: row (r < 4 ? 4 ty + r : 64 + 4 ty + r - 4), columns 64 h + 4 tx + {0..3}
  vec4 c00 = vec4(0.0), c01 = vec4(0.0), c10 = vec4(0.0), c11 = vec4(0.0);
  vec4 c20 = vec4(0.0), c21 = vec4(0.0), c30 = vec4(0.0), c31 = vec4(0.0);
  vec4 c40 = vec4(0.0), c41 = vec4(0.0), c50 = vec4(0.0), c51 = vec4(0.0);
  vec4 c60 = vec4(0.0), c61 = vec4(0.0), c70 = vec4(0.0), c71 = vec4(0.0);
  vec4 ra = big32_load_a(lid, m0, k_begin, k_end, M), rb = big32_load_b(lid, n0, k_begin, k_end, N, kmajor);
  big32_store_a(lid, 0u, ra);
  big32_store_b(lid, 0u, rb, kmajor);
  barrier();
  uint buf = 0u;
  for (uint k0 = k_begin; k0 < k_end; k0 += BK32) {
    bool more = k0 + BK32 < k_end;
    if (more) {  // the next slice's global loads are in flight during this slice's multiply-adds
      ra = big32_load_a(lid, m0, k0 + BK32, k_end, M);
      rb = big32_load_b(lid, n0, k0 + BK32, k_end, N, kmajor);
    }
    [[unroll]] for (uint kk = 0u; kk < BK32; ++kk) {
      uint row = (buf * BK32 + kk) * 32u;
      vec4 a0 = As32[row + ty], a1 = As32[row + 16u + ty], b0 = Bs32[row + tx], b1 = Bs32[row + 16u + tx];
      BIG32_FMA(0, a0.x) BIG32_FMA(1, a0.y) BIG32_FMA(2, a0.z) BIG32_FMA(3, a0.w)
      BIG32_FMA(4, a1.x) BIG32_FMA(5, a1.y) BIG32_FMA(6, a1.z) BIG32_FMA(7, a1.w)
    }
    if (more) {  // the other buffer: every invocation finished reading it before the last barrier
      big32_store_a(lid, buf ^ 1u, ra);
      big32_store_b(lid, buf ^ 1u, rb, kmajor);
    }
    barrier();
    buf ^= 1u;
  }
  uint m = m0 + 4u * ty, n = n0 + 4u * tx;
  big32_emit_row(m, n, c00, c01, M, N);
  big32_emit_row(m + 1u, n, c10, c11, M, N);
  big32_emit_row(m + 2u, n, c20, c21, M, N);
  big32_emit_row(m + 3u, n, c30, c31, M, N);
  big32_emit_row(m + 64u, n, c40, c41, M, N);
  big32_emit_row(m + 65u, n, c50, c51, M, N);
  big32_emit_row(m + 66u, n, c60, c61, M, N);
  big32_emit_row(m + 67u, n, c70, c71, M, N);
}
