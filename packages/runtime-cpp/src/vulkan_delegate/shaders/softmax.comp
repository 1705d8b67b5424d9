#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16
// (Log-)softmax over the middle of [outer, red, inner]: push = outer, red, inner, log, causal, q_len,
// masked_rows_zero.
// Causal (attention scores [.., q, kv], inner 1): keeps kv <= q (torch's is_causal), others get 0.
// masked_rows_zero (attention): a row whose kept scores are all -inf (masked out) is 0, as torch's
// SDPA gives; plain softmax leaves it NaN, as torch.softmax does.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { T y[]; };

void main() {
  uint i = linear_id();
  uint outer = PU(0), red = PU(1), inner = PU(2);
  if (i >= outer * inner) return;
  uint o = i / inner, j = i % inner, base = o * red * inner + j;
  uint limit = PU(4) != 0 ? min(red, o % PU(5) + 1) : red;
  float mx = -1.0 / 0.0;
  for (uint r = 0; r < limit; ++r) mx = max(mx, float(x[base + r * inner]));
  float sum = 0.0;
  for (uint r = 0; r < limit; ++r) sum += exp(float(x[base + r * inner]) - mx);
  bool lg = PU(3) != 0;
  bool zero_row = PU(6) != 0 && isinf(mx) && mx < 0.0;
  for (uint r = 0; r < red; ++r) {
    float v = float(x[base + r * inner]) - mx;
    float out_v = r < limit ? (lg ? v - log(sum) : exp(v) / sum) : (lg ? -1.0 / 0.0 : 0.0);
    y[base + r * inner] = T(zero_row ? 0.0 : out_v);
  }
}
