// EthosUBackend on the host: runs the deployable Ethos-U payload by simulating the NPU. init
// validates the vela bin stream as the firmware runtime would (block order, sizes, alignment, I/O
// description) and decodes its command stream; execute copies the inputs into the scratch region
// at the offsets vela gave them, runs the command stream on the bit-exact Ethos-U55/U65 simulator
// (npu_simulator.h; Ethos-U85 streams on u85_simulator.h) and copies the outputs back. A payload
// whose stream uses an operation the simulator lacks runs its host-only TOSA graph ("tosa_graph"
// block, from `--host-graph`) on the TOSA reference model when it has one, and is refused with the
// reason otherwise. Cycle numbers stay vela's.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "common/program_backend.h"
#include "common/tosa_runner.h"
#include "ethosu/npu_command_stream.h"
#include "ethosu/npu_simulator.h"
#include "ethosu/u85_commands.h"
#include "ethosu/vela_bin_stream.h"

namespace runtime_cpp {
namespace {

constexpr const char* kId = "EthosUBackend";

// The firmware copies each tensor into the NPU's region as `shape` x `elem_size` bytes: the tensor
// ExecuTorch hands us must have that many elements of that size. The shape itself may differ:
// vela describes a tensor in the view its first operation reads (a [2,3,4,5] input that is
// reshaped on the NPU is described as [1,1,1,1,24,5]); the bytes are the same row-major bytes.
Error check_io(const char* what, size_t i, const VelaIo& io, const TensorArg& arg) {
  const size_t elem = executorch::runtime::elementSize(arg.dtype);
  // int64 results cross the TOSA boundary as int32 (the lowering's contract).
  const size_t want_elem = arg.dtype == ScalarType::Long ? 4 : elem;
  uint64_t io_numel = 1;
  for (size_t d = 0; d < kVelaRank; ++d) io_numel *= static_cast<uint64_t>(std::max<int32_t>(io.shape[d], 0));
  const bool ok = static_cast<size_t>(io.elem_size) == want_elem && io_numel == arg.numel;
  if (!ok) {
    ET_LOG(Error, "%s: %s %zu is %s of rank %d (%zu elements) but the vela payload describes shape "
                  "[%d,%d,%d,%d,%d,%d] of %d-byte elements: the .pte was compiled for other inputs",
           kId, what, i, dtype_name(arg.dtype), arg.dim, arg.numel, io.shape[0], io.shape[1],
           io.shape[2], io.shape[3], io.shape[4], io.shape[5], io.elem_size);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

// Copies between an ExecuTorch tensor and its place in an NPU region; int64 tensors cross the
// NPU boundary as int32 (the lowering's contract).
Error copy_io(const char* what, size_t i, const VelaIo& io, const TensorArg& arg,
              const npu::Memory& memory, bool to_npu) {
  const npu::Region& region = memory[static_cast<size_t>(io.region)];
  const size_t elem = static_cast<size_t>(io.elem_size);
  const size_t bytes = arg.numel * elem;
  if (region.data == nullptr || !fits(region.size, static_cast<size_t>(io.offset), bytes)) {
    ET_LOG(Error, "%s: %s %zu (%zu bytes at offset %d of region %d) lies outside the NPU's "
                  "regions: corrupt I/O description", kId, what, i, bytes, io.offset, io.region);
    return Error::InvalidProgram;
  }
  uint8_t* npu = region.data + io.offset;
  const size_t host_elem = executorch::runtime::elementSize(arg.dtype);
  auto* host = static_cast<uint8_t*>(arg.data);
  if (host_elem == elem) {
    if (to_npu) std::memcpy(npu, host, bytes); else std::memcpy(host, npu, bytes);
    return Error::Ok;
  }
  for (size_t k = 0; k < arg.numel; ++k) {  // int64 <-> int32
    if (to_npu) {
      int64_t v;
      std::memcpy(&v, host + 8 * k, 8);
      const int32_t n = static_cast<int32_t>(v);
      std::memcpy(npu + 4 * k, &n, 4);
    } else {
      int32_t n;
      std::memcpy(&n, npu + 4 * k, 4);
      const int64_t v = n;
      std::memcpy(host + 8 * k, &v, 8);
    }
  }
  return Error::Ok;
}

// One loaded delegate: the stream's I/O table and either the NPU simulator with its memory or
// the runner of the host graph.
struct EthosUProgram {
  std::vector<VelaIo> inputs;
  std::vector<VelaIo> outputs;
  std::unique_ptr<TosaRunner> runner;  // the host graph, when the payload carries one
  npu::CommandStream commands;
  std::vector<uint8_t> weights, scratch, scratch_fast;
  npu::Memory memory{};
  std::unique_ptr<npu::Simulator> simulator;

  static Error load(const uint8_t* data, size_t size, std::unique_ptr<EthosUProgram>* out) {
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
      // The NPU reads the command stream in place and needs 16-byte alignment; on the host it is a
      // deployment hint, not an error.
      ET_LOG(Info, "%s: payload at an address that is not 16-byte aligned; on a device, store "
                   "delegate data in aligned segments", kId);
    }
    VelaBinStream stream;
    ET_CHECK_OK_OR_RETURN_ERROR(parse_vela_bin_stream(data, size, &stream));
    auto program = std::unique_ptr<EthosUProgram>(new (std::nothrow) EthosUProgram());
    if (!program) return Error::MemoryAllocationFailed;
    program->inputs = std::move(stream.inputs);
    program->outputs = std::move(stream.outputs);
    Error sim = npu::parse_command_stream(stream.cmd_data, stream.cmd_size, &program->commands);
    if (sim == Error::Ok) {
      program->simulator.reset(new (std::nothrow) npu::Simulator(program->commands));
      if (!program->simulator) return Error::MemoryAllocationFailed;
      sim = program->simulator->check_supported();
    }
    if (sim != Error::Ok && sim != Error::NotSupported) {
      return sim;  // a malformed stream is an error even when a host graph is present
    }
    if (sim == Error::NotSupported && stream.tosa_graph == nullptr) {
      ET_LOG(Error, "%s: the host NPU simulator cannot run this payload's command stream (see the "
                    "line above) and the payload has no host graph. Compile with "
                    "`arm-compile <model> --host-graph` (EthosUCompileSpec(...).include_host_graph()) "
                    "to run it on the TOSA reference model instead", kId);
      return Error::NotSupported;
    }
    if (sim == Error::Ok) {
      ET_CHECK_OK_OR_RETURN_ERROR(program->map_memory(stream));
    } else {
      ET_LOG(Info, "%s: running the payload's host graph on the TOSA reference model (the NPU "
                   "simulator cannot run this stream, see above)", kId);
      program->simulator.reset();
    }
    if (stream.tosa_graph != nullptr) {
      // The host twin: the execution path when the simulator cannot run the stream, and a check
      // that the payload's parts come from one compile either way.
      ET_CHECK_OK_OR_RETURN_ERROR(
          TosaRunner::create(kId, stream.tosa_graph, stream.tosa_graph_size, &program->runner));
      if (program->runner->num_inputs() != program->inputs.size() ||
          program->runner->num_outputs() != program->outputs.size()) {
        ET_LOG(Error, "%s: the host graph has %zu inputs/%zu outputs but the vela stream %zu/%zu: "
                      "the payload was assembled from different compiles", kId,
               program->runner->num_inputs(), program->runner->num_outputs(),
               program->inputs.size(), program->outputs.size());
        return Error::InvalidProgram;
      }
    }
    *out = std::move(program);
    return Error::Ok;
  }

  // The driver's base pointers: weights (read-only), scratch and fast scratch (writable).
  Error map_memory(const VelaBinStream& stream) {
    try {
      weights.assign(stream.weight_data, stream.weight_data + stream.weight_size);
      scratch.assign(stream.scratch_size, 0);
      scratch_fast.assign(stream.scratch_fast_size, 0);
    } catch (const std::bad_alloc&) {
      ET_LOG(Error, "%s: cannot allocate the %u + %u bytes of scratch the payload declares", kId,
             stream.scratch_size, stream.scratch_fast_size);
      return Error::MemoryAllocationFailed;
    }
    memory[static_cast<size_t>(stream.weight_region)] = {weights.data(), weights.size(), false};
    memory[static_cast<size_t>(stream.scratch_region)] = {scratch.data(), scratch.size(), true};
    if (stream.scratch_fast_size > 0) {
      if (stream.scratch_fast_region == stream.weight_region ||
          stream.scratch_fast_region == stream.scratch_region) {
        ET_LOG(Error, "%s: corrupt 'scratch_data' block: the fast scratch region %d is also the "
                      "weight or scratch region", kId, stream.scratch_fast_region);
        return Error::InvalidProgram;
      }
      memory[static_cast<size_t>(stream.scratch_fast_region)] = {scratch_fast.data(), scratch_fast.size(), true};
    }
    return Error::Ok;
  }

  Error run(Span<EValue*> args) {
    const size_t n_in = inputs.size();
    if (args.size() != n_in + outputs.size()) {
      ET_LOG(Error, "%s: the method passed %zu tensors but the vela payload has %zu inputs and %zu "
                    "outputs", kId, args.size(), n_in, outputs.size());
      return Error::InvalidArgument;
    }
    std::vector<TensorArg> tensors(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      ET_CHECK_OK_OR_RETURN_ERROR(tensor_arg(kId, args, i, &tensors[i]));
      const bool is_in = i < n_in;
      ET_CHECK_OK_OR_RETURN_ERROR(check_io(is_in ? "input" : "output", is_in ? i : i - n_in,
                                           is_in ? inputs[i] : outputs[i - n_in], tensors[i]));
    }
    if (!simulator) return runner->run(kId, args);
    // A fresh scratch arena per call: results never depend on an earlier call.
    std::fill(scratch.begin(), scratch.end(), 0);
    std::fill(scratch_fast.begin(), scratch_fast.end(), 0);
    for (size_t i = 0; i < n_in; ++i) {
      ET_CHECK_OK_OR_RETURN_ERROR(copy_io("input", i, inputs[i], tensors[i], memory, true));
    }
    ET_CHECK_OK_OR_RETURN_ERROR(simulator->run(memory, nullptr));
    for (size_t i = 0; i < outputs.size(); ++i) {
      ET_CHECK_OK_OR_RETURN_ERROR(copy_io("output", i, outputs[i], tensors[n_in + i], memory, false));
    }
    return Error::Ok;
  }
};

ProgramBackend<EthosUProgram> g_backend(kId);

// The command stream of a payload (for the work-record and decoding entry points below).
Error decode_commands(const uint8_t* data, size_t size, npu::CommandStream* out) {
  VelaBinStream stream;
  ET_CHECK_OK_OR_RETURN_ERROR(parse_vela_bin_stream(data, size, &stream));
  return npu::parse_command_stream(stream.cmd_data, stream.cmd_size, out);
}

}  // namespace
}  // namespace runtime_cpp

RUNTIME_CPP_REGISTER_FN(ethosu) { return static_cast<int>(runtime_cpp::g_backend.register_once()); }

// Fuzz hook: parse a payload and run its command stream on the simulator with zeroed inputs;
// returns the Error code (0 = the stream ran). Scratch is capped so that a mutated size field
// does not ask the fuzzer's process for gigabytes.
extern "C" __attribute__((visibility("default"))) int runtime_cpp_fuzz_ethosu_command_stream(
    const uint8_t* data, size_t size) {
  using namespace runtime_cpp;
  VelaBinStream stream;
  Error err = parse_vela_bin_stream(data, size, &stream);
  if (err != Error::Ok) return static_cast<int>(err);
  if (uint64_t{stream.scratch_size} + stream.scratch_fast_size > (uint64_t{64} << 20)) {
    return static_cast<int>(Error::InvalidProgram);
  }
  EthosUProgram program;
  err = npu::parse_command_stream(stream.cmd_data, stream.cmd_size, &program.commands);
  if (err != Error::Ok) return static_cast<int>(err);
  npu::Simulator simulator(program.commands);
  err = simulator.check_supported();
  if (err == Error::Ok) err = program.map_memory(stream);
  if (err == Error::Ok) err = simulator.run(program.memory, nullptr);
  return static_cast<int>(err);
}

// The per-op work record of a payload's command stream, for runtime_cpp.ethosu_work_record: one
// tab-separated line per kick-off (cmd_data offset, op, OFM H W C, IFM H W C, IFM2 H W C, kernel
// H W, MACs, DMA bytes) written into `out` (at most `cap` bytes). Returns the length the full text
// needs (call again with a larger buffer when it exceeds `cap`), or minus the Error code.
extern "C" __attribute__((visibility("default"))) long runtime_cpp_ethosu_work_record(
    const uint8_t* data, size_t size, char* out, size_t cap) {
  using namespace runtime_cpp;
  npu::CommandStream commands;
  Error err = decode_commands(data, size, &commands);
  if (err != Error::Ok) return -static_cast<long>(err);
  std::vector<npu::OpRecord> records;
  err = npu::Simulator(commands).check_supported(&records);
  if (err != Error::Ok) return -static_cast<long>(err);
  std::string text;
  char line[256];
  for (const npu::OpRecord& r : records) {
    const int n = std::snprintf(
        line, sizeof(line), "%zu\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%llu\t%llu\n",
        r.offset, r.op, r.ofm_shape[0], r.ofm_shape[1], r.ofm_shape[2], r.ifm_shape[0], r.ifm_shape[1],
        r.ifm_shape[2], r.ifm2_shape[0], r.ifm2_shape[1], r.ifm2_shape[2], r.kernel[0], r.kernel[1],
        static_cast<unsigned long long>(r.macs), static_cast<unsigned long long>(r.dma_bytes));
    text.append(line, static_cast<size_t>(std::max(n, 0)));
  }
  if (out != nullptr && text.size() <= cap) std::memcpy(out, text.data(), text.size());
  return static_cast<long>(text.size());
}

// The decoded command stream of a payload, for runtime_cpp.ethosu_commands: a first line naming
// the NPU ("ethos-u55", "ethos-u65", "ethos-u85"), then one tab-separated line per command
// (cmd_data offset, name in the stream's register map, parameter, payload or "-") written into
// `out` (at most `cap` bytes). Returns the length the full text needs, or minus the Error code.
extern "C" __attribute__((visibility("default"))) long runtime_cpp_ethosu_commands(
    const uint8_t* data, size_t size, char* out, size_t cap) {
  using namespace runtime_cpp;
  npu::CommandStream commands;
  const Error err = decode_commands(data, size, &commands);
  if (err != Error::Ok) return -static_cast<long>(err);
  static const char* const kProducts[] = {"ethos-u55", "ethos-u65", "ethos-u85"};
  std::string text = std::string(kProducts[commands.config.product]) + "\n";
  char line[128];
  for (const npu::Command& c : commands.commands) {
    const char* name = commands.config.product == 2 ? npu::u85::command_name(c.code, c.is_cmd1)
                                                    : npu::command_name(c.code, c.is_cmd1);
    const int n = c.is_cmd1 ? std::snprintf(line, sizeof(line), "%zu\t%s\t%u\t%u\n", c.offset, name,
                                            unsigned{c.param}, unsigned{c.data})
                            : std::snprintf(line, sizeof(line), "%zu\t%s\t%u\t-\n", c.offset, name,
                                            unsigned{c.param});
    text.append(line, static_cast<size_t>(std::max(n, 0)));
  }
  if (out != nullptr && text.size() <= cap) std::memcpy(out, text.data(), text.size());
  return static_cast<long>(text.size());
}
