// linear_q_gemv.comp's and linear_q_gemv_words.comp's common part, included after their bindings: the nibble
// decode, a word's dot product and the output (folded norm, bias, epilogue).
// one of a word's 8 nibbles (m = value + 8 after the caller's xor), moved to mantissa bits 19..22 of 1.0
#define NIB(bits) uintBitsToFloat(0x3F800000u | ((bits) & 0x00780000u))

// sum over a word's 8 weights of x * (1 + m / 16)
float word_dot(uint w, vec4 lo, vec4 hi) {
  float s = lo.x * NIB(w << 19);
  s += lo.y * NIB(w << 15);
  s += lo.z * NIB(w << 11);
  s += lo.w * NIB(w << 7);
  s += hi.x * NIB(w << 3);
  s += hi.y * NIB(w >> 1);
  s += hi.z * NIB(w >> 5);
  s += hi.w * NIB(w >> 9);
  return s;
}

// output n of activation row r from its dot product v and the row's sum of squares ss (a folded norm)
void store(uint r, uint n, float v, float ss) {
  uint N = PU(1);
  if (PU(6) != 0u) v *= inversesqrt(ss / float(PU(2)) + PF(9));
  if (PU(5) != 0u) v += float(bias[n]);
  uint ep = PU(8);
  if (ep == 1u) v += float(other[r * N + n]);
  else if (ep == 2u) v *= float(other[r * N + n]);
  else if (ep == 3u) v = v / (1.0 + exp(-v));
  y[r * N + n] = T(v);
}

