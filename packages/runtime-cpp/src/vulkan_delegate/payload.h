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

enum : uint32_t { kF32 = 0, kF16 = 1, kU8 = 2 };
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
  uint64_t arena_bytes = 0;
  std::vector<uint8_t> constants;
  // Optional trailing section (payload.py: "names"): per dispatch, the PyTorch module/op it came from;
  // empty when the payload has none (older payloads). Only the per-dispatch profile reads it.
  std::vector<std::string> dispatch_names;
  bool fp16() const { return flags & 1u; }
};

constexpr uint32_t kMaxPushWords = 32;
constexpr uint32_t kMaxBindings = 8;

// Parses and validates every index and size; a corrupt payload is an Error, never a crash.
executorch::runtime::Error parse_program(const void* data, size_t size, Program* out);

}  // namespace vkdg
