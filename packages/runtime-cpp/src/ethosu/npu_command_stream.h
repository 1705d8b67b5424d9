// The Ethos-U55/U65 command stream as vela writes it into "cmd_data": a driver-action header
// ("COP1" fourcc, a Config tag with the NPU's CONFIG and ID words, NOP padding, a CmdStream tag
// giving the stream's length in words) and then the register command stream itself. Each command
// is a 32-bit word: bits 0-9 the opcode, bit 14 set for a "cmd1" (one 32-bit payload word
// follows), bits 16-31 a 16-bit parameter. Opcodes below 0x100 without bit 14 are kick-offs
// (operations); the others set a register. Names follow vela's ethos_u55_regs (the public
// register definitions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <executorch/runtime/core/error.h>

namespace runtime_cpp {
namespace npu {

// Kick-off (cmd0, no register) opcodes.
enum Op : uint16_t {
  kOpStop = 0x000,
  kOpIrq = 0x001,
  kOpConv = 0x002,
  kOpDepthwise = 0x003,
  kOpPool = 0x005,
  kOpElementwise = 0x006,
  kOpDmaStart = 0x010,
  kOpDmaWait = 0x011,
  kOpKernelWait = 0x012,
  kOpPmuMask = 0x013,
};

// cmd0 register opcodes (16-bit parameter).
enum Reg0 : uint16_t {
  kIfmPadTop = 0x100, kIfmPadLeft = 0x101, kIfmPadRight = 0x102, kIfmPadBottom = 0x103,
  kIfmDepthM1 = 0x104, kIfmPrecision = 0x105, kIfmUpscale = 0x107, kIfmZeroPoint = 0x109,
  kIfmWidth0M1 = 0x10A, kIfmHeight0M1 = 0x10B, kIfmHeight1M1 = 0x10C, kIfmIbEnd = 0x10D,
  kIfmRegion = 0x10F,
  kOfmWidthM1 = 0x111, kOfmHeightM1 = 0x112, kOfmDepthM1 = 0x113, kOfmPrecision = 0x114,
  kOfmBlkWidthM1 = 0x115, kOfmBlkHeightM1 = 0x116, kOfmBlkDepthM1 = 0x117, kOfmZeroPoint = 0x118,
  kOfmWidth0M1 = 0x11A, kOfmHeight0M1 = 0x11B, kOfmHeight1M1 = 0x11C, kOfmRegion = 0x11F,
  kKernelWidthM1 = 0x120, kKernelHeightM1 = 0x121, kKernelStride = 0x122, kParallelMode = 0x123,
  kAccFormat = 0x124, kActivation = 0x125, kActivationMin = 0x126, kActivationMax = 0x127,
  kWeightRegion = 0x128, kScaleRegion = 0x129, kAbStart = 0x12D, kBlockDep = 0x12F,
  kDmaSrcRegion = 0x130, kDmaDstRegion = 0x131, kDmaSize0 = 0x132, kDmaSize1 = 0x133,
  kIfm2Broadcast = 0x180, kIfm2Scalar = 0x181, kIfm2Precision = 0x185, kIfm2ZeroPoint = 0x189,
  kIfm2Width0M1 = 0x18A, kIfm2Height0M1 = 0x18B, kIfm2Height1M1 = 0x18C, kIfm2IbStart = 0x18D,
  kIfm2Region = 0x18F,
};

// cmd1 register opcodes (16-bit parameter + 32-bit payload).
enum Reg1 : uint16_t {
  kIfmBase0 = 0x000, kIfmBase1 = 0x001, kIfmBase2 = 0x002, kIfmBase3 = 0x003,
  kIfmStrideX = 0x004, kIfmStrideY = 0x005, kIfmStrideC = 0x006,
  kOfmBase0 = 0x010, kOfmBase1 = 0x011, kOfmBase2 = 0x012, kOfmBase3 = 0x013,
  kOfmStrideX = 0x014, kOfmStrideY = 0x015, kOfmStrideC = 0x016,
  kWeightBase = 0x020, kWeightLength = 0x021, kScaleBase = 0x022, kScaleLength = 0x023,
  kOfmScale = 0x024, kOpaScale = 0x025, kOpbScale = 0x026,
  kDmaSrc = 0x030, kDmaDst = 0x031, kDmaLen = 0x032, kDmaSkip0 = 0x033, kDmaSkip1 = 0x034,
  kIfm2Base0 = 0x080, kIfm2Base1 = 0x081, kIfm2Base2 = 0x082, kIfm2Base3 = 0x083,
  kIfm2StrideX = 0x084, kIfm2StrideY = 0x085, kIfm2StrideC = 0x086,
  kWeight1Base = 0x090, kWeight1Length = 0x091, kScale1Base = 0x092, kScale1Length = 0x093,
};

// Which NPU the stream was compiled for (the header's CONFIG word).
struct NpuConfig {
  int product = 0;       // 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85 (u85_commands.h)
  int macs_per_cc = 0;   // MACs per cycle (128 for ethos-u55-128)
  int shram_kb = 0;
};

struct Command {
  size_t offset;   // byte offset of the command word inside cmd_data (for messages)
  uint16_t code;   // bits 0-9
  bool is_cmd1;    // has a 32-bit payload word
  uint16_t param;  // bits 16-31
  uint32_t data;   // payload word (cmd1 only)
};

// Name of a kick-off or register opcode for log lines ("NPU_OP_CONV", "NPU_SET_IFM_BASE0", ...).
const char* command_name(uint16_t code, bool is_cmd1);
// True for the opcodes the U55/U65 register map defines.
bool is_known_command(uint16_t code, bool is_cmd1);

struct CommandStream {
  NpuConfig config;
  std::vector<Command> commands;
};

// Parses the driver header and splits the stream into commands. Error::InvalidProgram with a log
// line naming the offset on anything malformed; Error::NotSupported for a stream that is not for
// an Ethos-U55/U65/U85. An Ethos-U85 stream's opcodes are checked against the U85 register map.
executorch::runtime::Error parse_command_stream(const uint8_t* data, size_t size, CommandStream* out);

}  // namespace npu
}  // namespace runtime_cpp
