#include "ethosu/npu_simulator.h"

#include <new>

#include <executorch/runtime/platform/log.h>

#include "ethosu/npu_state.h"
#include "ethosu/u85_simulator.h"

namespace runtime_cpp {
namespace npu {
namespace {

// Runs (memory != null) or checks (memory == null) the stream.
Error walk(const CommandStream& stream, const Memory* memory, std::vector<OpRecord>* records) {
  if (stream.config.product == 2) return u85::walk(stream, memory, records);  // Ethos-U85
  // The NPU's internal shared buffer (LUTs live at its top), as large as the CONFIG word says.
  std::vector<uint8_t> shram(size_t(stream.config.shram_kb) * 1024, 0);
  return walk_commands(stream, records, [&](const Registers& regs, const Command& c, OpRecord* r) {
    switch (c.code) {
      case kOpConv:
      case kOpDepthwise:
        return run_conv(regs, c, c.code == kOpDepthwise, memory, stream.config, &shram, r);
      case kOpPool:
        return run_pool(regs, c, memory, &shram, r);
      case kOpElementwise:
        return run_elementwise(regs, c, memory, &shram, r);
      case kOpDmaStart:
        return run_dma(regs, c, memory, &shram, r);
      default:  // IRQ, DMA_WAIT, KERNEL_WAIT, PMU_MASK: ordering and events only
        return Error::Ok;
    }
  });
}

}  // namespace

Error Simulator::check_supported(std::vector<OpRecord>* records) const { return walk(stream_, nullptr, records); }

Error Simulator::run(const Memory& memory, std::vector<OpRecord>* records) const {
  try {
    return walk(stream_, &memory, records);
  } catch (const std::bad_alloc&) {
    ET_LOG(Error, "EthosUBackend: out of host memory while simulating the command stream");
    return Error::MemoryAllocationFailed;
  }
}

}  // namespace npu
}  // namespace runtime_cpp
