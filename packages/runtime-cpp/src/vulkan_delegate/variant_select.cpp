// variant_select.h: the fp16-arithmetic / math32 twin choice.
#include "variant_select.h"

#include <cstdlib>
#include <cstring>

namespace vkdg {

bool needs_float16(const ShaderBinary& sb) {
  // OpCapability (opcode 17, 2 words) Float16 (9); capabilities come right after the 5-word header
  constexpr uint32_t kOpCapability = (2u << 16) | 17u, kFloat16 = 9;
  for (size_t i = 5; i + 1 < sb.words; ++i) {
    if (sb.code[i] != kOpCapability) break;
    if (sb.code[++i] == kFloat16) return true;
  }
  return false;
}

bool fp16_math_disabled() {
  const char* env = std::getenv("VKDG_FP16_MATH");
  return env && std::strcmp(env, "0") == 0;
}

bool subgroups_disabled() {
  const char* env = std::getenv("VKDG_SUBGROUP");
  return env && std::strcmp(env, "0") == 0;
}

void use_subgroup_twins(Program* prog) {
  for (auto& name : prog->shaders)
    if (find_shader(name + kSubgroupSuffix)) name += kSubgroupSuffix;
}

void use_gemv_chunks(Program* prog) {
  constexpr char kWords[] = "linear_q_gemv_words_";
  for (auto& name : prog->shaders)
    if (name.rfind(kWords, 0) == 0) name = "linear_q_gemv_" + name.substr(sizeof(kWords) - 1);
}

bool gemv_words_disabled() {
  const char* env = std::getenv("VKDG_GEMV_SG");
  return env && std::strcmp(env, "0") == 0;
}

bool runs_without_float16(const Program& prog) {
  for (const auto& name : prog.shaders) {
    const ShaderBinary* sb = find_shader(name);
    if (sb && needs_float16(*sb) && !find_shader(name + kMath32Suffix)) return false;
  }
  return true;
}

void use_math32(Program* prog) {
  for (auto& name : prog->shaders)
    if (find_shader(name + kMath32Suffix)) name += kMath32Suffix;
}

}  // namespace vkdg
