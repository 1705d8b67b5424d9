// NPU_OP_ELEMENTWISE on the Ethos-U85: one or two operands (IFM and IFM2: feature maps, chain
// buffers or a scalar, each broadcast and scaled by its own scale register) combined by the mode in
// the command's parameter (arithmetic, compare or bitwise), then the OFM scale, zero point and
// activation as the mode takes them.
#include <algorithm>
#include <iterator>

#include "ethosu/u85_commands.h"
#include "ethosu/u85_operands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

namespace {

// The elementwise modes (NPU_OP_ELEMENTWISE's parameter, bits 0-5) simulated, by their U85 numbers
// (vela's register-command-stream listing names them): the arithmetic ones on the scaled operands,
// the compares on the scaled operands into a mask, the bitwise ones on the raw operands.
enum Mode : int {
  kMul = 0, kAdd = 1, kSub = 2, kMin = 3, kMax = 4, kAbs = 6,
  kCmpEq = 16, kCmpNe = 17, kCmpGe = 18, kCmpGt = 19,
  kAnd = 33, kOr = 34, kXor = 35, kNot = 36, kAndNot = 42,
};
enum class Kind { kArithmetic, kCompare, kBitwise, kUnsupported };

Kind kind_of(int mode, const char** name) {
  switch (mode) {
    case kMul: *name = "mul"; return Kind::kArithmetic;
    case kAdd: *name = "add"; return Kind::kArithmetic;
    case kSub: *name = "sub"; return Kind::kArithmetic;
    case kMin: *name = "min"; return Kind::kArithmetic;
    case kMax: *name = "max"; return Kind::kArithmetic;
    case kAbs: *name = "abs"; return Kind::kArithmetic;
    case kCmpEq: *name = "cmp_eq"; return Kind::kCompare;
    case kCmpNe: *name = "cmp_ne"; return Kind::kCompare;
    case kCmpGe: *name = "cmp_ge"; return Kind::kCompare;
    case kCmpGt: *name = "cmp_gt"; return Kind::kCompare;
    case kAnd: *name = "and"; return Kind::kBitwise;
    case kOr: *name = "or"; return Kind::kBitwise;
    case kXor: *name = "xor"; return Kind::kBitwise;
    case kNot: *name = "not"; return Kind::kBitwise;
    case kAndNot: *name = "and_not"; return Kind::kBitwise;
    default: *name = "?"; return Kind::kUnsupported;
  }
}

// A compare writes a mask: every bit set (-1) where it holds, 0 elsewhere. regor builds TOSA SELECT
// from it as (IFM AND mask) OR (IFM2 AND_NOT mask), a bool-to-integer cast as mask AND 1 and a bool
// tensor's mask as CMP_NE against 0.
int64_t combine(int mode, int64_t va, int64_t vb) {
  switch (mode) {
    case kMul: return va * vb;
    case kAdd: return va + vb;
    case kSub: return va - vb;
    case kMin: return std::min(va, vb);
    case kMax: return std::max(va, vb);
    case kAbs: return va < 0 ? -va : va;
    case kCmpEq: return va == vb ? -1 : 0;
    case kCmpNe: return va != vb ? -1 : 0;
    case kCmpGe: return va >= vb ? -1 : 0;
    case kCmpGt: return va > vb ? -1 : 0;
    case kAnd: return va & vb;
    case kOr: return va | vb;
    case kXor: return va ^ vb;
    case kNot: return ~va;
    default: return va & ~vb;  // kAndNot: IFM AND NOT IFM2
  }
}

}  // namespace

// Arithmetic modes (ABS reads IFM alone): each operand less its zero point and through its IFM/IFM2
// scale, combined, then the OFM scale, zero point and activation. Compares: the scaled operands compared into a mask,
// which skips the OFM scale and zero point (regor does not rewrite OFM_SCALE for them) but takes
// the clamp. Bitwise modes (NOT reads IFM alone): the operands as stored, zero points 0 (another is
// refused), neither scale nor OFM zero point applied, then the clamp. A LUT after a compare or a
// bitwise mode is refused.
Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                      const std::vector<uint8_t>& lut, OpRecord* record) {
  const int mode = at.param & 0x3F;
  const char* name = nullptr;
  const Kind kind = kind_of(mode, &name);
  if (kind == Kind::kUnsupported) {
    return unsupported(at, "this elementwise mode (MUL, ADD, SUB, MIN, MAX, ABS, CMP_EQ/NE/GE/GT, AND, OR, XOR, NOT "
                           "and AND_NOT are)");
  }
  const bool unary = mode == kNot || mode == kAbs;
  Operand a, b;
  ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm, at, memory, chains, &a));
  if (!unary) {
    ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm2, at, memory, chains, &b));
    if (a.broadcast == 8 && b.broadcast == 8) return fail(at, "both operands are scalars");
  } else if (a.broadcast == 8) {
    return fail(at, "a unary elementwise operation on a scalar");
  }
  if (kind == Kind::kBitwise && (a.fm.zero_point != 0 || (!unary && b.fm.zero_point != 0))) {
    return unsupported(at, "a bitwise elementwise operation with a non-zero IFM zero point");
  }
  const int ofm_prec = regs.p(kOfmPrecision);
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  const FeatureMap& ofm = out.fm;
  const int acc = regs.p(kAccFormat);
  if ((acc & 3) > 1 || ((acc >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, ofm.type, lut, &act));
  if (kind != Kind::kArithmetic && act.lut != nullptr) {
    return unsupported(at, "a LUT after a compare or bitwise elementwise operation");
  }
  if (((ofm_prec >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on an elementwise operation");
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  if (kind == Kind::kArithmetic) ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int oh = out.h, ow = out.w, oc = out.c;
  if (record != nullptr) {
    const auto dim = [](int bcast, int bit, int full) { return bcast == 8 || (bcast & bit) ? 1 : full; };
    *record = {at.offset, name, {oh, ow, oc},
               {dim(a.broadcast, 1, oh), dim(a.broadcast, 2, ow), dim(a.broadcast, 4, oc)},
               {dim(b.broadcast, 1, oh), dim(b.broadcast, 2, ow), dim(b.broadcast, 4, oc)},
               {1, 1}, 0, 0};
    if (unary) std::fill(std::begin(record->ifm2_shape), std::end(record->ifm2_shape), 0);
  }
  if (memory == nullptr) return Error::Ok;
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      for (int c = 0; c < oc; ++c) {
        int64_t va = 0, vb = 0;
        ET_CHECK_OK_OR_RETURN_ERROR(read_operand(a, regs, at, y, x, c, &va));
        if (!unary) ET_CHECK_OK_OR_RETURN_ERROR(read_operand(b, regs, at, y, x, c, &vb));
        if (kind != Kind::kBitwise) {
          va = apply(a.scale, va, false);
          vb = apply(b.scale, vb, false);
        }
        int64_t r = combine(mode, va, vb);
        if (kind == Kind::kArithmetic) r = apply(out_scale, r, true) + ofm.zero_point;
        r = apply_activation(act, r);
        if (!out.write(y, x, c, r)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  out.finish(chains);
  return Error::Ok;
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
