// Layer-range maps: "0-1=http://a:8081|http://a2:8083,2-3=http://b:8082" (inclusive
// ranges; `|` separates replicas of a range), or a single URL for every layer. A part may
// name a range of a mixture-of-experts layer's experts, "0-7/0-31=URL", or the dense MLP that
// Gemma 4 keeps beside them, "0-7/dense=URL" (PROTOCOL §12); a plain part owns both.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/layer_range.h"

namespace larql {

enum class ShardPart {
  all,      // the layers' FFN: a dense MLP, or a MoE layer's experts (and its dense MLP)
  experts,  // only the expert ids in `experts`
  dense,    // only the dense MLP beside the experts
};

struct ShardRange {
  LayerRange range;
  std::vector<std::string> urls;  // replicas, in the order given
  ShardPart part = ShardPart::all;
  LayerRange experts{0, UINT32_MAX};  // for ShardPart::experts
  bool has_experts(uint32_t e) const { return part == ShardPart::all || (part == ShardPart::experts && experts.contains(e)); }
  bool has_dense() const { return part != ShardPart::experts; }
  std::string str() const;  // "0-7", "0-7/0-31", "0-7/dense"
  bool same_part(const ShardRange& o) const {
    return range.first == o.range.first && range.last == o.range.last && part == o.part &&
           (part != ShardPart::experts || (experts.first == o.experts.first && experts.last == o.experts.last));
  }
};

// The first ids of [0, count) that none of `ranges` (inclusive, any order) covers: a
// layer's experts left without a shard. None when they are all covered.
std::optional<LayerRange> first_uncovered(std::vector<LayerRange> ranges, uint32_t count);

// Whether two parts would both serve something of a layer: their layers meet, and neither
// holds only experts where the other holds only the dense MLP or other experts.
bool parts_overlap(const ShardRange& a, const ShardRange& b);

// A bare URL (or URL|URL) maps every layer: its range is [0, UINT32_MAX] until the caller
// narrows it to the model. Overlapping or malformed parts are an error naming the part: two
// parts of common layers overlap unless one holds only experts and the other only the
// dense MLP or other experts. (Gaps among expert ranges are found once E is known.)
Result<std::vector<ShardRange>> parse_shard_spec(std::string_view spec);

}  // namespace larql
