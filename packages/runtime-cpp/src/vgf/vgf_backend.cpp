// VgfBackend: the delegate payload is one VGF file (arm_vgf's VgfBackend preprocess). init decodes
// it and builds the data-graph pipeline with its constants on a VK_ARM_data_graph device
// (GraphProgram); execute copies the inputs in, submits the recorded commands and copies out.
#include <memory>
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
    Model model;
    Error err = parse_model(static_cast<const uint8_t*>(processed->data()), processed->size(),
                            &model);
    if (err == Error::Ok) err = GraphProgram::create(model, &handle->program);
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

// Parses a VGF payload without touching Vulkan: the fuzz target (runtime_cpp tests call it through
// ctypes). Returns the executorch Error code.
RUNTIME_CPP_EXPORT int runtime_cpp_vgf_parse(const uint8_t* data, size_t size) {
  runtime_cpp::vgf::Model model;
  return static_cast<int>(runtime_cpp::vgf::parse_model(data, size, &model));
}

RUNTIME_CPP_REGISTER_FN(vgf) {
  return static_cast<int>(
      runtime_cpp::register_once(runtime_cpp::vgf::kId, &runtime_cpp::vgf::g_backend));
}
