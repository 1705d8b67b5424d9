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

// Kernel geometry from KERNEL_*, stride, dilation and padding registers.
struct Kernel {
  int h, w, eff_h, eff_w, stride_x, stride_y, dil_x, dil_y;
  bool part_kernel;
  int pad_top, pad_left, pad_bottom, pad_right;
  int upscale;  // 0 none, 1 nearest 2x, 2 transpose (zero insertion) 2x
};
// KERNEL_STRIDE keeps each stride's low bit at bits 0 (x) and 1 (y) and its high bits from bit 6
// (x) and bit 9 (y): three high bits on Ethos-U55/U65, one on Ethos-U85.
constexpr int kU55StrideHighBits = 3;
constexpr int kU85StrideHighBits = 1;
Kernel kernel_of(const Registers& regs, int stride_high_bits);

// Logs the error of a stream that ends without NPU_OP_STOP.
void log_missing_stop();

// The command loop both architectures share: register commands update `regs`; every kick-off
// (a cmd0 below 0x100, or a cmd1 from 0x100 up: U85's NPU_OP_BRANCH) but STOP calls
// `execute(regs, command, &record)`, which fills `record.op` when the kick-off did work worth a
// work record (the waits and IRQs leave it null). STOP ends the walk; a stream without it is an
// InvalidProgram.
template <class Execute>
Error walk_commands(const CommandStream& stream, std::vector<OpRecord>* records, Execute execute) {
  Registers regs;
  for (const Command& c : stream.commands) {
    const bool kick_off = c.is_cmd1 ? c.code >= 0x100 : c.code < 0x100;
    if (!kick_off) {
      regs.set(c);
      continue;
    }
    if (!c.is_cmd1 && c.code == kOpStop) return Error::Ok;
    OpRecord rec{};
    ET_CHECK_OK_OR_RETURN_ERROR(execute(static_cast<const Registers&>(regs), c, &rec));
    if (records != nullptr && rec.op != nullptr) records->push_back(rec);
  }
  log_missing_stop();
  return Error::InvalidProgram;
}
// A checked byte range of a region, or null when it lies outside it (or the region is unmapped).
const uint8_t* region_bytes(const Memory& memory, int region, uint64_t addr, uint64_t len);

// Decodes one core's weight stream (WEIGHT_REGION, `base` and `length`: WEIGHT_BASE/LENGTH, or
// WEIGHT1_BASE/LENGTH for the second core of a two-core Ethos-U65-512), mlw-coded, and places the
// value at each stream position where `order` says (an index into this core's kernel, OHWI; -1 is
// padding) into `weights`, of shape[0] OFM x shape[1] x shape[2] taps x `in_depth`: the core owns
// OFM channels core, core + cores, ..., so its local channel j is channel core + cores * j.
// shape[3] is the IFM depth named in errors. `weights` must already have the full kernel's size.
struct CoreWeights {
  Reg1 base, length;
  int core, cores;
  bool fast = false;  // the U85's fast weight format (FWD) instead of the mlw codec
};
Error decode_weights(const Registers& regs, const Command& at, const Memory& memory, const CoreWeights& stream,
                     const std::vector<int64_t>& order, const std::array<int, 4>& shape, int in_depth,
                     std::vector<int32_t>* weights);

constexpr int kScaleRecord = 10;  // bias, scale and shift per OFM channel
// The scale stream's records for `channels` OFM channels at SCALE_REGION, `base` (SCALE_BASE or,
// for the second core, SCALE1_BASE) with at least `length` bytes declared, or null (with the Error
// in *err and a log line) when it is shorter or lies outside its region.
const uint8_t* scale_records(const Registers& regs, const Command& at, const Memory& memory, Reg1 base,
                             Reg1 length, int channels, Error* err);

// Adds OFM channel `o`'s products over a gathered receptive field to `acc`: `patch` holds the
// zero-point-adjusted IFM values tap by tap (`depth` per tap), `valid` which of the `taps` lie inside
// the IFM, `weights` the OHWI weights (OHW1 for depthwise, which multiplies IFM channel `o` only).
inline int64_t accumulate(int64_t acc, const std::vector<int64_t>& patch, const std::vector<uint8_t>& valid,
                          const std::vector<int32_t>& weights, int taps, int depth, int o, bool depthwise) {
  for (int t = 0; t < taps; ++t) {
    if (!valid[size_t(t)]) continue;
    if (depthwise) {
      acc += patch[size_t(t) * depth + o] * weights[size_t(o) * taps + t];
    } else {
      const int64_t* p = &patch[size_t(t) * depth];
      const int32_t* w = &weights[(size_t(o) * taps + t) * depth];
      for (int c = 0; c < depth; ++c) acc += p[c] * w[c];
    }
  }
  return acc;
}

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
