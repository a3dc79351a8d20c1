#include "wire/encoding.h"

#include "wire/text.h"

namespace larql::wire {

std::string_view content_type(Encoding e) {
  switch (e) {
    case Encoding::f32: return kContentTypeF32;
    case Encoding::f16: return kContentTypeF16;
    case Encoding::i8: return kContentTypeI8;
  }
  return kContentTypeF32;
}

std::string_view encoding_name(Encoding e) {
  switch (e) {
    case Encoding::f32: return "f32";
    case Encoding::f16: return "f16";
    case Encoding::i8: return "i8";
  }
  return "f32";
}

std::optional<Encoding> encoding_from_name(std::string_view name) {
  if (name == "f32") return Encoding::f32;
  if (name == "f16") return Encoding::f16;
  if (name == "i8") return Encoding::i8;
  return std::nullopt;
}

BodyKind body_kind_from_content_type(std::string_view header_value) {
  std::string_view media = trim(header_value.substr(0, header_value.find(';')));
  if (iequals(media, kContentTypeF32)) return BodyKind::binary_f32;
  if (iequals(media, kContentTypeF16)) return BodyKind::binary_f16;
  if (iequals(media, kContentTypeI8)) return BodyKind::binary_i8;
  if (iequals(media, kContentTypeJson)) return BodyKind::json;
  return BodyKind::unknown;
}

std::optional<Encoding> binary_encoding(BodyKind kind) {
  switch (kind) {
    case BodyKind::binary_f32: return Encoding::f32;
    case BodyKind::binary_f16: return Encoding::f16;
    case BodyKind::binary_i8: return Encoding::i8;
    default: return std::nullopt;
  }
}

std::optional<size_t> values_byte_size(Encoding e, size_t rows, size_t hidden) {
  size_t per_row = 0;
  switch (e) {
    case Encoding::f32:
      if (__builtin_mul_overflow(hidden, size_t{4}, &per_row)) return std::nullopt;
      break;
    case Encoding::f16:
      if (__builtin_mul_overflow(hidden, size_t{2}, &per_row)) return std::nullopt;
      break;
    case Encoding::i8:
      if (__builtin_add_overflow(hidden, size_t{8}, &per_row)) return std::nullopt;
      break;
  }
  size_t total = 0;
  if (__builtin_mul_overflow(rows, per_row, &total)) return std::nullopt;
  return total;
}

}  // namespace larql::wire
