// The fp16-arithmetic choice made at load (issue 23 item 6): an fp16 program's elementwise, pooling,
// upsample, depthwise and data-movement shaders compute in fp16 where the device has shaderFloat16;
// elsewhere (or under VKDG_FP16_MATH=0) each runs as its `math32` twin (fp16 storage, fp32 arithmetic),
// when every shader of the program has one or needs no fp16 arithmetic. Also the subgroup choice of the
// row reductions (below). Kept apart from shader_select.cpp (the tensor-core choice).
#pragma once

#include "payload.h"
#include "shader_table.h"

namespace vkdg {

// The suffix of a shader's fp16-storage, fp32-arithmetic twin (embed_shaders.py): unary_f16 -> unary_f16math32.
inline constexpr char kMath32Suffix[] = "math32";

// Whether the SPIR-V declares the Float16 capability (fp16 arithmetic, which needs shaderFloat16); loads,
// stores and conversions of fp16 storage need only 16-bit storage.
bool needs_float16(const ShaderBinary& sb);

// VKDG_FP16_MATH=0: run the math32 twins even where the device has shaderFloat16 (for timing the old path).
bool fp16_math_disabled();

// Whether the program can run without shaderFloat16: each of its shaders needs no Float16 or has a
// math32 twin (the GEMM tiles compute in fp16 and have none).
bool runs_without_float16(const Program& prog);

// Renames every shader that has a math32 twin to it (the program then declares no Float16 use).
void use_math32(Program* prog);

// The subgroup choice: a row reduction (softmax_row, norm_row, reduce_row) runs as its `sg` twin
// (subgroupAdd/subgroupMax, then shared memory across subgroups) where the device has subgroup arithmetic
// in compute shaders, unless VKDG_SUBGROUP=0; else its shared-memory tree.
inline constexpr char kSubgroupSuffix[] = "sg";
bool subgroups_disabled();
void use_subgroup_twins(Program* prog);

// The 4-bit GEMV a lowering named linear_q_gemv_words (subgroup sums; same push, bindings and grid) runs as
// linear_q_gemv where the device lacks subgroup arithmetic, or under VKDG_SUBGROUP=0 or VKDG_GEMV_SG=0.
bool gemv_words_disabled();
void use_gemv_chunks(Program* prog);

}  // namespace vkdg
