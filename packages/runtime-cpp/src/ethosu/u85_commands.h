// The Ethos-U85 register command stream (what vela 5.x's regor compiler writes for ethos-u85-*).
// The word format and the driver header are the U55/U65 ones (npu_command_stream.h: bits 0-9 the
// opcode, bit 14 a "cmd1" with a payload word, bits 16-31 the parameter); the register map
// differs: new registers (IFM_BROADCAST, RESIZE_*, WEIGHT_FORMAT, DMA0 strides and index, the
// WEIGHT2/3 streams, OP_SCALAR), other meanings for some (IFM/IFM2/OFM_SCALE replace OPA/OPB_SCALE,
// ACC_FORMAT and ACTIVATION carry other fields) and NPU_OP_RESIZE / NPU_OP_BRANCH. Names follow the
// public U85 register definitions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ethosu/npu_command_stream.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

// Only the opcodes whose number or meaning is U85-specific; the shared ones (IFM/IFM2/OFM
// geometry, bases, strides, regions, zero points, kernel size, DMA source/destination) keep the
// U55 names of npu_command_stream.h.
constexpr Op kOpResize = static_cast<Op>(0x007);
// cmd0 registers.
constexpr Reg0 kIfmBroadcast = static_cast<Reg0>(0x108);
constexpr Reg0 kResizeXScaleNM1 = static_cast<Reg0>(0x12A);
constexpr Reg0 kResizeYScaleNM1 = static_cast<Reg0>(0x12B);
constexpr Reg0 kResizeXOffset = static_cast<Reg0>(0x12C);
constexpr Reg0 kResizeYOffset = static_cast<Reg0>(0x12D);
constexpr Reg0 kWeightFormat = static_cast<Reg0>(0x12E);
constexpr Reg0 kDmaIdxRegion = static_cast<Reg0>(0x134);
// cmd1 registers (OFM_SCALE keeps its U55 number; IFM/IFM2_SCALE take OPA/OPB_SCALE's).
constexpr Reg1 kIfmScale = static_cast<Reg1>(0x025);
constexpr Reg1 kIfm2Scale = static_cast<Reg1>(0x026);
constexpr Reg1 kOpScalar = static_cast<Reg1>(0x027);
// RESIZE_X/Y_STEP: the step between OFM positions in IFM units of 1/n, as an integer part
// (parameter bits 0-3) and a remainder (payload bits 0-10); the block steps follow.
constexpr Reg1 kResizeXStep = static_cast<Reg1>(0x096);
constexpr Reg1 kResizeYStep = static_cast<Reg1>(0x097);
// NPU_OP_BRANCH is a cmd1 (its payload the target), the only kick-off with a payload.
constexpr uint16_t kOpBranch = 0x100;

// Name of a U85 kick-off or register opcode for log lines, or null when the U85 register map
// does not define it.
const char* command_name(uint16_t code, bool is_cmd1);

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
