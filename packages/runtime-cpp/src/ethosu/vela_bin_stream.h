// The Ethos-U delegate payload ("vela bin stream", arm-ethosu README "Payload format"), parsed the
// way the firmware runtime walks it: 32-byte block headers (name[16], u32 size, 12 reserved bytes),
// data padded to 16 bytes, "vela_bin_stream" first, then cmd_data, weight_data, scratch_data, inputs,
// outputs, up to "vela_end_stream". Blocks after the end marker are host-only ("tosa_graph",
// "vela_report") and never read by the firmware.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <executorch/runtime/core/error.h>

namespace runtime_cpp {

constexpr size_t kVelaRank = 6;

struct VelaIo {
  int32_t shape[kVelaRank];
  int32_t elem_size;
  int32_t offset;
  int32_t region;
};

// Views into the parsed buffer (which must outlive this struct).
struct VelaBinStream {
  const uint8_t* cmd_data = nullptr;
  size_t cmd_size = 0;
  const uint8_t* weight_data = nullptr;
  size_t weight_size = 0;
  uint32_t scratch_size = 0;
  uint32_t scratch_fast_size = 0;
  int32_t weight_region = 0;        // base-pointer indices the driver maps the buffers to
  int32_t scratch_region = 1;
  int32_t scratch_fast_region = 2;
  std::vector<VelaIo> inputs;
  std::vector<VelaIo> outputs;
  const uint8_t* tosa_graph = nullptr;  // host-only block, null when absent
  size_t tosa_graph_size = 0;
};

// Error::InvalidProgram and a log line naming the problem and the offset for anything malformed.
executorch::runtime::Error parse_vela_bin_stream(const uint8_t* data, size_t size, VelaBinStream* out);

}  // namespace runtime_cpp
