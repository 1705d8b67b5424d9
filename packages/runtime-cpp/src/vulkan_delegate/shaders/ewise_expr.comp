#version 450
#extension GL_GOOGLE_include_directive : require
// variants: f32 f16 f16math32
// y[i] = a tree of elementwise ops (vulkan_delegate/fuse.py builds it from unary/binary dispatches), run per
// output element as a postfix program on a small stack, in fp32, rounded once at the store.
// push = n, program length in words, (div, mod) of inputs 0..3, then the program (at most 22 words).
// Input k at output index i is x_k[(i / div_k) % mod_k]: same shape (1, n), a scalar (1, 1), or a broadcast
// whose kept dims are one contiguous run (a bias [C] over [N, C, H, W]: (H * W, C)).
// A program word: bits 0-1 the kind (0 push input `slot`, 1 unary, 2 binary, 3 push the next word as a float),
// bits 2-3 the input slot, bits 4-5 how many float words follow (a unary's alpha, beta), bits 8.. the op code.
#include "common.glsl"
#include "elementwise.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X0 { T x0[]; };
layout(std430, binding = 1) readonly buffer X1 { T x1[]; };
layout(std430, binding = 2) readonly buffer X2 { T x2[]; };
layout(std430, binding = 3) readonly buffer X3 { T x3[]; };
layout(std430, binding = 4) writeonly buffer Y { T y[]; };

#define KIND_LOAD 0u
#define KIND_UNARY 1u
#define KIND_BINARY 2u
#define KIND_IMM 3u
#define PROGRAM FUSED_PROGRAM_WORD  // opcodes.glsl, generated from opcodes.py with fuse.py's limits
#define STACK FUSED_STACK  // fuse.py never builds a deeper program

float load(uint slot, uint i) {
  uint j = (i / PU(2 + 2 * slot)) % PU(3 + 2 * slot);
  switch (slot) {
    case 0u: return float(x0[j]);
    case 1u: return float(x1[j]);
    case 2u: return float(x2[j]);
    default: return float(x3[j]);
  }
}

void main() {
  uint i = linear_id();
  if (i >= PU(0)) return;
  float st[STACK];
  int sp = 0;
  uint end = PROGRAM + PU(1);
  for (uint at = PROGRAM; at < end;) {
    uint w = PU(at), kind = w & 3u, nf = (w >> 4) & 3u;
    int op = int(w >> 8);
    float a = nf > 0u ? PF(at + 1u) : 0.0, b = nf > 1u ? PF(at + 2u) : 0.0;
    if (kind == KIND_LOAD) {
      st[sp++] = load((w >> 2) & 3u, i);
    } else if (kind == KIND_IMM) {
      st[sp++] = a;
    } else if (kind == KIND_UNARY) {
      st[sp - 1] = unary_f32(op, st[sp - 1], a, b);
    } else {
      --sp;
      st[sp - 1] = binary_f32(op, st[sp - 1], st[sp]);
    }
    at += 1u + nf;
  }
  y[i] = T(st[0]);
}
