// The body of linear_qi.comp (int32 multiply-adds) and linear_qi_dot.comp (the packed 4x8-bit integer
// dot product of VK_KHR_shader_integer_dot_product, which the runtime picks at load where the device
// has it): y[r, n] = sa[r] * sum_g ws[n, g] * (dot_g(xa[r], q[n]) - za[r] * wsum[n, g]) (+ bias[n]),
// dot_g an exact int32 sum over group g. a: quantize_rows's rows [scale, zero point, KW words of int8x4].
// q: the [N, KW * 4] integer weights in the same grouped layout, 8-bit four per word or 4-bit eight per
// word (element i in bits 4*(i%8).., low nibble first); unpacked to int8x4 words in registers.
// ws: weight scales [N, NG] (float32); wsum: per (n, g) the sum of the group's weights (int32, read
// only with a zero point). push = rows, N, KW, GW (words per group), NG, has_bias, bits (4 or 8),
// has_zp. Threads: (N, rows). The including .comp declares the bindings (the shader table reads them there).
#ifdef INT_DOT
// OpSDot (4450) with PackedVectorFormat4x8Bit (0): Debian's glslc has no GL_EXT_integer_dot_product.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_packed(uint a, uint b, spirv_literal int packed_vector_format);
int dot4(uint a, uint b) { return sdot_packed(a, b, 0); }
#else
int dot4(uint a, uint b) {
  int ia = int(a), ib = int(b);
  return bitfieldExtract(ia, 0, 8) * bitfieldExtract(ib, 0, 8) + bitfieldExtract(ia, 8, 8) * bitfieldExtract(ib, 8, 8) +
         bitfieldExtract(ia, 16, 8) * bitfieldExtract(ib, 16, 8) + bitfieldExtract(ia, 24, 8) * bitfieldExtract(ib, 24, 8);
}
#endif

// Four signed nibbles (16 bits) as four signed bytes: spread, then copy each nibble's sign bit (bit 3)
// into bits 4..7 of its byte (t * 30 = t << 1 | t << 2 | t << 3 | t << 4, no carry between bytes).
uint nibbles_to_bytes(uint h) {
  uint b = (h & 0xfu) | ((h & 0xf0u) << 4) | ((h & 0xf00u) << 8) | ((h & 0xf000u) << 12);
  return b | ((b & 0x08080808u) * 30u);
}

void main() {
  uint n = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  uint N = PU(1), KW = PU(2), GW = PU(3), NG = PU(4);
  if (n >= N || r >= PU(0)) return;
  uint ab = r * (KW + 2u) + 2u;
  bool q4 = PU(6) == 4u, has_zp = PU(7) != 0u;
  int za = int(a[ab - 1u]);
  float acc = 0.0;
  for (uint g = 0u; g < NG; ++g) {
    int part = 0;
    for (uint w = g * GW; w < (g + 1u) * GW; ++w) {
      uint qw = q4 ? nibbles_to_bytes((q[(n * KW + w) >> 1] >> ((w & 1u) * 16u)) & 0xffffu) : q[n * KW + w];
      part += dot4(a[ab + w], qw);
    }
    if (has_zp) part -= za * wsum[n * NG + g];
    acc += float(part) * ws[n * NG + g];
  }
  float sa = uintBitsToFloat(a[ab - 2u]);
  y[r * N + n] = T(acc * sa + (PU(5) != 0u ? float(bias[n]) : 0.0));
}
