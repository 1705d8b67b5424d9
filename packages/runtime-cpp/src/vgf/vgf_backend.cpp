// VgfBackend: the delegate payload is one VGF file (arm_vgf's VgfBackend preprocess). init decodes
// it and builds the data-graph pipeline with its constants on a VK_ARM_data_graph device
// (GraphProgram); execute copies the inputs in, submits the recorded commands and copies out.
#include <memory>
#include <exception>
#include <mutex>
#include <new>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "common/registration.h"
#include "vgf/vgf_program.h"

namespace runtime_cpp {
namespace vgf {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;

constexpr const char* kId = "VgfBackend";

// One loaded delegate; one method executed from two threads takes turns on its device objects.
struct VgfHandle {
  std::unique_ptr<GraphProgram> program;
  std::mutex lock;
};

// Decode + build, with any exception from the VGF library or the standard library stopped here.
Error load(const uint8_t* data, size_t size, std::unique_ptr<GraphProgram>* out) {
  try {
    Model model;
    const Error err = parse_model(data, size, &model);
    if (err != Error::Ok) return err;
    return GraphProgram::create(model, out);
  } catch (const std::bad_alloc&) {
    ET_LOG(Error, "%s: out of memory while loading the VGF", kId);
    return Error::MemoryAllocationFailed;
  } catch (const std::exception& e) {
    ET_LOG(Error, "%s: loading the VGF failed: %s", kId, e.what());
    return Error::InvalidProgram;
  }
}

class VgfBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    if (processed == nullptr) {
      ET_LOG(Error, "%s: no payload", kId);
      return Error::InvalidProgram;
    }
    auto handle = std::unique_ptr<VgfHandle>(new (std::nothrow) VgfHandle());
    if (!handle) return Error::MemoryAllocationFailed;
    const Error err = load(static_cast<const uint8_t*>(processed->data()), processed->size(),
                           &handle->program);
    // The pipeline holds its own copies of the SPIR-V and constants: the payload can go.
    processed->Free();
    if (err != Error::Ok) return err;
    return handle.release();
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle,
                Span<EValue*> args) const override {
    auto* h = static_cast<VgfHandle*>(handle);
    std::lock_guard<std::mutex> guard(h->lock);
    return h->program->run(args);
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<VgfHandle*>(handle); }
};

VgfBackend g_backend;

}  // namespace
}  // namespace vgf
}  // namespace runtime_cpp

// Decodes a VGF payload without touching Vulkan: the parser's fuzz target (tests/test_vgf_bad_input.py
// calls it through ctypes). Returns the executorch Error code.
RUNTIME_CPP_EXPORT int runtime_cpp_fuzz_vgf(const uint8_t* data, size_t size) {
  try {
    runtime_cpp::vgf::Model model;
    return static_cast<int>(runtime_cpp::vgf::parse_model(data, size, &model));
  } catch (const std::exception& e) {
    ET_LOG(Error, "VgfBackend: decoding the VGF failed: %s", e.what());
    return static_cast<int>(executorch::runtime::Error::InvalidProgram);
  }
}

RUNTIME_CPP_REGISTER_FN(vgf) {
  return static_cast<int>(
      runtime_cpp::register_once(runtime_cpp::vgf::kId, &runtime_cpp::vgf::g_backend));
}
