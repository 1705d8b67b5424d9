#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg
// norm_row.comp with 256 lanes per row, for rows of at least reduce.py's NORM_WIDE_MIN columns (the decode
// step's RMS norm of one 4096-wide token): with 64 lanes each lane walks 64 elements per pass one load at a
// time, and a single row (one workgroup, two warps on one SM) took 34 us on the H100 against 12 us for
// vk-bench's 256-lane kernel. Same push and bindings as norm_row. Threads: rows * 256.
#define ROW_LANES 256
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 256) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) readonly buffer Wt { T w[]; };
layout(std430, binding = 2) readonly buffer Bs { T b[]; };
layout(std430, binding = 3) writeonly buffer Y { T y[]; };
#include "norm_row.glsl"
