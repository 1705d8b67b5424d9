// Opcode-to-name tables of the register maps (U55/U65 in npu_command_stream.cpp, U85 in
// u85_commands.cpp) and their lookup, shared so each map only lists its names.
#pragma once

#include <cstddef>
#include <cstdint>

namespace runtime_cpp {
namespace npu {

struct CommandName {
  uint16_t code;
  const char* name;
};

// The name of `code` in `table`, or null when the table does not define it.
template <size_t N>
const char* find_name(const CommandName (&table)[N], uint16_t code) {
  for (const CommandName& n : table) {
    if (n.code == code) return n.name;
  }
  return nullptr;
}

}  // namespace npu
}  // namespace runtime_cpp
