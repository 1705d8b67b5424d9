#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: f16bigcoop keeps its accumulators in registers
// variants: f32 f16 f32small f16small f16big f16bigcoop f32big
// tile: 4 4 1
// tile small: 1 1 1
// tile big: 8 8 1
// Ungrouped NCHW convolution as an implicit GEMM (gemm_tile.glsl): per image, Y[oc, p] = W[oc, k] X[k, p]
// with K = C*KH*KW and X[k, p] the input pixel under tap k of output pixel p (im2col addressed on the fly,
// never stored); a 1x1 stride-1 unpadded convolution reads X directly. Epilogue: bias, the residual
// (y = conv + bias + res, as a following add the lowering folded), then clamp.
// push = N, C, H, W, OC, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, groups (1), has_bias, lo, hi, has_res,
// splits, packed (0: NCHW, 1: packed, one image per z, 2: packed and folded, below). Threads (OH*OW, OC, N * splits); each invocation computes 4x4 of them (the `small`
// variants: 1; `f16big` 8x8, 128x128 per workgroup: gemm_tile_big.glsl, or f16bigcoop on tensor cores
// gemm_tile_big_coop.glsl, with 128-bit loads of the weight rows and of a pointwise conv's input; `f32big`
// the same block in fp32, gemm_tile_big32.glsl, with vec4 loads: packed fp32 convolutions).
// packed (1): X is conv2d_pack.comp's channel-last copy of the input, [N][H][W][C] with the zero padding
// inside it (the push's H, W, C are the packed sizes, PH = PW = 0, C a multiple of 8) and the weight rows
// are ordered (kh, kw, c) to match, so 8 consecutive k from a multiple of 8 are 8 channels of one tap:
// one 128-bit load in f16bigcoop, no bounds checks, and no (c, kh, kw) split of k per element. A packed
// convolution also folds the batch into the GEMM's columns (packed = 2): p runs over N*OH*OW (image
// p / (OH*OW)), so the small late layers (7x7 = 49 pixels) fill 128-wide blocks; threads (N*OH*OW, OC, splits).
// A strided 1x1 convolution is packed with the stride inside (conv2d_pack.comp samples every SH-th row,
// SW-th column): it arrives here as a 1x1 stride-1 packed convolution over the OH x OW samples.
// Split-K (splits > 1, where the output alone gives too few 64x64 tiles to fill the GPU): workgroup
// z = n * splits + s sums its share of K and writes the raw partial to Y[s][n][oc][p] (Y is then the
// [splits, N, OC, OH*OW] scratch); conv2d_splitk.comp adds the partials and applies the epilogue.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer W { T w[]; };
layout(std430, binding = 2) readonly buffer Bias { T bias[]; };
layout(std430, binding = 3) readonly buffer Res { T res[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

uint xbase, K, Kend, OHW;  // K: the weight row length; loads return 0 from Kend on (this split's end)
uint NP;  // the GEMM's columns: OHW, or N*OHW when packed (batch folded in)

#define PACKED (PU(21) != 0u)
#define FOLDED (PU(21) == 2u)  // packed, the batch folded into the columns (a payload before the fold gives 1)

// packed: the element offset of B[k, p], k = (kh * KW + kw) * C + c, p = image * OH*OW + pixel
uint packed_offset(uint k, uint p) {
  uint q = p, rows = 0u;  // q: the pixel in its image; rows: the image's first packed row
  if (FOLDED) {  // (a uniform branch: unfolded, batch 1, keeps its address math without the division, which
    uint img = p / OHW;  // cost ResNet-18 b1 fp16's packed convs ~30 % on the H100)
    q = p - img * OHW;
    rows = img * PU(2);
  }
  uint C = PU(1), t = k / C, kw = t % PU(8), OW = PU(6), oh = q / OW, ow = q % OW;
  return ((rows + oh * PU(9) + (t / PU(8)) * PU(13)) * PU(3) + ow * PU(10) + kw * PU(14)) * C + k % C;
}

T load_x(uint k, uint p) {
  if (k >= Kend || p >= NP) return T(0);
  if (PACKED) return x[xbase + packed_offset(k, p)];
  uint H = PU(2), Wd = PU(3), KH = PU(7), KW = PU(8), OW = PU(6);
  if (KH * KW == 1u && PU(9) == 1u && PU(10) == 1u && PU(11) == 0u && PU(12) == 0u)
    return x[xbase + k * H * Wd + p];  // pointwise: X is the input itself
  uint c = k / (KH * KW), r = k % (KH * KW), kh = r / KW, kw = r % KW, oh = p / OW, ow = p % OW;
  int ih = int(oh * PU(9) + kh * PU(13)) - PI(11), iw = int(ow * PU(10) + kw * PU(14)) - PI(12);
  if (ih < 0 || ih >= int(H) || iw < 0 || iw >= int(Wd)) return T(0);
  return x[xbase + (c * H + uint(ih)) * Wd + uint(iw)];
}

#define LOAD_A(m, k) ((m) < PU(4) && (k) < Kend ? w[(m) * K + (k)] : T(0))
#define LOAD_B(k, n) load_x(k, n)
// f16coop (tensor cores) is not built for the convolution: on the H100 it ran ResNet-18 b1's convs 25 %
// slower than this fp16 tile (the implicit-im2col loads bound it, not the multiply-adds); add the variant
// back to the list above once gemm_tile_coop.glsl loads faster.
#ifdef BIG_TILE
uint img, part_base;  // part_base: split-K's s * N; image im's raw [OC][OH*OW] partial goes to part s * N + im
void emit(uint oc, uint p, float v) {
  uint im = img;
  if (FOLDED) {  // img is 0
    im += p / OHW;
    p %= OHW;
  }
  if (PU(20) > 1u) {
    y[((part_base + im) * PU(4) + oc) * OHW + p] = T(v);
    return;
  }
  uint o = (im * PU(4) + oc) * OHW + p;
  float r = v + (PU(16) != 0u ? float(bias[oc]) : 0.0) + (PU(19) != 0u ? float(res[o]) : 0.0);
  y[o] = T(nan_clamp(r, PF(17), PF(18)));
}
#define POINTWISE (!PACKED && PU(7) * PU(8) == 1u && PU(9) == 1u && PU(10) == 1u && PU(11) == 0u && PU(12) == 0u)
#ifdef COOPMAT
// 128-bit loads (8 fp16): weight rows (K contiguous) when K is a multiple of 8; the input of a pointwise
// stride-1 unpadded conv (pixels contiguous) when OH*OW is; a packed input (8 channels of one tap) always
#define A_VEC (K % 8u == 0u)
#define B_NVEC (POINTWISE && OHW % 8u == 0u)
#define B_KVEC PACKED
layout(std430, binding = 0) readonly buffer X8 { uvec4 x8[]; };
layout(std430, binding = 1) readonly buffer W8 { uvec4 w8[]; };
#define LOAD_A8(m, k) w8[((m) * K + (k)) / 8u]
#define LOAD_B8(k, p) x8[(xbase + (PACKED ? packed_offset(k, p) : (k) * OHW + (p))) / 8u]
#include "gemm_tile_big_coop.glsl"
#elif !defined(FP16)
// f32big: vec4 loads (4 fp32), as above; a packed input's 4 channels of one tap (CP is a multiple of 8)
#define A_VEC4 (K % 4u == 0u)
#define B_NVEC4 (POINTWISE && OHW % 4u == 0u)
#define B_KVEC4 PACKED
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };
#define LOAD_A4(m, k) w4[((m) * K + (k)) / 4u]
#define LOAD_B4(k, p) x4[(xbase + (PACKED ? packed_offset(k, p) : (k) * OHW + (p))) / 4u]
#include "gemm_tile_big32.glsl"
#else
#include "gemm_tile_big.glsl"  // f16big without tensor cores: the 64x64 tile over the 2 x 2 quarters
#endif
#elif defined(COOPMAT)
#include "gemm_tile_coop.glsl"
#else
#include "gemm_tile.glsl"
#endif

void main() {
  uint splits = max(PU(20), 1u), n = gl_WorkGroupID.z / splits, s = gl_WorkGroupID.z % splits;
  uint C = PU(1), OC = PU(4);
  K = C * PU(7) * PU(8);
#ifdef BIG_TILE  // split over K in whole slices of 32 (gemm_tile_big_coop.glsl's BK)
  uint share = ((K + splits - 1u) / splits + 31u) / 32u * 32u, k_begin = min(K, s * share);
  Kend = min(K, k_begin + share);
  OHW = PU(5) * PU(6);
  NP = FOLDED ? PU(0) * OHW : OHW;  // folded: z = s alone (n = 0), the images in the columns
  xbase = n * C * PU(2) * PU(3);
  img = n;
  part_base = s * PU(0);
  gemm_big(gl_WorkGroupID.y * BIG, gl_WorkGroupID.x * BIG, k_begin, Kend, OC, NP);
#else
  uint share = (K + splits - 1u) / splits;
  share = (share + TK - 1u) / TK * TK;  // whole K steps per split
  uint k_begin = s * share;
  Kend = min(K, k_begin + share);
  OHW = PU(5) * PU(6);
  NP = OHW;  // (packed convolutions run f16big only)
  xbase = n * C * PU(2) * PU(3);
  uint m0 = gl_WorkGroupID.y * TILE, p0 = gl_WorkGroupID.x * TILE;
  vec4 acc[4];
  gemm_tile(m0, p0, k_begin, Kend, acc);
  if (splits > 1u) {
    uint base = (s * PU(0) + n) * OC;
    for (uint i = 0u; i < RB; ++i) {
      uint oc = m0 + gl_LocalInvocationID.y + 16u * i;
      if (oc >= OC) break;
      for (uint j = 0u; j < RB; ++j) {
        uint p = p0 + gl_LocalInvocationID.x + 16u * j;
        if (p < OHW) y[(base + oc) * OHW + p] = T(acc[i][j]);
      }
    }
    return;
  }
  for (uint i = 0u; i < RB; ++i) {
    uint oc = m0 + gl_LocalInvocationID.y + 16u * i;
    if (oc >= OC) break;
    float b = PU(16) != 0u ? float(bias[oc]) : 0.0;
    for (uint j = 0u; j < RB; ++j) {
      uint p = p0 + gl_LocalInvocationID.x + 16u * j;
      if (p >= OHW) break;
      uint o = (n * OC + oc) * OHW + p;
      float r = acc[i][j] + b + (PU(19) != 0u ? float(res[o]) : 0.0);
      y[o] = T(nan_clamp(r, PF(17), PF(18)));
    }
  }
#endif
}
