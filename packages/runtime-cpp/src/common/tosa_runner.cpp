#include "common/tosa_runner.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <executorch/runtime/platform/log.h>

#include <sys/wait.h>
#include <unistd.h>

#include "model_runner.h"
#include "tosa_serialization_handler.h"

namespace runtime_cpp {
namespace {

using tosa::DType;

// The TOSA element a boundary tensor of ExecuTorch dtype `et` is stored as; INT64 crosses as INT32
// (TOSA 1.0 PRO profiles have no 64-bit integers), as the AOT lowering does.
bool compatible(ScalarType et, DType tosa) {
  switch (tosa) {
    case DType::DType_FP32: return et == ScalarType::Float;
    case DType::DType_FP16: return et == ScalarType::Half;
    case DType::DType_BF16: return et == ScalarType::BFloat16;
    case DType::DType_INT8: return et == ScalarType::Char;
    case DType::DType_INT16: return et == ScalarType::Short;
    case DType::DType_INT32: return et == ScalarType::Int || et == ScalarType::Long;
    case DType::DType_BOOL: return et == ScalarType::Bool;
    default: return false;
  }
}

size_t numel_of(const std::vector<int32_t>& shape) {
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d < 0 ? 0 : d);
  return n;
}

// The reference model keeps its configuration and debug state in process globals (g_func_config,
// g_func_debug), so two graphs cannot run on it at once: every use goes through this lock. Two
// methods in two threads therefore take turns inside the reference model (correct, not parallel).
std::mutex& reference_model_lock() {
  static std::mutex lock;
  return lock;
}

// The serialization library dereferences fields the flatbuffer verifier lets be absent, and the
// reference model ends the process (abort(), assert) on some malformed graphs instead of returning
// an error. So a graph is first deserialized and initialized in a forked child: a child that dies
// means a graph we refuse, and this process lives. Costs one extra load per loaded delegate.
Error loads_safely(const char* backend, const uint8_t* data, size_t size) {
  std::unique_lock<std::mutex> guard(reference_model_lock());  // a consistent state to fork
  const pid_t pid = fork();
  if (pid < 0) {
    ET_LOG(Error, "%s: fork() failed, so the graph cannot be checked safely before loading", backend);
    return Error::Internal;
  }
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // die quietly: no Python faulthandler report from the child
    std::signal(SIGABRT, SIG_DFL);
    int code = 3;
    try {
      tosa::TosaSerializationHandler handler;
      if (handler.LoadFileTosaFlatbuffer(data, size) != tosa::TOSA_OK) _exit(4);
      TosaReference::IModelRunner runner;
      std::signal(SIGABRT, SIG_DFL);  // the reference model's handler starts a debugger
      std::signal(SIGSEGV, SIG_DFL);
      code = static_cast<int>(runner.initialize(handler));
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  guard.unlock();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      ET_LOG(Error, "%s: waiting for the graph check failed", backend);
      return Error::Internal;
    }
  }
  if (WIFSIGNALED(status)) {
    ET_LOG(Error, "%s: the TOSA reference model crashed (signal %d) loading this graph: it is "
                  "malformed (dangling tensor names, bad attributes or shapes)", backend,
           WTERMSIG(status));
    return Error::InvalidProgram;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
  if (code == 4) {
    ET_LOG(Error, "%s: the TOSA flatbuffer (%zu bytes) failed verification or is a version the "
                  "reference model does not read (TOSA 1.0 expected)", backend, size);
    return Error::InvalidProgram;
  }
  if (code != static_cast<int>(GraphStatus::TOSA_VALID)) {
    ET_LOG(Error, "%s: the TOSA reference model rejected the graph (%s); the lowering produced an "
                  "invalid graph, please report it with the .pte", backend,
           code == static_cast<int>(GraphStatus::TOSA_ERROR)           ? "TOSA_ERROR"
           : code == static_cast<int>(GraphStatus::TOSA_UNPREDICTABLE) ? "TOSA_UNPREDICTABLE"
                                                                       : "exception");
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

struct Port {
  std::string name;
  DType dtype;
  size_t numel;
};

}  // namespace

struct TosaRunner::Impl {
  tosa::TosaSerializationHandler handler;
  // The reference model's runner evaluates a graph once: each run gets a fresh one initialized from
  // the parsed handler (kept, so the flatbuffer is parsed once per load).
  std::unique_ptr<TosaReference::IModelRunner> runner;
  std::vector<Port> inputs;
  std::vector<Port> outputs;
  std::vector<uint8_t> staging;  // INT64 <-> INT32 conversions
};

TosaRunner::TosaRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TosaRunner::~TosaRunner() = default;
size_t TosaRunner::num_inputs() const { return impl_->inputs.size(); }
size_t TosaRunner::num_outputs() const { return impl_->outputs.size(); }

Error TosaRunner::create(const char* backend, const uint8_t* data, size_t size,
                         std::unique_ptr<TosaRunner>* out) {
  // The flatbuffer identifier sits at bytes 4..7; check it here so a wrong file gets our message.
  if (data == nullptr || size < 8 || std::memcmp(data + 4, "TOSA", 4) != 0) {
    ET_LOG(Error, "%s: the payload (%zu bytes) is not a TOSA flatbuffer (no \"TOSA\" identifier at "
                  "offset 4); recompile the model with arm_tosa_core", backend, size);
    return Error::InvalidProgram;
  }
  const Error checked = loads_safely(backend, data, size);
  if (checked != Error::Ok) return checked;
  auto impl = std::make_unique<Impl>();
  std::lock_guard<std::mutex> guard(reference_model_lock());
  try {
    if (impl->handler.LoadFileTosaFlatbuffer(data, size) != tosa::TOSA_OK) {
      ET_LOG(Error, "%s: the TOSA flatbuffer (%zu bytes) failed verification or is a version the "
                    "reference model does not read (TOSA 1.0 expected)", backend, size);
      return Error::InvalidProgram;
    }
    auto* region = impl->handler.GetMainRegion();
    if (region == nullptr || region->GetBlocks().empty()) {
      ET_LOG(Error, "%s: the TOSA graph has no main region/block", backend);
      return Error::InvalidProgram;
    }
    auto* block = region->GetBlocks()[0].get();
    for (int pass = 0; pass < 2; ++pass) {
      auto& names = pass == 0 ? block->GetInputs() : block->GetOutputs();
      auto& ports = pass == 0 ? impl->inputs : impl->outputs;
      for (const auto& name : names) {
        auto* tensor = block->GetTensorByName(name);
        if (tensor == nullptr) {
          ET_LOG(Error, "%s: the TOSA graph names %s %s but has no such tensor", backend,
                 pass == 0 ? "input" : "output", name.c_str());
          return Error::InvalidProgram;
        }
        ports.push_back({name, tensor->GetDtype(), numel_of(tensor->GetShape())});
      }
    }
    impl->runner = std::make_unique<TosaReference::IModelRunner>();
    const GraphStatus status = impl->runner->initialize(impl->handler);
    if (status != GraphStatus::TOSA_VALID) {
      ET_LOG(Error, "%s: the TOSA reference model rejected the graph (status %d: %s); the lowering "
                    "produced an invalid graph, please report it with the .pte", backend,
             static_cast<int>(status), status == GraphStatus::TOSA_ERROR ? "ERROR" : "UNPREDICTABLE");
      return Error::InvalidProgram;
    }
  } catch (const std::exception& e) {
    ET_LOG(Error, "%s: the TOSA reference model failed to load the graph: %s", backend, e.what());
    return Error::InvalidProgram;
  } catch (...) {
    ET_LOG(Error, "%s: the TOSA reference model failed to load the graph (unknown exception)", backend);
    return Error::InvalidProgram;
  }
  out->reset(new TosaRunner(std::move(impl)));
  return Error::Ok;
}

namespace {

Error check_port(const char* backend, const char* what, size_t i, const Port& port, const TensorArg& arg) {
  if (!compatible(arg.dtype, port.dtype)) {
    ET_LOG(Error, "%s: %s %zu (%s) is %s but the TOSA graph expects %s", backend, what, i,
           port.name.c_str(), dtype_name(arg.dtype), tosa::EnumNameDType(port.dtype));
    return Error::InvalidArgument;
  }
  if (arg.numel != port.numel) {
    ET_LOG(Error, "%s: %s %zu (%s) has %zu elements but the TOSA graph expects %zu", backend, what, i,
           port.name.c_str(), arg.numel, port.numel);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

}  // namespace

Error TosaRunner::run(const char* backend, Span<EValue*> args) {
  Impl& m = *impl_;
  const size_t n_in = m.inputs.size();
  const size_t n_out = m.outputs.size();
  if (args.size() != n_in + n_out) {
    ET_LOG(Error, "%s: the method passed %zu arguments but the TOSA graph has %zu inputs and %zu "
                  "outputs", backend, args.size(), n_in, n_out);
    return Error::InvalidArgument;
  }
  std::lock_guard<std::mutex> guard(reference_model_lock());
  try {
    if (!m.runner) {
      m.runner = std::make_unique<TosaReference::IModelRunner>();
      if (m.runner->initialize(m.handler) != GraphStatus::TOSA_VALID) {
        m.runner.reset();
        ET_LOG(Error, "%s: the TOSA reference model could not re-initialize the graph", backend);
        return Error::Internal;
      }
    }
    // This run consumes the runner whatever happens.
    std::unique_ptr<TosaReference::IModelRunner> runner = std::move(m.runner);
    for (size_t i = 0; i < n_in; ++i) {
      TensorArg arg;
      ET_CHECK_OK_OR_RETURN_ERROR(tensor_arg(backend, args, i, &arg));
      ET_CHECK_OK_OR_RETURN_ERROR(check_port(backend, "input", i, m.inputs[i], arg));
      uint8_t* ptr = static_cast<uint8_t*>(arg.data);
      size_t nbytes = arg.nbytes;
      if (arg.dtype == ScalarType::Long) {  // narrow to INT32, refusing values that do not fit
        m.staging.resize(arg.numel * sizeof(int32_t));
        const int64_t* src = static_cast<const int64_t*>(arg.data);
        int32_t* dst = reinterpret_cast<int32_t*>(m.staging.data());
        for (size_t k = 0; k < arg.numel; ++k) {
          if (src[k] < INT32_MIN || src[k] > INT32_MAX) {
            ET_LOG(Error, "%s: int64 input %zu holds %lld, which does not fit the INT32 the TOSA "
                          "graph uses", backend, i, static_cast<long long>(src[k]));
            return Error::InvalidArgument;
          }
          dst[k] = static_cast<int32_t>(src[k]);
        }
        ptr = m.staging.data();
        nbytes = m.staging.size();
      }
      if (runner->setInput(m.inputs[i].name, ptr, nbytes) != 0) {
        ET_LOG(Error, "%s: the reference model refused input %zu (%s, %zu bytes)", backend, i,
               m.inputs[i].name.c_str(), nbytes);
        return Error::InvalidArgument;
      }
    }
    const GraphStatus status = runner->run();
    if (status != GraphStatus::TOSA_VALID) {
      ET_LOG(Error, "%s: the TOSA reference model returned %s for these inputs", backend,
             status == GraphStatus::TOSA_ERROR ? "TOSA_ERROR" : "TOSA_UNPREDICTABLE");
      return Error::InvalidState;
    }
    for (size_t j = 0; j < n_out; ++j) {
      TensorArg arg;
      ET_CHECK_OK_OR_RETURN_ERROR(tensor_arg(backend, args, n_in + j, &arg));
      ET_CHECK_OK_OR_RETURN_ERROR(check_port(backend, "output", j, m.outputs[j], arg));
      const bool widen = arg.dtype == ScalarType::Long;
      uint8_t* ptr = widen ? nullptr : static_cast<uint8_t*>(arg.data);
      size_t nbytes = arg.nbytes;
      if (widen) {
        m.staging.resize(arg.numel * sizeof(int32_t));
        ptr = m.staging.data();
        nbytes = m.staging.size();
      }
      if (runner->getOutput(m.outputs[j].name, ptr, nbytes) != 0) {
        ET_LOG(Error, "%s: the reference model could not return output %zu (%s, %zu bytes)", backend,
               j, m.outputs[j].name.c_str(), nbytes);
        return Error::Internal;
      }
      if (widen) {
        const int32_t* src = reinterpret_cast<const int32_t*>(m.staging.data());
        int64_t* dst = static_cast<int64_t*>(arg.data);
        for (size_t k = 0; k < arg.numel; ++k) dst[k] = src[k];
      }
    }
  } catch (const std::exception& e) {
    ET_LOG(Error, "%s: the TOSA reference model failed: %s", backend, e.what());
    return Error::Internal;
  } catch (...) {
    ET_LOG(Error, "%s: the TOSA reference model failed (unknown exception)", backend);
    return Error::Internal;
  }
  return Error::Ok;
}

}  // namespace runtime_cpp
