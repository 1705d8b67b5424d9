// EthosUBackend on the host: a functional emulation of an Ethos-U delegate. init validates the vela
// bin stream as the firmware runtime would (block order, sizes, alignment, I/O description); execute
// checks the tensors it gets against the stream's I/O (count, shape, element size) and runs the
// partition's TOSA INT graph (the host-only "tosa_graph" block) on the TOSA reference model, which is
// bit-exact with the NPU's integer arithmetic. Cycle numbers stay vela's.
#include <memory>
#include <vector>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "common/program_backend.h"
#include "common/tosa_runner.h"
#include "ethosu/vela_bin_stream.h"

namespace runtime_cpp {
namespace {

constexpr const char* kId = "EthosUBackend";

// The firmware copies each tensor into the NPU's region as `shape` x `elem_size` bytes: the tensor
// ExecuTorch hands us must have exactly that shape (left-padded to 6-D) and element size.
Error check_io(const char* what, size_t i, const VelaIo& io, const TensorArg& arg) {
  const size_t elem = executorch::runtime::elementSize(arg.dtype);
  // int64 results cross the TOSA boundary as int32 (the lowering's contract).
  const size_t want_elem = arg.dtype == ScalarType::Long ? 4 : elem;
  bool ok = static_cast<size_t>(io.elem_size) == want_elem && arg.dim <= static_cast<int>(kVelaRank);
  for (size_t d = 0; ok && d < kVelaRank; ++d) {
    const int pad = static_cast<int>(kVelaRank) - arg.dim;
    const int32_t got = static_cast<int>(d) < pad ? 1 : arg.sizes[static_cast<int>(d) - pad];
    ok = got == io.shape[d];
  }
  if (!ok) {
    ET_LOG(Error, "%s: %s %zu is %s of rank %d (%zu elements) but the vela payload describes shape "
                  "[%d,%d,%d,%d,%d,%d] of %d-byte elements: the .pte was compiled for other inputs",
           kId, what, i, dtype_name(arg.dtype), arg.dim, arg.numel, io.shape[0], io.shape[1],
           io.shape[2], io.shape[3], io.shape[4], io.shape[5], io.elem_size);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

// One loaded delegate: the stream's I/O table and the runner of its host graph.
struct EthosUProgram {
  std::vector<VelaIo> inputs;
  std::vector<VelaIo> outputs;
  std::unique_ptr<TosaRunner> runner;

  static Error load(const uint8_t* data, size_t size, std::unique_ptr<EthosUProgram>* out) {
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
      // The NPU reads the command stream in place and needs 16-byte alignment; on the host it is a
      // deployment hint, not an error.
      ET_LOG(Info, "%s: payload at an address that is not 16-byte aligned; on a device, store "
                   "delegate data in aligned segments", kId);
    }
    VelaBinStream stream;
    ET_CHECK_OK_OR_RETURN_ERROR(parse_vela_bin_stream(data, size, &stream));
    if (stream.tosa_graph == nullptr) {
      ET_LOG(Error, "%s: this is a deployable Ethos-U payload (vela command stream only, no host "
                    "graph), valid for the NPU but not runnable on the host. For host execution "
                    "compile with the host graph: `arm-compile <model> --host-graph` or "
                    "EthosUCompileSpec(...).include_host_graph()", kId);
      return Error::NotSupported;
    }
    auto program = std::unique_ptr<EthosUProgram>(new (std::nothrow) EthosUProgram());
    if (!program) return Error::MemoryAllocationFailed;
    program->inputs = std::move(stream.inputs);
    program->outputs = std::move(stream.outputs);
    ET_CHECK_OK_OR_RETURN_ERROR(
        TosaRunner::create(kId, stream.tosa_graph, stream.tosa_graph_size, &program->runner));
    if (program->runner->num_inputs() != program->inputs.size() ||
        program->runner->num_outputs() != program->outputs.size()) {
      ET_LOG(Error, "%s: the host graph has %zu inputs/%zu outputs but the vela stream %zu/%zu: the "
                    "payload was assembled from different compiles", kId, program->runner->num_inputs(),
             program->runner->num_outputs(), program->inputs.size(), program->outputs.size());
      return Error::InvalidProgram;
    }
    *out = std::move(program);
    return Error::Ok;
  }

  Error run(Span<EValue*> args) {
    const size_t n_in = inputs.size();
    if (args.size() != n_in + outputs.size()) {
      ET_LOG(Error, "%s: the method passed %zu tensors but the vela payload has %zu inputs and %zu "
                    "outputs", kId, args.size(), n_in, outputs.size());
      return Error::InvalidArgument;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      TensorArg arg;
      ET_CHECK_OK_OR_RETURN_ERROR(tensor_arg(kId, args, i, &arg));
      const bool is_in = i < n_in;
      ET_CHECK_OK_OR_RETURN_ERROR(check_io(is_in ? "input" : "output", is_in ? i : i - n_in,
                                           is_in ? inputs[i] : outputs[i - n_in], arg));
    }
    return runner->run(kId, args);
  }
};

ProgramBackend<EthosUProgram> g_backend(kId);

}  // namespace
}  // namespace runtime_cpp

RUNTIME_CPP_REGISTER_FN(ethosu) { return static_cast<int>(runtime_cpp::g_backend.register_once()); }
