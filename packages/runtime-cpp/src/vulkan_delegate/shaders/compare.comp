#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// Comparisons and logic with a bool (int32 0/1) result, broadcast: y = op(a, b).
// push = op, n, out sizes[6], a strides[6], b strides[6]. Unary ops (logical_not, bitwise_not) read a.
// Floats compare as IEEE does (NaN: only ne is true), as torch does.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Y { int y[]; };

void main() {
  uint i = linear_id();
  if (i >= PU(1)) return;
  uint rem = i, ia = 0, ib = 0;
  for (int d = 5; d >= 0; --d) {
    uint s = PU(2 + d);
    uint c = rem % s;
    rem /= s;
    ia += c * PU(8 + d);
    ib += c * PU(14 + d);
  }
#ifdef T_IS_INT
#define V int
#else
#define V CT  // f16math32: compared in fp32 (exact)
#endif
  V x = V(a[ia]), z = V(b[ib]);
  bool bx = x != V(0), bz = z != V(0);
  int r;
  switch (PI(0)) {  // op codes: opcodes.glsl
    case COMPARE_EQ: r = int(x == z); break;
    case COMPARE_NE: r = int(x != z); break;
    case COMPARE_LT: r = int(x < z); break;
    case COMPARE_LE: r = int(x <= z); break;
    case COMPARE_GT: r = int(x > z); break;
    case COMPARE_GE: r = int(x >= z); break;
    case COMPARE_LOGICAL_AND: r = int(bx && bz); break;
    case COMPARE_LOGICAL_OR: r = int(bx || bz); break;
    case COMPARE_LOGICAL_XOR: r = int(bx != bz); break;
    case COMPARE_LOGICAL_NOT: r = int(!bx); break;
    // bitwise ops are claimed for int32/bool only (a bool is 0/1, so not is 1 - x there)
    case COMPARE_BITWISE_AND: r = int(x) & int(z); break;
    case COMPARE_BITWISE_OR: r = int(x) | int(z); break;
    case COMPARE_BITWISE_XOR: r = int(x) ^ int(z); break;
    case COMPARE_BITWISE_NOT: r = ~int(x); break;
    case COMPARE_BOOL_NOT: r = 1 - int(bx); break;
    default: r = 0; break;  // unreachable: the runtime refuses unknown codes at load
  }
  y[i] = r;
}
