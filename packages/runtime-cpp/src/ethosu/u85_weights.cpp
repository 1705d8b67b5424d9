#include "ethosu/u85_weights.h"

#include <algorithm>

namespace runtime_cpp {
namespace npu {
namespace u85 {
namespace {

constexpr int kInterleave = 4;  // OFM channels fed together within a micro-block

int round_up(int v, int m) { return (v + m - 1) / m * m; }

}  // namespace

bool weight_order(const WeightLayout& l, size_t max_entries, std::vector<int64_t>* order) {
  const bool depthwise = l.traversal == Traversal::kDepthwise;
  const bool part = l.traversal == Traversal::kPartKernel;
  const bool ifm16 = l.ifm_bits == 16;
  // Depth-first ignores the kernel stride; the others split the kernel into stride phases.
  const int sx = l.traversal == Traversal::kDepthFirst ? 1 : l.stride_x;
  const int sy = l.traversal == Traversal::kDepthFirst ? 1 : l.stride_y;
  const int ifm_ublock = part ? (ifm16 && !l.sparse ? 8 : l.ifm_block_depth) : depthwise ? 1 : l.ifm_block_depth;
  const int sub_round = part ? (ifm16 || l.sparse ? 10 : 5) : depthwise ? 10 : 1;
  const int inner_step = depthwise ? 1 : l.sparse ? 16 : 8;
  const int dw_padding = (!ifm16 && l.macs <= 256) ? 0 : (l.macs <= 512 ? 2 : 6);
  const int decomp_x = 8 / l.dil_x, decomp_y = 8 / l.dil_y;
  const int ifm_blocks_end = depthwise ? 1 : l.ifm_depth;
  if ((depthwise && l.sparse) || l.ofm_block_depth <= 0 || l.ifm_block_depth <= 0 || l.ofm_ublock_depth <= 0 || sx <= 0 || sy <= 0 ||
      decomp_x <= 0 || decomp_y <= 0) {
    return false;
  }
  std::vector<int> ifm_blocks;
  for (int z = 0; z < ifm_blocks_end; z += l.ifm_block_depth) ifm_blocks.push_back(z);
  const auto emit = [&](int64_t v) {
    if (order->size() >= max_entries) return false;
    order->push_back(v);
    return true;
  };
  bool forward = false;
  for (int ofm_block = 0; ofm_block < l.ofm_depth; ofm_block += l.ofm_block_depth) {
    forward = !forward;  // the IFM blocks are walked forwards, then backwards, in turn
    const int clipped_ofm = std::min(l.ofm_block_depth, l.ofm_depth - ofm_block);
    for (size_t b = 0; b < ifm_blocks.size(); ++b) {
      const int ifm_block = ifm_blocks[forward ? b : ifm_blocks.size() - 1 - b];
      const int clipped_ifm = std::min(l.ifm_block_depth, l.ifm_depth - ifm_block);
      for (int sub_x = 0; sub_x < l.kernel_w; sub_x += decomp_x) {
        const int sub_w = std::min(l.kernel_w - sub_x, decomp_x);
        for (int sub_y = 0; sub_y < l.kernel_h; sub_y += decomp_y) {
          const int sub_h = std::min(l.kernel_h - sub_y, decomp_y);
          const int outer_end = depthwise ? 1 : clipped_ifm;
          for (int ifm_outer = 0; ifm_outer < outer_end; ifm_outer += ifm_ublock) {
            for (int ofm_outer = 0; ofm_outer < clipped_ofm; ofm_outer += l.ofm_ublock_depth) {
              int remaining = round_up(sub_w * sub_h, sub_round);
              for (int phase_y = 0; phase_y < sy; ++phase_y) {
                const int rows = (sub_h + sy - 1 - phase_y) / sy;
                for (int phase_x = 0; phase_x < sx; ++phase_x) {
                  const int cols = (sub_w + sx - 1 - phase_x) / sx;
                  for (int ky = 0; ky < rows; ++ky) {
                    for (int kx = 0; kx < cols; ++kx) {
                      const int x = ky % 2 == 0 ? kx : cols - 1 - kx;  // odd rows run backwards
                      const int wx = sub_x + phase_x + x * sx;
                      const int wy = sub_y + phase_y + ky * sy;
                      --remaining;
                      for (int ifm_inner = 0; ifm_inner < ifm_ublock; ifm_inner += inner_step) {
                        for (int ofm_z = 0; ofm_z < l.ofm_ublock_depth; ofm_z += kInterleave) {
                          for (int ofm_inner = 0; ofm_inner < kInterleave; ++ofm_inner) {
                            for (int ifm_z = 0; ifm_z < inner_step; ++ifm_z) {
                              const int i = ifm_block + ifm_outer + ifm_inner + ifm_z;
                              const int o = ofm_block + ofm_outer + ofm_inner + ofm_z;
                              const bool real = i < l.ifm_depth && o < l.ofm_depth;
                              const int64_t idx =
                                  ((int64_t{o} * l.kernel_h + wy) * l.kernel_w + wx) * l.ifm_depth + i;
                              if (!emit(real ? idx : -1)) return false;
                            }
                          }
                        }
                      }
                      if (depthwise && remaining % sub_round == 0) {
                        for (int p = 0; p < dw_padding * l.ofm_ublock_depth; ++p) {
                          if (!emit(-1)) return false;
                        }
                      }
                    }
                  }
                }
              }
              if (remaining > 0) {  // pad the sub-kernel to its rounded element count
                const int pad = (remaining + (depthwise ? dw_padding : 0)) * ifm_ublock * l.ofm_ublock_depth;
                for (int p = 0; p < pad; ++p) {
                  if (!emit(-1)) return false;
                }
              }
            }
          }
        }
      }
    }
  }
  return true;
}

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
