#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg
// Layer norm (mode 0), RMS norm (mode 1) or group norm (G > 0) of contiguous rows, one workgroup per row
// (row_reduce.glsl), sums in fp32 (two passes: mean, then the variance around it). push = rows, cols,
// eps, has_weight, has_bias, mode, hw, G: a group norm's row is (n, group) of C/G channels of hw values,
// weighted per channel ((row % G) * C/G + i / hw); otherwise per column. Threads: rows * 64.
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 64) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };
#include "norm_row.glsl"
