#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// argmax / argmin over the middle of [outer, red, inner] (int32 result): the first index of the
// extreme value; a NaN counts as the extreme (torch's rule). push = op, outer, red, inner.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { T x[]; };
layout(std430, binding = 1) writeonly buffer Y { int y[]; };

void main() {
  uint i = linear_id();
  uint red = PU(2), inner = PU(3);
  if (i >= PU(1) * inner) return;
  uint base = (i / inner) * red * inner + i % inner;
  bool is_max;
  switch (PI(0)) {  // op codes: opcodes.glsl
    case ARGREDUCE_ARGMAX: is_max = true; break;
    case ARGREDUCE_ARGMIN: is_max = false; break;
    default: y[i] = -1; return;  // unreachable: the runtime refuses unknown codes at load
  }
#ifdef T_IS_INT
#define V int
#else
#define V CT  // f16math32: compared in fp32 (exact)
#endif
  V best = V(x[base]);
  int at = 0;
  for (uint r = 1; r < red; ++r) {
    V v = V(x[base + r * inner]);
#ifdef T_IS_INT
    bool better = is_max ? v > best : v < best;
#else
    if (isnan(best)) break;
    bool better = isnan(v) || (is_max ? v > best : v < best);
#endif
    if (better) {
      best = v;
      at = int(r);
    }
  }
  y[i] = at;
}
