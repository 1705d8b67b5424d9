// Reader of the VKDG payload written by vulkan_delegate/payload.py (the format is documented there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>

namespace vkdg {

// A size: sum over terms of coefficient * product of dynamic symbols (batch, sequence length, ...).
struct Expr {
  struct Term {
    int64_t coef = 0;
    std::vector<uint32_t> symbols;
  };
  std::vector<Term> terms;
  int64_t eval(const std::vector<int64_t>& symbol_values) const;
};

struct SymbolDesc {
  uint32_t input = 0, dim = 0, max = 0;
};

enum : uint32_t { kF32 = 0, kF16 = 1, kU8 = 2, kI32 = 3 };  // device dtypes (u8: bool bytes, packed weights)
// The dtype a delegate input or output has in ExecuTorch (version 3 stores it; older versions imply it
// from the device dtype). The runtime converts at upload and readback: bool bytes <-> int32 words,
// int64 <-> int32 (an input value outside int32 is an InvalidArgument error, never wrapped).
enum : uint32_t { kHostF32 = 0, kHostF16 = 1, kHostBool = 2, kHostI32 = 3, kHostI64 = 4 };
enum : uint32_t { kArena = 0, kConst = 1 };

struct TensorDesc {
  uint32_t dtype = 0, kind = 0;
  uint64_t offset = 0, nbytes = 0;
  std::vector<Expr> dims;
};

struct PushValue {
  bool is_float = false;
  float f = 0.f;
  Expr e;
};

struct DispatchDesc {
  uint32_t shader = 0;
  std::vector<uint32_t> bindings;
  std::vector<PushValue> push;
  Expr threads[3];
};

struct Program {
  uint32_t flags = 0;
  std::vector<SymbolDesc> symbols;
  std::vector<std::string> shaders;
  std::vector<TensorDesc> tensors;
  std::vector<DispatchDesc> dispatches;
  std::vector<int32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<uint32_t> input_hosts, output_hosts;  // host dtype per input / output
  uint64_t arena_bytes = 0;
  std::vector<uint8_t> constants;
  // Optional trailing section (payload.py: "names"): per dispatch, the PyTorch module/op it came from;
  // empty when the payload has none (older payloads). Only the per-dispatch profile reads it.
  std::vector<std::string> dispatch_names;
  bool fp16() const { return flags & 1u; }
  bool uses_f16() const {  // fp16 compute, or fp16 tensors (a model.half() program's inputs and outputs)
    if (fp16()) return true;
    for (const auto& t : tensors)
      if (t.dtype == kF16) return true;
    return false;
  }
};

constexpr uint32_t kMaxPushWords = 32;
constexpr uint32_t kMaxBindings = 8;

// Parses and validates every index and size; a corrupt payload is an Error, never a crash.
executorch::runtime::Error parse_program(const void* data, size_t size, Program* out);

// Whether a delegate input or output of host dtype `host` may live in a device tensor of `device` dtype.
bool host_device_pair_ok(uint32_t host, uint32_t device);

}  // namespace vkdg
