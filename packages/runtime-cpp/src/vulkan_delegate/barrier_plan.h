// Which dispatches need a compute-to-compute memory barrier before them.
#pragma once

#include <cstdint>
#include <vector>

#include "payload.h"

namespace vkdg {

// need[i] != 0: dispatch i touches arena bytes that a dispatch since the last barrier wrote (read after
// write, write after write), or writes bytes one of them read (write after read: the arena plan reuses
// slots). Every shader writes only its last binding (graph.py's contract, checked by the shader declarations:
// only the last binding is not `readonly`); constants are never written. Ranges are each tensor's bound
// bytes at the planned maximum size, so dynamic sizes stay covered. Independent dispatches (a decode
// step's q/k/v projections) then run without a drain between them.
std::vector<uint8_t> plan_barriers(const Program& prog);

// VKDG_ALL_BARRIERS=1: a barrier after every dispatch (the old recording, for A/B timing).
bool all_barriers_forced();

}  // namespace vkdg
