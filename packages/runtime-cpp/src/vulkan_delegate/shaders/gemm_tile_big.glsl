// The 128x128 GEMM tile on the shader cores (matmul's `f32big` / `f16big`, for outputs large enough to
// fill the GPU with 128x128 blocks; gemm_tile_big_coop.glsl is the tensor-core twin of `f16big`).
// gemm_big(m0, n0, k_begin, k_end, M, N) calls the includer's emit(m, n, v) once for every m < M, n < N of
// the block C[m0 .. m0+128, n0 .. n0+128] with v = sum_k A[m, k] B[k, n] over k_begin <= k < k_end, in fp32.
//
// 16x16 invocations, each an 8x8 register block: rows 4 ty + i and 64 + 4 ty + i, columns 4 tx + j and
// 64 + 4 tx + j (i, j < 4), so every multiply step reads 2 + 2 vec4 from shared memory for 64 FMAs. K advances
// 16 at a time through two shared buffers (fp32, also for fp16 data): the next slice's 2 + 2 4-element
// chunks wait in registers while this slice is multiplied. Global loads are 4-wide where the includer says
// the operand allows it (A_VEC: A row-major with rows a multiple of 4 elements apart; B_NVEC: B row-major
// likewise; B_KVEC: B column-major, as Linear's weight) and the chunk lies inside the matrix; else element
// loads (LOAD_A / LOAD_B). The includer defines LOAD_A(m, k), LOAD_B(k, n), LOAD_A4(m, k) / LOAD_B4(k, n)
// (vec4 from that element on along k, resp. along n, or along k with B_KVEC), A_VEC, B_NVEC, B_KVEC, emit().
#define BIG 128u
#define BK 16u
#define STR4 ((BIG + 4u) / 4u)  // a shared row of 128 (+4 padding) fp32, in vec4
#define SZ4 (BK * STR4)
shared vec4 As[2u * SZ4];  // [buf][k][m]: A transposed, so a column of 4 rows is one vec4
shared vec4 Bs[2u * SZ4];  // [buf][k][n]

// chunk c (< 512) of A's K slice at k0: row c / 4, k from k0 + 4 (c % 4)
vec4 big_load_a(uint c, uint m0, uint k0, uint k_end, uint M) {
  uint m = m0 + c / 4u, k = k0 + 4u * (c % 4u);
  if (A_VEC && m < M && k + 4u <= k_end) return LOAD_A4(m, k);
  vec4 v;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) v[i] = m < M && k + i < k_end ? float(LOAD_A(m, k + i)) : 0.0;
  return v;
}

// chunk c of B's K slice: row-major B (k = c / 32, n from 4 (c % 32)) or, with B_KVEC, column-major
// (n = c / 4, k from 4 (c % 4))
vec4 big_load_b(uint c, uint n0, uint k0, uint k_end, uint N, bool kmajor) {
  uint k = k0 + (kmajor ? 4u * (c % 4u) : c / 32u), n = n0 + (kmajor ? c / 4u : 4u * (c % 32u));
  if (kmajor && n < N && k + 4u <= k_end) return LOAD_B4(k, n);
  if (!kmajor && B_NVEC && k < k_end && n + 4u <= N) return LOAD_B4(k, n);
  vec4 v;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint kk = kmajor ? k + i : k, nn = kmajor ? n : n + i;
    v[i] = kk < k_end && nn < N ? float(LOAD_B(kk, nn)) : 0.0;
  }
  return v;
}

void big_store(uint c, uint buf, vec4 a, vec4 b, bool kmajor) {
  uint m = c / 4u, k = 4u * (c % 4u);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) As[buf * SZ4 + (k + i) * STR4 + m / 4u][m % 4u] = a[i];
  if (!kmajor) {
    Bs[buf * SZ4 + (c / 32u) * STR4 + c % 32u] = b;
    return;
  }
  [[unroll]] for (uint i = 0u; i < 4u; ++i) Bs[buf * SZ4 + (k + i) * STR4 + m / 4u][m % 4u] = b[i];  // n = c / 4 here
}

void gemm_big(uint m0, uint n0, uint k_begin, uint k_end, uint M, uint N) {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, lid = ty * 16u + tx;
  bool kmajor = B_KVEC && !B_NVEC;
  vec4 acc[16];  // acc[2 r + h][j]: row (r < 4 ? 4 ty + r : 60 + 4 ty + r), column 64 h + 4 tx + j
  [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = vec4(0.0);
  vec4 ra[2], rb[2];
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    ra[r] = big_load_a(lid + 256u * r, m0, k_begin, k_end, M);
    rb[r] = big_load_b(lid + 256u * r, n0, k_begin, k_end, N, kmajor);
  }
  [[unroll]] for (uint r = 0u; r < 2u; ++r) big_store(lid + 256u * r, 0u, ra[r], rb[r], kmajor);
  barrier();
  uint buf = 0u;
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    bool more = k0 + BK < k_end;
    if (more)
      [[unroll]] for (uint r = 0u; r < 2u; ++r) {
        ra[r] = big_load_a(lid + 256u * r, m0, k0 + BK, k_end, M);
        rb[r] = big_load_b(lid + 256u * r, n0, k0 + BK, k_end, N, kmajor);
      }
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      uint row = buf * SZ4 + kk * STR4;
      vec4 a0 = As[row + ty], a1 = As[row + 16u + ty], b0 = Bs[row + tx], b1 = Bs[row + 16u + tx];
      [[unroll]] for (uint r = 0u; r < 4u; ++r) {
        acc[2u * r] = fma(vec4(a0[r]), b0, acc[2u * r]);
        acc[2u * r + 1u] = fma(vec4(a0[r]), b1, acc[2u * r + 1u]);
        acc[8u + 2u * r] = fma(vec4(a1[r]), b0, acc[8u + 2u * r]);
        acc[8u + 2u * r + 1u] = fma(vec4(a1[r]), b1, acc[8u + 2u * r + 1u]);
      }
    }
    if (more)  // the other buffer: every invocation finished reading it before the last barrier
      [[unroll]] for (uint r = 0u; r < 2u; ++r) big_store(lid + 256u * r, buf ^ 1u, ra[r], rb[r], kmajor);
    barrier();
    buf ^= 1u;
  }
  [[unroll]] for (uint r = 0u; r < 8u; ++r) {
    uint m = m0 + (r < 4u ? 4u * ty + r : 60u + 4u * ty + r);
    if (m >= M) continue;
    [[unroll]] for (uint h = 0u; h < 2u; ++h)
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        uint n = n0 + 64u * h + 4u * tx + j;
        if (n < N) emit(m, n, acc[2u * r + h][j]);
      }
  }
}
