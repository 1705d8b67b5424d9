#include "io_convert.h"

#include <cstring>
#include <limits>

#include <executorch/runtime/platform/log.h>

#include "payload.h"

namespace vkdg {

using executorch::aten::ScalarType;
using executorch::runtime::Error;

ScalarType host_scalar_type(uint32_t host) {
  switch (host) {
    case kHostF16: return ScalarType::Half;
    case kHostBool: return ScalarType::Bool;
    case kHostI32: return ScalarType::Int;
    case kHostI64: return ScalarType::Long;
    default: return ScalarType::Float;
  }
}

const char* host_dtype_name(uint32_t host) {
  switch (host) {
    case kHostF16: return "float16";
    case kHostBool: return "bool";
    case kHostI32: return "int32";
    case kHostI64: return "int64";
    default: return "float32";
  }
}

namespace {
size_t element_bytes(uint32_t device) { return device == kF16 ? 2 : device == kU8 ? 1 : 4; }
}  // namespace

Error upload(const void* src, size_t numel, uint32_t host, uint32_t device, void* dst, size_t input_index) {
  int32_t* out = static_cast<int32_t*>(dst);
  if (host == kHostBool && device == kI32) {
    const uint8_t* in = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < numel; ++i) out[i] = in[i] != 0;
    return Error::Ok;
  }
  if (host == kHostI64 && device == kI32) {
    const int64_t* in = static_cast<const int64_t*>(src);
    for (size_t i = 0; i < numel; ++i) {
      if (in[i] < std::numeric_limits<int32_t>::min() || in[i] > std::numeric_limits<int32_t>::max()) {
        ET_LOG(Error, "VkComputeBackend: input %zu holds %lld at element %zu; the delegate computes int64 "
               "tensors as int32 (keep such values on the CPU: lower with an operator_blocklist)", input_index,
               static_cast<long long>(in[i]), i);
        return Error::InvalidArgument;
      }
      out[i] = static_cast<int32_t>(in[i]);
    }
    return Error::Ok;
  }
  std::memcpy(dst, src, numel * element_bytes(device));  // same-type pairs (payload.cpp checked the pair)
  return Error::Ok;
}

void readback(const void* src, size_t numel, uint32_t device, uint32_t host, void* dst) {
  const int32_t* in = static_cast<const int32_t*>(src);
  if (host == kHostBool && device == kI32) {
    uint8_t* out = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < numel; ++i) out[i] = in[i] != 0;
  } else if (host == kHostI64 && device == kI32) {
    int64_t* out = static_cast<int64_t*>(dst);
    for (size_t i = 0; i < numel; ++i) out[i] = in[i];
  } else {
    std::memcpy(dst, src, numel * element_bytes(device));
  }
}

}  // namespace vkdg
