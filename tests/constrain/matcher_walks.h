// Walks through a JsonMatcher's grammar that the matcher tests share: closing a value by the
// shortest way, one byte at a time, and random values.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "constrain/json_matcher.h"

namespace larql::test {

// Feeds m bytes that each bring bytes_to_close() down by exactly one until the value closes
// (or, for a value that could still grow, is complete); returns them, or nothing when at
// some point no byte does (bytes_to_close was not exact).
inline std::optional<std::string> close_step_by_step(JsonMatcher& m) {
  std::string closing;
  for (size_t left = m.bytes_to_close(); !m.closed() && left > 0; --left) {
    bool stepped = false;
    for (int b = 0; b < 256 && !stepped; ++b) {
      JsonMatcher next = m;
      if (next.feed(uint8_t(b)) && next.bytes_to_close() == left - 1) {
        m = next;
        closing += char(b);
        stepped = true;
      }
    }
    if (!stepped) return std::nullopt;
  }
  return closing;
}

// Up to `steps` bytes of `alphabet` that the matcher takes, each drawn by rng among those it
// takes, then the shortest close; nothing when it gets stuck.
inline std::optional<std::string> random_value(const JsonGrammar& g, std::mt19937& rng, std::string_view alphabet, int steps) {
  JsonMatcher m(g);
  std::string text;
  for (int s = 0; s < steps && !m.closed(); ++s) {
    std::string options;
    for (char c : alphabet)
      if (JsonMatcher(m).feed(uint8_t(c))) options += c;
    if (options.empty()) return std::nullopt;
    const char c = options[rng() % options.size()];
    m.feed(uint8_t(c));
    text += c;
  }
  auto closing = close_step_by_step(m);
  if (!closing || !m.closed()) return std::nullopt;
  return text + *closing;
}

}  // namespace larql::test
