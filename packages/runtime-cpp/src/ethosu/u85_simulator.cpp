#include "ethosu/u85_simulator.h"

#include <algorithm>

#include <executorch/runtime/platform/log.h>

#include "ethosu/npu_state.h"
#include "ethosu/u85_commands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {
namespace {

constexpr const char* kTag = "EthosUBackend";

const char* name_of(const Command& at) {
  const char* name = command_name(at.code, at.is_cmd1);
  return name != nullptr ? name : "unknown command";
}

Error fail(const Command& at, const char* what, Error err = Error::InvalidProgram) {
  ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s", kTag, name_of(at), at.offset, what);
  return err;
}

Error unsupported(const Command& at, const char* what) {
  ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s is not simulated for Ethos-U85 yet", kTag,
         name_of(at), at.offset, what);
  return Error::NotSupported;
}

// The storage field (bits 14-15 of IFM/IFM2/OFM_PRECISION): 0 tiled (the 2x2 tiles of
// npu_state.h), 1 3x1 tiles, 2 chained into the next operation, 3 none (a scalar IFM2, or an OFM
// that is not written).
int storage_of(int precision) { return (precision >> 14) & 3; }

// One operand's scale register (IFM_SCALE, IFM2_SCALE or OFM_SCALE): value * scale >> shift,
// rounded as `round` says.
struct Scale {
  int64_t scale;
  int shift;
  int double_round;  // bits of the extra rounding term vela sets for ADD/SUB scaling
  int round;
};
Scale scale_of(const Registers& regs, Reg1 reg, int round_bits) {
  const uint32_t p = regs.param(reg);
  return {static_cast<int64_t>(regs.data(reg) & 0x7FFFFFFF), static_cast<int>(p & 0x3F),
          static_cast<int>((p >> 6) & 0x1F), static_cast<int>((p >> 13) & ((1 << round_bits) - 1))};
}

// The rounding modes simulated: OFM 0 double symmetric (TFL), 1 natural, 4 truncate to zero;
// IFM/IFM2 0 double symmetric, 1 natural (their double-round term must be 0).
Error check_scale(const Command& at, const Scale& s, bool is_ofm) {
  if (s.double_round != 0) return unsupported(at, "a scale register's double-round term");
  if (is_ofm && s.round != 0 && s.round != 1 && s.round != 4) {
    return unsupported(at, "an OFM rounding mode other than double symmetric, natural or truncate");
  }
  return Error::Ok;
}

int64_t apply(const Scale& s, int64_t v, bool is_ofm) {
  // scale_round's modes: 0 TFL double rounding, 1 truncate, 2 natural.
  const int mode = s.round == 0 ? 0 : (is_ofm && s.round == 4 ? 1 : 2);
  return scale_round(v, s.scale, s.shift, mode);
}

struct Operand {
  FeatureMap fm;
  int broadcast = 0;  // bit 0 H, bit 1 W, bit 2 C; 8 a scalar (OP_SCALAR)
  Scale scale{};
};

Error read_operand(const Operand& op, const Registers& regs, const Command& at, int y, int x, int c,
                   int64_t* v) {
  if (op.broadcast == 8) {
    *v = static_cast<int32_t>(regs.data(kOpScalar));
  } else if (!op.fm.read((op.broadcast & 1) ? 0 : y, (op.broadcast & 2) ? 0 : x,
                         (op.broadcast & 4) ? 0 : c, v)) {
    return fail(at, "an IFM/IFM2 address lies outside its region");
  }
  *v -= op.fm.zero_point;
  return Error::Ok;
}

Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory, OpRecord* record) {
  static const char* const kNames[] = {"mul", "add", "sub", "min", "max"};
  const int mode = at.param & 0x3F;
  if (mode > 4) return unsupported(at, "this elementwise mode (only MUL, ADD, SUB, MIN, MAX are)");
  Operand a, b;
  FeatureMap ofm;
  a.broadcast = regs.p(kIfmBroadcast) & 0xF;
  b.broadcast = regs.p(kIfm2Broadcast) & 0xF;
  if (a.broadcast == 8 && b.broadcast == 8) return fail(at, "both operands are scalars");
  if ((a.broadcast > 7 && a.broadcast != 8) || (b.broadcast > 7 && b.broadcast != 8)) {
    return fail(at, "broadcast mode is not defined");
  }
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, a.broadcast == 8 ? nullptr : memory, at, &a.fm));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm2, b.broadcast == 8 ? nullptr : memory, at, &b.fm));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &ofm));
  const int ofm_prec = regs.p(kOfmPrecision);
  if (storage_of(regs.p(kIfmPrecision)) == 2 || storage_of(regs.p(kIfm2Precision)) == 2 ||
      storage_of(ofm_prec) != 0) {
    return unsupported(at, "chained, 3x1-tiled or unwritten feature maps");
  }
  if (((ofm_prec >> 9) & 0x1F) != 0) return unsupported(at, "a reversed or transposed OFM");
  const int acc = regs.p(kAccFormat);
  if ((acc & 3) > 1 || ((acc >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  const int act = regs.p(kActivation);
  if ((act & 0x1F) != 0) return unsupported(at, "a LUT activation");
  if (((ofm_prec >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on an elementwise operation");
  a.scale = scale_of(regs, kIfmScale, 1);
  b.scale = scale_of(regs, kIfm2Scale, 1);
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, a.scale, false));
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, b.scale, false));
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int oh = regs.p(kOfmHeightM1) + 1, ow = regs.p(kOfmWidthM1) + 1, oc = regs.p(kOfmDepthM1) + 1;
  if (ofm.mem != nullptr && uint64_t(oh) * ow * oc * uint64_t(ofm.type.bytes()) > ofm.mem->size) {
    return fail(at, "the OFM shape needs more bytes than its region holds");
  }
  if (record != nullptr) {
    const auto dim = [](int bcast, int bit, int full) { return bcast == 8 || (bcast & bit) ? 1 : full; };
    *record = {at.offset, kNames[mode], {oh, ow, oc},
               {dim(a.broadcast, 1, oh), dim(a.broadcast, 2, ow), dim(a.broadcast, 4, oc)},
               {dim(b.broadcast, 1, oh), dim(b.broadcast, 2, ow), dim(b.broadcast, 4, oc)},
               {1, 1}, 0, 0};
  }
  if (memory == nullptr) return Error::Ok;
  int64_t lo = ofm.type.min(), hi = ofm.type.max();
  if (ofm.type.bits < 32) {
    lo = std::max<int64_t>(lo, regs.s16(kActivationMin));
    hi = std::min<int64_t>(hi, ofm.type.is_signed ? regs.s16(kActivationMax) : regs.p(kActivationMax));
  }
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      for (int c = 0; c < oc; ++c) {
        int64_t va = 0, vb = 0;
        ET_CHECK_OK_OR_RETURN_ERROR(read_operand(a, regs, at, y, x, c, &va));
        ET_CHECK_OK_OR_RETURN_ERROR(read_operand(b, regs, at, y, x, c, &vb));
        va = apply(a.scale, va, false);
        vb = apply(b.scale, vb, false);
        int64_t r = 0;
        switch (mode) {
          case 0: r = va * vb; break;
          case 1: r = va + vb; break;
          case 2: r = va - vb; break;
          case 3: r = std::min(va, vb); break;
          default: r = std::max(va, vb); break;
        }
        r = apply(out_scale, r, true) + ofm.zero_point;
        if (!ofm.write(y, x, c, std::min(hi, std::max(lo, r)))) {
          return fail(at, "an OFM address lies outside its (writable) region");
        }
      }
    }
  }
  return Error::Ok;
}

// DMA between two mapped regions (U85 DMA0_*_REGION: region bits 0-2, internal memory bit 8,
// source stride mode bits 9-10, index mode bit 11). Strided, indexed and internal-memory (LUT)
// transfers are refused.
Error run_dma_u85(const Registers& regs, const Command& at, const Memory* memory, OpRecord* record) {
  const int src = regs.p(kDmaSrcRegion), dst = regs.p(kDmaDstRegion);
  if (((src | dst) >> 8) & 1) return unsupported(at, "a DMA to or from the NPU's internal memory");
  if (((src >> 9) & 3) != 0) return unsupported(at, "a 2D/3D strided DMA");
  if (((src | dst) >> 11) & 1) return unsupported(at, "an indexed DMA");
  std::vector<uint8_t> no_shram;
  return run_dma(regs, at, memory, &no_shram, record);
}

}  // namespace

Error walk(const CommandStream& stream, const Memory* memory, std::vector<OpRecord>* records) {
  Registers regs;
  for (const Command& c : stream.commands) {
    if (c.is_cmd1 && c.code == kOpBranch) return unsupported(c, "control flow (NPU_OP_BRANCH)");
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
      case kOpElementwise:
        err = run_elementwise(regs, c, memory, r);
        break;
      case kOpDmaStart:
        err = run_dma_u85(regs, c, memory, r);
        break;
      case kOpConv:
      case kOpDepthwise:
      case kOpPool:
      case kOpResize:
        return unsupported(c, "this operation");
      default:  // IRQ, DMA_WAIT, KERNEL_WAIT, PMU_MASK: ordering and events only
        continue;
    }
    if (err != Error::Ok) return err;
    if (records != nullptr) records->push_back(rec);
  }
  ET_LOG(Error, "%s: the command stream ends without NPU_OP_STOP: truncated stream", kTag);
  return Error::InvalidProgram;
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
