// The simulator's register file and the views the executors build from it: feature maps (IFM,
// IFM2, OFM with their four tiles, strides, precision, layout and zero point), kernels, and the
// NPU's output scaling. Internal to the simulator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <executorch/runtime/core/error.h>

#include "ethosu/npu_command_stream.h"
#include "ethosu/npu_simulator.h"

namespace runtime_cpp {
namespace npu {

using executorch::runtime::Error;

struct Registers {
  std::array<uint16_t, 0x200> r0{};  // cmd0 parameters by opcode
  std::array<uint64_t, 0x100> r1{};  // cmd1: payload | parameter << 32, by opcode

  void set(const Command& c) {
    if (c.is_cmd1) {
      r1[c.code & 0xFF] = static_cast<uint64_t>(c.data) | (static_cast<uint64_t>(c.param) << 32);
    } else if (c.code >= 0x100) {
      r0[c.code & 0x1FF] = c.param;
    }
  }
  int p(Reg0 r) const { return r0[r & 0x1FF]; }
  int s16(Reg0 r) const { return static_cast<int16_t>(r0[r & 0x1FF]); }
  uint32_t data(Reg1 r) const { return static_cast<uint32_t>(r1[r & 0xFF]); }
  uint32_t param(Reg1 r) const { return static_cast<uint32_t>(r1[r & 0xFF] >> 32); }
  // 40-bit addresses: payload plus the parameter's low byte as bits 32-39.
  uint64_t addr(Reg1 r) const { return (r1[r & 0xFF] & 0xFFFFFFFFull) | ((r1[r & 0xFF] >> 32 & 0xFF) << 32); }
};

// Element types of IFM/IFM2/OFM.
struct ElemType {
  int bits = 8;
  bool is_signed = true;
  int bytes() const { return bits / 8; }
  int64_t min() const { return is_signed ? -(int64_t{1} << (bits - 1)) : 0; }
  int64_t max() const { return is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1; }
};

// One feature map as the registers describe it. Tiles: 0 top-left (height0 x width0), 1 top-right
// (height1 rows), 2 below tile 0, 3 below tile 1.
struct FeatureMap {
  int region = 0;
  std::array<uint64_t, 4> base{};
  int height0 = 0, height1 = 0, width0 = 0;
  int64_t stride_x = 0, stride_y = 0, stride_c = 0;
  ElemType type;
  bool brick = false;  // NHCWB16
  int32_t zero_point = 0;
  const Region* mem = nullptr;

  // Byte pointer of element (y, x, c), or null when it falls outside the region.
  uint8_t* at(int y, int x, int c) const;
  bool read(int y, int x, int c, int64_t* v) const;
  bool write(int y, int x, int c, int64_t v) const;
};

enum class Which { kIfm, kIfm2, kOfm };

// Builds a feature map from the registers; NotSupported / InvalidProgram with a log line.
Error feature_map(const Registers& regs, Which which, const Memory* memory, const Command& at,
                  FeatureMap* out);

// The NPU's scale-and-shift of an accumulator with its rounding mode (0 TFL double rounding,
// 1 truncate, 2 natural round-half-up).
int64_t scale_round(int64_t acc, int64_t scale, int shift, int rounding);

// Executors, one per kick-off kind. `memory` null means check only (no data touched).
Error run_conv(const Registers& regs, const Command& at, bool depthwise, const Memory* memory,
               const NpuConfig& config, const std::vector<uint8_t>* shram, OpRecord* record);
Error run_pool(const Registers& regs, const Command& at, const Memory* memory,
               const std::vector<uint8_t>* shram, OpRecord* record);
Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory,
                      const std::vector<uint8_t>* shram, OpRecord* record);
Error run_dma(const Registers& regs, const Command& at, const Memory* memory,
              std::vector<uint8_t>* shram, OpRecord* record);

constexpr size_t kLutBytes = 256;           // one 8-bit LUT slot
constexpr size_t kLutArea = 8 * kLutBytes;   // the LUT slots at the top of the shared buffer

// Activation (clamp, LUT) applied to a scaled, zero-point-adjusted value.
struct Activation {
  int64_t lo = 0, hi = 0;
  const uint8_t* lut = nullptr;  // 256 int8 entries, or 512 32-bit entries when lut16
  bool lut16 = false;            // a 16-bit OFM: base and slope per 128 input steps, interpolated
};
Error activation(const Registers& regs, const Command& at, const ElemType& ofm_type,
                 const std::vector<uint8_t>* shram, Activation* out);
inline int64_t apply_activation(const Activation& a, int64_t v) {
  if (a.lut != nullptr && a.lut16) {
    // 16-bit LUT: the int16-saturated value picks one of 512 entries (its top 9 bits); an entry
    // holds the base (low half) and the slope to the next entry (high half), and the low 7 bits
    // interpolate: base + (slope * fraction + 64) >> 7. This equals TOSA's int16 TABLE (base << 7
    // + slope * fraction) followed by its RESCALE by 2^-7 with round-half-up.
    v = v < -32768 ? -32768 : (v > 32767 ? 32767 : v);
    const uint32_t u = static_cast<uint32_t>(v + 32768);
    const uint8_t* e = a.lut + (u >> 7) * 4;
    const int64_t base = static_cast<int16_t>(e[0] | e[1] << 8);
    const int64_t slope = static_cast<int16_t>(e[2] | e[3] << 8);
    v = base + ((slope * static_cast<int64_t>(u & 0x7F) + 64) >> 7);
  } else if (a.lut != nullptr) {  // 8-bit LUT: index by the int8-saturated value, then clamp
    v = v < -128 ? -128 : (v > 127 ? 127 : v);
    v = static_cast<int8_t>(a.lut[static_cast<size_t>(v + 128)]);
  }
  return v < a.lo ? a.lo : (v > a.hi ? a.hi : v);
}

}  // namespace npu
}  // namespace runtime_cpp
