// "VkComputeBackend": the ExecuTorch backend of the Vulkan compute delegate (registration, init, execute)
// and a small C API for Python (shader table, device name).
#include <new>
#include <string>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "device.h"
#include "method.h"
#include "shader_table.h"

namespace vkdg {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

class VkComputeBackend final : public executorch::runtime::BackendInterface {
 public:
  bool is_available() const override { return true; }  // device problems are reported at init, with the fix

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec>) const override {
    Method* m = context.get_runtime_allocator()->allocateInstance<Method>();
    if (m == nullptr) return Error::MemoryAllocationFailed;
    new (m) Method();
    Error err = m->init(processed->data(), processed->size());
    processed->Free();  // everything needed was copied to the device or parsed
    if (err != Error::Ok) {
      m->~Method();
      return err;
    }
    return m;
  }

  Error execute(BackendExecutionContext&, DelegateHandle* handle, Span<EValue*> args) const override {
    return static_cast<Method*>(handle)->execute(args);
  }

  void destroy(DelegateHandle* handle) const override {
    if (handle) static_cast<Method*>(handle)->~Method();
  }
};

VkComputeBackend backend;

}  // namespace

// Registers the backend; Ok when this library registered it already.
Error register_vk_compute_backend() {
  if (executorch::runtime::get_backend_class("VkComputeBackend") == &backend) return Error::Ok;
  Error err = executorch::runtime::register_backend(Backend{"VkComputeBackend", &backend});
  if (err != Error::Ok) ET_LOG(Error, "VkComputeBackend: registration failed (0x%x)", static_cast<unsigned>(err));
  return err;
}

}  // namespace vkdg

// runtime_cpp's plug-in convention (common/registration.h): whoever loads the library calls this once
// (runtime_cpp, vulkan_delegate.runtime for the standalone build, the bench runner).
extern "C" __attribute__((visibility("default"))) int runtime_cpp_register_vulkan_delegate() {
  return static_cast<int>(vkdg::register_vk_compute_backend());
}

extern "C" {

// Number of shaders in the runtime's table and their names (the Python registry test reads these).
__attribute__((visibility("default"))) int vkdg_shader_count() { return static_cast<int>(vkdg::shader_count()); }

__attribute__((visibility("default"))) const char* vkdg_shader_name(int i) {
  return (i < 0 || static_cast<size_t>(i) >= vkdg::shader_count()) ? "" : vkdg::shader_at(i).name;
}

// Name of the device a program would run on, or "error: <what is missing>".
__attribute__((visibility("default"))) const char* vkdg_device_name() {
  static thread_local std::string name;
  std::string why;
  auto dev = vkdg::Device::create(false, &why);
  name = dev ? dev->name() : "error: " + why;
  return name.c_str();
}
}
