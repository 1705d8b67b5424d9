// select_shader (shader_table.h): the device-dependent variant choice, kept apart from the generated table.
#include "shader_table.h"

namespace vkdg {

const ShaderBinary* select_shader(const std::string& name, bool coopmat) {
  const std::string suffix = "_f16";
  const bool fp16 = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (coopmat && fp16)
    if (const ShaderBinary* twin = find_shader(name + "coop")) return twin;
  return find_shader(name);
}

}  // namespace vkdg
