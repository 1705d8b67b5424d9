#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// An ungrouped 3x3 stride-1 undilated NCHW convolution by Winograd F(2x2, 3x3) in one dispatch (Lavin &
// Gray 2016): each 2x2 output tile is A^T [sum_c U_c (.) V_c] A with V_c = B^T d_c B the transform of the 4x4
// input patch of channel c and U_c = G g_c G^T its transformed 3x3 filter. 16 multiplies per 4 outputs where
// the direct form takes 36: on the H100 every
// ResNet-18 b1 3x3 conv took 29-41 us as an implicit GEMM (the same multiply-adds per conv in each stage).
// A workgroup computes 16 output channels x 16 tiles (64 pixels) for all 16 entries e: per step of 16 input
// channels, thread (c, tile) transforms one patch and thread (c, output channel) one filter into shared memory
// (U is computed here, not stored: a stored U is 16/9 of the weights, and a .pte 1.8x larger), then
// thread (e, 4 channels, 4 tiles) adds 16 x 16 products into registers; at the end the sums pass through
// shared memory and thread (channel, tile) applies A^T . A, bias, the residual and the clamp (as
// conv2d_gemm.comp's epilogue). Arithmetic in fp32 whatever T is.
// W: the plain [OC][C][3][3] weights. push = N, C, H, W, OC, OH, OW, PH, PW, TW (tiles per row), TILES (per
// image), OCP, CP (OC, C rounded up to 16), splits, has_bias, lo, hi, has_res, share (input channels per
// split, a multiple of 16).
// Split over input channels (splits > 1: few workgroups, late layers at batch 1): workgroup z = n * splits + s
// writes its raw partial output to Y[s][n][oc][pixel] (the transform is linear) and conv2d_splitk.comp adds
// them and applies the epilogue. Threads: (ceil(TILES / 16) * 256, OCP / 16, N * splits).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) readonly buffer Res { T res[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

#define CK 16u  // input channels per step
#define BO 16u  // output channels per workgroup
#define BT 16u  // tiles per workgroup
// [e][c][tile] (then [e][oc][tile] for the epilogue) and [e][c][oc]; rows of 17: entries e and e + 1 of a
// warp fall on other banks
shared float Vs[16][CK][BT + 1u];
shared float Us[16][CK][BO + 1u];

void main() {
  uint C = PU(1), H = PU(2), Wd = PU(3), OC = PU(4), OH = PU(5), OW = PU(6);
  int PH = PI(7), PW = PI(8);
  uint TW = PU(9), TILES = PU(10), OCP = PU(11), CP = PU(12), splits = PU(13), share = PU(18);
  uint n = gl_WorkGroupID.z / splits, s = gl_WorkGroupID.z % splits;
  uint t0 = gl_WorkGroupID.x * BT, oc0 = gl_WorkGroupID.y * BO, lid = gl_LocalInvocationID.x;
  uint e = lid >> 4u, og = ((lid >> 2u) & 3u) * 4u, tg = (lid & 3u) * 4u;  // the multiply role
  uint lc = lid >> 4u, lt = lid & 15u, tile = t0 + lt;                      // the transform role
  bool tile_in = tile < TILES;
  int ih0 = int((tile / TW) * 2u) - PH, iw0 = int((tile % TW) * 2u) - PW;
  uint xbase = n * C * H * Wd;
  vec4 acc[4];  // acc[i][j]: output channel oc0 + og + i, tile t0 + tg + j
  for (int i = 0; i < 4; ++i) acc[i] = vec4(0.0);
  uint c_end = min(CP, (s + 1u) * share);
  for (uint c0 = s * share; c0 < c_end; c0 += CK) {
    uint c = c0 + lc;
    float d[4][4];
    for (int r = 0; r < 4; ++r) {
      int ih = ih0 + r;
      bool row_in = tile_in && c < C && ih >= 0 && ih < int(H);
      for (int q = 0; q < 4; ++q) {
        int iw = iw0 + q;
        d[r][q] = row_in && iw >= 0 && iw < int(Wd) ? float(x[xbase + (c * H + uint(ih)) * Wd + uint(iw)]) : 0.0;
      }
    }
    float t[4][4];  // B^T d
    for (int q = 0; q < 4; ++q) {
      t[0][q] = d[0][q] - d[2][q];
      t[1][q] = d[1][q] + d[2][q];
      t[2][q] = d[2][q] - d[1][q];
      t[3][q] = d[1][q] - d[3][q];
    }
    for (int r = 0; r < 4; ++r) {  // (B^T d) B
      Vs[r * 4 + 0][lc][lt] = t[r][0] - t[r][2];
      Vs[r * 4 + 1][lc][lt] = t[r][1] + t[r][2];
      Vs[r * 4 + 2][lc][lt] = t[r][2] - t[r][1];
      Vs[r * 4 + 3][lc][lt] = t[r][1] - t[r][3];
    }
    {  // U = G g G^T of input channel c (lc), output channel oc0 + lt (0 past C or OC)
      uint oc = oc0 + lt, wb = (oc * C + c) * 9u;
      bool in_w = c < C && oc < OC;
      float g[9];
      for (int k = 0; k < 9; ++k) g[k] = in_w ? float(w[wb + uint(k)]) : 0.0;
      float gg[4][3];  // G g
      for (int q = 0; q < 3; ++q) {
        gg[0][q] = g[q];
        gg[1][q] = 0.5 * (g[q] + g[3 + q] + g[6 + q]);
        gg[2][q] = 0.5 * (g[q] - g[3 + q] + g[6 + q]);
        gg[3][q] = g[6 + q];
      }
      for (int r = 0; r < 4; ++r) {  // (G g) G^T
        Us[r * 4 + 0][lc][lt] = gg[r][0];
        Us[r * 4 + 1][lc][lt] = 0.5 * (gg[r][0] + gg[r][1] + gg[r][2]);
        Us[r * 4 + 2][lc][lt] = 0.5 * (gg[r][0] - gg[r][1] + gg[r][2]);
        Us[r * 4 + 3][lc][lt] = gg[r][2];
      }
    }
    barrier();
    for (uint cc = 0u; cc < CK; ++cc) {
      vec4 v = vec4(Vs[e][cc][tg], Vs[e][cc][tg + 1u], Vs[e][cc][tg + 2u], Vs[e][cc][tg + 3u]);
      acc[0] = fma(vec4(Us[e][cc][og]), v, acc[0]);
      acc[1] = fma(vec4(Us[e][cc][og + 1u]), v, acc[1]);
      acc[2] = fma(vec4(Us[e][cc][og + 2u]), v, acc[2]);
      acc[3] = fma(vec4(Us[e][cc][og + 3u]), v, acc[3]);
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) Vs[e][og + i][tg + j] = acc[i][j];
  barrier();
  uint ol = lid >> 4u, oc = oc0 + ol;
  if (oc >= OC || !tile_in) return;
  float m[16];
  for (int k = 0; k < 16; ++k) m[k] = Vs[k][ol][lt];
  float a[2][4];  // A^T m
  for (int q = 0; q < 4; ++q) {
    a[0][q] = m[q] + m[4 + q] + m[8 + q];
    a[1][q] = m[4 + q] - m[8 + q] - m[12 + q];
  }
  uint oh0 = (tile / TW) * 2u, ow0 = (tile % TW) * 2u, OHW = OH * OW;
  float b = PU(14) != 0u && splits == 1u ? float(bias[oc]) : 0.0;
  for (uint r = 0u; r < 2u; ++r) {
    float v0 = a[r][0] + a[r][1] + a[r][2], v1 = a[r][1] - a[r][2] - a[r][3];
    for (uint q = 0u; q < 2u; ++q) {
      uint oh = oh0 + r, ow = ow0 + q;
      if (oh >= OH || ow >= OW) continue;
      float v = q == 0u ? v0 : v1;
      uint p = oh * OW + ow;
      if (splits > 1u) {
        y[((s * PU(0) + n) * OC + oc) * OHW + p] = T(v);
        continue;
      }
      uint o = (n * OC + oc) * OHW + p;
      v += b + (PU(17) != 0u ? float(res[o]) : 0.0);
      y[o] = T(nan_clamp(v, PF(15), PF(16)));
    }
  }
}
