// Shared by every shader: the element type, the push-constant words, the op codes (opcodes.glsl,
// generated from vulkan_delegate/opcodes.py) and the 1-D invocation index.
#include "opcodes.glsl"
#ifdef FP16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#endif
// CT: the arithmetic type of the shaders that compute in their storage type (elementwise, max pooling,
// upsample, depthwise, compare): fp16 in the f16 variants, fp32 in the f32 ones and in the `f16math32`
// twins. A twin stores fp16 but does only fp32 arithmetic (its SPIR-V declares no Float16 capability): the
// runtime runs it on a device without shaderFloat16, or under VKDG_FP16_MATH=0 (variant_select.h).
// Reductions (softmax, norms, sums, averages) accumulate in float whatever T is.
#if defined(FP16) && !defined(MATH32)
#define CT float16_t
#define CT4 f16vec4
#else
#define CT float
#define CT4 vec4
#endif
// VT: the register type of a data-movement shader's values (where, take, pad, ...): int in i32 variants.
#ifdef T_IS_INT
#define VT int
#else
#define VT CT
#endif
#ifdef COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif

// 32 words: ints (sizes, strides; evaluated per call) and floats (bit patterns), in rule order.
layout(push_constant) uniform PushConstants { uint p[32]; } pc;
#define PU(i) pc.p[i]
#define PI(i) int(pc.p[i])
#define PF(i) uintBitsToFloat(pc.p[i])
// torch's maximum/minimum/clamp/amax/amin/max_pool2d return NaN where an operand is NaN; GLSL's max/min/clamp
// leave that result undefined (NVIDIA and llvmpipe return the other operand): every NaN-sensitive use calls these,
// the clamps fused into conv/matmul epilogues included (relu of a NaN accumulator is NaN in torch).
float nan_max(float a, float b) { return isnan(a) || isnan(b) ? a + b : max(a, b); }
float nan_min(float a, float b) { return isnan(a) || isnan(b) ? a + b : min(a, b); }
float nan_clamp(float v, float lo, float hi) { return isnan(v) ? v : clamp(v, lo, hi); }
vec4 nan_clamp(vec4 v, vec4 lo, vec4 hi) { return mix(clamp(v, lo, hi), v, isnan(v)); }  // selects, no arithmetic
#if defined(FP16) && !defined(MATH32)
float16_t nan_max(float16_t a, float16_t b) { return isnan(a) || isnan(b) ? a + b : max(a, b); }
float16_t nan_min(float16_t a, float16_t b) { return isnan(a) || isnan(b) ? a + b : min(a, b); }
float16_t nan_clamp(float16_t v, float16_t lo, float16_t hi) { return isnan(v) ? v : clamp(v, lo, hi); }
f16vec4 nan_clamp(f16vec4 v, f16vec4 lo, f16vec4 hi) { return mix(clamp(v, lo, hi), v, isnan(v)); }
#endif
// The default branch of an op-code switch: unreachable (the runtime refuses unknown codes at load).
#define UNKNOWN_OP_NAN uintBitsToFloat(0x7fc00000u)

// 1-D shaders: the runtime folds more than 65535 workgroups into y (only for shaders that call
// linear_id: embed_shaders.py marks them). A macro, not a function: this file is included before the
// shader's `layout(local_size_x = ...) in;`, and a function here would read gl_WorkGroupSize as its
// default (1, 1, 1), so row y would start at gl_NumWorkGroups.x instead of gl_NumWorkGroups.x * local
// size and every element past 65535 * (local + 1) - 1 would never be written.
#define linear_id() (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// torch.pow semantics for a negative base with an integer exponent (GLSL pow is undefined there).
float pow_signed(float v, float e) {
  if (e == 2.0) return v * v;
  if (v < 0.0 && e == floor(e)) {
    float m = pow(-v, e);
    return mod(e, 2.0) == 1.0 ? -m : m;
  }
  return pow(v, e);
}
