#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// The second half of a split-K convolution (conv2d_gemm.comp): y[i] = clamp(sum_s part[s][i] + bias[oc]
// (+ res[i])), summed in fp32. push = total (N*OC*OH*OW), OC, OH*OW, splits, has_bias, lo, hi, has_res.
// Threads: total.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Part { T part[]; };
layout(std430, binding = 1) readonly buffer Bias { T bias[]; };
layout(std430, binding = 2) readonly buffer Res { T res[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id(), total = PU(0);
  if (i >= total) return;
  float acc = 0.0;
  for (uint s = 0u; s < PU(3); ++s) acc += float(part[s * total + i]);
  if (PU(4) != 0u) acc += float(bias[(i / PU(2)) % PU(1)]);
  if (PU(7) != 0u) acc += float(res[i]);
  y[i] = T(nan_clamp(acc, PF(5), PF(6)));
}
