// VgfBackend: the delegate payload is one VGF file (arm_vgf's VgfBackend preprocess). init decodes
// it and builds the data-graph pipeline with its constants on a VK_ARM_data_graph device
// (GraphProgram); execute copies the inputs in, submits the recorded commands and copies out.
#include <exception>
#include <memory>

#include "common/program_backend.h"
#include "vgf/vgf_program.h"

namespace runtime_cpp {
namespace vgf {
namespace {

constexpr const char* kId = "VgfBackend";

// One loaded delegate: the pipeline holds its own copies of the SPIR-V and constants.
struct VgfProgram {
  std::unique_ptr<GraphProgram> graph;

  // Decode + build, with any exception from the VGF library or the standard library stopped here.
  static Error load(const uint8_t* data, size_t size, std::unique_ptr<VgfProgram>* out) {
    try {
      Model model;
      auto program = std::unique_ptr<VgfProgram>(new VgfProgram());
      Error err = parse_model(data, size, &model);
      if (err == Error::Ok) err = GraphProgram::create(model, &program->graph);
      if (err == Error::Ok) *out = std::move(program);
      return err;
    } catch (const std::bad_alloc&) {
      ET_LOG(Error, "%s: out of memory while loading the VGF", kId);
      return Error::MemoryAllocationFailed;
    } catch (const std::exception& e) {
      ET_LOG(Error, "%s: loading the VGF failed: %s", kId, e.what());
      return Error::InvalidProgram;
    }
  }
  Error run(Span<EValue*> args) { return graph->run(args); }
};

ProgramBackend<VgfProgram> g_backend(kId);

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

RUNTIME_CPP_REGISTER_FN(vgf) { return static_cast<int>(runtime_cpp::vgf::g_backend.register_once()); }
