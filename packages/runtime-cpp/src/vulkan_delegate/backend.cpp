// "VkComputeBackend": the ExecuTorch backend of the Vulkan compute delegate (runtime-cpp's
// ProgramBackend over Method) and a small C API for Python (shader table, device name).
#include <string>

#include "common/program_backend.h"
#include "device.h"
#include "method.h"
#include "shader_table.h"

namespace vkdg {
namespace {

runtime_cpp::ProgramBackend<Method> g_backend("VkComputeBackend");

}  // namespace
}  // namespace vkdg

// runtime_cpp's plug-in convention (common/registration.h): whoever loads the library calls this once
// (runtime_cpp, vulkan_delegate.runtime for the standalone build, the bench runner).
RUNTIME_CPP_REGISTER_FN(vulkan_delegate) { return static_cast<int>(vkdg::g_backend.register_once()); }

// Number of shaders in the runtime's table and their names (the Python registry test reads these).
RUNTIME_CPP_EXPORT int vkdg_shader_count() { return static_cast<int>(vkdg::shader_count()); }

RUNTIME_CPP_EXPORT const char* vkdg_shader_name(int i) {
  return (i < 0 || static_cast<size_t>(i) >= vkdg::shader_count()) ? "" : vkdg::shader_at(i).name;
}

// The shader a payload's `name` runs as on a device with (coopmat 1) or without (0) cooperative matrices, or
// with VK_NV_cooperative_matrix2 too (2) (select_shader), or "" for a name not in the table: the variant choice,
// testable without such a device.
RUNTIME_CPP_EXPORT const char* vkdg_select_shader(const char* name, int coopmat) {
  const vkdg::ShaderBinary* sb = vkdg::select_shader(name ? name : "", coopmat != 0, coopmat >= 2);
  return sb ? sb->name : "";
}

// Whether an fp16 program loaded now would run the tensor-core variants (Caps::coopmat_f16 as enabled
// for an fp16 program: the device offers them and VKDG_COOPMAT is not 0), 2 where VK_NV_cooperative_matrix2's
// twins run too (Caps::coopmat2); -1 without a usable device.
RUNTIME_CPP_EXPORT int vkdg_device_coopmat() {
  std::unique_ptr<vkdg::Device> dev;
  if (vkdg::Device::create(true, false, &dev) != executorch::runtime::Error::Ok) return -1;
  return dev->caps().coopmat2 ? 2 : dev->caps().coopmat_f16 ? 1 : 0;
}

// Name of the device a program would run on, or "error: ..." (the log line above says what is missing).
RUNTIME_CPP_EXPORT const char* vkdg_device_name() {
  static thread_local std::string name;
  std::unique_ptr<vkdg::Device> dev;
  const executorch::runtime::Error err = vkdg::Device::create(false, false, &dev);
  name = err == executorch::runtime::Error::Ok
             ? dev->name()
             : "error: no usable Vulkan device (error " + std::to_string(static_cast<int>(err)) +
                   "; the log line above says why)";
  return name.c_str();
}
