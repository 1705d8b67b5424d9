// TOSABackend: the delegate payload is one TOSA 1.0 flatbuffer (arm_tosa_core's TOSABackend
// preprocess); init parses and initializes it on the reference model, execute runs it.
#include <memory>

#include "common/program_backend.h"
#include "common/tosa_runner.h"

namespace runtime_cpp {
namespace {

constexpr const char* kId = "TOSABackend";

// One loaded delegate: the runner holds its own parsed copy of the graph.
struct TosaProgram {
  std::unique_ptr<TosaRunner> runner;

  static Error load(const uint8_t* data, size_t size, std::unique_ptr<TosaProgram>* out) {
    auto program = std::unique_ptr<TosaProgram>(new (std::nothrow) TosaProgram());
    if (!program) return Error::MemoryAllocationFailed;
    const Error err = TosaRunner::create(kId, data, size, &program->runner);
    if (err != Error::Ok) return err;
    *out = std::move(program);
    return Error::Ok;
  }
  Error run(Span<EValue*> args) { return runner->run(kId, args); }
};

ProgramBackend<TosaProgram> g_backend(kId);

}  // namespace
}  // namespace runtime_cpp

RUNTIME_CPP_REGISTER_FN(tosa) { return static_cast<int>(runtime_cpp::g_backend.register_once()); }

// Fuzz hook: parse and initialize arbitrary bytes as a TOSA graph; returns the Error code.
RUNTIME_CPP_EXPORT int runtime_cpp_fuzz_tosa_graph(const uint8_t* data, size_t size) {
  std::unique_ptr<runtime_cpp::TosaRunner> runner;
  return static_cast<int>(runtime_cpp::TosaRunner::create("TOSABackend", data, size, &runner));
}
