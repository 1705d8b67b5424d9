#include "ethosu/u85_simulator.h"

#include <algorithm>
#include <array>
#include <utility>

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

// A chain buffer: an OFM kept inside the NPU (OFM storage "chained", its REGION register naming
// the buffer) for the next operation to read as its IFM or IFM2, at full (32-bit) precision.
struct Chain {
  int h = 0, w = 0, c = 0;
  std::vector<int64_t> values;
};
using Chains = std::array<Chain, kRegions>;

// The OFM clamp: its type's range, narrowed by ACTIVATION_MIN/MAX for 8- and 16-bit OFMs.
void clamp_range(const Registers& regs, const ElemType& type, int64_t* lo, int64_t* hi) {
  *lo = type.min();
  *hi = type.max();
  if (type.bits < 32) {
    *lo = std::max<int64_t>(*lo, regs.s16(kActivationMin));
    *hi = std::min<int64_t>(*hi, type.is_signed ? regs.s16(kActivationMax) : regs.p(kActivationMax));
  }
}

struct Operand {
  FeatureMap fm;
  const Chain* chain = nullptr;  // when the operand is a chain buffer
  int broadcast = 0;  // bit 0 H, bit 1 W, bit 2 C; 8 a scalar (OP_SCALAR)
  Scale scale{};
};

Error read_operand(const Operand& op, const Registers& regs, const Command& at, int y, int x, int c,
                   int64_t* v) {
  if (op.broadcast == 8) {
    *v = static_cast<int32_t>(regs.data(kOpScalar));
  } else {
    y = (op.broadcast & 1) ? 0 : y;
    x = (op.broadcast & 2) ? 0 : x;
    c = (op.broadcast & 4) ? 0 : c;
    if (op.chain != nullptr) {
      const Chain& ch = *op.chain;
      if (y >= ch.h || x >= ch.w || c >= ch.c) {
        return fail(at, "an operand reads a chain buffer beyond the shape its producer wrote");
      }
      *v = ch.values[(size_t(y) * ch.w + x) * ch.c + c];
    } else if (!op.fm.read(y, x, c, v)) {
      return fail(at, "an IFM/IFM2 address lies outside its region");
    }
  }
  *v -= op.fm.zero_point;
  return Error::Ok;
}

// The IFM or IFM2 operand: a scalar, a chain buffer or a feature map in memory.
Error operand(const Registers& regs, Which which, const Command& at, const Memory* memory,
              const Chains* chains, Operand* out) {
  const bool first = which == Which::kIfm;
  out->broadcast = regs.p(first ? kIfmBroadcast : kIfm2Broadcast) & 0xF;
  if (out->broadcast > 8) return fail(at, "broadcast mode is not defined");
  const int storage = storage_of(regs.p(first ? kIfmPrecision : kIfm2Precision));
  if (storage == 1) return unsupported(at, "a 3x1-tiled IFM");
  const bool chained = storage == 2 && out->broadcast != 8;
  ET_CHECK_OK_OR_RETURN_ERROR(
      feature_map(regs, which, out->broadcast == 8 || chained ? nullptr : memory, at, &out->fm));
  if (chained && chains != nullptr) out->chain = &(*chains)[static_cast<size_t>(out->fm.region)];
  out->scale = scale_of(regs, first ? kIfmScale : kIfm2Scale, 1);
  return check_scale(at, out->scale, false);
}

Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                      OpRecord* record) {
  static const char* const kNames[] = {"mul", "add", "sub", "min", "max"};
  const int mode = at.param & 0x3F;
  if (mode > 4) return unsupported(at, "this elementwise mode (only MUL, ADD, SUB, MIN, MAX are)");
  Operand a, b;
  ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm, at, memory, chains, &a));
  ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm2, at, memory, chains, &b));
  if (a.broadcast == 8 && b.broadcast == 8) return fail(at, "both operands are scalars");
  const int ofm_prec = regs.p(kOfmPrecision);
  const int ofm_storage = storage_of(ofm_prec);
  if (ofm_storage == 1 || ofm_storage == 3) return unsupported(at, "a 3x1-tiled or unwritten OFM");
  const bool ofm_chained = ofm_storage == 2;
  FeatureMap ofm;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, ofm_chained ? nullptr : memory, at, &ofm));
  if (((ofm_prec >> 9) & 0x1F) != 0) return unsupported(at, "a reversed or transposed OFM");
  const int acc = regs.p(kAccFormat);
  if ((acc & 3) > 1 || ((acc >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  const int act = regs.p(kActivation);
  if ((act & 0x1F) != 0) return unsupported(at, "a LUT activation");
  if (((ofm_prec >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on an elementwise operation");
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int oh = regs.p(kOfmHeightM1) + 1, ow = regs.p(kOfmWidthM1) + 1, oc = regs.p(kOfmDepthM1) + 1;
  if (ofm.mem != nullptr && uint64_t(oh) * ow * oc * uint64_t(ofm.type.bytes()) > ofm.mem->size) {
    return fail(at, "the OFM shape needs more bytes than its region holds");
  }
  if (ofm_chained && uint64_t(oh) * ow * oc > (uint64_t{1} << 20)) {
    return fail(at, "a chained OFM larger than the NPU's internal buffers");
  }
  if (record != nullptr) {
    const auto dim = [](int bcast, int bit, int full) { return bcast == 8 || (bcast & bit) ? 1 : full; };
    *record = {at.offset, kNames[mode], {oh, ow, oc},
               {dim(a.broadcast, 1, oh), dim(a.broadcast, 2, ow), dim(a.broadcast, 4, oc)},
               {dim(b.broadcast, 1, oh), dim(b.broadcast, 2, ow), dim(b.broadcast, 4, oc)},
               {1, 1}, 0, 0};
  }
  if (memory == nullptr) return Error::Ok;
  Chain produced;
  if (ofm_chained) produced = {oh, ow, oc, std::vector<int64_t>(size_t(oh) * ow * oc)};
  int64_t lo, hi;
  clamp_range(regs, ofm.type, &lo, &hi);
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
        r = std::min(hi, std::max(lo, apply(out_scale, r, true) + ofm.zero_point));
        if (ofm_chained) {
          produced.values[(size_t(y) * ow + x) * oc + c] = r;
        } else if (!ofm.write(y, x, c, r)) {
          return fail(at, "an OFM address lies outside its (writable) region");
        }
      }
    }
  }
  // Written after the loops: an operation may read the chain buffer it replaces.
  if (ofm_chained) (*chains)[static_cast<size_t>(ofm.region)] = std::move(produced);
  return Error::Ok;
}

// NPU_OP_POOL in MAX mode over an NHWC or NHCWB16 IFM with padding (padded positions are
// skipped, as TOSA's MAX_POOL2D does). AVERAGE and SUM are written below but refused: no stream
// of ours has exercised them against the reference model yet (regor turns our average pools into
// depthwise convolutions, and its 1x1 SUM copies come with transposed OFMs).
Error run_pool(const Registers& regs, const Command& at, const Memory* memory, OpRecord* record) {
  static const char* const kNames[] = {"pool_max", "pool_avg", "reduce_sum", "pool_sum"};
  const int mode = at.param & 7;
  if (mode != 0) return unsupported(at, "this pooling mode (only MAX is)");
  // Pooling reads the IFM as stored: no broadcast and no IFM scale (regor leaves IFM_SCALE as the
  // previous elementwise operation set it).
  Operand in;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &in.fm));
  if ((regs.p(kIfmBroadcast) & 0xF) != 0 || storage_of(regs.p(kIfmPrecision)) != 0) {
    return unsupported(at, "a broadcast, scalar or chained pooling input");
  }
  const int ofm_prec = regs.p(kOfmPrecision);
  if (storage_of(ofm_prec) != 0 || ((ofm_prec >> 9) & 0x1F) != 0) {
    return unsupported(at, "a chained, 3x1-tiled, unwritten, reversed or transposed pooling OFM");
  }
  FeatureMap ofm;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &ofm));
  if ((regs.p(kIfmUpscale) & 3) != 0) return unsupported(at, "IFM upscaling");
  if ((regs.p(kActivation) & 0x1F) != 0) return unsupported(at, "a LUT activation");
  if ((regs.p(kAccFormat) & 3) > 1 || ((regs.p(kAccFormat) >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const Kernel k = kernel_of(regs, kU85StrideHighBits);
  const int oh = regs.p(kOfmHeightM1) + 1, ow = regs.p(kOfmWidthM1) + 1, oc = regs.p(kOfmDepthM1) + 1;
  // The IFM extent the NPU derives from the OFM size, the kernel and the padding.
  const int ih = (oh - 1) * k.stride_y + k.eff_h - k.pad_top - k.pad_bottom;
  const int iw = (ow - 1) * k.stride_x + k.eff_w - k.pad_left - k.pad_right;
  const uint64_t reads = uint64_t(oh) * ow * oc * k.h * k.w;
  if (ofm.mem != nullptr && uint64_t(oh) * ow * oc * uint64_t(ofm.type.bytes()) > ofm.mem->size) {
    return fail(at, "the OFM shape needs more bytes than its region holds");
  }
  if (reads > (uint64_t{1} << 32)) return fail(at, "the operation is implausibly large (over 2^32 reads)");
  if (record != nullptr) *record = {at.offset, kNames[mode], {oh, ow, oc}, {ih, iw, oc}, {0, 0, 0}, {k.h, k.w}, reads, 0};
  if (memory == nullptr) return Error::Ok;
  int64_t lo, hi;
  clamp_range(regs, ofm.type, &lo, &hi);
  for (int oy = 0; oy < oh; ++oy) {
    for (int ox = 0; ox < ow; ++ox) {
      for (int c = 0; c < oc; ++c) {
        int64_t acc = 0;
        int count = 0;
        for (int ky = 0; ky < k.h; ++ky) {
          for (int kx = 0; kx < k.w; ++kx) {
            const int iy = oy * k.stride_y - k.pad_top + ky * k.dil_y;
            const int ix = ox * k.stride_x - k.pad_left + kx * k.dil_x;
            if (iy < 0 || ix < 0 || iy >= ih || ix >= iw) continue;
            int64_t v = 0;
            ET_CHECK_OK_OR_RETURN_ERROR(read_operand(in, regs, at, iy, ix, c, &v));
            acc = mode == 0 ? (count > 0 ? std::max(acc, v) : v) : acc + v;
            ++count;
          }
        }
        if (mode == 1 && count > 0) {  // rounded half away from zero
          acc = acc >= 0 ? (2 * acc + count) / (2 * count) : -((-2 * acc + count) / (2 * count));
        }
        const int64_t r = std::min(hi, std::max(lo, apply(out_scale, acc, true) + ofm.zero_point));
        if (!ofm.write(oy, ox, c, r)) return fail(at, "an OFM address lies outside its (writable) region");
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
  Chains chains;
  return walk_commands(stream, records, [&](const Registers& regs, const Command& c, OpRecord* r) {
    if (c.is_cmd1) return unsupported(c, "control flow (NPU_OP_BRANCH)");
    switch (c.code) {
      case kOpElementwise:
        return run_elementwise(regs, c, memory, &chains, r);
      case kOpDmaStart:
        return run_dma_u85(regs, c, memory, r);
      case kOpPool:
        return run_pool(regs, c, memory, r);
      case kOpConv:
      case kOpDepthwise:
      case kOpResize:
        return unsupported(c, "this operation");
      default:  // IRQ, DMA_WAIT, KERNEL_WAIT, PMU_MASK: ordering and events only
        return Error::Ok;
    }
  });
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
