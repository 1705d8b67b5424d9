// The BackendInterface every runtime-cpp backend shares: init loads a Program from the payload and
// frees the payload, execute runs it under the handle's lock, destroy deletes it. A backend supplies
// only its Program:
//
//   struct MyProgram {
//     // Parse and build everything a call needs (the payload is freed right after); Error + log line
//     // on bad input, never an exception out of here.
//     static Error load(const uint8_t* data, size_t size, std::unique_ptr<MyProgram>* out);
//     Error run(Span<EValue*> args);  // one call: inputs then outputs, as ExecuTorch passes them
//   };
//   ProgramBackend<MyProgram> g_backend("MyBackendId");
//   RUNTIME_CPP_REGISTER_FN(my) { return static_cast<int>(g_backend.register_once()); }
//
// One method executed from two threads takes turns on its handle; two methods are two handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "common/registration.h"

namespace runtime_cpp {

template <typename Program>
class ProgramBackend final : public executorch::runtime::BackendInterface {
 public:
  using Error = executorch::runtime::Error;
  using DelegateHandle = executorch::runtime::DelegateHandle;
  using EValue = executorch::runtime::EValue;

  explicit ProgramBackend(const char* id) : id_(id) {}
  const char* id() const { return id_; }
  Error register_once() { return runtime_cpp::register_once(id_, this); }

  bool is_available() const override { return true; }  // device problems are reported by init

  executorch::runtime::Result<DelegateHandle*> init(
      executorch::runtime::BackendInitContext& context,
      executorch::runtime::FreeableBuffer* processed,
      executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> compile_specs) const override {
    if (processed == nullptr) {
      ET_LOG(Error, "%s: no payload", id_);
      return Error::InvalidProgram;
    }
    auto handle = std::unique_ptr<Handle>(new (std::nothrow) Handle());
    if (!handle) return Error::MemoryAllocationFailed;
    const Error err = Program::load(static_cast<const uint8_t*>(processed->data()),
                                    processed->size(), &handle->program);
    processed->Free();  // a loaded program keeps what it needs (parsed, or on the device)
    if (err != Error::Ok) return err;
    return handle.release();
  }

  Error execute(executorch::runtime::BackendExecutionContext& context, DelegateHandle* handle,
                executorch::runtime::Span<EValue*> args) const override {
    auto* h = static_cast<Handle*>(handle);
    std::lock_guard<std::mutex> guard(h->lock);
    return h->program->run(args);
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<Handle*>(handle); }

 private:
  struct Handle {
    std::unique_ptr<Program> program;
    std::mutex lock;
  };
  const char* id_;
};

}  // namespace runtime_cpp
