// The 128x256 workgroup-scope tensor-core GEMM block (matmul's `f16bigcoop2`, the twin the runtime picks for
// `f16big` on a device with VK_NV_cooperative_matrix2: device.cpp's coopmat2 probe). Compiled by Slang's glslang
// (slang_glslang.py; glslang 13.1.1 does not know the extension) to SPIR-V 1.6.
// gemm_coop2(m0, n0, M, N, K) computes y[m, n] = emit(m, n, sum_k A[m, k] B[k, n]) for the block
// C[m0 .. m0+128, n0 .. n0+256] in fp32 on tensor cores: one workgroup-scope fp32 accumulator; each K step of 32 loads
// a 128x32 A and a 32x256 B matrix through tensor layouts (the driver stages them through shared memory), and the
// epilogue runs as a per-element operation on the accumulator before one fp16 tensor store. A block inside the
// matrices with K a multiple of 32 uses layouts without bounds checks; an edge block, clamp mode Constant (loads
// past the edges read 0, stores there are dropped).
// Operands: A row-major (k stride 1) or column-major (m stride 1, loaded through a transposing tensor view), B
// likewise (n stride 1, or k stride 1 as Linear's weight); every base a multiple of 8 elements (the 16-byte
// alignment coopMatLoadTensorNV requires). Anything else (other strides, an odd batch offset) takes
// gemm_coop2_scalar: correct, not fast. The includer defines LOAD_A, LOAD_B, abase, bbase, ybase, emit_value(m, n, v)
// (alpha, bias, clamp) and emit(m, n, v).
#define C2_BM 128
#define C2_BN 256
#define C2_BK 32
#define C2_LAYOUT tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>
#define C2_NEW_LAYOUT createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV)
#define C2_ACC coopmat<float, gl_ScopeWorkgroup, C2_BM, C2_BN, gl_MatrixUseAccumulator>
#define C2_OUT coopmat<float16_t, gl_ScopeWorkgroup, C2_BM, C2_BN, gl_MatrixUseAccumulator>
#define C2_A coopmat<float16_t, gl_ScopeWorkgroup, C2_BM, C2_BK, gl_MatrixUseA>
#define C2_B coopmat<float16_t, gl_ScopeWorkgroup, C2_BK, C2_BN, gl_MatrixUseB>

float c2_epilogue(const in uint row, const in uint col, const in float v, const in uint m0, const in uint n0) {
  return emit_value(m0 + row, n0 + col, v);
}

// One K loop: LOAD_A_C2(ma, k0) / LOAD_B_C2(mb, k0) name the operand layouts' load at k0.
#define C2_LOOP(LOAD_A_C2, LOAD_B_C2)              \
  for (uint k0 = 0u; k0 < K; k0 += C2_BK) {          \
    C2_A ma;                                         \
    C2_B mb;                                         \
    LOAD_A_C2(ma, k0);                               \
    LOAD_B_C2(mb, k0);                               \
    acc = coopMatMulAdd(ma, mb, acc);                \
  }
#define C2_LOAD_A_ROW(ma, k0) coopMatLoadTensorNV(ma, a, abase, sliceTensorLayoutNV(la, m0, C2_BM, k0, C2_BK))
#define C2_LOAD_A_COL(ma, k0) \
  coopMatLoadTensorNV(ma, a, abase, sliceTensorLayoutNV(la, k0, C2_BK, m0, C2_BM), createTensorViewNV(2, false, 1, 0))
#define C2_LOAD_B_ROW(mb, k0) coopMatLoadTensorNV(mb, b, bbase, sliceTensorLayoutNV(lb, k0, C2_BK, n0, C2_BN))
#define C2_LOAD_B_COL(mb, k0) \
  coopMatLoadTensorNV(mb, b, bbase, sliceTensorLayoutNV(lb, n0, C2_BN, k0, C2_BK), createTensorViewNV(2, false, 1, 0))

// The block through layouts of type LAYOUT_T (made by NEW_LAYOUT): the loop for the operands' orientation, the
// epilogue, the store.
#define C2_BODY(LAYOUT_T, NEW_LAYOUT)                                                          \
  {                                                                                            \
    LAYOUT_T la = NEW_LAYOUT;                                                                  \
    la = a_row ? setTensorLayoutStrideNV(setTensorLayoutDimensionNV(la, M, K), PU(6), 1u)      \
               : setTensorLayoutStrideNV(setTensorLayoutDimensionNV(la, K, M), PU(7), 1u);     \
    LAYOUT_T lb = NEW_LAYOUT;                                                                  \
    lb = b_row ? setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lb, K, N), PU(10), 1u)     \
               : setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lb, N, K), PU(11), 1u);    \
    C2_ACC acc = C2_ACC(0.0);                                                                  \
    if (a_row && b_row) {                                                                      \
      C2_LOOP(C2_LOAD_A_ROW, C2_LOAD_B_ROW)                                                    \
    } else if (a_row) {                                                                        \
      C2_LOOP(C2_LOAD_A_ROW, C2_LOAD_B_COL)                                                    \
    } else if (b_row) {                                                                        \
      C2_LOOP(C2_LOAD_A_COL, C2_LOAD_B_ROW)                                                    \
    } else {                                                                                   \
      C2_LOOP(C2_LOAD_A_COL, C2_LOAD_B_COL)                                                    \
    }                                                                                          \
    coopMatPerElementNV(acc, acc, c2_epilogue, m0, n0);                                        \
    C2_OUT out16 = C2_OUT(acc);                                                                \
    LAYOUT_T ly = setTensorLayoutDimensionNV(NEW_LAYOUT, M, N);                                \
    coopMatStoreTensorNV(out16, y, ybase, sliceTensorLayoutNV(ly, m0, C2_BM, n0, C2_BN));      \
  }

// The block one output at a time (any strides and offsets).
void gemm_coop2_scalar(uint m0, uint n0, uint M, uint N, uint K) {
  for (uint e = gl_LocalInvocationIndex; e < uint(C2_BM * C2_BN); e += 256u) {
    uint m = m0 + e / uint(C2_BN), n = n0 + e % uint(C2_BN);
    if (m >= M || n >= N) continue;
    float s = 0.0;
    for (uint k = 0u; k < K; ++k) s += float(LOAD_A(m, k)) * float(LOAD_B(k, n));
    emit(m, n, s);
  }
}

void gemm_coop2(uint m0, uint n0, uint M, uint N, uint K) {
  // strides: A (m, k) = PU(6), PU(7); B (k, n) = PU(10), PU(11); a row-major operand's rows lie at least a row
  // apart (a tensor layout's stride rule)
  bool a_row = PU(7) == 1u && PU(6) >= K, a_col = !a_row && PU(6) == 1u && PU(7) >= M;
  bool b_row = PU(11) == 1u && PU(10) >= N, b_col = !b_row && PU(10) == 1u && PU(11) >= K;
  bool aligned = abase % 8u == 0u && bbase % 8u == 0u && ybase % 8u == 0u;
  if (!aligned || !(a_row || a_col) || !(b_row || b_col)) {
    gemm_coop2_scalar(m0, n0, M, N, K);
    return;
  }
  // a block inside the matrices, K a whole number of steps: layouts without bounds checks (the common case)
  if (m0 + uint(C2_BM) <= M && n0 + uint(C2_BN) <= N && K % uint(C2_BK) == 0u) {
    C2_BODY(tensorLayoutNV<2>, createTensorLayoutNV(2))
  } else {
    C2_BODY(C2_LAYOUT, C2_NEW_LAYOUT)
  }
}
