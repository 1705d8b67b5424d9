#include "ethosu/u85_pooling.h"

#include <algorithm>

#include "ethosu/u85_commands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {
namespace {

// The scale stream's records of `channels` OFM channels (per-channel OFM scaling: a bias, a scale
// and a shift each), bounds-checked against their region.
Error channel_records(const Registers& regs, const Command& at, const Memory& memory, int channels,
                      const uint8_t** records) {
  Error err = Error::Ok;
  *records = scale_records(regs, at, memory, kScaleBase, kScaleLength, channels, &err);
  return *records == nullptr ? err : Error::Ok;
}

// Channel c's record applied to an accumulator `v`: its bias added, its scale and shift put into
// `scale`.
void add_channel_record(const uint8_t* records, int c, bool acc48, int64_t* v, Scale* scale) {
  int64_t bias = 0;
  scale_record(records + size_t(c) * kScaleRecord, acc48, &bias, &scale->scale, &scale->shift);
  *v += bias;
}

// NPU_OP_POOL in mode NONE with the accumulator loaded from IFM2 (ACC_FORMAT acc_input 2): regor's
// rescale of a 32-bit tensor (the "null pool": a bilinear resize's sums, a MUL by reciprocals) to
// 8 or 16 bits. Each OFM element is its IFM2 element, less IFM2's zero point, through the global
// OFM scale or, in the per-channel mode (a conv_transpose2d's output), its channel's bias and scale
// from the scale stream, then the zero point and the activation; the IFM registers (int8, the same
// tensor) are not read. IFM2 may be a chain buffer. IFM2_BROADCAST is not applied: regor's generator does not
// write it for this operation, so it holds whatever the previous elementwise operation set (a
// channel broadcast after the MUL of a count_include_pad=False average pool).
Error run_rescale_pool(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                       const std::vector<uint8_t>& lut, OpRecord* record) {
  const int acc_format = regs.p(kAccFormat);
  if ((acc_format & 3) > 1 || ((acc_format >> 4) & 3) != 2 || ((acc_format >> 6) & 1) != 0) {
    return unsupported(at, "a NONE pool without its accumulator from IFM2");
  }
  const bool per_channel = ((regs.p(kOfmPrecision) >> 8) & 1) == 0;
  const int storage = storage_of(regs.p(kIfm2Precision));
  if (storage == 1 || storage == 3) return unsupported(at, "a scalar or 3x1-tiled accumulator input");
  Operand acc_in;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm2, storage == 2 ? nullptr : memory, at, &acc_in.fm));
  if (storage == 2 && chains != nullptr) acc_in.chain = &(*chains)[static_cast<size_t>(acc_in.fm.region)];
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, out.fm.type, lut, &act));
  Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int oh = out.h, ow = out.w, oc = out.c;
  if (record != nullptr) *record = {at.offset, "rescale", {oh, ow, oc}, {0, 0, 0}, {oh, ow, oc}, {1, 1}, 0, 0};
  if (memory == nullptr) return Error::Ok;
  const uint8_t* scales = nullptr;
  if (per_channel) ET_CHECK_OK_OR_RETURN_ERROR(channel_records(regs, at, *memory, oc, &scales));
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      for (int c = 0; c < oc; ++c) {
        int64_t v = 0;
        ET_CHECK_OK_OR_RETURN_ERROR(read_operand(acc_in, regs, at, y, x, c, &v));
        if (scales != nullptr) add_channel_record(scales, c, (acc_format & 3) == 1, &v, &out_scale);
        const int64_t r = apply_activation(act, apply(out_scale, v, true) + out.fm.zero_point);
        if (!out.write(y, x, c, r)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  out.finish(chains);
  return Error::Ok;
}

// The AVERAGE pool's division: the window sum times the reciprocal of its element count n, as TOSA
// AVG_POOL2D defines it (reciprocal_scale: with k the bit length of n - 1, the multiplier
// ((2^30 + 1) << k) / n and the shift 30 + k, rounded half up). regor leaves the division to the NPU
// (OFM_SCALE 1, shift 0, natural rounding) and computes the same multiplier and shift itself where
// it divides with the OFM scale instead (a SUM pool over more than 8x8), so this is the NPU's
// arithmetic that regor's own stream assumes; the reference model agrees bit for bit
// (test_ethosu_simulator_u85.py, global average pools of 2x2 to 8x8, int8 and int16).
int64_t average_of(int64_t sum, int count) {
  int k = 0;
  while ((int64_t{1} << k) < count) ++k;  // the bit length of count - 1
  const int64_t multiplier = ((int64_t{1} << 30) + 1) * (int64_t{1} << k) / count;
  const int shift = 30 + k;
  return static_cast<int64_t>((static_cast<__int128>(sum) * multiplier + (__int128{1} << (shift - 1))) >> shift);
}

}  // namespace

Error run_pool(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
               const std::vector<uint8_t>& lut, OpRecord* record) {
  static const char* const kNames[] = {"pool_max", "pool_avg", "reduce_sum", "pool_sum", "", "pool_min"};
  const int mode = at.param & 7;  // 0 MAX, 1 AVERAGE, 2 REDUCE_SUM, 3 SUM, 4 NONE, 5 MIN, 6/7 ARGMAX_X/Y
  if (mode == 4) return run_rescale_pool(regs, at, memory, chains, lut, record);
  if (mode > 5) return unsupported(at, "this pooling mode (MAX, MIN, AVERAGE, SUM, REDUCE_SUM and NONE are)");
  const bool extremum = mode == 0 || mode == 5;
  // Pooling reads the IFM as stored, with no IFM scale (regor leaves IFM_SCALE as the previous
  // elementwise operation set it) and no broadcast: regor writes IFM_BROADCAST for elementwise
  // operations only, so before a pool it holds what the last of those set (a W broadcast before
  // group_norm's 1x1 SUM). A chained IFM is refused: no stream of ours chains into a pool.
  Operand in;
  if (storage_of(regs.p(kIfmPrecision)) != 0) return unsupported(at, "a chained, 3x1-tiled or scalar pooling input");
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &in.fm));
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  if ((regs.p(kIfmUpscale) & 3) != 0) return unsupported(at, "IFM upscaling");
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, out.fm.type, lut, &act));
  const int acc_format = regs.p(kAccFormat);
  if ((acc_format & 3) > 1 || ((acc_format >> 4) & 7) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  const bool per_channel = ((regs.p(kOfmPrecision) >> 8) & 1) == 0;
  if (per_channel && (extremum || mode == 1)) {
    return unsupported(at, "per-channel OFM scaling on a MAX, MIN or AVERAGE pool");
  }
  Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const Kernel k = kernel_of(regs, kU85StrideHighBits);
  // An AVERAGE pool as regor writes it: the NPU's division alone. Whether the NPU counts padded
  // positions, and how it combines the division with another OFM scale or rounding, no stream of
  // ours shows (regor writes a DEPTHWISE for our padded average pools): refused, not guessed.
  if (mode == 1 && k.pad_top + k.pad_left + k.pad_bottom + k.pad_right != 0) {
    return unsupported(at, "an AVERAGE pool with padding");
  }
  if (mode == 1 && (out_scale.scale != 1 || out_scale.shift != 0 || out_scale.round != 1)) {
    return unsupported(at, "an AVERAGE pool with an OFM scale other than 1, shift 0, natural rounding");
  }
  const int oh = out.h, ow = out.w, oc = out.c;
  // REDUCE_SUM reads IFM_DEPTH channels per OFM channel 0; the other modes one per OFM channel.
  const int sum_depth = mode == 2 ? regs.p(kIfmDepthM1) + 1 : 1;
  if (mode == 2 && oc != 1) return unsupported(at, "REDUCE_SUM into more than one OFM channel");
  // The IFM extent the NPU derives from the OFM size, the kernel and the padding.
  const int ih = (oh - 1) * k.stride_y + k.eff_h - k.pad_top - k.pad_bottom;
  const int iw = (ow - 1) * k.stride_x + k.eff_w - k.pad_left - k.pad_right;
  const uint64_t reads = uint64_t(oh) * ow * oc * k.h * k.w * sum_depth;
  if (reads > (uint64_t{1} << 32)) return fail(at, "the operation is implausibly large (over 2^32 reads)");
  if (record != nullptr) {
    *record = {at.offset, kNames[mode], {oh, ow, oc}, {ih, iw, mode == 2 ? sum_depth : oc}, {0, 0, 0},
               {k.h, k.w}, reads, 0};
  }
  if (memory == nullptr) return Error::Ok;
  const uint8_t* scales = nullptr;
  if (per_channel) ET_CHECK_OK_OR_RETURN_ERROR(channel_records(regs, at, *memory, oc, &scales));
  const bool acc48 = (acc_format & 3) == 1;
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
            for (int ic = mode == 2 ? 0 : c; ic < (mode == 2 ? sum_depth : c + 1); ++ic) {
              int64_t v = 0;
              ET_CHECK_OK_OR_RETURN_ERROR(read_operand(in, regs, at, iy, ix, ic, &v));
              if (!extremum || count == 0) {
                acc = extremum ? v : acc + v;
              } else {
                acc = mode == 0 ? std::max(acc, v) : std::min(acc, v);
              }
              ++count;
            }
          }
        }
        if (scales != nullptr) add_channel_record(scales, c, acc48, &acc, &out_scale);
        if (mode == 1 && count > 0) acc = average_of(acc, count);
        const int64_t r = apply_activation(act, apply(out_scale, acc, true) + out.fm.zero_point);
        if (!out.write(oy, ox, c, r)) return fail(at, "an OFM address lies outside its (writable) region");
      }
    }
  }
  out.finish(chains);
  return Error::Ok;
}

Error run_matmul(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                 const std::vector<uint8_t>& lut, OpRecord* record) {
  if (((regs.p(kOfmPrecision) >> 8) & 1) == 0) return unsupported(at, "per-channel OFM scaling on a matmul");
  // IFM_BROADCAST and IFM2_BROADCAST are not applied: regor writes them for elementwise operations
  // only, so before a matmul they hold what the last of those set (a channel broadcast before the
  // second matmul of scaled_dot_product_attention).
  if (storage_of(regs.p(kIfmPrecision)) != 0 || storage_of(regs.p(kIfm2Precision)) != 0) {
    return unsupported(at, "a chained, 3x1-tiled or scalar matmul operand");
  }
  if ((regs.p(kIfmUpscale) & 3) != 0) return unsupported(at, "IFM upscaling");
  const int acc = regs.p(kAccFormat);
  if ((acc & 3) > 1) return fail(at, "accumulator format is not 32 or 48 bits");
  if (((acc >> 4) & 3) != 0 || ((acc >> 6) & 1) != 0) {
    return unsupported(at, "an accumulator kept from or handed to another operation");
  }
  const Kernel k = kernel_of(regs, kU85StrideHighBits);
  if (k.h != 1 || k.w != 1 || k.stride_x != 1 || k.stride_y != 1 ||
      k.pad_top + k.pad_left + k.pad_bottom + k.pad_right != 0) {
    return unsupported(at, "a matmul with a kernel other than 1x1, a stride or padding");
  }
  FeatureMap a, b;
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm, memory, at, &a));
  ET_CHECK_OK_OR_RETURN_ERROR(feature_map(regs, Which::kIfm2, memory, at, &b));
  if (a.type.bits != b.type.bits || (a.type.bits != 8 && a.type.bits != 16)) {
    return unsupported(at, "matmul operands other than two 8-bit or two 16-bit feature maps");
  }
  OfmWriter out;
  ET_CHECK_OK_OR_RETURN_ERROR(ofm_writer(regs, at, memory, chains, &out));
  if (out.h != 1) return unsupported(at, "a matmul more than one OFM row high");
  Activation act;
  ET_CHECK_OK_OR_RETURN_ERROR(activation_of(regs, at, out.fm.type, lut, &act));
  const Scale out_scale = scale_of(regs, kOfmScale, 3);
  ET_CHECK_OK_OR_RETURN_ERROR(check_scale(at, out_scale, true));
  const int m = out.w, n = out.c, depth = regs.p(kIfmDepthM1) + 1;
  const uint64_t macs = uint64_t(m) * n * depth;
  if (record != nullptr) *record = {at.offset, "matmul", {1, m, n}, {1, m, depth}, {1, n, depth}, {1, 1}, macs, 0};
  if (memory == nullptr) return Error::Ok;
  std::vector<int64_t> rhs(size_t(n) * depth);
  for (int j = 0; j < n; ++j) {
    for (int c = 0; c < depth; ++c) {
      int64_t v = 0;
      if (!b.read(0, j, c, &v)) return fail(at, "an IFM2 address lies outside its region");
      rhs[size_t(j) * depth + c] = v - b.zero_point;
    }
  }
  std::vector<int64_t> row(depth);
  for (int x = 0; x < m; ++x) {
    for (int c = 0; c < depth; ++c) {
      int64_t v = 0;
      if (!a.read(0, x, c, &v)) return fail(at, "an IFM address lies outside its region");
      row[c] = v - a.zero_point;
    }
    for (int j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int c = 0; c < depth; ++c) sum += row[c] * rhs[size_t(j) * depth + c];
      const int64_t r = apply_activation(act, apply(out_scale, sum, true) + out.fm.zero_point);
      if (!out.write(0, x, j, r)) return fail(at, "an OFM address lies outside its (writable) region");
    }
  }
  out.finish(chains);
  return Error::Ok;
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
