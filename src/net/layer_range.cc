#include "net/layer_range.h"

#include <charconv>

namespace larql {

Result<LayerRange> parse_layer_range(std::string_view text) {
  auto number = [](std::string_view s, uint32_t& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && !s.empty();
  };
  LayerRange r;
  const size_t dash = text.find('-');
  const bool ok = dash == std::string_view::npos
                      ? number(text, r.first) && (r.last = r.first, true)
                      : number(text.substr(0, dash), r.first) && number(text.substr(dash + 1), r.last);
  if (!ok || r.first > r.last)
    return make_error(ErrorCode::invalid_argument,
                      "layer range '" + std::string(text) + "' is not valid: expected A-B with A ≤ B (inclusive), or A");
  return r;
}

}  // namespace larql
