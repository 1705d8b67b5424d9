// The fp32 128x128 GEMM block (matmul's `f32big`): gemm_big(m0, n0, k_begin, k_end, M, N) calls the
// includer's emit(m, n, v) once for every m < M, n < N of C[m0 .. m0+128, n0 .. n0+128] with
// v = sum_k A[m, k] B[k, n] over k_begin <= k < k_end, fp32 multiply-adds.
//
// 256 invocations (tx = lid % 16, ty = lid / 16), each an 8x8 register block: rows 4 ty + {0..3} and
// 64 + 4 ty + {0..3}, columns 4 tx + {0..3} and 64 + 4 tx + {0..3}, held as 16 vec4 accumulators with only
// constant indices (every loop over them [[unroll]]ed, so they stay in registers: a dynamically indexed
// accumulator array goes to local memory, which is what made an earlier 8x8 tile 16x slower on the H100).
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
  [[unroll]] for (uint i = 0u; i < 4u; ++i) As32[at + 32u * i][c] = v[i];
}

void big32_store_b(uint lid, uint buf, vec4 v, bool kmajor) {
  if (!kmajor) {
    Bs32[(buf * BK32 + lid / 32u) * 32u + lid % 32u] = v;
    return;
  }
  uint n = lid / 2u, k = 4u * (lid % 2u), at = (buf * BK32 + k) * 32u + n / 4u, c = n % 4u;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) Bs32[at + 32u * i][c] = v[i];
}

void gemm_big(uint m0, uint n0, uint k_begin, uint k_end, uint M, uint N) {
  uint lid = gl_LocalInvocationIndex, tx = lid % 16u, ty = lid / 16u;
  bool kmajor = B_KVEC4 && !B_NVEC4;
  vec4 acc[16];  // acc[2 r + h]: row (r < 4 ? 4 ty + r : 64 + 4 ty + r - 4), columns 64 h + 4 tx + {0..3}
  [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = vec4(0.0);
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
      [[unroll]] for (uint r = 0u; r < 4u; ++r) {
        acc[2u * r] = fma(vec4(a0[r]), b0, acc[2u * r]);
        acc[2u * r + 1u] = fma(vec4(a0[r]), b1, acc[2u * r + 1u]);
        acc[8u + 2u * r] = fma(vec4(a1[r]), b0, acc[8u + 2u * r]);
        acc[8u + 2u * r + 1u] = fma(vec4(a1[r]), b1, acc[8u + 2u * r + 1u]);
      }
    }
    if (more) {  // the other buffer: every invocation finished reading it before the last barrier
      big32_store_a(lid, buf ^ 1u, ra);
      big32_store_b(lid, buf ^ 1u, rb, kmajor);
    }
    barrier();
    buf ^= 1u;
  }
  [[unroll]] for (uint r = 0u; r < 8u; ++r) {
    uint m = m0 + (r < 4u ? 4u * ty + r : 64u + 4u * ty + r - 4u);
    if (m >= M) continue;
    [[unroll]] for (uint h = 0u; h < 2u; ++h)
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        uint n = n0 + 64u * h + 4u * tx + j;
        if (n < N) emit(m, n, acc[2u * r + h][j]);
      }
  }
}
