#include "ethosu/npu_state.h"

#include <algorithm>

#include <executorch/runtime/platform/log.h>

#include "ethosu/mlw_decoder.h"

namespace runtime_cpp {
namespace npu {
namespace {

constexpr const char* kTag = "EthosUBackend";

struct FmRegs {
  Reg0 region, height0, height1, width0, precision, zero_point;
  Reg1 base0, stride_x, stride_y, stride_c;
};
constexpr FmRegs kIfmRegs{kIfmRegion, kIfmHeight0M1, kIfmHeight1M1, kIfmWidth0M1, kIfmPrecision,
                          kIfmZeroPoint, kIfmBase0, kIfmStrideX, kIfmStrideY, kIfmStrideC};
constexpr FmRegs kIfm2Regs{kIfm2Region, kIfm2Height0M1, kIfm2Height1M1, kIfm2Width0M1,
                           kIfm2Precision, kIfm2ZeroPoint, kIfm2Base0, kIfm2StrideX,
                           kIfm2StrideY, kIfm2StrideC};
constexpr FmRegs kOfmRegs{kOfmRegion, kOfmHeight0M1, kOfmHeight1M1, kOfmWidth0M1, kOfmPrecision,
                          kOfmZeroPoint, kOfmBase0, kOfmStrideX, kOfmStrideY, kOfmStrideC};

}  // namespace

uint8_t* FeatureMap::at(int y, int x, int c) const {
  int tile = 0;
  if (x >= width0) {
    x -= width0;
    tile = 1;
    if (y >= height1) {
      y -= height1;
      tile = 3;
    }
  } else if (y >= height0) {
    y -= height0;
    tile = 2;
  }
  const int64_t elem = type.bytes();
  const int64_t off_c = brick ? (c / 16) * stride_c + (c % 16) * elem : c * stride_c;
  const uint64_t addr = base[static_cast<size_t>(tile)] + static_cast<uint64_t>(
      int64_t{y} * stride_y + int64_t{x} * stride_x + off_c);
  if (mem == nullptr || mem->data == nullptr || addr > mem->size ||
      static_cast<uint64_t>(elem) > mem->size - addr) {
    return nullptr;
  }
  return mem->data + addr;
}

bool FeatureMap::read(int y, int x, int c, int64_t* v) const {
  const uint8_t* p = at(y, x, c);
  if (p == nullptr) return false;
  uint32_t u = 0;
  for (int i = 0; i < type.bytes(); ++i) u |= static_cast<uint32_t>(p[i]) << (8 * i);
  if (type.bits == 32) {
    *v = static_cast<int32_t>(u);
  } else if (type.is_signed) {
    const uint32_t sign = 1u << (type.bits - 1);
    *v = static_cast<int64_t>((u ^ sign)) - static_cast<int64_t>(sign);
  } else {
    *v = u;
  }
  return true;
}

bool FeatureMap::write(int y, int x, int c, int64_t v) const {
  if (!mem->writable) return false;
  uint8_t* p = at(y, x, c);
  if (p == nullptr) return false;
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < type.bytes(); ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
  return true;
}

Error feature_map(const Registers& regs, Which which, const Memory* memory, const Command& at,
                  FeatureMap* out) {
  const FmRegs& r = which == Which::kIfm ? kIfmRegs : which == Which::kIfm2 ? kIfm2Regs : kOfmRegs;
  const char* name = which == Which::kIfm ? "IFM" : which == Which::kIfm2 ? "IFM2" : "OFM";
  const int prec = regs.p(r.precision);
  if (which == Which::kOfm) {
    switch (prec & 0x7) {
      case 0: out->type = {8, false}; break;
      case 1: out->type = {8, true}; break;
      case 2: out->type = {16, false}; break;
      case 3: out->type = {16, true}; break;
      case 5: out->type = {32, true}; break;
      default:
        ET_LOG(Error, "%s: %s at cmd_data offset %zu: OFM precision %d is not defined", kTag,
               command_name(at.code, false), at.offset, prec & 0x7);
        return Error::InvalidProgram;
    }
  } else {
    switch (prec & 0xF) {
      case 0: out->type = {8, false}; break;
      case 1: out->type = {8, true}; break;
      case 4: out->type = {16, false}; break;
      case 5: out->type = {16, true}; break;
      case 9: out->type = {32, true}; break;
      default:
        ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s precision %d is not defined", kTag,
               command_name(at.code, false), at.offset, name, prec & 0xF);
        return Error::InvalidProgram;
    }
  }
  const int format = (prec >> 6) & 0x3;
  if (format > 1) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s format %d is not NHWC (0) or NHCWB16 (1)",
           kTag, command_name(at.code, false), at.offset, name, format);
    return Error::InvalidProgram;
  }
  out->brick = format == 1;
  out->region = regs.p(r.region) & 0x7;
  for (int t = 0; t < 4; ++t) out->base[static_cast<size_t>(t)] = regs.addr(static_cast<Reg1>(r.base0 + t));
  out->height0 = regs.p(r.height0) + 1;
  out->height1 = regs.p(r.height1) + 1;
  out->width0 = regs.p(r.width0) + 1;
  // Strides are 40-bit two's complement: vela writes a negative stride to traverse a dimension
  // backwards (a flip is a POOL whose OFM stride runs from the last column to the first).
  const auto stride = [&regs](Reg1 reg) { return static_cast<int64_t>(regs.addr(reg) << 24) >> 24; };
  out->stride_x = stride(r.stride_x);
  out->stride_y = stride(r.stride_y);
  out->stride_c = stride(r.stride_c);
  out->zero_point = out->type.is_signed ? regs.s16(r.zero_point) : regs.p(r.zero_point);
  if (out->type.bits == 32) out->zero_point = 0;
  out->mem = memory != nullptr ? &(*memory)[static_cast<size_t>(out->region)] : nullptr;
  if (memory != nullptr && out->mem->data == nullptr) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s uses region %d, which the payload does not "
                  "map (weights, scratch and fast scratch only)", kTag,
           command_name(at.code, false), at.offset, name, out->region);
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

Kernel kernel_of(const Registers& regs, int stride_high_bits) {
  Kernel k{};
  const int s = regs.p(kKernelStride);
  const int high = (1 << stride_high_bits) - 1;
  k.stride_x = ((s & 1) | (((s >> 6) & high) << 1)) + 1;
  k.stride_y = (((s >> 1) & 1) | (((s >> 9) & high) << 1)) + 1;
  k.dil_x = ((s >> 3) & 1) + 1;
  k.dil_y = ((s >> 4) & 1) + 1;
  k.part_kernel = ((s >> 2) & 1) != 0;
  k.eff_h = regs.p(kKernelHeightM1) + 1;
  k.eff_w = regs.p(kKernelWidthM1) + 1;
  k.h = regs.p(kKernelHeightM1) / k.dil_y + 1;
  k.w = regs.p(kKernelWidthM1) / k.dil_x + 1;
  k.pad_top = regs.p(kIfmPadTop);
  k.pad_left = regs.p(kIfmPadLeft);
  k.pad_bottom = regs.p(kIfmPadBottom);
  k.pad_right = regs.p(kIfmPadRight);
  k.upscale = regs.p(kIfmUpscale) & 3;
  return k;
}

const uint8_t* region_bytes(const Memory& memory, int region, uint64_t addr, uint64_t len) {
  const Region& r = memory[static_cast<size_t>(region & 7)];
  if (r.data == nullptr || addr > r.size || len > r.size - addr) return nullptr;
  return r.data + addr;
}

Error decode_weights(const Registers& regs, const Command& at, const Memory& memory, const CoreWeights& stream,
                     const std::vector<int64_t>& order, const std::array<int, 4>& shape, int in_depth,
                     std::vector<int32_t>* weights) {
  const char* name = command_name(at.code, false);
  const uint64_t len = regs.data(stream.length);
  const uint8_t* bytes = region_bytes(memory, regs.p(kWeightRegion), regs.addr(stream.base), len);
  if (bytes == nullptr) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s weight stream (WEIGHT%s_BASE + WEIGHT%s_LENGTH) lies "
                  "outside its region", kTag, name, at.offset, stream.core == 0 ? "the" : "the second core's",
           stream.core == 0 ? "" : "1", stream.core == 0 ? "" : "1");
    return Error::InvalidProgram;
  }
  std::vector<int16_t> decoded;
  const char* error = nullptr;
  const bool ok = stream.fast ? fwd_decode(bytes, len, order.size(), &decoded, &error)
                              : mlw_decode(bytes, len, order.size(), &decoded, &error);
  if (!ok) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s", kTag, name, at.offset, error);
    return Error::InvalidProgram;
  }
  const int channels = (shape[0] - stream.core + stream.cores - 1) / stream.cores;
  if (decoded.size() != order.size()) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: core %d's weight stream holds %zu weights but the "
                  "kernel %dx%d, IFM depth %d and its %d OFM channels need %zu", kTag, name, at.offset,
           stream.core, decoded.size(), shape[1], shape[2], shape[3], channels, order.size());
    return Error::InvalidProgram;
  }
  const size_t per_ofm = size_t(shape[1]) * shape[2] * in_depth;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0) continue;
    const size_t local = static_cast<size_t>(order[i]);
    const size_t channel = size_t(stream.core) + size_t(stream.cores) * (local / per_ofm);
    const size_t at_index = channel * per_ofm + local % per_ofm;
    if (at_index >= weights->size()) {
      ET_LOG(Error, "%s: %s at cmd_data offset %zu: a weight traversal beyond the kernel", kTag, name, at.offset);
      return Error::InvalidProgram;
    }
    (*weights)[at_index] = decoded[i];
  }
  return Error::Ok;
}

const uint8_t* scale_records(const Registers& regs, const Command& at, const Memory& memory, Reg1 base,
                             Reg1 length, int channels, Error* err) {
  const uint64_t need = uint64_t(channels) * kScaleRecord;
  const uint8_t* s = region_bytes(memory, regs.p(kScaleRegion), regs.addr(base), need);
  if (s == nullptr || regs.data(length) < need) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: a scale stream (SCALE_BASE / SCALE1_BASE + its LENGTH) "
                  "is shorter than 10 bytes per OFM channel of its core or lies outside its region", kTag,
           command_name(at.code, false), at.offset);
    *err = Error::InvalidProgram;
    return nullptr;
  }
  return s;
}

void log_missing_stop() {
  ET_LOG(Error, "%s: the command stream ends without NPU_OP_STOP: truncated stream", kTag);
}

int64_t scale_round(int64_t acc, int64_t scale, int shift, int rounding) {
  const __int128 v = static_cast<__int128>(acc) * scale;
  if (shift <= 0) return static_cast<int64_t>(v);
  if (rounding == 1) {  // truncate toward zero
    return static_cast<int64_t>(v >= 0 ? v >> shift : -((-v) >> shift));
  }
  if (rounding == 0 && shift > 31) {
    // TFL: a saturating rounding doubling high multiply (round half away from zero, to 31 bits)
    // and then a rounding right shift by shift - 31 (half away from zero).
    const __int128 nudge = v >= 0 ? (__int128{1} << 30) : (1 - (__int128{1} << 30));
    __int128 high = (v + nudge) / (__int128{1} << 31);
    const int e = shift - 31;
    const __int128 mask = (__int128{1} << e) - 1;
    const __int128 rem = high & mask;
    const __int128 threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    return static_cast<int64_t>((high >> e) + (rem > threshold ? 1 : 0));
  }
  return static_cast<int64_t>((v + (__int128{1} << (shift - 1))) >> shift);
}

Error activation(const Registers& regs, const Command& at, const ElemType& ofm_type,
                 const std::vector<uint8_t>* shram, Activation* out) {
  const int act = regs.p(kActivation);
  const int type = act & 0xFFF;
  const int clip = (act >> 12) & 0xF;
  const bool lut = type >= 16 && type <= 23;
  if ((type != 0 && !lut) || clip != 0 || (lut && ofm_type.bits == 32)) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: activation function %d (clip range %d) on a "
                  "%d-bit OFM is not simulated yet (clamping and 8/16-bit LUTs are)", kTag,
           command_name(at.code, false), at.offset, type, clip, ofm_type.bits);
    return Error::NotSupported;
  }
  out->lo = ofm_type.min();
  out->hi = ofm_type.max();
  if (ofm_type.bits < 32) {
    out->lo = std::max<int64_t>(out->lo, regs.s16(kActivationMin));
    out->hi = std::min<int64_t>(out->hi, ofm_type.is_signed ? regs.s16(kActivationMax)
                                                            : regs.p(kActivationMax));
  }
  out->lut = nullptr;
  if (lut) {
    // The eight 256-byte LUT slots sit at the top 2 KiB of a core's shared buffer, where the
    // stream DMAs them (NPU_SET_DMA0_DST_REGION with the internal bit). The CONFIG word counts the
    // shared buffers of all cores (two on Ethos-U65-512, PARALLEL_MODE 1); the DMA writes the first.
    const size_t slot = static_cast<size_t>(type - 16) * kLutBytes;
    const size_t core_shram = shram == nullptr ? 0 : shram->size() / size_t(regs.p(kParallelMode) > 0 ? 2 : 1);
    if (core_shram < kLutArea) {
      ET_LOG(Error, "%s: %s at cmd_data offset %zu: a LUT activation but the stream's CONFIG word "
                    "declares no shared buffer for it", kTag, command_name(at.code, false), at.offset);
      return Error::InvalidProgram;
    }
    out->lut16 = ofm_type.bits == 16;
    if (out->lut16 && slot != 0) {  // a 16-bit LUT (512 x 4 bytes) fills all eight slots
      ET_LOG(Error, "%s: %s at cmd_data offset %zu: a 16-bit LUT in slot %d (it needs the whole "
                    "2 KiB LUT area, slot 0)", kTag, command_name(at.code, false), at.offset, type - 16);
      return Error::InvalidProgram;
    }
    out->lut = shram->data() + (core_shram - kLutArea) + slot;
  }
  return Error::Ok;
}

}  // namespace npu
}  // namespace runtime_cpp
