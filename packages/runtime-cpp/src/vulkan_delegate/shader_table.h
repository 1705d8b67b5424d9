// The SPIR-V compiled from shaders/*.comp at build time (generated shaders.cpp): the runtime's
// dispatch table. A payload naming a shader not in it fails at init with a clear log line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vkdg {

struct ShaderBinary {
  const char* name;
  const uint32_t* code;
  size_t words;
  uint32_t local_size[3];
  uint32_t bindings;
  uint32_t tile[3];  // outputs per invocation per axis: groups = ceil(threads / (local * tile))
};

size_t shader_count();
const ShaderBinary& shader_at(size_t i);
const ShaderBinary* find_shader(const std::string& name);

}  // namespace vkdg
