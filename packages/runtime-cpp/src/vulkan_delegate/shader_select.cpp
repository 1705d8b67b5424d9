// select_shader (shader_table.h): the device-dependent variant choice, kept apart from the generated table.
#include "shader_table.h"

namespace vkdg {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

const ShaderBinary* select_shader(const std::string& name, bool coopmat, bool coopmat2) {
  // the fp16 shaders with a tensor-core twin: the GEMM tiles (the 64x64 `f16`, the 128x128 `f16big` and matmul's
  // 16x16 `f16smallsplit`, K split over the subgroups) and attention_flash's `f16sg`; `f16big` has a
  // VK_NV_cooperative_matrix2 twin too
  const bool fp16 = ends_with(name, "_f16") || ends_with(name, "_f16big") || ends_with(name, "_f16smallsplit") ||
                    ends_with(name, "_f16sg");
  if (coopmat && coopmat2 && ends_with(name, "_f16big"))
    if (const ShaderBinary* twin = find_shader(name + "coop2")) return twin;
  if (coopmat && fp16)
    if (const ShaderBinary* twin = find_shader(name + "coop")) return twin;
  return find_shader(name);
}

}  // namespace vkdg
