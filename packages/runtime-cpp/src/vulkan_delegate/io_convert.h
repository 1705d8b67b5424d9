// Conversions at the delegate boundary between an ExecuTorch tensor's dtype (the payload's host dtype)
// and the dtype its device tensor holds: bool bytes <-> int32 words, int64 <-> int32; same-type pairs
// are copies. Kept apart from method.cpp so the dispatch code does not grow with the dtype list.
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace vkdg {

// The ExecuTorch scalar type of a host dtype (payload.h kHost*), and its name for log lines.
executorch::aten::ScalarType host_scalar_type(uint32_t host);
const char* host_dtype_name(uint32_t host);

// `numel` elements of host dtype at `src` into device dtype at `dst` (staging memory). An int64 value
// outside int32 is InvalidArgument (it would wrap on the device), with a log line naming the input.
executorch::runtime::Error upload(const void* src, size_t numel, uint32_t host, uint32_t device, void* dst,
                                  size_t input_index);

// `numel` elements of device dtype at `src` (staging memory) into host dtype at `dst`.
void readback(const void* src, size_t numel, uint32_t device, uint32_t host, void* dst);

}  // namespace vkdg
