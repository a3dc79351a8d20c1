#include "model/utf8.h"

#include <array>
#include <unordered_map>

namespace larql::utf8 {

namespace {

bool valid_at(std::string_view s, size_t i, size_t len) {
  if (i + len > s.size()) return false;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (len == 1) return b0 < 0x80;
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  return cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);  // no overlongs, no surrogates
}

struct ByteLevelTables {
  std::array<std::string, 256> to_char;
  std::unordered_map<std::string, uint8_t> to_byte;
  ByteLevelTables() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[b] = encode(printable ? uint32_t(b) : next++);
      to_byte[to_char[b]] = uint8_t(b);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

std::vector<std::string> characters(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = sequence_length(static_cast<unsigned char>(s[i]));
    if (!valid_at(s, i, len)) len = 1;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

std::string lossy(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = sequence_length(static_cast<unsigned char>(s[i]));
    if (valid_at(s, i, len)) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    // One U+FFFD for the longest prefix of a valid sequence (Rust's maximal-subpart rule).
    size_t bad = 1;
    while (bad < len && i + bad < s.size() && (static_cast<unsigned char>(s[i + bad]) & 0xC0) == 0x80) ++bad;
    if (len == 1) bad = 1;
    out.append(kReplacementChar);
    i += bad;
  }
  return out;
}

const std::string& byte_to_char(uint8_t b) { return tables().to_char[b]; }

bool char_to_byte(std::string_view c, uint8_t* b) {
  auto it = tables().to_byte.find(std::string(c));
  if (it == tables().to_byte.end()) return false;
  *b = it->second;
  return true;
}

}  // namespace larql::utf8
