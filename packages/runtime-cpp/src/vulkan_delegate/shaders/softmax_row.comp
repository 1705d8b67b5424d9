#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f32sg f16sg
// (Log-)softmax of contiguous rows, one workgroup per row (row_reduce.glsl): softmax.comp's push and
// semantics for inner == 1. push = rows, red, log, causal, q_len, masked_rows_zero. Threads: rows * 64.
#include "common.glsl"
#include "row_reduce.glsl"
layout(local_size_x = 64) in;  // ROW_LANES (embed_shaders.py reads the number)
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint row = row_id(), lane = gl_LocalInvocationID.x;
  if (row >= PU(0)) return;  // the whole workgroup: the barriers below stay uniform
  uint red = PU(1), base = row * red;
  uint limit = PU(3) != 0 ? min(red, row % PU(4) + 1) : red;
  float mx = -1.0 / 0.0;
  for (uint r = lane; r < limit; r += ROW_LANES) mx = max(mx, float(x[base + r]));
  mx = row_max(mx);
  float sum = 0.0;
  for (uint r = lane; r < limit; r += ROW_LANES) sum += exp(float(x[base + r]) - mx);
  sum = row_sum(sum);
  bool lg = PU(2) != 0;
  bool zero_row = PU(5) != 0 && isinf(mx) && mx < 0.0;
  for (uint r = lane; r < red; r += ROW_LANES) {
    float v = float(x[base + r]) - mx;
    float out_v = r < limit ? (lg ? v - log(sum) : exp(v) / sum) : (lg ? -1.0 / 0.0 : 0.0);
    y[base + r] = T(zero_row ? 0.0 : out_v);
  }
}
