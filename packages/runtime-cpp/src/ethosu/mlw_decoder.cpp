#include "ethosu/mlw_decoder.h"

#include <algorithm>
#include <array>

namespace runtime_cpp {
namespace npu {
namespace {

constexpr int kZdivDisable = 6;  // no zero runs in this slice
constexpr int kZdivEos = 7;      // end of stream
constexpr int kWdivUncompressed = 7;
constexpr int kChunk = 12;       // symbols per unary chunk

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), bits_(size * 8) {}
  // Reads `n` (<= 32) bits LSB first; false past the end.
  bool get(int n, uint32_t* value) {
    if (n < 0 || static_cast<size_t>(n) > bits_ - pos_) return false;
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      v |= static_cast<uint32_t>((data_[pos_ >> 3] >> (pos_ & 7)) & 1) << i;
    }
    *value = v;
    return true;
  }
  size_t pos() const { return pos_; }
  size_t bits() const { return bits_; }

 private:
  const uint8_t* data_;
  size_t bits_;
  size_t pos_ = 0;
};

// One slice's Golomb-Rice stream state: symbols of a chunk are read as unary prefixes first and
// their remainders one chunk later (the format interleaves weight and zero-run chunks).
struct GrcState {
  std::array<int, kChunk> q{};
  std::array<int, kChunk> prev_q{};
  int nsymbols = 0;
  int prev_nsymbols = 0;
  int carry = 0;
  bool enabled = false;
  bool prev_enabled = false;
  int pos = 0;       // symbols whose prefix has been read
  int prev_pos = 0;  // symbols fully decoded
};

}  // namespace

bool mlw_decode(const uint8_t* data, size_t size, size_t max_values, std::vector<int16_t>* out,
                const char** error) {
  BitReader bb(data, size);
  std::array<int16_t, 32> palette{};
  int palsize = 0, palbits = 0, direct_offset = 0;
  bool first = true;
  int prev_zdiv = kZdivDisable;
  std::vector<int> w_value, z_value;
#define MLW_GET(n, var)                     \
  do {                                      \
    uint32_t tmp_;                          \
    if (!bb.get((n), &tmp_)) {              \
      *error = "truncated weight stream";   \
      return false;                         \
    }                                       \
    (var) = static_cast<int>(tmp_);         \
  } while (0)

  for (;;) {
    int zdiv;
    MLW_GET(3, zdiv);
    bool at_end = false;
    while (zdiv == kZdivEos) {
      int pad;
      MLW_GET(static_cast<int>((8 - (bb.pos() & 7)) & 7), pad);
      (void)pad;
      first = true;
      if (bb.pos() == bb.bits()) {
        at_end = true;
        break;
      }
      MLW_GET(3, zdiv);
    }
    if (at_end || bb.pos() == bb.bits()) break;
    if (zdiv > 3 && zdiv != kZdivDisable) {
      *error = "bad zero-run divisor in slice header";
      return false;
    }
    const bool use_zero_run = zdiv != kZdivDisable;
    int nvalues, wdiv, wtrunc, new_palette;
    MLW_GET(15, nvalues);
    nvalues += 1;
    MLW_GET(3, wdiv);
    MLW_GET(1, wtrunc);
    MLW_GET(1, new_palette);
    if (first && !new_palette) {
      *error = "first slice of a stream has no palette header";
      return false;
    }
    first = false;
    if (!new_palette && use_zero_run != (prev_zdiv != kZdivDisable)) {
      *error = "slice changes zero-run mode without a new palette";
      return false;
    }
    prev_zdiv = zdiv;
    if (new_palette) {
      MLW_GET(5, direct_offset);
      MLW_GET(5, palsize);
      if (palsize > 0) palsize++;
      MLW_GET(3, palbits);
      palbits += 2;
      for (int i = 0; i < palsize; ++i) {
        int v;
        MLW_GET(palbits, v);
        palette[static_cast<size_t>(i)] = static_cast<int16_t>(v);
      }
    }
    bool uncompressed = false;
    if (wdiv == kWdivUncompressed) {
      uncompressed = true;
      int bits = 0;
      if (palsize > 0) {
        while ((1 << bits) < palsize) bits++;
      } else {
        bits = palbits;
      }
      wdiv = bits;
    } else if (wdiv > 5) {
      *error = "bad weight divisor in slice header";
      return false;
    }
    const int z_nvalues = nvalues + (new_palette ? 1 : 0);
    w_value.assign(static_cast<size_t>(nvalues), 0);
    z_value.assign(static_cast<size_t>(z_nvalues), 0);
    GrcState w, z;
    const int z_unary_len = zdiv < 3 ? 12 : 8;
    long long total_zeros = 0;
    do {
      const int balance = use_zero_run ? w.pos - z.pos : 0;
      w.enabled = (balance < 8 || !use_zero_run) && w.pos < nvalues;
      z.enabled = balance >= 0 && use_zero_run && z.pos < z_nvalues;
      int w_unary0 = 0;
      if (w.enabled && !uncompressed) MLW_GET(12, w_unary0);
      if (z.enabled) {
        int z_unary;
        MLW_GET(z_unary_len, z_unary);
        z.nsymbols = 0;
        int cnt = z.carry;
        for (int i = 0; i < z_unary_len; ++i) {
          if (z_unary & (1 << i)) {
            cnt++;
          } else {
            z.q[static_cast<size_t>(z.nsymbols++)] = cnt;
            cnt = 0;
          }
        }
        z.carry = cnt;
        z.pos += z.nsymbols;
      }
      if (w.enabled) {
        const int max_symbols = uncompressed && wdiv > 5 ? 8 : 12;
        int unary1_len = 0;
        for (int i = 0; i < max_symbols; ++i) unary1_len += (w_unary0 >> i) & 1;
        int w_unary1;
        MLW_GET(unary1_len, w_unary1);
        w.nsymbols = 0;
        int cnt = w.carry;
        for (int i = 0; i < max_symbols; ++i) {
          int code = 0;
          if (w_unary0 & (1 << i)) {
            code++;
            if (w_unary1 & 1) code++;
            w_unary1 >>= 1;
          }
          cnt += code;
          if (code < 2 || wtrunc) {
            w.q[static_cast<size_t>(w.nsymbols++)] = cnt;
            cnt = 0;
          }
        }
        w.carry = cnt;
        w.pos += w.nsymbols;
      }
      if (w.prev_enabled) {
        for (int i = 0; i < w.prev_nsymbols && w.prev_pos < nvalues; ++i, ++w.prev_pos) {
          int remain;
          MLW_GET(wdiv, remain);
          if (w.prev_q[static_cast<size_t>(i)] > (1 << 20)) {
            *error = "weight symbol out of range";
            return false;
          }
          w_value[static_cast<size_t>(w.prev_pos)] = (w.prev_q[static_cast<size_t>(i)] << wdiv) + remain;
        }
      }
      if (z.prev_enabled) {
        for (int i = 0; i < z.prev_nsymbols && z.prev_pos < z_nvalues; ++i, ++z.prev_pos) {
          int remain;
          MLW_GET(zdiv, remain);
          if (z.prev_q[static_cast<size_t>(i)] > (1 << 20)) {
            *error = "zero-run symbol out of range";
            return false;
          }
          const int v = (z.prev_q[static_cast<size_t>(i)] << zdiv) + remain;
          z_value[static_cast<size_t>(z.prev_pos)] = v;
          total_zeros += v;
        }
      }
      w.prev_enabled = w.enabled;
      w.prev_nsymbols = w.nsymbols;
      w.prev_q = w.q;
      z.prev_enabled = z.enabled;
      z.prev_nsymbols = z.nsymbols;
      z.prev_q = z.q;
    } while (w.prev_enabled || z.prev_enabled);

    if (out->size() + static_cast<size_t>(nvalues) + static_cast<size_t>(total_zeros) > max_values) {
      *error = "weight stream decodes to more weights than the operation uses";
      return false;
    }
    if (new_palette && use_zero_run) out->insert(out->end(), static_cast<size_t>(z_value[0]), 0);
    for (int i = 0; i < nvalues; ++i) {
      const int idx = w_value[static_cast<size_t>(i)];
      if (idx >= 512) {
        *error = "weight index beyond the 9-bit range";
        return false;
      }
      const int val = idx < palsize ? palette[static_cast<size_t>(idx)] : idx - palsize + direct_offset;
      const int mag = val >> 1;
      out->push_back(static_cast<int16_t>((val & 1) ? -mag : mag));
      if (use_zero_run) {
        out->insert(out->end(), static_cast<size_t>(z_value[static_cast<size_t>(i + (new_palette ? 1 : 0))]), 0);
      }
    }
  }
#undef MLW_GET
  return true;
}

bool fwd_decode(const uint8_t* data, size_t size, size_t count, std::vector<int16_t>* out, const char** error) {
  constexpr size_t kHeaderBytes = 32, kAlign = 32;
  constexpr int kTableEntries = 16;
  BitReader bb(data, size);
  uint32_t raw = 0, small_table = 0, unused = 0, adjust = 0;
  if (size < kHeaderBytes || !bb.get(1, &raw) || !bb.get(1, &small_table)) {
    *error = "a fast-format (FWD) weight stream shorter than its 32-byte header";
    return false;
  }
  for (int skipped = 0; skipped < 102; skipped += 32) bb.get(std::min(32, 102 - skipped), &unused);
  bb.get(8, &adjust);
  std::array<int16_t, kTableEntries> table{};
  for (int16_t& entry : table) {
    uint32_t folded = 0;
    bb.get(9, &folded);
    const int mag = static_cast<int>(folded >> 1);
    entry = static_cast<int16_t>((folded & 1) ? -mag : mag);
  }
  if (raw && small_table) {
    *error = "a fast-format (FWD) weight header sets both raw mode and the small table";
    return false;
  }
  const int bits = raw ? 8 : small_table ? 2 : 4;
  const size_t body = (count * size_t(bits) + 7) / 8;
  if (size != kHeaderBytes + (body + kAlign - 1) / kAlign * kAlign) {
    *error = "a fast-format (FWD) weight stream whose length is not one section of the operation's weights";
    return false;
  }
  const int zero_adjust = static_cast<int8_t>(adjust);
  out->reserve(out->size() + count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t code = 0;
    bb.get(bits, &code);
    if (raw) {
      out->push_back(static_cast<int16_t>(static_cast<int8_t>(code) - zero_adjust));
    } else {
      out->push_back(table[code]);
    }
  }
  return true;
}

}  // namespace npu
}  // namespace runtime_cpp
