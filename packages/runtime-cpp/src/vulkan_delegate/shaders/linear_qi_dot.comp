#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
// variants: f32 f16
// Integer quantized linear through OpSDot (VK_KHR_shader_integer_dot_product): see linear_qi.glsl. The
// runtime runs it in place of linear_qi where the device has shaderIntegerDotProduct.
#define INT_DOT 1
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer Q { uint q[]; };
layout(std430, binding = 2) readonly buffer WS { float ws[]; };
layout(std430, binding = 3) readonly buffer WSum { int wsum[]; };
layout(std430, binding = 4) readonly buffer Bias { T bias[]; };
layout(std430, binding = 5) writeonly buffer Y { T y[]; };

#include "linear_qi.glsl"
