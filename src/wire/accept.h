// Accept-header negotiation of PROTOCOL §6 (RFC 9110 §12.5.1 media ranges and q-values).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "wire/encoding.h"

namespace larql::wire {

struct MediaRange {
  std::string type;     // lower-cased; "*" for a wildcard
  std::string subtype;  // lower-cased; "*" for a wildcard
  int q_millis = 1000;  // q-value in thousandths: q=0.5 → 500
  size_t position = 0;  // index in the header, for "first listed wins"
};

// Parses an Accept header value. Elements that are not a valid media range or carry an
// invalid q-value are skipped (a lenient reading: one bad element does not void the header).
std::vector<MediaRange> parse_accept(std::string_view header_value);

// Chooses the response encoding for an Accept value ("" when the header is absent) among
// the encodings this server offers (f32 is always possible): highest q; ties go to an
// explicitly named type over a wildcard match, then to the type listed first, and among
// wildcard-only matches to the enum order (f32 > f16 > q8 > i8). Nothing acceptable
// means f32.
Encoding negotiate_response_encoding(std::string_view accept, EncodingSet offered);

}  // namespace larql::wire
