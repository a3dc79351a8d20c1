// Inclusive layer ranges ("0-7", "5") as used by --layers, --ffn maps and the router.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/errors.h"

namespace larql {

struct LayerRange {
  uint32_t first = 0;
  uint32_t last = 0;  // inclusive
  bool contains(uint32_t layer) const { return layer >= first && layer <= last; }
  std::string str() const { return std::to_string(first) + "-" + std::to_string(last); }
};

// "A-B" or "A"; A ≤ B. The error names the text.
Result<LayerRange> parse_layer_range(std::string_view text);

}  // namespace larql
