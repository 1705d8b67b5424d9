#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg
// Sum / mean / max / min of contiguous rows (reduce.comp for inner == 1: global pooling, means over the
// last dims), one workgroup per row (row_reduce.glsl), in fp32. push = op (opcodes.glsl), rows, red, 1.
// Threads: rows * 64.
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 64) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint row = row_id(), lane = gl_LocalInvocationID.x;
  if (row >= PU(1)) return;  // the whole workgroup: the barriers below stay uniform
  uint red = PU(2), base = row * red;
  int op = PI(0);
  float acc = op == REDUCE_MAX ? -1.0 / 0.0 : (op == REDUCE_MIN ? 1.0 / 0.0 : 0.0);
  for (uint r = lane; r < red; r += ROW_LANES) {
    float v = float(x[base + r]);
    acc = op == REDUCE_MAX ? nan_max(acc, v) : (op == REDUCE_MIN ? nan_min(acc, v) : acc + v);
  }
  // subgroupMax/Min (and max/min) drop a NaN: a row holding one reduces to NaN, as torch's amax/amin
  bool extreme = op == REDUCE_MAX || op == REDUCE_MIN;
  float nans = extreme ? row_sum(isnan(acc) ? 1.0 : 0.0) : 0.0;
  acc = op == REDUCE_MAX ? row_max(acc) : (op == REDUCE_MIN ? row_min(acc) : row_sum(acc));
  if (nans > 0.0) acc = UNKNOWN_OP_NAN;
  if (op == REDUCE_MEAN) acc /= float(red);
  else if (op != REDUCE_SUM && op != REDUCE_MAX && op != REDUCE_MIN) acc = UNKNOWN_OP_NAN;
  if (lane == 0) y[row] = T(acc);
}
