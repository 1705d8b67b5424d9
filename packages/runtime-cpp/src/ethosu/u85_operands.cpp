#include "ethosu/u85_operands.h"

#include <algorithm>

#include <executorch/runtime/platform/log.h>

#include "ethosu/u85_commands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

const char* name_of(const Command& at) {
  const char* name = command_name(at.code, at.is_cmd1);
  return name != nullptr ? name : "unknown command";
}

Error fail(const Command& at, const char* what, Error err) {
  ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s", kTag, name_of(at), at.offset, what);
  return err;
}

Error unsupported(const Command& at, const char* what) {
  ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s is not simulated for Ethos-U85 yet", kTag,
         name_of(at), at.offset, what);
  return Error::NotSupported;
}

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

// The OFM clamp: its type's range, narrowed by ACTIVATION_MIN/MAX for 8- and 16-bit OFMs.
void clamp_range(const Registers& regs, const ElemType& type, int64_t* lo, int64_t* hi) {
  *lo = type.min();
  *hi = type.max();
  if (type.bits < 32) {
    *lo = std::max<int64_t>(*lo, regs.s16(kActivationMin));
    *hi = std::min<int64_t>(*hi, type.is_signed ? regs.s16(kActivationMax) : regs.p(kActivationMax));
  }
}

// ACTIVATION (function bits 0-4, table bits 5-7) with ACTIVATION_MIN/MAX: an optional LUT, then
// the clamp. LUT_S8_S8 (4) reads one 256-byte slot; LUT_S16_S16 (8: regor's int16 TABLE with the
// RESCALE by 2^-7 after it) reads the whole 2 KiB as 512 entries of a 16-bit base and the 16-bit
// slope to the next entry, interpolated as the U55's 16-bit LUT (npu_state.h). The unsigned and
// widening LUT functions and the built-in TANH/SIGMOID are refused: regor writes none of them for
// our graphs (no uint8 tensors, no int8-to-int16/32 TABLE).
Error activation_of(const Registers& regs, const Command& at, const ElemType& ofm_type,
                    const std::vector<uint8_t>& lut, Activation* out) {
  clamp_range(regs, ofm_type, &out->lo, &out->hi);
  const int act = regs.p(kActivation);
  const int function = act & 0x1F, table = (act >> 5) & 7;
  out->lut = nullptr;
  out->lut16 = false;
  if (function == 0) return Error::Ok;
  if (lut.size() != kLutRam) return fail(at, "a LUT activation without the NPU's LUT memory");
  if (function == 4 && ofm_type.bits == 8 && ofm_type.is_signed) {
    out->lut = lut.data() + size_t(table) * 256;
    return Error::Ok;
  }
  if (function == 8 && ofm_type.bits == 16 && ofm_type.is_signed) {
    if (table != 0) return fail(at, "a 16-bit LUT names a table other than 0 (it fills the whole LUT memory)");
    out->lut = lut.data();
    out->lut16 = true;
    return Error::Ok;
  }
  return unsupported(at, "this LUT activation (LUT_S8_S8 and LUT_S16_S16 are)");
}

Error ofm_writer(const Registers& regs, const Command& at, const Memory* memory, Chains* chains, OfmWriter* out) {
  const int prec = regs.p(kOfmPrecision);
  out->h = regs.p(kOfmHeightM1) + 1;
  out->w = regs.p(kOfmWidthM1) + 1;
  out->c = regs.p(kOfmDepthM1) + 1;
  if (storage_of(prec) == 2 && chains != nullptr) {
    if (((prec >> 9) & 0x1F) != 0) return fail(at, "a chained OFM cannot be reversed or transposed");
    if (uint64_t(out->h) * out->w * out->c > (uint64_t{1} << 20)) {
      return fail(at, "a chained OFM larger than the NPU's internal buffers");
    }
    out->chained = true;
    ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, nullptr, at, &out->fm));
    if (memory != nullptr) out->chain = {out->h, out->w, out->c, std::vector<int64_t>(size_t(out->h) * out->w * out->c)};
    return Error::Ok;
  }
  if (storage_of(prec) != 0) return unsupported(at, "a chained, 3x1-tiled or unwritten OFM here");
  out->reverse = (prec >> 9) & 3;
  out->transpose = (prec >> 11) & 7;
  if (out->transpose == 4 || out->transpose == 5) return fail(at, "OFM transpose mode is not defined");
  if (out->reverse != 0 && out->transpose != 0) return fail(at, "an OFM both reversed and transposed");
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &out->fm));
  if (out->fm.mem != nullptr &&
      uint64_t(out->h) * out->w * out->c * uint64_t(out->fm.type.bytes()) > out->fm.mem->size) {
    return fail(at, "the OFM shape needs more bytes than its region holds");
  }
  return Error::Ok;
}

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

void scale_record(const uint8_t* rec, bool acc48, int64_t* bias, int64_t* scale, int* shift) {
  uint64_t b = 0;
  const int bias_bytes = acc48 ? 6 : 4;
  for (int i = 0; i < bias_bytes; ++i) b |= uint64_t(rec[i]) << (8 * i);
  const int unused = 64 - 8 * bias_bytes;
  *bias = static_cast<int64_t>(b << unused) >> unused;
  uint64_t sc = 0;
  for (int i = bias_bytes; i < 8; ++i) sc |= uint64_t(rec[i]) << (8 * (i - bias_bytes));
  *scale = static_cast<int64_t>(sc & (acc48 ? 0x7FFF : 0x7FFFFFFF));
  *shift = rec[8] & 0x3F;
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
