// How a backend module registers itself (the plug-in convention in README.md).
//
// Each _backend_<name>.so defines RUNTIME_CPP_REGISTER_FN(<name>) { ... } returning the executorch
// Error code of its register_backend calls; runtime_cpp (Python) calls it once after loading the
// module, so a failed registration is reported by runtime_cpp.backends() instead of being lost in
// a static initializer.
#pragma once

#include <executorch/runtime/backend/interface.h>

#define RUNTIME_CPP_EXPORT extern "C" __attribute__((visibility("default")))
#define RUNTIME_CPP_REGISTER_FN(name) RUNTIME_CPP_EXPORT int runtime_cpp_register_##name()

namespace runtime_cpp {

// Registers `backend` under `id`; registering the same id twice from the same module is Ok (a
// second import of the module), anything else is the registry's error, logged.
inline executorch::runtime::Error register_once(const char* id,
                                                executorch::runtime::BackendInterface* backend) {
  using executorch::runtime::Error;
  if (executorch::runtime::get_backend_class(id) == backend) {
    return Error::Ok;
  }
  const Error err = executorch::runtime::register_backend({id, backend});
  if (err != Error::Ok) {
    ET_LOG(Error, "runtime_cpp: registering backend %s failed (error 0x%x): the registry is full or "
                  "another library registered that id first", id, static_cast<unsigned>(err));
  }
  return err;
}

}  // namespace runtime_cpp
