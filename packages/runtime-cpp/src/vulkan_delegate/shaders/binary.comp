#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32 f16math32
// y = op(a, alpha * b) with broadcast: push = op, n, out sizes[6], a strides[6], b strides[6], alpha
// (i32: integer arithmetic, alpha an integer given as a float; div and pow are not claimed for it)
// fmod: C semantics (the result has the dividend's sign), as torch.fmod
// Floats: add/sub/mul/div/max/min in CT (fp16 in the f16 variant); pow and fmod in fp32.
#include "common.glsl"
#include "elementwise.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer Y { T y[]; };

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
  int x = a[ia], z = b[ib], r;
  switch (PI(0)) {
    case BINARY_ADD: r = x + int(PF(20)) * z; break;
    case BINARY_SUB: r = x - int(PF(20)) * z; break;
    case BINARY_MUL: r = x * z; break;
    case BINARY_MAXIMUM: r = max(x, z); break;
    case BINARY_MINIMUM: r = min(x, z); break;
    // C fmod: the sign of the dividend (GLSL's % is undefined for negative operands); torch raises
    // on an integer division by zero, so 0 there is never compared
    case BINARY_FMOD: r = z == 0 ? 0 : (x < 0 ? -(abs(x) % abs(z)) : abs(x) % abs(z)); break;
    default: r = 0; break;  // unreachable: the registry claims no other int op
  }
  y[i] = r;
#else
  CT hx = CT(a[ia]), hz = CT(b[ib]), hr;
  switch (PI(0)) {  // op codes: opcodes.glsl
    case BINARY_ADD: hr = hx + CT(PF(20)) * hz; break;
    case BINARY_SUB: hr = hx - CT(PF(20)) * hz; break;
    case BINARY_MUL: hr = hx * hz; break;
    case BINARY_DIV: hr = hx / hz; break;
    case BINARY_MAXIMUM: hr = nan_max(hx, hz); break;
    case BINARY_MINIMUM: hr = nan_min(hx, hz); break;
    default: hr = CT(binary_f32(PI(0), float(a[ia]), float(b[ib]))); break;  // pow, fmod: fp32
  }
  y[i] = T(hr);
#endif
}
