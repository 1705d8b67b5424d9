// The Ethos-U85 simulator's shared pieces (u85_simulator.cpp's dispatch, u85_elementwise.cpp,
// u85_pooling.cpp): log lines that name the command and its offset, the IFM/IFM2/OFM scale registers,
// chain buffers, the OFM writer (tiles, reversed, transposed or chained OFMs), the activation (clamp
// and LUT) and the operands (feature map, chain buffer or scalar, broadcast and scaled).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <executorch/runtime/core/error.h>

#include "ethosu/npu_state.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

constexpr const char* kTag = "EthosUBackend";

const char* name_of(const Command& at);
// Error::InvalidProgram (or `err`) with a log line naming the command and its offset.
Error fail(const Command& at, const char* what, Error err = Error::InvalidProgram);
// Error::NotSupported with a log line naming the command, its offset and what is not simulated.
Error unsupported(const Command& at, const char* what);

// The storage field (bits 14-15 of IFM/IFM2/OFM_PRECISION): 0 tiled (the 2x2 tiles of
// npu_state.h), 1 3x1 tiles, 2 chained into the next operation, 3 none (a scalar IFM2, or an OFM
// that is not written).
inline int storage_of(int precision) { return (precision >> 14) & 3; }

// One operand's scale register (IFM_SCALE, IFM2_SCALE or OFM_SCALE): value * scale >> shift,
// rounded as `round` says.
struct Scale {
  int64_t scale;
  int shift;
  int double_round;  // bits of the extra rounding term vela sets for ADD/SUB scaling
  int round;
};
Scale scale_of(const Registers& regs, Reg1 reg, int round_bits);

// The rounding modes simulated: OFM 0 double symmetric (TFL), 1 natural, 4 truncate to zero;
// IFM/IFM2 0 double symmetric, 1 natural (their double-round term must be 0).
Error check_scale(const Command& at, const Scale& s, bool is_ofm);
int64_t apply(const Scale& s, int64_t v, bool is_ofm);

// A chain buffer: an OFM kept inside the NPU (OFM storage "chained", its REGION register naming
// the buffer) for the next operation to read as its IFM or IFM2, at full (32-bit) precision.
struct Chain {
  int h = 0, w = 0, c = 0;
  std::vector<int64_t> values;
};
using Chains = std::array<Chain, kRegions>;

// The OFM clamp: its type's range, narrowed by ACTIVATION_MIN/MAX for 8- and 16-bit OFMs.
void clamp_range(const Registers& regs, const ElemType& type, int64_t* lo, int64_t* hi);

constexpr size_t kLutRam = 2048;  // the U85's LUT memory: eight 256-byte slots, filled by DMA

// ACTIVATION (function bits 0-4, table bits 5-7) with ACTIVATION_MIN/MAX: an optional LUT, then
// the clamp.
Error activation_of(const Registers& regs, const Command& at, const ElemType& ofm_type,
                    const std::vector<uint8_t>& lut, Activation* out);

// The OFM as stored: the operation's (y, x, c) mirrored by ACTIVATION_REVERSE (OFM_PRECISION bits
// 9-10: H, W or C) or permuted by ACTIVATION_TRANSPOSE (bits 11-13: the stored tensor's H, W, C
// are the operation's WHC, HCW, WCH, CHW or CWH); the OFM size registers give the shape before
// the transposition, the tiles and strides the stored tensor's. A chained OFM (storage 2) goes to
// `chain` instead, which `finish` hands to the chain buffer its REGION register names.
struct OfmWriter {
  FeatureMap fm;
  int reverse = 0, transpose = 0;
  int h = 0, w = 0, c = 0;
  bool chained = false;
  Chain chain;
  bool write(int y, int x, int ch, int64_t v) {
    if (chained) {
      chain.values[(size_t(y) * w + x) * c + ch] = v;
      return true;
    }
    if (reverse == 1) y = h - 1 - y;
    if (reverse == 2) x = w - 1 - x;
    if (reverse == 3) ch = c - 1 - ch;
    switch (transpose) {
      case 1: return fm.write(x, y, ch, v);
      case 2: return fm.write(y, ch, x, v);
      case 3: return fm.write(x, ch, y, v);
      case 6: return fm.write(ch, y, x, v);
      case 7: return fm.write(ch, x, y, v);
      default: return fm.write(y, x, ch, v);
    }
  }
  // Called after the operation's loops: it may read the chain buffer it replaces.
  void finish(Chains* chains) {
    if (chained && chains != nullptr) (*chains)[static_cast<size_t>(fm.region)] = std::move(chain);
  }
};

// The OFM of a kick-off: 2x2-tiled storage in memory or, where `chains` is given, a chain buffer;
// NotSupported for 3x1 tiles or an unwritten OFM (and a chained one without `chains`).
Error ofm_writer(const Registers& regs, const Command& at, const Memory* memory, Chains* chains, OfmWriter* out);

struct Operand {
  FeatureMap fm;
  const Chain* chain = nullptr;  // when the operand is a chain buffer
  int broadcast = 0;  // bit 0 H, bit 1 W, bit 2 C; 8 a scalar (OP_SCALAR)
  Scale scale{};
};

// One element of an operand, less its zero point (unscaled).
Error read_operand(const Operand& op, const Registers& regs, const Command& at, int y, int x, int c,
                   int64_t* v);
// The IFM or IFM2 operand: a scalar, a chain buffer or a feature map in memory.
Error operand(const Registers& regs, Which which, const Command& at, const Memory* memory,
              const Chains* chains, Operand* out);

// NPU_OP_ELEMENTWISE (u85_elementwise.cpp).
Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                      const std::vector<uint8_t>& lut, OpRecord* record);

// One OFM channel's record of the scale stream: with a 32-bit accumulator a 32-bit bias and a
// 31-bit scale, with a 48-bit one (16-bit IFMs) a 48-bit bias and a 15-bit scale; the shift in
// byte 8.
void scale_record(const uint8_t* rec, bool acc48, int64_t* bias, int64_t* scale, int* shift);

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
