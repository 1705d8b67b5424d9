// The Ethos-U85 side of the NPU simulator: runs a stream regor (vela 5.x) wrote for ethos-u85-*
// on the same register file, feature-map views and memory regions as the U55/U65 simulator
// (npu_state.h), with the U85's own operand scaling, broadcast and activation registers.
// Simulated so far: NPU_OP_ELEMENTWISE (MUL, ADD, SUB, MIN, MAX with per-operand IFM/IFM2 scaling,
// broadcast, scalars and chain buffers), NPU_OP_POOL (MAX, with padding) and 1D
// NPU_OP_DMA_START between regions. Every other kick-off (CONV, DEPTHWISE: the U85 weight encoding
// is not decoded yet; RESIZE, BRANCH) and mode (LUTs, transposed/reversed OFMs, the rounding modes
// listed in u85_simulator.cpp) is Error::NotSupported with a log line naming the command and its
// offset, never a wrong answer.
#pragma once

#include <vector>

#include <executorch/runtime/core/error.h>

#include "ethosu/npu_command_stream.h"
#include "ethosu/npu_simulator.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

// Runs the stream on `memory`, or (memory null) checks that every kick-off is simulated without
// touching data. `records` (optional) receives one work record per kick-off.
executorch::runtime::Error walk(const CommandStream& stream, const Memory* memory,
                                std::vector<OpRecord>* records);

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
