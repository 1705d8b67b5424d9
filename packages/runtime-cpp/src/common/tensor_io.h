// Checked access to the EValues a delegate receives: tensor-ness, dtype, byte sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

namespace runtime_cpp {

using executorch::aten::ScalarType;
using executorch::runtime::EValue;
using executorch::runtime::Error;
using executorch::runtime::Span;

// The delegate's view of one argument: a tensor's data and size, or an Error (logged) naming the
// backend and the argument index when the argument is not a tensor.
struct TensorArg {
  void* data = nullptr;
  size_t nbytes = 0;
  size_t numel = 0;
  ScalarType dtype = ScalarType::Undefined;
  int dim = 0;
  const int32_t* sizes = nullptr;  // ExecuTorch's SizesType is int32_t
};

Error tensor_arg(const char* backend, Span<EValue*> args, size_t index, TensorArg* out);

// Human-readable dtype name for log lines.
const char* dtype_name(ScalarType t);

// Little-endian readers over an untrusted buffer: every read is bounds-checked by the caller via
// `fits`, so parsers never index past the end.
inline bool fits(size_t size, size_t offset, size_t need) {
  return offset <= size && need <= size - offset;
}
inline uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline int32_t read_i32(const uint8_t* p) { return static_cast<int32_t>(read_u32(p)); }

}  // namespace runtime_cpp
