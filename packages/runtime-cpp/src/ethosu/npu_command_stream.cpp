#include "ethosu/npu_command_stream.h"

#include <executorch/runtime/platform/log.h>

#include "common/tensor_io.h"
#include "ethosu/command_names.h"
#include "ethosu/u85_commands.h"

namespace runtime_cpp {
namespace npu {
namespace {

using executorch::runtime::Error;

constexpr const char* kTag = "EthosUBackend";
constexpr uint32_t kFourccCop1 = 0x31504F43;  // "COP1"
// Driver-action tags (low byte of a header word).
constexpr uint32_t kDaConfig = 0x01;
constexpr uint32_t kDaCmdStream = 0x02;
constexpr uint32_t kDaReadApb = 0x03;
constexpr uint32_t kDaDumpShram = 0x04;
constexpr uint32_t kDaNop = 0x05;

constexpr CommandName kCmd0Names[] = {
    {kOpStop, "NPU_OP_STOP"}, {kOpIrq, "NPU_OP_IRQ"}, {kOpConv, "NPU_OP_CONV"},
    {kOpDepthwise, "NPU_OP_DEPTHWISE"}, {kOpPool, "NPU_OP_POOL"},
    {kOpElementwise, "NPU_OP_ELEMENTWISE"}, {kOpDmaStart, "NPU_OP_DMA_START"},
    {kOpDmaWait, "NPU_OP_DMA_WAIT"}, {kOpKernelWait, "NPU_OP_KERNEL_WAIT"},
    {kOpPmuMask, "NPU_OP_PMU_MASK"},
    {kIfmPadTop, "NPU_SET_IFM_PAD_TOP"}, {kIfmPadLeft, "NPU_SET_IFM_PAD_LEFT"},
    {kIfmPadRight, "NPU_SET_IFM_PAD_RIGHT"}, {kIfmPadBottom, "NPU_SET_IFM_PAD_BOTTOM"},
    {kIfmDepthM1, "NPU_SET_IFM_DEPTH_M1"}, {kIfmPrecision, "NPU_SET_IFM_PRECISION"},
    {kIfmUpscale, "NPU_SET_IFM_UPSCALE"}, {kIfmZeroPoint, "NPU_SET_IFM_ZERO_POINT"},
    {kIfmWidth0M1, "NPU_SET_IFM_WIDTH0_M1"}, {kIfmHeight0M1, "NPU_SET_IFM_HEIGHT0_M1"},
    {kIfmHeight1M1, "NPU_SET_IFM_HEIGHT1_M1"}, {kIfmIbEnd, "NPU_SET_IFM_IB_END"},
    {kIfmRegion, "NPU_SET_IFM_REGION"}, {kOfmWidthM1, "NPU_SET_OFM_WIDTH_M1"},
    {kOfmHeightM1, "NPU_SET_OFM_HEIGHT_M1"}, {kOfmDepthM1, "NPU_SET_OFM_DEPTH_M1"},
    {kOfmPrecision, "NPU_SET_OFM_PRECISION"}, {kOfmBlkWidthM1, "NPU_SET_OFM_BLK_WIDTH_M1"},
    {kOfmBlkHeightM1, "NPU_SET_OFM_BLK_HEIGHT_M1"}, {kOfmBlkDepthM1, "NPU_SET_OFM_BLK_DEPTH_M1"},
    {kOfmZeroPoint, "NPU_SET_OFM_ZERO_POINT"}, {kOfmWidth0M1, "NPU_SET_OFM_WIDTH0_M1"},
    {kOfmHeight0M1, "NPU_SET_OFM_HEIGHT0_M1"}, {kOfmHeight1M1, "NPU_SET_OFM_HEIGHT1_M1"},
    {kOfmRegion, "NPU_SET_OFM_REGION"}, {kKernelWidthM1, "NPU_SET_KERNEL_WIDTH_M1"},
    {kKernelHeightM1, "NPU_SET_KERNEL_HEIGHT_M1"}, {kKernelStride, "NPU_SET_KERNEL_STRIDE"},
    {kParallelMode, "NPU_SET_PARALLEL_MODE"}, {kAccFormat, "NPU_SET_ACC_FORMAT"},
    {kActivation, "NPU_SET_ACTIVATION"}, {kActivationMin, "NPU_SET_ACTIVATION_MIN"},
    {kActivationMax, "NPU_SET_ACTIVATION_MAX"}, {kWeightRegion, "NPU_SET_WEIGHT_REGION"},
    {kScaleRegion, "NPU_SET_SCALE_REGION"}, {kAbStart, "NPU_SET_AB_START"},
    {kBlockDep, "NPU_SET_BLOCKDEP"}, {kDmaSrcRegion, "NPU_SET_DMA0_SRC_REGION"},
    {kDmaDstRegion, "NPU_SET_DMA0_DST_REGION"}, {kDmaSize0, "NPU_SET_DMA0_SIZE0"},
    {kDmaSize1, "NPU_SET_DMA0_SIZE1"}, {kIfm2Broadcast, "NPU_SET_IFM2_BROADCAST"},
    {kIfm2Scalar, "NPU_SET_IFM2_SCALAR"}, {kIfm2Precision, "NPU_SET_IFM2_PRECISION"},
    {kIfm2ZeroPoint, "NPU_SET_IFM2_ZERO_POINT"}, {kIfm2Width0M1, "NPU_SET_IFM2_WIDTH0_M1"},
    {kIfm2Height0M1, "NPU_SET_IFM2_HEIGHT0_M1"}, {kIfm2Height1M1, "NPU_SET_IFM2_HEIGHT1_M1"},
    {kIfm2IbStart, "NPU_SET_IFM2_IB_START"}, {kIfm2Region, "NPU_SET_IFM2_REGION"},
};

constexpr CommandName kCmd1Names[] = {
    {kIfmBase0, "NPU_SET_IFM_BASE0"}, {kIfmBase1, "NPU_SET_IFM_BASE1"},
    {kIfmBase2, "NPU_SET_IFM_BASE2"}, {kIfmBase3, "NPU_SET_IFM_BASE3"},
    {kIfmStrideX, "NPU_SET_IFM_STRIDE_X"}, {kIfmStrideY, "NPU_SET_IFM_STRIDE_Y"},
    {kIfmStrideC, "NPU_SET_IFM_STRIDE_C"}, {kOfmBase0, "NPU_SET_OFM_BASE0"},
    {kOfmBase1, "NPU_SET_OFM_BASE1"}, {kOfmBase2, "NPU_SET_OFM_BASE2"},
    {kOfmBase3, "NPU_SET_OFM_BASE3"}, {kOfmStrideX, "NPU_SET_OFM_STRIDE_X"},
    {kOfmStrideY, "NPU_SET_OFM_STRIDE_Y"}, {kOfmStrideC, "NPU_SET_OFM_STRIDE_C"},
    {kWeightBase, "NPU_SET_WEIGHT_BASE"}, {kWeightLength, "NPU_SET_WEIGHT_LENGTH"},
    {kScaleBase, "NPU_SET_SCALE_BASE"}, {kScaleLength, "NPU_SET_SCALE_LENGTH"},
    {kOfmScale, "NPU_SET_OFM_SCALE"}, {kOpaScale, "NPU_SET_OPA_SCALE"},
    {kOpbScale, "NPU_SET_OPB_SCALE"}, {kDmaSrc, "NPU_SET_DMA0_SRC"}, {kDmaDst, "NPU_SET_DMA0_DST"},
    {kDmaLen, "NPU_SET_DMA0_LEN"}, {kDmaSkip0, "NPU_SET_DMA0_SKIP0"},
    {kDmaSkip1, "NPU_SET_DMA0_SKIP1"}, {kIfm2Base0, "NPU_SET_IFM2_BASE0"},
    {kIfm2Base1, "NPU_SET_IFM2_BASE1"}, {kIfm2Base2, "NPU_SET_IFM2_BASE2"},
    {kIfm2Base3, "NPU_SET_IFM2_BASE3"}, {kIfm2StrideX, "NPU_SET_IFM2_STRIDE_X"},
    {kIfm2StrideY, "NPU_SET_IFM2_STRIDE_Y"}, {kIfm2StrideC, "NPU_SET_IFM2_STRIDE_C"},
    {kWeight1Base, "NPU_SET_WEIGHT1_BASE"}, {kWeight1Length, "NPU_SET_WEIGHT1_LENGTH"},
    {kScale1Base, "NPU_SET_SCALE1_BASE"}, {kScale1Length, "NPU_SET_SCALE1_LENGTH"},
};

}  // namespace

const char* command_name(uint16_t code, bool is_cmd1) {
  const char* name = is_cmd1 ? find_name(kCmd1Names, code) : find_name(kCmd0Names, code);
  return name != nullptr ? name : "unknown command";
}

bool is_known_command(uint16_t code, bool is_cmd1) {
  return (is_cmd1 ? find_name(kCmd1Names, code) : find_name(kCmd0Names, code)) != nullptr;
}

Error parse_command_stream(const uint8_t* data, size_t size, CommandStream* out) {
  const size_t words = size / 4;
  if (size % 4 != 0 || words < 1 || read_u32(data) != kFourccCop1) {
    ET_LOG(Error, "%s: cmd_data does not start with the 'COP1' driver header vela writes for "
                  "Ethos-U55/U65: not an Ethos-U55/U65 command stream", kTag);
    return Error::NotSupported;
  }
  size_t w = 1;
  bool have_config = false;
  size_t stream_words = 0;
  for (;;) {
    if (w >= words) {
      ET_LOG(Error, "%s: truncated cmd_data: the driver header at offset %zu has no CmdStream tag",
             kTag, w * 4);
      return Error::InvalidProgram;
    }
    const uint32_t tag = read_u32(data + 4 * w);
    const uint32_t id = tag & 0xFF;
    if (id == kDaConfig) {
      if (w + 2 >= words) {
        ET_LOG(Error, "%s: truncated cmd_data: Config tag at offset %zu lacks its 2 words", kTag, w * 4);
        return Error::InvalidProgram;
      }
      const uint32_t cfg = read_u32(data + 4 * (w + 1));
      out->config.macs_per_cc = 1 << (cfg & 0xF);
      out->config.shram_kb = static_cast<int>((cfg >> 8) & 0xFF);
      out->config.product = static_cast<int>((cfg >> 28) & 0xF);
      have_config = true;
      w += 3;
    } else if (id == kDaNop || id == kDaDumpShram) {
      w += 1;
    } else if (id == kDaReadApb) {
      w += 1;
    } else if (id == kDaCmdStream) {
      stream_words = ((tag >> 16) & 0xFFFF) | (((tag >> 8) & 0xFF) << 16);
      w += 1;
      break;
    } else {
      ET_LOG(Error, "%s: corrupt cmd_data: unknown driver-action tag 0x%02x at offset %zu", kTag,
             static_cast<unsigned>(id), w * 4);
      return Error::InvalidProgram;
    }
  }
  if (!have_config || out->config.product < 0 || out->config.product > 2) {
    ET_LOG(Error, "%s: the command stream's CONFIG word names product %d; the host simulator runs "
                  "Ethos-U55 (0), Ethos-U65 (1) and Ethos-U85 (2) streams", kTag, out->config.product);
    return Error::NotSupported;
  }
  // Ethos-U85 streams share the word format but not the register map (u85_commands.h).
  const bool is_u85 = out->config.product == 2;
  const auto name_of = [is_u85](uint16_t code, bool cmd1) -> const char* {
    if (!is_u85) return is_known_command(code, cmd1) ? command_name(code, cmd1) : nullptr;
    return u85::command_name(code, cmd1);
  };
  if (stream_words > words - w) {
    ET_LOG(Error, "%s: truncated cmd_data: the CmdStream tag declares %zu words at offset %zu but "
                  "%zu remain", kTag, stream_words, w * 4, words - w);
    return Error::InvalidProgram;
  }
  const size_t end = w + stream_words;
  out->commands.clear();
  out->commands.reserve(stream_words);
  while (w < end) {
    const uint32_t word = read_u32(data + 4 * w);
    Command c{};
    c.offset = w * 4;
    c.code = static_cast<uint16_t>(word & 0x3FF);
    c.is_cmd1 = (word & 0x4000) != 0;
    c.param = static_cast<uint16_t>(word >> 16);
    if ((word & 0x8000) != 0 || ((word >> 10) & 0xF) != 0) {
      ET_LOG(Error, "%s: corrupt command word 0x%08x at cmd_data offset %zu (reserved bits set)",
             kTag, word, c.offset);
      return Error::InvalidProgram;
    }
    if (c.is_cmd1) {
      if (w + 1 >= end) {
        ET_LOG(Error, "%s: truncated command stream: %s at offset %zu lacks its payload word", kTag,
               name_of(c.code, true) != nullptr ? name_of(c.code, true) : "unknown command", c.offset);
        return Error::InvalidProgram;
      }
      c.data = read_u32(data + 4 * (w + 1));
      w += 2;
    } else {
      w += 1;
    }
    if (name_of(c.code, c.is_cmd1) == nullptr) {
      ET_LOG(Error, "%s: unknown %s opcode 0x%03x at cmd_data offset %zu", kTag,
             c.is_cmd1 ? "cmd1" : "cmd0", static_cast<unsigned>(c.code), c.offset);
      return Error::InvalidProgram;
    }
    out->commands.push_back(c);
  }
  return Error::Ok;
}

}  // namespace npu
}  // namespace runtime_cpp
