#include "ethosu/u85_simulator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include <executorch/runtime/platform/log.h>

#include "ethosu/npu_state.h"
#include "ethosu/u85_commands.h"
#include "ethosu/u85_operands.h"
#include "ethosu/u85_pooling.h"
#include "ethosu/u85_weights.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {
namespace {

// The OFM micro-block (ACC_FORMAT bits 8-10) as height x width; its depth follows from the MACs.
bool ublock_of(int microblock, int* h, int* w) {
  static const int kShapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {2, 2}, {2, 4}, {4, 4}};
  if (microblock > 5) return false;
  *h = kShapes[microblock][0];
  *w = kShapes[microblock][1];
  return true;
}

// Where a convolution's accumulators start (ACC_FORMAT: bits 0-1 the accumulator, 0 32-bit, 1
// 48-bit; bits 4-5 acc_input, 0 RESET, 1 KEEP, 2 IFM2; bit 6 acc_output, 0 ENABLE, 1 DISABLE; bits
// 8-10 the OFM micro-block): from zero, or with acc_input IFM2 from the IFM2 element at the OFM
// position. regor writes IFM2 for a CONV3D (scheduler_decompose: one 2-D convolution per kernel
// plane that reads the IFM, the first from zero, each other one from the 32-bit OFM of the one
// before it, ACC_FORMAT 0x300 then 0x320; all but the last with a zero bias and unit scales, the
// last with the bias, and a NONE pool rescales the 32-bit result). So IFM2 is the acc tensor: 32
// bits, zero point 0, in memory, and the bias is added on top as for a reset accumulator (the
// reference model agrees bit for bit, test_ethosu_simulator_u85_acc.py). Refused, as no stream of
// ours shows them: KEEP and DISABLE (an accumulator left inside the NPU), IFM2 with a 48-bit
// accumulator (a 64-bit acc tensor), a depthwise convolution from IFM2, a chained acc tensor.
Error accumulator_input(const Registers& regs, const Command& at, bool depthwise, const Memory* memory,
                        FeatureMap* acc_in, bool* from_ifm2) {
  const int acc = regs.p(kAccFormat);
  const int input = (acc >> 4) & 3;
  if (input == 3) return fail(at, "ACC_FORMAT acc_input 3 is not defined");
  if (input == 1 || ((acc >> 6) & 1) != 0) {
    return unsupported(at, "an accumulator kept inside the NPU between operations (acc_input KEEP or acc_output DISABLE)");
  }
  *from_ifm2 = input == 2;
  if (!*from_ifm2) return Error::Ok;
  if (depthwise) return unsupported(at, "a depthwise convolution accumulating onto IFM2");
  if ((acc & 3) != 0) return unsupported(at, "a 48-bit accumulator loaded from IFM2");
  if (storage_of(regs.p(kIfm2Precision)) != 0) return unsupported(at, "a chained, 3x1-tiled or scalar accumulator input");
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm2, memory, at, acc_in));
  if (acc_in->type.bits != 32 || !acc_in->type.is_signed || acc_in->zero_point != 0) {
    return unsupported(at, "an accumulator input other than a 32-bit signed IFM2 with zero point 0");
  }
  return Error::Ok;
}

// NPU_OP_CONV and NPU_OP_DEPTHWISE with weights from the weight stream (standard format, one
// weight decoder), bias and per-channel scale from the scale stream, over an IFM in memory.
// The OFM goes to memory or to a chain buffer (regor chains a convolution into the residual ADD
// that follows it). Weights in the mlw codec or the fast format (FWD); weights from IFM2 are
// run_matmul's (u85_pooling.cpp). The accumulators start from zero or from IFM2 (accumulator_input).
// Refused: more than one weight stream, IFM upscaling, a chained input, global OFM scaling and
// accumulators kept inside the NPU across kick-offs.
Error run_conv(const Registers& regs, const Command& at, bool depthwise, const Memory* memory,
               const NpuConfig& config, Chains* chains, const std::vector<uint8_t>& lut, OpRecord* record) {
  // WEIGHT_FORMAT bit 0: the fast format (FWD), bit 4: 2:4 sparsity. With one weight decoder FWD
  // keeps the standard traversal; only the coding of the stream differs.
  const int wf = regs.p(kWeightFormat);
  const bool fast = wf & 1;
  const bool sparse = !depthwise && ((wf >> 4) & 1);
  if (fast && (depthwise || sparse)) return fail(at, "the fast weight format with a depthwise or sparse traversal");
  if (config.macs_per_cc > 256) return unsupported(at, "a configuration with more than one weight decoder");
  if (regs.data(kWeight1Length) != 0 || regs.data(static_cast<Reg1>(0x093)) != 0 ||
      regs.data(static_cast<Reg1>(0x095)) != 0) {
    return unsupported(at, "a second weight stream (WEIGHT1/2/3)");
  }
  // IFM_BROADCAST is not applied: regor writes it for elementwise operations only, so before a
  // convolution it holds what the last of those set (transformers' StaticCache Llama prefill: a W
  // broadcast left by an elementwise MUL before a projection), as for pools and matmuls.
  if (storage_of(regs.p(kIfmPrecision)) != 0) {
    return unsupported(at, "a chained, 3x1-tiled or scalar convolution input");
  }
  if ((regs.p(kOfmPrecision) >> 8) & 1) return unsupported(at, "global OFM scaling on a convolution");
  if ((regs.p(kIfmUpscale) & 3) != 0) return unsupported(at, "IFM upscaling");
  const int acc = regs.p(kAccFormat);
  if ((acc & 3) > 1) return fail(at, "accumulator format is not 32 or 48 bits");
  FeatureMap acc_in;
  bool from_ifm2 = false;
  ET_CHECK_OK_OR_RETURN_ERROR(accumulator_input(regs, at, depthwise, memory, &acc_in, &from_ifm2));
  const bool acc48 = (acc & 3) == 1;
  int ub_h = 0, ub_w = 0;
  if (!ublock_of((acc >> 8) & 7, &ub_h, &ub_w)) return fail(at, "OFM micro-block is not defined");
  if ((regs.p(kKernelStride) >> 5) & 1) return unsupported(at, "4x4 kernel decomposition");
  FeatureMap ifm;
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &ifm));
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, out.fm.type, lut, &act));
  if (ifm.type.bits == 32) return unsupported(at, "a 32-bit convolution IFM");
  const Kernel k = kernel_of(regs, kU85StrideHighBits);
  const int oh = regs.p(kOfmHeightM1) + 1, ow = regs.p(kOfmWidthM1) + 1, oc = regs.p(kOfmDepthM1) + 1;
  const int ifm_depth = depthwise ? oc : regs.p(kIfmDepthM1) + 1;
  const int in_depth = depthwise ? 1 : ifm_depth;
  const int ih = (oh - 1) * k.stride_y + k.eff_h - k.pad_top - k.pad_bottom;
  const int iw = (ow - 1) * k.stride_x + k.eff_w - k.pad_left - k.pad_right;
  const uint64_t macs = uint64_t(oh) * ow * oc * k.h * k.w * in_depth;
  if (macs > (uint64_t{1} << 32)) return fail(at, "the operation is implausibly large (over 2^32 MACs)");
  if (uint64_t(oc) * k.h * k.w * in_depth > (uint64_t{1} << 24)) {
    return fail(at, "the kernel needs more than 2^24 weights: corrupt kernel or depth registers");
  }
  if (record != nullptr) {
    *record = {at.offset, depthwise ? "depthwise" : "conv", {oh, ow, oc}, {ih, iw, ifm_depth},
               {0, 0, 0}, {k.h, k.w}, macs, 0};
  }
  if (memory == nullptr) return Error::Ok;

  const bool part = !depthwise && k.part_kernel;
  const int ofm_ublock_depth = config.macs_per_cc / (8 * ub_h * ub_w);
  // The IFM block depth the hardware fixes for a convolution (depthwise ignores it).
  const int ifm_block_depth = part                                 ? 16
                              : ofm_ublock_depth == 16 && !sparse  ? 32
                              : sparse && ifm.type.bits == 8       ? 128
                                                                   : 64;
  const WeightLayout layout{
      depthwise ? Traversal::kDepthwise : part ? Traversal::kPartKernel : Traversal::kDepthFirst,
      oc, in_depth, k.h, k.w, k.stride_x, k.stride_y, k.dil_x, k.dil_y,
      regs.p(kOfmBlkDepthM1) + 1, ifm_block_depth, ofm_ublock_depth, ifm.type.bits,
      config.macs_per_cc, sparse};
  std::vector<int64_t> order;
  if (ofm_ublock_depth <= 0 || !weight_order(layout, size_t{1} << 26, &order)) {
    return fail(at, "the weight traversal the registers describe is not valid");
  }
  std::vector<int32_t> weights(size_t(oc) * k.h * k.w * in_depth, 0);
  ET_CHECK_OK_OR_RETURN_ERROR(decode_weights(regs, at, *memory, {kWeightBase, kWeightLength, 0, 1, fast}, order,
                                             {oc, k.h, k.w, ifm_depth}, in_depth, &weights));
  Error err = Error::Ok;
  const uint8_t* s_bytes = scale_records(regs, at, *memory, kScaleBase, kScaleLength, oc, &err);
  if (s_bytes == nullptr) return err;
  Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  std::vector<int64_t> patch(size_t(k.h) * k.w * ifm_depth);
  std::vector<uint8_t> valid(size_t(k.h) * k.w);
  for (int oy = 0; oy < oh; ++oy) {
    for (int ox = 0; ox < ow; ++ox) {
      for (int ky = 0; ky < k.h; ++ky) {
        for (int kx = 0; kx < k.w; ++kx) {
          const int iy = oy * k.stride_y - k.pad_top + ky * k.dil_y;
          const int ix = ox * k.stride_x - k.pad_left + kx * k.dil_x;
          const bool inside = iy >= 0 && ix >= 0 && iy < ih && ix < iw;
          valid[size_t(ky) * k.w + kx] = inside ? 1 : 0;
          if (!inside) continue;
          for (int c = 0; c < ifm_depth; ++c) {
            int64_t v = 0;
            if (!ifm.read(iy, ix, c, &v)) return fail(at, "an IFM address lies outside its region");
            patch[(size_t(ky) * k.w + kx) * ifm_depth + c] = v - ifm.zero_point;
          }
        }
      }
      for (int o = 0; o < oc; ++o) {
        int64_t bias = 0;
        scale_record(s_bytes + size_t(o) * kScaleRecord, acc48, &bias, &out_scale.scale, &out_scale.shift);
        int64_t start = 0;
        if (from_ifm2 && !acc_in.read(oy, ox, o, &start)) return fail(at, "an IFM2 (accumulator) address lies outside its region");
        const int64_t sum = accumulate(bias + start, patch, valid, weights, k.h * k.w, ifm_depth, o, depthwise);
        const int64_t r = apply_activation(act, apply(out_scale, sum, true) + out.fm.zero_point);
        if (!out.write(oy, ox, o, r)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  out.finish(chains);
  return Error::Ok;
}

// One axis of NPU_OP_RESIZE: OFM position o reads IFM position (o * d + offset) / n, with n from
// RESIZE_*_SCALE_N_M1, d from RESIZE_*_STEP (one step = d / n and d % n), the signed 12-bit
// RESIZE_*_OFFSET, and the IFM extent from the kernel size (regor writes the IFM height and the
// columns the OFM reads there).
struct ResizeAxis {
  int64_t n = 1, d = 1, offset = 0;
  int extent = 1;
  // TOSA RESIZE's integer source position: the floor index and the remainder in units of 1/n.
  void at(int o, int64_t* index, int64_t* frac) const {
    const int64_t pos = int64_t{o} * d + offset;
    *index = pos >= 0 ? pos / n : -((-pos + n - 1) / n);
    *frac = pos - *index * n;
  }
  int clamp(int64_t i) const { return static_cast<int>(std::min<int64_t>(std::max<int64_t>(i, 0), extent - 1)); }
};

ResizeAxis resize_axis(const Registers& regs, Reg0 scale_n_m1, Reg1 step, Reg0 offset, int extent) {
  ResizeAxis a;
  a.n = (regs.p(scale_n_m1) & 0x7FF) + 1;
  a.d = int64_t(regs.param(step) & 0xF) * a.n + (regs.data(step) & 0x7FF);
  a.offset = static_cast<int16_t>(uint16_t(regs.p(offset) << 4)) >> 4;  // signed 12 bits
  a.extent = extent;
  return a;
}

// NPU_OP_RESIZE as TOSA RESIZE defines it (mode in the parameter: 0 bilinear, 2 nearest; 1
// REPLICATE, which regor does not write, is refused): bilinear weighs the four neighbours, clamped
// to the IFM, by (n - frac) and frac per axis; nearest takes the neighbour the remainder rounds to.
// The sum, in units of 1/(n_y * n_x), is scaled by 2^16 before the OFM scale, whose shift regor
// sets to 16 plus the shift of the rescale it fuses (a power of two: n_y * n_x for a plain
// bilinear resize).
Error run_resize(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                 const std::vector<uint8_t>& lut, OpRecord* record) {
  const int mode = at.param & 3;
  if (mode != 0 && mode != 2) return unsupported(at, "this resize mode (BILINEAR and NEAREST are)");
  Operand in;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &in.fm));
  if ((regs.p(kIfmBroadcast) & 0xF) != 0 || storage_of(regs.p(kIfmPrecision)) != 0) {
    return unsupported(at, "a broadcast, scalar or chained resize input");
  }
  if ((regs.p(kIfmUpscale) & 3) != 0) return unsupported(at, "IFM upscaling");
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, out.fm.type, lut, &act));
  const int acc_format = regs.p(kAccFormat);
  if ((acc_format & 3) > 1 || ((acc_format >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  if (((regs.p(kOfmPrecision) >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on a resize");
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const ResizeAxis ay = resize_axis(regs, kResizeYScaleNM1, kResizeYStep, kResizeYOffset, regs.p(kKernelHeightM1) + 1);
  const ResizeAxis ax = resize_axis(regs, kResizeXScaleNM1, kResizeXStep, kResizeXOffset, regs.p(kKernelWidthM1) + 1);
  const int oh = out.h, ow = out.w, oc = out.c;
  if (record != nullptr) {
    *record = {at.offset, mode == 0 ? "resize_bilinear" : "resize_nearest", {oh, ow, oc}, {ay.extent, ax.extent, oc},
               {0, 0, 0}, {1, 1}, 0, 0};
  }
  if (memory == nullptr) return Error::Ok;
  for (int oy = 0; oy < oh; ++oy) {
    int64_t iy = 0, fy = 0;
    ay.at(oy, &iy, &fy);
    for (int ox = 0; ox < ow; ++ox) {
      int64_t ix = 0, fx = 0;
      ax.at(ox, &ix, &fx);
      for (int c = 0; c < oc; ++c) {
        int64_t acc = 0;
        if (mode == 0) {
          const int ys[2] = {ay.clamp(iy), ay.clamp(iy + 1)}, xs[2] = {ax.clamp(ix), ax.clamp(ix + 1)};
          const int64_t wy[2] = {ay.n - fy, fy}, wx[2] = {ax.n - fx, fx};
          for (int j = 0; j < 2; ++j) {
            for (int i = 0; i < 2; ++i) {
              int64_t v = 0;
              ET_CHECK_OK_OR_RETURN_ERROR(read_operand(in, regs, at, ys[j], xs[i], c, &v));
              acc += v * wy[j] * wx[i];
            }
          }
        } else {
          const int y = ay.clamp(2 * fy >= ay.n ? iy + 1 : iy), x = ax.clamp(2 * fx >= ax.n ? ix + 1 : ix);
          ET_CHECK_OK_OR_RETURN_ERROR(read_operand(in, regs, at, y, x, c, &acc));
        }
        const int64_t r = apply_activation(act, apply(out_scale, acc * 65536, true) + out.fm.zero_point);
        if (!out.write(oy, ox, c, r)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  out.finish(chains);
  return Error::Ok;
}

// A 2-D, 3-D or indexed DMA between two mapped regions (DMA0_SRC_REGION bits 9-10: stride mode 0 1-D,
// 1 2-D, 2 3-D; bit 11 of DMA0_SRC_REGION or DMA0_DST_REGION: that side indexed): SIZE1 planes (3-D)
// of SIZE0 rows (2-D/3-D) of DMA0_LEN contiguous bytes, row r of plane p at p * STRIDE1 + r * STRIDE0
// on each side (40-bit two's complement strides), where the indexed side takes the row number from
// the int32 index at DMA0_IDX + 4 * r in DMA0_IDX_REGION instead (0..DMA0_IDX_MAX). regor writes an
// indexed source for a GATHER (an embedding lookup) and an indexed destination for a SCATTER (a KV
// cache update), each the same indices for every plane (DMA0_IDX_SKIP1 0; another skip is refused).
Error run_strided_dma(const Registers& regs, const Command& at, const Memory* memory, OpRecord* record) {
  const int src = regs.p(kDmaSrcRegion), dst = regs.p(kDmaDstRegion);
  const int mode = (src >> 9) & 3;
  const bool src_indexed = (src >> 11) & 1, dst_indexed = (dst >> 11) & 1;
  if ((dst >> 8) & 1) return unsupported(at, "a strided or indexed DMA into the NPU's internal memory");
  if ((src & 0xFF) >= kRegions || (dst & 0xFF) >= kRegions) {
    return fail(at, "the DMA names a region beyond the eight base pointers");
  }
  if (mode == 3) return fail(at, "DMA stride mode 3 is not defined");
  if (src_indexed && dst_indexed) return fail(at, "a DMA indexed on both sides");
  const bool indexed = src_indexed || dst_indexed;
  const auto signed40 = [&regs](int reg) { return static_cast<int64_t>(regs.addr(static_cast<Reg1>(reg)) << 24) >> 24; };
  if (indexed && mode == 2 && signed40(0x039) != 0) return unsupported(at, "an indexed 3-D DMA with DMA0_IDX_SKIP1 other than 0");
  const uint64_t len = regs.addr(kDmaLen);
  const int64_t rows = mode >= 1 ? regs.p(static_cast<Reg0>(0x132)) : 1;
  const int64_t planes = mode == 2 ? regs.p(static_cast<Reg0>(0x133)) : 1;
  const int64_t src_row = mode >= 1 || src_indexed ? signed40(0x033) : 0, src_plane = mode == 2 ? signed40(0x034) : 0;
  const int64_t dst_row = mode >= 1 || dst_indexed ? signed40(0x035) : 0, dst_plane = mode == 2 ? signed40(0x036) : 0;
  const uint64_t bytes = len * uint64_t(rows) * uint64_t(planes);
  if (uint64_t(rows) * uint64_t(planes) > (uint64_t{1} << 24) || bytes > (uint64_t{1} << 32)) {
    return fail(at, "the DMA is implausibly large (over 2^24 rows or 2^32 bytes)");
  }
  if (record != nullptr) *record = {at.offset, "dma", {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0}, 0, bytes};
  if (memory == nullptr) return Error::Ok;
  if (!(*memory)[static_cast<size_t>(dst & 7)].writable) return fail(at, "the DMA destination region is read-only");
  const uint8_t* index = nullptr;
  if (indexed) {
    index = region_bytes(*memory, regs.p(kDmaIdxRegion) & 7, regs.addr(static_cast<Reg1>(0x037)), uint64_t(rows) * 4);
    if (index == nullptr) return fail(at, "the DMA's index list lies outside its region");
  }
  const int64_t idx_max = static_cast<int64_t>(regs.data(static_cast<Reg1>(0x038)));
  const int64_t src_base = static_cast<int64_t>(regs.addr(kDmaSrc)), dst_base = static_cast<int64_t>(regs.addr(kDmaDst));
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (int64_t row = 0; row < rows; ++row) {
      int64_t at_row = row;
      if (indexed) {
        int32_t i = 0;
        std::memcpy(&i, index + size_t(row) * 4, 4);
        if (i < 0 || i > idx_max) {
          ET_LOG(Error, "%s: %s at cmd_data offset %zu: index %d of row %lld lies outside 0..DMA0_IDX_MAX (%lld)",
                 kTag, name_of(at), at.offset, i, static_cast<long long>(row), static_cast<long long>(idx_max));
          return Error::InvalidArgument;
        }
        at_row = i;
      }
      const int64_t s_at = src_base + plane * src_plane + (src_indexed ? at_row : row) * src_row;
      const int64_t d_at = dst_base + plane * dst_plane + (dst_indexed ? at_row : row) * dst_row;
      const uint8_t* from = s_at < 0 ? nullptr : region_bytes(*memory, src & 0xFF, uint64_t(s_at), len);
      const uint8_t* to = d_at < 0 ? nullptr : region_bytes(*memory, dst & 0xFF, uint64_t(d_at), len);
      if (from == nullptr || to == nullptr) {
        return fail(at, "a row of the DMA lies outside its source or destination region");
      }
      std::memmove(const_cast<uint8_t*>(to), from, len);
    }
  }
  return Error::Ok;
}

// DMA between two mapped regions, or into the LUT memory (U85 DMA0_*_REGION: region bits 0-2,
// internal memory bit 8, source stride mode bits 9-10, index mode bit 11): 1-D, or 2-D/3-D/indexed
// between regions (run_strided_dma). Transfers from internal memory are refused.
Error run_dma_u85(const Registers& regs, const Command& at, const Memory* memory, std::vector<uint8_t>* lut,
                  OpRecord* record) {
  const int src = regs.p(kDmaSrcRegion), dst = regs.p(kDmaDstRegion);
  if ((src >> 8) & 1) return unsupported(at, "a DMA from the NPU's internal memory");
  if (((src >> 9) & 3) != 0 || ((src | dst) >> 11) & 1) return run_strided_dma(regs, at, memory, record);
  return run_dma(regs, at, memory, lut, record);
}

}  // namespace

Error walk(const CommandStream& stream, const Memory* memory, std::vector<OpRecord>* records) {
  Chains chains;
  std::vector<uint8_t> lut(kLutRam, 0);
  return walk_commands(stream, records, [&](const Registers& regs, const Command& c, OpRecord* r) {
    if (c.is_cmd1) return unsupported(c, "control flow (NPU_OP_BRANCH)");
    switch (c.code) {
      case kOpElementwise:
        return run_elementwise(regs, c, memory, &chains, lut, r);
      case kOpDmaStart:
        return run_dma_u85(regs, c, memory, &lut, r);
      case kOpPool:
        return run_pool(regs, c, memory, &chains, lut, r);
      case kOpConv:
        if (c.param & 1) return run_matmul(regs, c, memory, &chains, lut, r);  // weights from IFM2
        return run_conv(regs, c, false, memory, stream.config, &chains, lut, r);
      case kOpDepthwise:
        return run_conv(regs, c, true, memory, stream.config, &chains, lut, r);
      case kOpResize:
        return run_resize(regs, c, memory, &chains, lut, r);
      default:  // IRQ, DMA_WAIT, KERNEL_WAIT, PMU_MASK: ordering and events only
        return Error::Ok;
    }
  });
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
