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
  Registers regs;
  // The NPU's internal shared buffer (LUTs live at its top), as large as the CONFIG word says.
  std::vector<uint8_t> shram(size_t(stream.config.shram_kb) * 1024, 0);
  for (const Command& c : stream.commands) {
    if (c.is_cmd1 || c.code >= 0x100) {
      regs.set(c);
      continue;
    }
    OpRecord rec{};
    OpRecord* r = records != nullptr ? &rec : nullptr;
    Error err = Error::Ok;
    switch (c.code) {
      case kOpStop:
        return Error::Ok;
      case kOpConv:
      case kOpDepthwise:
        err = run_conv(regs, c, c.code == kOpDepthwise, memory, stream.config, &shram, r);
        break;
      case kOpPool:
        err = run_pool(regs, c, memory, &shram, r);
        break;
      case kOpElementwise:
        err = run_elementwise(regs, c, memory, &shram, r);
        break;
      case kOpDmaStart:
        err = run_dma(regs, c, memory, &shram, r);
        break;
      default:  // IRQ, DMA_WAIT, KERNEL_WAIT, PMU_MASK: ordering and events only
        continue;
    }
    if (err != Error::Ok) return err;
    if (records != nullptr) records->push_back(rec);
  }
  ET_LOG(Error, "EthosUBackend: the command stream ends without NPU_OP_STOP: truncated stream");
  return Error::InvalidProgram;
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
