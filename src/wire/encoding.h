// The three binary value encodings of ADR-0009 and their Content-Type strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace larql::wire {

enum class Encoding { f32, f16, i8 };

inline constexpr std::string_view kContentTypeF32 = "application/x-larql-ffn";
inline constexpr std::string_view kContentTypeF16 = "application/x-larql-ffn-f16";
inline constexpr std::string_view kContentTypeI8 = "application/x-larql-ffn-i8";
inline constexpr std::string_view kContentTypeJson = "application/json";

std::string_view content_type(Encoding e);

// "f32", "f16" or "i8": the names used by --wire, metrics and stats.
std::string_view encoding_name(Encoding e);
std::optional<Encoding> encoding_from_name(std::string_view name);

// What a request's Content-Type says its body is.
enum class BodyKind { binary_f32, binary_f16, binary_i8, json, unknown };

// Parses a Content-Type header value: the media type is compared case-insensitively and
// parameters (e.g. "; charset=utf-8") are ignored.
BodyKind body_kind_from_content_type(std::string_view header_value);
std::optional<Encoding> binary_encoding(BodyKind kind);

// Bytes one value array of `rows` positions × `hidden` values takes in encoding `e`
// (i8 includes the 8-byte scale/zero_point block header per position).
// Returns nullopt when the product overflows size_t.
std::optional<size_t> values_byte_size(Encoding e, size_t rows, size_t hidden);

}  // namespace larql::wire
