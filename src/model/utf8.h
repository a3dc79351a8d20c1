// UTF-8 helpers for tokenizers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace larql::utf8 {

// Length of the UTF-8 sequence starting with byte `lead` (1 for a stray continuation byte).
inline size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Splits into code points (an invalid or truncated sequence becomes single bytes).
std::vector<std::string> characters(std::string_view s);

std::string encode(uint32_t code_point);

// Replaces every invalid sequence with U+FFFD, as Rust's from_utf8_lossy does.
std::string lossy(std::string_view bytes);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// GPT-2's byte-level alphabet: every byte maps to a printable code point.
const std::string& byte_to_char(uint8_t b);
// The inverse; false when `c` is not one of the 256 byte-level characters.
bool char_to_byte(std::string_view c, uint8_t* b);

}  // namespace larql::utf8
