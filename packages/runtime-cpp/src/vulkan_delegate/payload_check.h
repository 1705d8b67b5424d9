// Load-time checks of a Vulkan delegate payload that no shader can make for itself: op codes inside their
// tables (opcodes.h) and fused elementwise programs (ewise_expr) that fit the shader.
#pragma once

#include <executorch/runtime/core/error.h>

#include "payload.h"

namespace vkdg {

// Every dispatch of a shader that picks its function by an op code gives a static code inside that
// shader's table, and every ewise_expr program is well formed; otherwise Error::InvalidProgram, logged.
executorch::runtime::Error check_op_codes(const Program& prog);

}  // namespace vkdg
