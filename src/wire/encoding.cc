#include "wire/encoding.h"

#include <string>

#include "wire/text.h"

namespace larql::wire {

std::optional<Encoding> encoding_from_name(std::string_view name) {
  for (const EncodingInfo& info : kEncodings)
    if (info.name == name) return info.encoding;
  return std::nullopt;
}

std::string encoding_names() {
  std::string out;
  for (size_t i = 0; i < kEncodingCount; ++i) {
    if (i > 0) out += i + 1 == kEncodingCount ? " or " : ", ";
    out += kEncodings[i].name;
  }
  return out;
}

BodyType body_type_from_content_type(std::string_view header_value) {
  const std::string_view media = trim(header_value.substr(0, header_value.find(';')));
  for (const EncodingInfo& info : kEncodings)
    if (iequals(media, info.content_type)) return {info.encoding, false};
  return {std::nullopt, iequals(media, kContentTypeJson)};
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
    case Encoding::q8:
      if (!encoding_fits_hidden(e, hidden)) return std::nullopt;
      if (__builtin_mul_overflow(hidden / kQ8BlockValues, kQ8BlockBytes, &per_row)) return std::nullopt;
      break;
    case Encoding::i8:
      if (__builtin_add_overflow(hidden, kI8BlockHeaderBytes, &per_row)) return std::nullopt;
      break;
  }
  size_t total = 0;
  if (__builtin_mul_overflow(rows, per_row, &total)) return std::nullopt;
  return total;
}

}  // namespace larql::wire
