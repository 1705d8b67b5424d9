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
  bool folds;        // 1-D (indexes by linear_id()): the runtime may fold > 65535 x-groups into y
};

size_t shader_count();
const ShaderBinary& shader_at(size_t i);
const ShaderBinary* find_shader(const std::string& name);

// The shader that runs a payload's `name`, chosen at load by what the device can do: with `coopmat`
// (Caps::coopmat_f16), the tensor-core twin `<name>coop` of an fp16 shader that has one (matmul_f16 ->
// matmul_f16coop, matmul_f16big -> matmul_f16bigcoop: same bindings, push words and outputs per
// workgroup); with `coopmat2` too (Caps::coopmat2), `<name>coop2` first where it exists (matmul_f16big ->
// matmul_f16bigcoop2: same bindings and push words, its own outputs per workgroup); else `name` itself. nullptr
// when `name` is not in the table.
const ShaderBinary* select_shader(const std::string& name, bool coopmat, bool coopmat2 = false);

}  // namespace vkdg
