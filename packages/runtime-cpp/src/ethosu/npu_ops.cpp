// The kick-off executors: convolution and depthwise (weights from the mlw stream, bias and
// per-channel scale from the scale stream), pooling, elementwise and DMA.
#include <algorithm>
#include <cstring>
#include <vector>

#include <executorch/runtime/platform/log.h>

#include "ethosu/npu_state.h"

namespace runtime_cpp {
namespace npu {
namespace {

constexpr const char* kTag = "EthosUBackend";

const char* name_of(const Command& at) { return command_name(at.code, at.is_cmd1); }

Error fail(const Command& at, const char* what, Error err = Error::InvalidProgram) {
  ET_LOG(Error, "%s: %s at cmd_data offset %zu: %s", kTag, name_of(at), at.offset, what);
  return err;
}

struct OfmShape {
  int h, w, c;
};
OfmShape ofm_shape(const Registers& regs) {
  return {regs.p(kOfmHeightM1) + 1, regs.p(kOfmWidthM1) + 1, regs.p(kOfmDepthM1) + 1};
}

// Every OFM element has its own address, so an OFM larger than its region (or an operation of
// more than 2^32 multiply-accumulates) can only come from a corrupt stream: refusing it up front
// keeps a malformed stream from running for hours before its first out-of-region write.
Error check_plausible(const Command& at, const OfmShape& o, const FeatureMap& ofm, uint64_t macs) {
  if (ofm.mem != nullptr &&
      uint64_t(o.h) * o.w * o.c * uint64_t(ofm.type.bytes()) > ofm.mem->size) {
    return fail(at, "the OFM shape needs more bytes than its region holds");
  }
  if (macs > (uint64_t{1} << 32)) return fail(at, "the operation is implausibly large (over 2^32 MACs)");
  return Error::Ok;
}

// Reads IFM element (iy, ix, c) in the (possibly upscaled) input space; `*pad` when the position
// is padding. False on an out-of-region address.
struct IfmReader {
  const FeatureMap& fm;
  int ifm_h, ifm_w;  // in upscaled coordinates
  int upscale;
  bool read(int iy, int ix, int c, int64_t* v, bool* pad) const {
    if (iy < 0 || ix < 0 || iy >= ifm_h || ix >= ifm_w) {
      *pad = true;
      return true;
    }
    *pad = false;
    if (upscale == 0) return fm.read(iy, ix, c, v);
    if (upscale == 2 && ((iy | ix) & 1) != 0) {
      *v = fm.zero_point;
      return true;
    }
    return fm.read(iy >> 1, ix >> 1, c, v);
  }
};

// Feature-map positions the kernel reads (derived the way the NPU derives them: the OFM size,
// the kernel and the padding fix the IFM extent).
void ifm_extent(const Kernel& k, const OfmShape& o, int* ifm_h, int* ifm_w) {
  *ifm_h = (o.h - 1) * k.stride_y + k.eff_h - k.pad_top - k.pad_bottom;
  *ifm_w = (o.w - 1) * k.stride_x + k.eff_w - k.pad_left - k.pad_right;
}

// The IFM height and width a kick-off reads, in stored (not upscaled) elements, into shape[0..1].
void ifm_read_extent(const Kernel& k, const OfmShape& o, int* shape) {
  ifm_extent(k, o, &shape[0], &shape[1]);
  if (k.upscale != 0) {
    shape[0] = (shape[0] + 1) / 2;
    shape[1] = (shape[1] + 1) / 2;
  }
}

// The stream order in which the NPU consumes weights (ofm, ky, kx, ifm) for one kick-off;
// -1 marks the zero padding the encoder inserts. Mirrors the traversal the hardware defines
// (OFM blocks, IFM blocks, 8x8 sub-kernels, micro-blocks), as vela's weight encoder writes it.
void weight_order(int ofm_depth, int ifm_depth, const Kernel& k, int ofm_block_depth, bool depthwise,
                  int ifm_bits, int ifm_ublock, int ofm_ublock, std::vector<int64_t>* order) {
  const int decomp_h = 8 / k.dil_y, decomp_w = 8 / k.dil_x;
  const bool part = k.part_kernel && !depthwise;
  const int ifm_block_depth = part || ifm_bits == 16 ? 16 : 32;
  const int in_depth = depthwise ? 1 : ifm_depth;
  order->clear();
  for (int ofm_block_z = 0; ofm_block_z < ofm_depth; ofm_block_z += ofm_block_depth) {
    const int clipped_ofm = std::min(ofm_block_depth, ofm_depth - ofm_block_z);
    for (int ifm_block_z = 0; ifm_block_z < in_depth; ifm_block_z += ifm_block_depth) {
      const int clipped_ifm = depthwise ? ifm_ublock
                              : part ? std::min(ifm_block_depth, ifm_depth - ifm_block_z)
                                     : ifm_block_depth;
      for (int sy = 0; sy < k.h; sy += decomp_h) {
        const int sub_h = std::min(k.h - sy, decomp_h);
        for (int sx = 0; sx < k.w; sx += decomp_w) {
          const int sub_w = std::min(k.w - sx, decomp_w);
          int elements = sub_w * sub_h;
          if (part) {
            const int mult = ifm_bits == 16 ? 2 : 4;
            elements = (elements + mult - 1) / mult * mult;
          } else if (depthwise) {
            elements = (elements + 3) / 4 * 4;
          }
          const int outer = part ? clipped_ifm : 1;
          const int inner = part ? 1 : clipped_ifm;
          for (int ifm_outer = 0; ifm_outer < outer; ifm_outer += ifm_ublock) {
            for (int ofm_ublk = 0; ofm_ublk < clipped_ofm; ofm_ublk += ofm_ublock) {
              for (int e = 0; e < elements; ++e) {
                const int kx = e % sub_w, ky = e / sub_w;
                for (int ifm_inner = 0; ifm_inner < inner; ifm_inner += ifm_ublock) {
                  for (int oz = 0; oz < ofm_ublock; ++oz) {
                    const int iz_count = depthwise ? 1 : ifm_ublock;
                    for (int iz = 0; iz < iz_count; ++iz) {
                      const int ifm_z = ifm_block_z + ifm_inner + ifm_outer + iz;
                      const int ofm_z = ofm_block_z + ofm_ublk + oz;
                      if (ifm_z < in_depth && ofm_z < ofm_depth && ky < sub_h) {
                        const int64_t idx = ((int64_t{ofm_z} * k.h + sy + ky) * k.w + sx + kx) * in_depth + ifm_z;
                        order->push_back(idx);
                      } else {
                        order->push_back(-1);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}


// The convolution's weights (OHWI, in_depth 1 for depthwise) and each OFM channel's 10-byte scale
// record (40-bit bias, 32-bit scale, 6-bit shift). With PARALLEL_MODE 1 (Ethos-U65-512) two cores
// split the kick-off's OFM channels: core n computes channels n, n + 2, ..., from its own weight
// stream (WEIGHT_BASE / WEIGHT1_BASE) encoded with OFM block depth ceil((block - n) / 2), and its
// own scale stream (SCALE_BASE / SCALE1_BASE), as vela's weight encoder deinterleaves them.
Error load_weights_and_scales(const Registers& regs, const Command& at, bool depthwise, const Memory& memory,
                              const NpuConfig& config, const Kernel& k, const OfmShape& o, int ifm_depth,
                              int ifm_bits, std::vector<int32_t>* weights, std::vector<const uint8_t*>* scales) {
  static constexpr Reg1 kWeightRegs[2][2] = {{kWeightBase, kWeightLength}, {kWeight1Base, kWeight1Length}};
  static constexpr Reg1 kScaleRegs[2][2] = {{kScaleBase, kScaleLength}, {kScale1Base, kScale1Length}};
  const int cores = regs.p(kParallelMode) + 1;
  const int in_depth = depthwise ? 1 : ifm_depth;
  const size_t per_ofm = size_t(k.h) * k.w * in_depth;
  if (uint64_t(o.c) * per_ofm > (uint64_t{1} << 24)) {
    return fail(at, "the kernel needs more than 2^24 weights: corrupt kernel or depth registers");
  }
  weights->assign(size_t(o.c) * per_ofm, 0);
  scales->assign(size_t(o.c), nullptr);
  const int ofm_ublock = config.macs_per_cc <= 32 ? 4 : 8;
  const int block = regs.p(kOfmBlkDepthM1) + 1;
  std::vector<int64_t> order;
  for (int core = 0; core < cores && core < o.c; ++core) {
    const int depth = (o.c - core + cores - 1) / cores;  // channels core, core + cores, ...
    const int core_block = (std::min(block, o.c) + cores - 1 - core) / cores;
    if (core_block == 0) return fail(at, "an OFM block depth that leaves the second core no channels");
    weight_order(depth, ifm_depth, k, core_block, depthwise, ifm_bits, 8, ofm_ublock, &order);
    ET_CHECK_OK_OR_RETURN_ERROR(decode_weights(regs, at, memory, {kWeightRegs[core][0], kWeightRegs[core][1], core, cores},
                                               order, {o.c, k.h, k.w, ifm_depth}, in_depth, weights));
    Error err = Error::Ok;
    const uint8_t* s_bytes = scale_records(regs, at, memory, kScaleRegs[core][0], kScaleRegs[core][1], depth, &err);
    if (s_bytes == nullptr) return err;
    for (int j = 0; j < depth; ++j) (*scales)[size_t(core + cores * j)] = s_bytes + size_t(j) * kScaleRecord;
  }
  return Error::Ok;
}

}  // namespace

Error run_conv(const Registers& regs, const Command& at, bool depthwise, const Memory* memory,
               const NpuConfig& config, const std::vector<uint8_t>* shram, OpRecord* record) {
  FeatureMap ifm, ofm;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &ifm));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &ofm));
  const Kernel k = kernel_of(regs, kU55StrideHighBits);
  const OfmShape o = ofm_shape(regs);
  const int ifm_depth = depthwise ? o.c : regs.p(kIfmDepthM1) + 1;
  if (ifm.type.bits == 32) return fail(at, "a 32-bit IFM is not valid for convolution");
  if (k.upscale == 3) return fail(at, "IFM upscale mode 3 is not defined");
  if ((regs.p(kOfmPrecision) >> 8) & 1) {
    return fail(at, "global OFM scaling on a convolution is not simulated yet", Error::NotSupported);
  }
  if (regs.p(kParallelMode) > 1) return fail(at, "PARALLEL_MODE names more than the two cores an Ethos-U65 has");
  if (regs.p(kParallelMode) == 0 && regs.data(kWeight1Length) != 0) {
    return fail(at, "a second core's weight stream (WEIGHT1) on a one-core NPU (PARALLEL_MODE 0)");
  }
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation(regs, at, ofm.type, shram, &act));
  const uint64_t macs = uint64_t(o.h) * o.w * o.c * k.h * k.w * (depthwise ? 1 : ifm_depth);
  ET_CHECK_OK_OR_RETURN_ERROR(check_plausible(at, o, ofm, macs));
  if (record != nullptr) {
    *record = {at.offset, depthwise ? "depthwise" : "conv", {o.h, o.w, o.c}, {0, 0, ifm_depth},
               {0, 0, 0}, {k.h, k.w}, macs, 0};
    ifm_read_extent(k, o, record->ifm_shape);
  }
  if (memory == nullptr) return Error::Ok;

  std::vector<int32_t> weights;
  std::vector<const uint8_t*> scales;
  ET_CHECK_OK_OR_RETURN_ERROR(
      load_weights_and_scales(regs, at, depthwise, *memory, config, k, o, ifm_depth, ifm.type.bits, &weights, &scales));
  const int rounding = (regs.p(kOfmPrecision) >> 14) & 3;
  int ifm_h, ifm_w;
  ifm_extent(k, o, &ifm_h, &ifm_w);
  const IfmReader in{ifm, ifm_h, ifm_w, k.upscale};
  std::vector<int64_t> patch(size_t(k.h) * k.w * ifm_depth);
  std::vector<uint8_t> valid(size_t(k.h) * k.w);
  for (int oy = 0; oy < o.h; ++oy) {
    for (int ox = 0; ox < o.w; ++ox) {
      // Gather the receptive field once per output position.
      for (int ky = 0; ky < k.h; ++ky) {
        for (int kx = 0; kx < k.w; ++kx) {
          const int iy = oy * k.stride_y - k.pad_top + ky * k.dil_y;
          const int ix = ox * k.stride_x - k.pad_left + kx * k.dil_x;
          bool pad = false;
          for (int c = 0; c < ifm_depth; ++c) {
            int64_t v = 0;
            if (!in.read(iy, ix, c, &v, &pad)) return fail(at, "an IFM address lies outside its region");
            if (pad) break;
            patch[(size_t(ky) * k.w + kx) * ifm_depth + c] = v - ifm.zero_point;
          }
          valid[size_t(ky) * k.w + kx] = pad ? 0 : 1;
        }
      }
      for (int oc = 0; oc < o.c; ++oc) {
        const uint8_t* rec = scales[size_t(oc)];
        uint64_t bias_u = 0;
        for (int b = 0; b < 5; ++b) bias_u |= uint64_t(rec[b]) << (8 * b);
        const int64_t bias = static_cast<int64_t>(bias_u << 24) >> 24;  // sign-extend 40 bits
        const int64_t scale = int64_t(rec[5]) | int64_t(rec[6]) << 8 | int64_t(rec[7]) << 16 |
                              int64_t(rec[8]) << 24;
        const int shift = rec[9] & 0x3F;
        const int64_t acc = accumulate(bias, patch, valid, weights, k.h * k.w, ifm_depth, oc, depthwise);
        const int64_t v = apply_activation(act, scale_round(acc, scale, shift, rounding) + ofm.zero_point);
        if (!ofm.write(oy, ox, oc, v)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  return Error::Ok;
}

Error run_pool(const Registers& regs, const Command& at, const Memory* memory,
               const std::vector<uint8_t>* shram, OpRecord* record) {
  FeatureMap ifm, ofm;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &ifm));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &ofm));
  const int mode = at.param;  // 0 max, 1 average, 2 reduce sum
  const Kernel k = kernel_of(regs, kU55StrideHighBits);
  const OfmShape o = ofm_shape(regs);
  if (mode > 2) return fail(at, "pooling mode is not MAX, AVERAGE or REDUCE_SUM");
  // REDUCE_SUM adds up the IFM's channels (and the kernel window) into a one-channel OFM.
  const int sum_depth = mode == 2 ? regs.p(kIfmDepthM1) + 1 : 1;
  if (mode == 2 && o.c != 1) return fail(at, "REDUCE_SUM pooling into more than one OFM channel");
  if (k.upscale == 3) return fail(at, "IFM upscale mode 3 is not defined");
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation(regs, at, ofm.type, shram, &act));
  const uint64_t macs = uint64_t(o.h) * o.w * o.c * k.h * k.w * sum_depth;
  ET_CHECK_OK_OR_RETURN_ERROR(check_plausible(at, o, ofm, macs));
  static const char* const kModes[] = {"pool_max", "pool_avg", "reduce_sum"};
  if (record != nullptr) {
    *record = {at.offset, kModes[mode], {o.h, o.w, o.c}, {0, 0, mode == 2 ? sum_depth : o.c},
               {0, 0, 0}, {k.h, k.w}, macs, 0};
    ifm_read_extent(k, o, record->ifm_shape);
  }
  // OFM_SCALE applies only in the global scale mode (OFM_PRECISION bit 8), which vela's generator
  // sets (and writes OFM_SCALE for) on average and sum pools without padding alone. A max pool in the
  // per-channel mode is unscaled, so whatever OFM_SCALE an earlier ADD or MUL left must not reach it.
  // Average and sum pools in that mode (the NPU divides by the window's valid element count itself)
  // are refused rather than guessed.
  const bool global_scale = ((regs.p(kOfmPrecision) >> 8) & 1) != 0;
  if (!global_scale && mode != 0) {
    return fail(at, "average or sum pooling in the per-channel scale mode (OFM_PRECISION bit 8 clear) is not "
                    "simulated yet", Error::NotSupported);
  }
  if (memory == nullptr) return Error::Ok;
  const int64_t scale = global_scale ? regs.data(kOfmScale) : 1;
  const int shift = global_scale ? static_cast<int>(regs.param(kOfmScale) & 0x3F) : 0;
  const int rounding = (regs.p(kOfmPrecision) >> 14) & 3;
  int ifm_h, ifm_w;
  ifm_extent(k, o, &ifm_h, &ifm_w);
  const IfmReader in{ifm, ifm_h, ifm_w, k.upscale};
  for (int oy = 0; oy < o.h; ++oy) {
    for (int ox = 0; ox < o.w; ++ox) {
      for (int c = 0; c < o.c; ++c) {
        int64_t acc = 0;
        bool any = false;
        for (int ky = 0; ky < k.h; ++ky) {
          for (int kx = 0; kx < k.w; ++kx) {
            for (int ic = mode == 2 ? 0 : c; ic < (mode == 2 ? sum_depth : c + 1); ++ic) {
              int64_t v = 0;
              bool pad = false;
              if (!in.read(oy * k.stride_y - k.pad_top + ky * k.dil_y,
                           ox * k.stride_x - k.pad_left + kx * k.dil_x, ic, &v, &pad)) {
                return fail(at, "an IFM address lies outside its region");
              }
              if (pad) break;
              v -= ifm.zero_point;
              acc = mode == 0 ? (any ? std::max(acc, v) : v) : acc + v;
              any = true;
            }
          }
        }
        const int64_t out = apply_activation(act, scale_round(acc, scale, shift, rounding) + ofm.zero_point);
        if (!ofm.write(oy, ox, c, out)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  return Error::Ok;
}

Error run_elementwise(const Registers& regs, const Command& at, const Memory* memory,
                      const std::vector<uint8_t>* shram, OpRecord* record) {
  // Modes: 0 MUL, 1 ADD, 2 SUB, 3 MIN, 4 MAX, 5 LRELU, 6 ABS, 7 CLZ, 8 SHR, 9 SHL.
  static const char* const kNames[] = {"mul", "add", "sub", "min", "max", "lrelu", "abs", "clz", "shr", "shl"};
  const int mode = at.param;
  if (mode > 9) return fail(at, "elementwise mode is not defined");
  if (mode == 5 || mode >= 7) {
    ET_LOG(Error, "%s: %s at cmd_data offset %zu: elementwise %s is not simulated yet", kTag,
           name_of(at), at.offset, kNames[mode]);
    return Error::NotSupported;
  }
  const bool binary = mode != 6;
  FeatureMap ifm, ifm2, ofm;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &ifm));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kOfm, memory, at, &ofm));
  const int bcast = regs.p(kIfm2Broadcast);
  const bool reversed = (bcast >> 6) & 1;
  const bool scalar = (bcast >> 7) & 1;
  if (binary) {
    ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm2, scalar ? nullptr : memory, at, &ifm2));
  }
  const int scale_mode = (regs.p(kIfmPrecision) >> 8) & 3;
  if (scale_mode == 3) return fail(at, "IFM scale mode 3 is not defined");
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation(regs, at, ofm.type, shram, &act));
  const OfmShape o = ofm_shape(regs);
  ET_CHECK_OK_OR_RETURN_ERROR(check_plausible(at, o, ofm, uint64_t(o.h) * o.w * o.c));
  if (record != nullptr) {
    *record = {at.offset, kNames[mode], {o.h, o.w, o.c}, {o.h, o.w, o.c}, {0, 0, 0}, {1, 1}, 0, 0};
    if (binary) {
      record->ifm2_shape[0] = scalar || (bcast & 1) ? 1 : o.h;
      record->ifm2_shape[1] = scalar || (bcast & 2) ? 1 : o.w;
      record->ifm2_shape[2] = scalar || (bcast & 4) ? 1 : o.c;
    }
  }
  if (memory == nullptr) return Error::Ok;

  const int64_t ofm_scale = regs.data(kOfmScale);
  const int ofm_shift = static_cast<int>(regs.param(kOfmScale) & 0x3F);
  const int rounding = (regs.p(kOfmPrecision) >> 14) & 3;
  const int in_rounding = (regs.p(kIfmPrecision) >> 14) & 3;
  // Operand scaling for ADD/SUB. In 16-bit mode (0) both operands are multiplied by their 16-bit
  // scale. In the 32-bit modes OPA_SCALE with its shift scales the selected operand (1: IFM,
  // 2: IFM2) and the other operand is shifted left by 19 bits (8-bit inputs; 14 for 16-bit),
  // the fixed point vela's add/sub scaling ("input_shift" 20 / 15, halved) and its streams assume.
  const int64_t opa = regs.data(kOpaScale);
  const int opa_shift = static_cast<int>(regs.param(kOpaScale) & 0x3F);
  const int64_t opb = regs.data(kOpbScale);
  const int unscaled_shift = ifm.type.bits == 8 ? 19 : 14;
  const bool add_sub = mode == 1 || mode == 2;
  const int64_t scalar_value = ifm2.type.is_signed ? regs.s16(kIfm2Scalar) : regs.p(kIfm2Scalar);
  for (int y = 0; y < o.h; ++y) {
    for (int x = 0; x < o.w; ++x) {
      for (int c = 0; c < o.c; ++c) {
        int64_t a = 0, b = 0;
        if (!ifm.read(y, x, c, &a)) return fail(at, "an IFM address lies outside its region");
        a -= ifm.zero_point;
        if (binary) {
          if (scalar) {
            b = scalar_value;
          } else if (!ifm2.read((bcast & 1) ? 0 : y, (bcast & 2) ? 0 : x, (bcast & 4) ? 0 : c, &b)) {
            return fail(at, "an IFM2 address lies outside its region");
          }
          b -= ifm2.zero_point;
        }
        if (reversed) std::swap(a, b);
        int64_t r = 0;
        if (add_sub) {
          if (scale_mode == 0) {
            a *= static_cast<int16_t>(opa & 0xFFFF);
            b *= static_cast<int16_t>(opb & 0xFFFF);
          } else if (scale_mode == 1) {
            a = scale_round(a, opa, opa_shift, in_rounding);
            b *= int64_t{1} << unscaled_shift;
          } else {
            b = scale_round(b, opa, opa_shift, in_rounding);
            a *= int64_t{1} << unscaled_shift;
          }
          r = mode == 1 ? a + b : a - b;
        } else if (mode == 0) {
          r = a * b;
        } else if (mode == 3) {
          r = std::min(a, b);
        } else if (mode == 4) {
          r = std::max(a, b);
        } else {
          r = a < 0 ? -a : a;
        }
        const int64_t out = apply_activation(act, scale_round(r, ofm_scale, ofm_shift, rounding) + ofm.zero_point);
        if (!ofm.write(y, x, c, out)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  return Error::Ok;
}

Error run_dma(const Registers& regs, const Command& at, const Memory* memory,
              std::vector<uint8_t>* shram, OpRecord* record) {
  const int src_cfg = regs.p(kDmaSrcRegion), dst_cfg = regs.p(kDmaDstRegion);
  const uint64_t len = regs.addr(kDmaLen);
  const bool to_shram = ((dst_cfg >> 8) & 1) != 0;
  if ((src_cfg >> 8) & 1) {
    return fail(at, "DMA from the NPU's internal memory is not simulated yet", Error::NotSupported);
  }
  if (((src_cfg >> 9) & 3) != 0 || ((dst_cfg >> 9) & 3) != 0) {
    return fail(at, "2D/3D strided DMA is not simulated yet", Error::NotSupported);
  }
  if (record != nullptr) *record = {at.offset, "dma", {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0}, 0, len};
  if ((src_cfg & 0xFF) >= kRegions || (!to_shram && (dst_cfg & 0xFF) >= kRegions)) {
    return fail(at, "the DMA names a region beyond the eight base pointers");
  }
  if (memory == nullptr) return Error::Ok;
  const uint8_t* src = region_bytes(*memory, src_cfg & 0xFF, regs.addr(kDmaSrc), len);
  uint8_t* dst = nullptr;
  const uint64_t dst_addr = regs.addr(kDmaDst);
  if (to_shram) {
    if (dst_addr <= shram->size() && len <= shram->size() - dst_addr) dst = shram->data() + dst_addr;
  } else if ((*memory)[static_cast<size_t>(dst_cfg & 7)].writable) {
    dst = const_cast<uint8_t*>(region_bytes(*memory, dst_cfg & 0xFF, dst_addr, len));
  }
  if (src == nullptr || dst == nullptr) {
    return fail(at, "the DMA source or destination range lies outside its region or the NPU's "
                    "shared buffer (or the destination is read-only)");
  }
  std::memmove(dst, src, len);
  return Error::Ok;
}

}  // namespace npu
}  // namespace runtime_cpp
