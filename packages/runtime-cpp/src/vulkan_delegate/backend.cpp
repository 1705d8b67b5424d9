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
