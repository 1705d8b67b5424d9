// The Ethos-U85 side of the NPU simulator: runs a stream regor (vela 5.x) wrote for ethos-u85-*
// on the same register file, feature-map views and memory regions as the U55/U65 simulator
// (npu_state.h), with the U85's own operand scaling, broadcast and activation registers.
// The kick-offs live in u85_simulator.cpp (pooling, convolution, resize, DMA) and
// u85_elementwise.cpp (NPU_OP_ELEMENTWISE), on the shared pieces of u85_operands.h; the runtime-cpp
// README lists what is simulated. Every other kick-off and mode is Error::NotSupported with a log
// line naming the command and its offset, never a wrong answer.
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
