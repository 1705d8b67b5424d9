// The order in which an Ethos-U85 consumes one kick-off's decoded weights (regor's "standard"
// weight stream, WEIGHT_FORMAT SWD without sparsity, one weight decoder as on ethos-u85-128/256).
// With 2:4 sparsity (WEIGHT_FORMAT bit 4; regor picks it whenever the weights allow) the stream
// still carries every weight, zeros included, 16 IFM channels per micro-block step.
// Written from the traversal the hardware defines and regor's U85 weight encoder follows: OFM
// blocks, IFM blocks in alternating (ping-pong) direction, 8x8 sub-kernels column by column,
// IFM and OFM micro-blocks, the kernel split into its stride phases with every other row walked
// backwards, interleaved four OFM channels deep; part-kernel-first and depthwise traversals pad
// each sub-kernel to a multiple of 5 or 10 elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace runtime_cpp {
namespace npu {
namespace u85 {

enum class Traversal { kDepthFirst, kPartKernel, kDepthwise };

struct WeightLayout {
  Traversal traversal = Traversal::kDepthFirst;
  int ofm_depth = 0;
  int ifm_depth = 0;  // the weights' input depth: 1 for depthwise
  int kernel_h = 0, kernel_w = 0;  // undilated
  int stride_x = 1, stride_y = 1, dil_x = 1, dil_y = 1;
  int ofm_block_depth = 0;   // OFM_BLK_DEPTH_M1 + 1
  int ifm_block_depth = 0;   // fixed by the traversal, precision and micro-block
  int ofm_ublock_depth = 0;  // from ACC_FORMAT's micro-block and the MAC count
  int ifm_bits = 8;
  int macs = 256;
  bool sparse = false;  // 2:4 sparse (not with depthwise)
};

// Appends, per stream position, the OHWI index ((o * kernel_h + y) * kernel_w + x) * ifm_depth + i
// of the weight it carries, or -1 for the zero padding. False (nothing usable) when the traversal
// would exceed `max_entries`, as only a corrupt register set asks for that many.
bool weight_order(const WeightLayout& layout, size_t max_entries, std::vector<int64_t>* order);

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
