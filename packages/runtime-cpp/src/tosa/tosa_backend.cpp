// TOSABackend: the delegate payload is one TOSA 1.0 flatbuffer (arm_tosa_core's TOSABackend
// preprocess); init parses and initializes it on the reference model, execute runs it.
#include <memory>
#include <mutex>
#include <new>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "common/registration.h"
#include "common/tosa_runner.h"

namespace runtime_cpp {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;

constexpr const char* kId = "TOSABackend";

// One loaded delegate: its runner and the lock that serializes its runs (two methods are two
// handles and run in parallel; one method executed from two threads takes turns).
struct TosaHandle {
  std::unique_ptr<TosaRunner> runner;
  std::mutex lock;
};

class TosaBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    if (processed == nullptr) {
      ET_LOG(Error, "%s: no payload", kId);
      return Error::InvalidProgram;
    }
    auto handle = std::unique_ptr<TosaHandle>(new (std::nothrow) TosaHandle());
    if (!handle) return Error::MemoryAllocationFailed;
    const Error err = TosaRunner::create(kId, static_cast<const uint8_t*>(processed->data()),
                                         processed->size(), &handle->runner);
    // The runner holds its own parsed copy of the graph: the program's copy can go.
    processed->Free();
    if (err != Error::Ok) return err;
    return handle.release();
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle,
                Span<EValue*> args) const override {
    auto* h = static_cast<TosaHandle*>(handle);
    std::lock_guard<std::mutex> guard(h->lock);
    return h->runner->run(kId, args);
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<TosaHandle*>(handle); }
};

TosaBackend g_backend;

}  // namespace
}  // namespace runtime_cpp

RUNTIME_CPP_REGISTER_FN(tosa) {
  return static_cast<int>(runtime_cpp::register_once(runtime_cpp::kId, &runtime_cpp::g_backend));
}
