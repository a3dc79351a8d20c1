// Layer-range maps: "0-1=http://a:8081|http://a2:8083,2-3=http://b:8082" (inclusive
// ranges; `|` separates replicas of a range), or a single URL for every layer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/layer_range.h"

namespace larql {

struct ShardRange {
  LayerRange range;
  std::vector<std::string> urls;  // replicas, in the order given
};

// A bare URL (or URL|URL) maps every layer: its range is [0, UINT32_MAX] until the caller
// narrows it to the model. Overlapping or malformed parts are an error naming the part.
Result<std::vector<ShardRange>> parse_shard_spec(std::string_view spec);

}  // namespace larql
