#include "ethosu/vela_bin_stream.h"

#include <cstring>

#include <executorch/runtime/platform/log.h>

#include "common/tensor_io.h"

namespace runtime_cpp {
namespace {

using executorch::runtime::Error;

constexpr size_t kHeader = 32;
constexpr size_t kNameLen = 16;
constexpr size_t kAlign = 16;
constexpr size_t kIoEntry = 4 * (kVelaRank + 3);
constexpr size_t kScratchBlock = 20;
constexpr const char* kTag = "EthosUBackend";

struct Block {
  char name[kNameLen + 1];
  const uint8_t* data;
  size_t size;
  size_t offset;  // of the header, for messages
};

// Reads the block header at `*pos`; advances past the padded data.
Error next_block(const uint8_t* data, size_t size, size_t* pos, Block* out) {
  if (!fits(size, *pos, kHeader)) {
    ET_LOG(Error, "%s: truncated bin stream: %zu bytes left at offset %zu, a block header needs %zu",
           kTag, size - *pos, *pos, kHeader);
    return Error::InvalidProgram;
  }
  const uint8_t* h = data + *pos;
  std::memcpy(out->name, h, kNameLen);
  out->name[kNameLen] = '\0';
  const size_t name_len = strnlen(out->name, kNameLen);
  if (name_len == 0 || name_len == kNameLen) {
    ET_LOG(Error, "%s: corrupt bin stream: the block header at offset %zu has no NUL-terminated name "
                  "(wrong magic or not a vela payload)", kTag, *pos);
    return Error::InvalidProgram;
  }
  for (size_t i = 0; i < name_len; ++i) {
    if (out->name[i] < 0x20 || out->name[i] > 0x7e) {
      ET_LOG(Error, "%s: corrupt bin stream: block name at offset %zu is not printable ASCII", kTag, *pos);
      return Error::InvalidProgram;
    }
  }
  const size_t block_size = read_u32(h + kNameLen);
  const size_t begin = *pos + kHeader;
  if (!fits(size, begin, block_size)) {
    ET_LOG(Error, "%s: truncated bin stream: block '%s' at offset %zu declares %zu bytes but %zu "
                  "remain", kTag, out->name, *pos, block_size, size - begin);
    return Error::InvalidProgram;
  }
  const size_t padded = block_size + (kAlign - block_size % kAlign) % kAlign;
  if (!fits(size, begin, padded)) {
    ET_LOG(Error, "%s: truncated bin stream: block '%s' at offset %zu lacks its padding to %zu bytes",
           kTag, out->name, *pos, kAlign);
    return Error::InvalidProgram;
  }
  out->data = data + begin;
  out->size = block_size;
  out->offset = *pos;
  *pos = begin + padded;
  return Error::Ok;
}

Error expect(const Block& b, const char* name) {
  if (std::strcmp(b.name, name) != 0) {
    ET_LOG(Error, "%s: bin stream block at offset %zu is '%s' but the firmware expects '%s' there "
                  "(order: vela_bin_stream, cmd_data, weight_data, scratch_data, inputs, outputs, "
                  "vela_end_stream)", kTag, b.offset, b.name, name);
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

Error parse_io(const Block& b, std::vector<VelaIo>* out) {
  if (b.size < 4) {
    ET_LOG(Error, "%s: corrupt '%s' block: %zu bytes, needs at least 4 (count)", kTag, b.name, b.size);
    return Error::InvalidProgram;
  }
  const int32_t count = read_i32(b.data);
  if (count < 0 || static_cast<size_t>(count) > (b.size - 4) / kIoEntry ||
      b.size != 4 + static_cast<size_t>(count) * kIoEntry) {
    ET_LOG(Error, "%s: corrupt '%s' block: count %d does not match its %zu bytes (4 + %zu per tensor)",
           kTag, b.name, count, b.size, kIoEntry);
    return Error::InvalidProgram;
  }
  out->resize(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    const uint8_t* p = b.data + 4 + static_cast<size_t>(i) * kIoEntry;
    VelaIo& io = (*out)[static_cast<size_t>(i)];
    for (size_t d = 0; d < kVelaRank; ++d) io.shape[d] = read_i32(p + 4 * d);
    io.elem_size = read_i32(p + 4 * kVelaRank);
    io.offset = read_i32(p + 4 * kVelaRank + 4);
    io.region = read_i32(p + 4 * kVelaRank + 8);
    bool ok = io.elem_size == 1 || io.elem_size == 2 || io.elem_size == 4;
    for (size_t d = 0; d < kVelaRank; ++d) ok = ok && io.shape[d] >= 0;
    ok = ok && io.offset >= 0 && io.region >= 0 && io.region < 8;
    if (!ok) {
      ET_LOG(Error, "%s: corrupt '%s' block: tensor %d has elem_size %d, offset %d, region %d or a "
                    "negative dimension", kTag, b.name, i, io.elem_size, io.offset, io.region);
      return Error::InvalidProgram;
    }
  }
  return Error::Ok;
}

}  // namespace

Error parse_vela_bin_stream(const uint8_t* data, size_t size, VelaBinStream* out) {
  if (data == nullptr || size == 0) {
    ET_LOG(Error, "%s: empty payload", kTag);
    return Error::InvalidProgram;
  }
  if (size % kAlign != 0) {
    ET_LOG(Error, "%s: bin stream length %zu is not a multiple of %zu: truncated or trailing bytes",
           kTag, size, kAlign);
    return Error::InvalidProgram;
  }
  size_t pos = 0;
  Block b{};
  static const char* const kOrder[] = {"vela_bin_stream", "cmd_data", "weight_data",
                                       "scratch_data", "inputs", "outputs"};
  for (const char* name : kOrder) {
    ET_CHECK_OK_OR_RETURN_ERROR(next_block(data, size, &pos, &b));
    ET_CHECK_OK_OR_RETURN_ERROR(expect(b, name));
    if (std::strcmp(name, "cmd_data") == 0) {
      out->cmd_data = b.data;
      out->cmd_size = b.size;
    } else if (std::strcmp(name, "weight_data") == 0) {
      out->weight_data = b.data;
      out->weight_size = b.size;
    } else if (std::strcmp(name, "scratch_data") == 0) {
      if (b.size != kScratchBlock) {
        ET_LOG(Error, "%s: corrupt 'scratch_data' block: %zu bytes, expected %zu", kTag, b.size,
               kScratchBlock);
        return Error::InvalidProgram;
      }
      out->scratch_size = read_u32(b.data);
      out->scratch_fast_size = read_u32(b.data + 4);
      out->weight_region = read_i32(b.data + 8);
      out->scratch_region = read_i32(b.data + 12);
      out->scratch_fast_region = read_i32(b.data + 16);
      for (int32_t region : {out->weight_region, out->scratch_region, out->scratch_fast_region}) {
        if (region < 0 || region >= 8) {
          ET_LOG(Error, "%s: corrupt 'scratch_data' block: region %d is not a base pointer 0..7",
                 kTag, region);
          return Error::InvalidProgram;
        }
      }
    } else if (std::strcmp(name, "inputs") == 0) {
      ET_CHECK_OK_OR_RETURN_ERROR(parse_io(b, &out->inputs));
    } else if (std::strcmp(name, "outputs") == 0) {
      ET_CHECK_OK_OR_RETURN_ERROR(parse_io(b, &out->outputs));
    }
  }
  if (out->cmd_size == 0 || out->cmd_size % 4 != 0) {
    ET_LOG(Error, "%s: 'cmd_data' holds %zu bytes; an NPU command stream is a non-empty sequence of "
                  "32-bit words", kTag, out->cmd_size);
    return Error::InvalidProgram;
  }
  // Unknown blocks before the end marker are skipped, as the firmware does.
  do {
    ET_CHECK_OK_OR_RETURN_ERROR(next_block(data, size, &pos, &b));
  } while (std::strcmp(b.name, "vela_end_stream") != 0);
  // Host-only blocks after the end marker.
  while (pos < size) {
    ET_CHECK_OK_OR_RETURN_ERROR(next_block(data, size, &pos, &b));
    if (std::strcmp(b.name, "tosa_graph") == 0) {
      out->tosa_graph = b.data;
      out->tosa_graph_size = b.size;
    }
  }
  return Error::Ok;
}

}  // namespace runtime_cpp

// Fuzz hook: parse arbitrary bytes, return the Error code (0 = valid stream).
extern "C" __attribute__((visibility("default"))) int runtime_cpp_fuzz_vela_bin_stream(
    const uint8_t* data, size_t size) {
  runtime_cpp::VelaBinStream stream;
  return static_cast<int>(runtime_cpp::parse_vela_bin_stream(data, size, &stream));
}
