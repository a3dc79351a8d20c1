// The binary value encodings (ADR-0009's f32, f16 and i8, and PROTOCOL §11's q8): one
// table of their names and Content-Types, the set type servers and clients offer them
// in, and the size of a value array in each. Adding an encoding is one enum value, one
// table row and the compiler errors of every exhaustive switch over Encoding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

namespace larql::wire {

// Declaration order is the rank among types an Accept header matches only by wildcard
// (PROTOCOL §6, §11): f32 > f16 > q8 > i8.
enum class Encoding : uint8_t { f32, f16, q8, i8 };

struct EncodingInfo {
  Encoding encoding;
  std::string_view name;          // --wire, /metrics labels, the /v1/stats "wire" lists
  std::string_view content_type;  // the media type of a body in this encoding
  bool scaled_integers;           // 8-bit integers and a scale: a value's error follows its block's (or row's) largest
};

inline constexpr std::array<EncodingInfo, 4> kEncodings{{
    {Encoding::f32, "f32", "application/x-larql-ffn", false},
    {Encoding::f16, "f16", "application/x-larql-ffn-f16", false},
    {Encoding::q8, "q8", "application/x-larql-ffn-q8", true},
    {Encoding::i8, "i8", "application/x-larql-ffn-i8", true},
}};
inline constexpr size_t kEncodingCount = kEncodings.size();

constexpr const EncodingInfo& encoding_info(Encoding e) { return kEncodings[static_cast<size_t>(e)]; }
constexpr bool table_is_in_enum_order() {
  for (size_t i = 0; i < kEncodingCount; ++i)
    if (static_cast<size_t>(kEncodings[i].encoding) != i) return false;
  return true;
}
static_assert(table_is_in_enum_order(), "kEncodings must list the encodings in enum order");

inline constexpr std::string_view kContentTypeJson = "application/json";

constexpr std::string_view content_type(Encoding e) { return encoding_info(e).content_type; }
constexpr std::string_view encoding_name(Encoding e) { return encoding_info(e).name; }
std::optional<Encoding> encoding_from_name(std::string_view name);
// "f32, f16, q8 or i8": for messages that say what was expected.
std::string encoding_names();

// A set of encodings (what a server offers, what a shard lists).
class EncodingSet {
 public:
  constexpr EncodingSet() = default;
  constexpr EncodingSet(std::initializer_list<Encoding> list) {
    for (Encoding e : list) insert(e);
  }
  constexpr bool contains(Encoding e) const { return bits_ & bit(e); }
  constexpr void insert(Encoding e) { bits_ |= bit(e); }
  constexpr void erase(Encoding e) { bits_ &= uint8_t(~bit(e)); }
  constexpr bool operator==(const EncodingSet&) const = default;
  // The members in table order (the order /v1/stats and start-up lines list them).
  std::vector<Encoding> members() const {
    std::vector<Encoding> out;
    for (const EncodingInfo& info : kEncodings)
      if (contains(info.encoding)) out.push_back(info.encoding);
    return out;
  }

 private:
  static constexpr uint8_t bit(Encoding e) { return uint8_t(1u << static_cast<unsigned>(e)); }
  uint8_t bits_ = 0;
};

// What a Content-Type header value says a body is: one of the binary encodings, JSON, or
// neither. The media type is compared case-insensitively; parameters are ignored.
struct BodyType {
  std::optional<Encoding> binary;
  bool json = false;
};
BodyType body_type_from_content_type(std::string_view header_value);

// q8 (PROTOCOL §11): each position is hidden/32 blocks of [d f16][q i8 × 32].
inline constexpr size_t kQ8BlockValues = 32;
inline constexpr size_t kQ8BlockBytes = 2 + kQ8BlockValues;
// i8 (PROTOCOL §5): each position is one block [scale f32][zero_point f32][q i8 × hidden].
inline constexpr size_t kI8BlockHeaderBytes = 8;

// Whether `hidden` values per position can be sent in encoding `e` at all (q8 needs whole
// blocks).
constexpr bool encoding_fits_hidden(Encoding e, size_t hidden) {
  return e != Encoding::q8 || hidden % kQ8BlockValues == 0;
}

// Bytes one value array of `rows` positions × `hidden` values takes in encoding `e`.
// nullopt when the product overflows size_t or `e` cannot carry `hidden` values.
std::optional<size_t> values_byte_size(Encoding e, size_t rows, size_t hidden);

}  // namespace larql::wire
