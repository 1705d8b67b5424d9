#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 i32
// y[i] = start + i * step (arange; full has step 0) for sizes only known per call.
// push = n, start, step: integers (EXPR words) for i32; for floats start and step as hi + lo fp32 pairs
// (n, start_hi, step_hi, start_lo, step_lo: the lowering splits torch's double start and step).
// Floats follow torch's CPU arange (accumulate type double, 8-wide SIMD vectors, two per loop step):
// block b of 8 starts at v = float(start + 8b * step), and element k of it is float(double(v) + k * step);
// the last n % 16 elements (its scalar tail) are float(start + i * step). Each of these sums is exact before its one
// rounding (error-free transforms on fp32 pairs). float(i) * step in fp32 (before) was off by an ulp
// past i = 2^24, where float(i) itself rounds.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { T y[]; };

#ifndef T_IS_INT
// s + e == a + b exactly (Knuth's TwoSum); `precise` keeps the compiler from reassociating it away
void two_sum(float a, float b, out float s, out float e) {
  precise float sum = a + b;
  precise float bb = sum - a;
  precise float err = (a - (sum - bb)) + (b - bb);
  s = sum;
  e = err;
}

// p + e == a * b exactly (fma keeps the product's low half)
void two_prod(float a, float b, out float p, out float e) {
  precise float prod = a * b;
  precise float err = fma(a, b, -prod);
  p = prod;
  e = err;
}

// fp32(a_hi + a_lo + i * (step_hi + step_lo)), the sum taken to about double precision, rounded once
float axpb(float a_hi, float a_lo, uint i) {
  // i = ih + il, both exact in fp32 (ih has at most 20 significant bits, il < 4096)
  float ih = float(i & 0xFFFFF000u), il = float(i & 0xFFFu), step = PF(2);
  float p1, e1, p2, e2, s1, t1, s2, t2;
  two_prod(ih, step, p1, e1);
  two_prod(il, step, p2, e2);
  two_sum(a_hi, p1, s1, t1);
  two_sum(s1, p2, s2, t2);
  // the low parts (rounding errors of the sums and products, a_lo, i * step_lo) lie far below an ulp of
  // s2, so their own fp32 rounding does not reach the result
  precise float low = ((t1 + t2) + (e1 + e2)) + (a_lo + (ih * PF(4) + il * PF(4)));
  precise float r = s2 + low;
  return r;
}
#endif

void main() {
  uint i = linear_id(), n = PU(0);
  if (i >= n) return;
#ifdef T_IS_INT
  y[i] = PI(1) + int(i) * PI(2);
#else
  const uint W = 8u;
  float r;
  if (i >= n - n % (2u * W)) {
    r = axpb(PF(1), PF(3), i);
  } else {
    float block = axpb(PF(1), PF(3), i - i % W);
    r = axpb(block, 0.0, i % W);
  }
  y[i] = T(r);
#endif
}
