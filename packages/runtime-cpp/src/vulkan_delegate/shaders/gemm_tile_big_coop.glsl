// The 128x128 tensor-core GEMM tile (matmul's `f16bigcoop`, the twin the runtime picks for `f16big` on a
// device with VK_KHR_cooperative_matrix 16x16x16 fp16 x fp16 + fp32 and 32-wide subgroups).
// gemm_big(m0, n0, k_begin, k_end, M, N) calls the includer's emit(m, n, v) once for every m < M, n < N of
// the block C[m0 .. m0+128, n0 .. n0+128] with v = sum_k A[m, k] B[k, n] over k_begin <= k < k_end, in fp32.
//
// The 256 invocations are 8 subgroups of 32 in a 2 (m) x 4 (n) grid, each owning a 64x32 block of C: 4 x 2
// fp32 accumulator matrices. K advances 32 at a time through two shared-memory buffers: while the tensor
// cores multiply one K slice, each invocation holds the next slice's 2 + 2 16-byte chunks (8 fp16 each) of
// A and B in registers and stores them into the other buffer before the one barrier per step.
// Global loads are 128-bit where the includer says the operand allows it (A_VEC: A row-major with rows a
// multiple of 8 elements apart; B_NVEC: B row-major likewise; B_KVEC: B column-major, as Linear's weight)
// and the chunk lies inside the matrix; else 8 element loads (LOAD_A / LOAD_B), which return 0 outside it.
// The includer defines LOAD_A(m, k), LOAD_B(k, n), LOAD_A8(m, k) / LOAD_B8(k, n) (uvec4: 8 fp16 from
// element (m, k) on along k, resp. from (k, n) along n, or along k with B_KVEC), A_VEC, B_NVEC, B_KVEC
// (bools) and emit().
// Shared tiles are f16vec4 arrays (coopMatLoad offsets and strides count f16vec4s); every row stride is a
// multiple of 16 bytes (the coopMatLoad/Store alignment), padded by 8 fp16 against bank conflicts. With
// B_KVEC the B slice is kept as A's is, [128 n][BK k] (each 8-k chunk two f16vec4 stores), and loaded as a
// column-major matrix; else [BK k][128 n].
#define BIG 128u
#define BK 32u
#define ASTR4 ((BK + 8u) / 4u)    // A buffer: [128 m][BK k] fp16, in f16vec4
#define BSTR4 ((BIG + 8u) / 4u)   // B buffer: [BK k][128 n] fp16, in f16vec4
#define ASZ4 (BIG * ASTR4)
#define BSZ4 (BIG * ASTR4)        // one B buffer: [BK k][128 n] (BK * BSTR4 f16vec4) or [128 n][BK k]
shared f16vec4 As[2u * ASZ4];
shared f16vec4 Bs[2u * BSZ4];  // with As and Cs: 48 KiB, the least maxComputeSharedMemorySize NVIDIA gives
shared float Cs[8u * 256u];  // one 16x16 accumulator per subgroup on its way to emit()

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

uvec4 pack8(float16_t h[8]) {
  return uvec4(packFloat2x16(f16vec2(h[0], h[1])), packFloat2x16(f16vec2(h[2], h[3])),
               packFloat2x16(f16vec2(h[4], h[5])), packFloat2x16(f16vec2(h[6], h[7])));
}

// chunk c (< 512) of A's K slice at k0: row c / 4, k from k0 + 8 (c % 4)
uvec4 big_load_a(uint c, uint m0, uint k0, uint k_end, uint M) {
  uint m = m0 + c / 4u, k = k0 + 8u * (c % 4u);
  if (A_VEC && m < M && k + 8u <= k_end) return LOAD_A8(m, k);
  float16_t h[8];
  [[unroll]] for (uint i = 0u; i < 8u; ++i) h[i] = m < M && k + i < k_end ? float16_t(LOAD_A(m, k + i)) : float16_t(0.0);
  return pack8(h);
}

// chunk c of B's K slice: row-major B (k = c / 16, n from 8 (c % 16)) or, with B_KVEC, column-major
// (n = c / 4, k from 8 (c % 4))
uvec4 big_load_b(uint c, uint n0, uint k0, uint k_end, uint N, bool kmajor) {
  uint k = k0 + (kmajor ? 8u * (c % 4u) : c / 16u), n = n0 + (kmajor ? c / 4u : 8u * (c % 16u));
  if (kmajor && n < N && k + 8u <= k_end) return LOAD_B8(k, n);
  if (!kmajor && B_NVEC && k < k_end && n + 8u <= N) return LOAD_B8(k, n);
  float16_t h[8];
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    uint kk = kmajor ? k + i : k, nn = kmajor ? n : n + i;
    h[i] = kk < k_end && nn < N ? float16_t(LOAD_B(kk, nn)) : float16_t(0.0);
  }
  return pack8(h);
}

void big_store_a(uint c, uint buf, uvec4 v) {
  uint at = buf * ASZ4 + (c / 4u) * ASTR4 + 2u * (c % 4u);
  As[at] = f16vec4(unpackFloat2x16(v.x), unpackFloat2x16(v.y));
  As[at + 1u] = f16vec4(unpackFloat2x16(v.z), unpackFloat2x16(v.w));
}

void big_store_b(uint c, uint buf, uvec4 v, bool kmajor) {
  if (!kmajor) {
    uint at = buf * BSZ4 + (c / 16u) * BSTR4 + 2u * (c % 16u);
    Bs[at] = f16vec4(unpackFloat2x16(v.x), unpackFloat2x16(v.y));
    Bs[at + 1u] = f16vec4(unpackFloat2x16(v.z), unpackFloat2x16(v.w));
    return;
  }
  uint at = buf * BSZ4 + (c / 4u) * ASTR4 + 2u * (c % 4u);  // 8 k of one n: contiguous in [n][k]
  Bs[at] = f16vec4(unpackFloat2x16(v.x), unpackFloat2x16(v.y));
  Bs[at + 1u] = f16vec4(unpackFloat2x16(v.z), unpackFloat2x16(v.w));
}

void gemm_big(uint m0, uint n0, uint k_begin, uint k_end, uint M, uint N) {
  uint lid = gl_LocalInvocationIndex, sg = gl_SubgroupID;
  uint wm = (sg / 4u) * 64u, wn = (sg % 4u) * 32u;
  bool kmajor = B_KVEC && !B_NVEC;
  CM_C acc[8];
  [[unroll]] for (uint i = 0u; i < 8u; ++i) acc[i] = CM_C(0.0);
  uvec4 ra[2], rb[2];
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    ra[r] = big_load_a(lid + 256u * r, m0, k_begin, k_end, M);
    rb[r] = big_load_b(lid + 256u * r, n0, k_begin, k_end, N, kmajor);
  }
  [[unroll]] for (uint r = 0u; r < 2u; ++r) {
    big_store_a(lid + 256u * r, 0u, ra[r]);
    big_store_b(lid + 256u * r, 0u, rb[r], kmajor);
  }
  barrier();
  uint buf = 0u;
  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    bool more = k0 + BK < k_end;
    if (more)  // the next slice's global loads are in flight during this slice's multiply-adds
      [[unroll]] for (uint r = 0u; r < 2u; ++r) {
        ra[r] = big_load_a(lid + 256u * r, m0, k0 + BK, k_end, M);
        rb[r] = big_load_b(lid + 256u * r, n0, k0 + BK, k_end, N, kmajor);
      }
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      CM_B b0;
      CM_B b1;
      if (kmajor) {  // [n][k]: B (k x n) column-major
        coopMatLoad(b0, Bs, buf * BSZ4 + wn * ASTR4 + kk / 4u, ASTR4, gl_CooperativeMatrixLayoutColumnMajor);
        coopMatLoad(b1, Bs, buf * BSZ4 + (wn + 16u) * ASTR4 + kk / 4u, ASTR4, gl_CooperativeMatrixLayoutColumnMajor);
      } else {
        coopMatLoad(b0, Bs, buf * BSZ4 + kk * BSTR4 + wn / 4u, BSTR4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(b1, Bs, buf * BSZ4 + kk * BSTR4 + (wn + 16u) / 4u, BSTR4, gl_CooperativeMatrixLayoutRowMajor);
      }
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        CM_A a;
        coopMatLoad(a, As, buf * ASZ4 + (wm + 16u * i) * ASTR4 + kk / 4u, ASTR4, gl_CooperativeMatrixLayoutRowMajor);
        acc[2u * i] = coopMatMulAdd(a, b0, acc[2u * i]);
        acc[2u * i + 1u] = coopMatMulAdd(a, b1, acc[2u * i + 1u]);
      }
    }
    if (more)  // the other buffer: every invocation finished reading it before the last barrier
      [[unroll]] for (uint r = 0u; r < 2u; ++r) {
        big_store_a(lid + 256u * r, buf ^ 1u, ra[r]);
        big_store_b(lid + 256u * r, buf ^ 1u, rb[r], kmajor);
      }
    barrier();
    buf ^= 1u;
  }
  uint lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint t = 0u; t < 8u; ++t) {
    coopMatStore(acc[t], Cs, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
      uint m = m0 + wm + 16u * (t / 2u) + e / 16u, n = n0 + wn + 16u * (t % 2u) + e % 16u;
      if (m < M && n < N) emit(m, n, Cs[sg * 256u + e]);
    }
    barrier();
  }
}
