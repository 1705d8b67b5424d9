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

// Decoder of the Ethos-U85 fast weight format (WEIGHT_FORMAT bit 0, "FWD"): a 256-bit header (bit 0
// raw mode, bit 1 a 4-entry table, bits 104-111 a signed zero adjustment, bits 112-255 sixteen
// 9-bit table entries, each |w| << 1 | sign), then one code per weight: a 2-bit table index, a
// 4-bit table index, or in raw mode a byte holding the int8 weight plus the zero adjustment; the
// stream is padded to 32 bytes. The header does not say how many weights follow, so the caller
// gives `count`; false (with `*error`) when `size` is not exactly that one section, so that a
// stream of several sections, or a truncated one, is never read as one.
bool fwd_decode(const uint8_t* data, size_t size, size_t count, std::vector<int16_t>* out, const char** error);

}  // namespace npu
}  // namespace runtime_cpp
