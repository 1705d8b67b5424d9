// Decoder of the Ethos-U55/U65 compressed weight stream ("mlw" format): slices of Golomb-Rice
// coded weight indices, optionally alternating with zero-run lengths, with a per-slice palette or
// direct sign/magnitude values; a ZDIV of 7 ends the stream (then byte alignment and padding).
// Written from the format as vela's mlw_codec documents it; every bit read is bounds-checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace runtime_cpp {
namespace npu {

// Decodes `size` bytes into 9-bit signed weights (appended to `out`). Returns false and sets
// `*error` (a static string) on a malformed or truncated stream. `max_values` caps the output so
// that a corrupt stream cannot request unbounded memory.
bool mlw_decode(const uint8_t* data, size_t size, size_t max_values, std::vector<int16_t>* out,
                const char** error);

}  // namespace npu
}  // namespace runtime_cpp
