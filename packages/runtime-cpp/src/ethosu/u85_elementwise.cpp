// NPU_OP_ELEMENTWISE on the Ethos-U85: two operands (IFM and IFM2: feature maps, chain buffers or
// a scalar, each broadcast and scaled by its own scale register) combined by the mode in the
// command's parameter, then the OFM scale, zero point and activation.
#include <algorithm>

#include "ethosu/u85_commands.h"
#include "ethosu/u85_operands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                      const std::vector<uint8_t>& lut, OpRecord* record) {
  static const char* const kNames[] = {"mul", "add", "sub", "min", "max"};
  const int mode = at.param & 0x3F;
  if (mode > 4) return unsupported(at, "this elementwise mode (only MUL, ADD, SUB, MIN, MAX are)");
  Operand a, b;
  ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm, at, memory, chains, &a));
  ET_CHECK_OK_OR_RETURN_ERROR(operand(regs, Which::kIfm2, at, memory, chains, &b));
  if (a.broadcast == 8 && b.broadcast == 8) return fail(at, "both operands are scalars");
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
  if (((ofm_prec >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on an elementwise operation");
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int oh = out.h, ow = out.w, oc = out.c;
  if (record != nullptr) {
    const auto dim = [](int bcast, int bit, int full) { return bcast == 8 || (bcast & bit) ? 1 : full; };
    *record = {at.offset, kNames[mode], {oh, ow, oc},
               {dim(a.broadcast, 1, oh), dim(a.broadcast, 2, ow), dim(a.broadcast, 4, oc)},
               {dim(b.broadcast, 1, oh), dim(b.broadcast, 2, ow), dim(b.broadcast, 4, oc)},
               {1, 1}, 0, 0};
  }
  if (memory == nullptr) return Error::Ok;
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
        r = apply_activation(act, apply(out_scale, r, true) + ofm.zero_point);
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
