// A functional, bit-exact simulator of the Ethos-U55/U65 NPU driven by vela's register command
// stream: commands set registers; each kick-off (NPU_OP_CONV, DEPTHWISE, POOL, ELEMENTWISE,
// DMA_START) runs on the register state with the NPU's integer arithmetic. Memory is the set of
// regions the driver maps to base pointers (weights, scratch, fast scratch); every address the
// stream computes is checked against its region. Cycle timing is not simulated (vela estimates it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>

#include "ethosu/npu_command_stream.h"

namespace runtime_cpp {
namespace npu {

constexpr int kRegions = 8;

// One base-pointer region: a host buffer the stream's addresses are relative to.
struct Region {
  uint8_t* data = nullptr;
  size_t size = 0;
  bool writable = false;
};
using Memory = std::array<Region, kRegions>;

// What one kick-off did (the per-op work record).
struct OpRecord {
  size_t offset;        // of the kick-off command in cmd_data
  const char* op;       // "conv", "depthwise", "pool_avg", "add", "dma", ...
  int ofm_shape[3];     // H, W, C (DMA: 0, 0, 0)
  int ifm_shape[3];     // H, W, C as read (before IFM upscaling); DMA: 0, 0, 0
  int ifm2_shape[3];    // H, W, C of the second operand (1, 1, 1 for a scalar); 0s when none
  int kernel[2];        // H, W
  uint64_t macs;        // multiply-accumulates (conv/depthwise/pool: per kernel tap)
  uint64_t dma_bytes;   // bytes moved by a DMA
};

class Simulator {
 public:
  explicit Simulator(const CommandStream& stream) : stream_(stream) {}

  // Walks the stream without touching memory: Error::NotSupported (with a log line naming the
  // command, its offset and what is missing) when a kick-off uses a mode this simulator lacks.
  // `records` (optional) receives each kick-off's work record (shapes, MACs, DMA bytes).
  executorch::runtime::Error check_supported(std::vector<OpRecord>* records = nullptr) const;

  // Runs the stream on `memory`. `records` (optional) receives one entry per kick-off.
  executorch::runtime::Error run(const Memory& memory, std::vector<OpRecord>* records) const;

 private:
  const CommandStream& stream_;
};

}  // namespace npu
}  // namespace runtime_cpp
