// The Ethos-U85's NPU_OP_POOL kick-offs, and regor's MATMUL (an NPU_OP_CONV with its weights from
// IFM2), on the shared kick-off state of u85_operands.h.
#pragma once

#include <vector>

#include <executorch/runtime/core/error.h>

#include "ethosu/u85_operands.h"

namespace runtime_cpp {
namespace npu {
namespace u85 {

// NPU_OP_POOL in MAX, MIN, AVERAGE, SUM or REDUCE_SUM mode over an NHWC or NHCWB16 IFM with
// padding (padded positions are skipped, as TOSA's MAX_POOL2D does), with a global OFM scale or a
// per-channel bias and scale from the scale stream (regor's rescales and its NCHW-to-NHWC copies: a
// 1x1 SUM into a transposed OFM), into memory or a chain buffer. REDUCE_SUM adds all IFM channels of
// a position into OFM channel 0 (regor's mean: a REDUCE_SUM into a 32-bit chain buffer, then an
// elementwise SUB of the zero points' sum with the OFM scale as the division). AVERAGE divides the
// window sum by its element count on the NPU itself (regor writes it for an AVG_POOL2D of at most
// 8x8, with OFM_SCALE 1, shift 0 and natural rounding; a larger one becomes a SUM whose OFM scale
// divides): see `average_of`. NONE goes to run_rescale_pool; ARGMAX is refused.
Error run_pool(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
               const std::vector<uint8_t>& lut, OpRecord* record);

// NPU_OP_CONV with its weights from IFM2 (param bit 0): regor's MATMUL, A [M, K] @ B [K, N] per batch.
// The IFM holds A's M rows along W with K channels; IFM2 holds B transposed, its N columns along W
// with K channels (regor first transposes B with a 1x1 SUM pool into an HCW OFM); the OFM is the
// M x N product along W and C. Both operands less their zero points, no bias, the global OFM scale,
// the clamp. regor writes one kick-off per batch, each one OFM row high; more rows (whether the NPU
// pairs OFM row y with IFM2 row y or row 0 is not shown by any stream), a kernel other than 1x1,
// padding, chained or upscaled operands are refused; the broadcast registers are not applied (regor
// writes them for elementwise operations only).
Error run_matmul(const Registers& regs, const Command& at, const Memory* memory, Chains* chains,
                 const std::vector<uint8_t>& lut, OpRecord* record);

}  // namespace u85
}  // namespace npu
}  // namespace runtime_cpp
