// Any text as a --shards / --ffn layer map: never crashes; an accepted map has valid ranges,
// each with at least one http(s) URL, and two parts of common layers serve apart things
// (experts and the dense MLP, or disjoint expert ranges).
#include <string_view>

#include "fuzz_common.h"
#include "net/shard_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = larql::parse_shard_spec(text);
  if (!spec) {
    larql::fuzz::check(!spec.error().message.empty());
    return 0;
  }
  for (size_t i = 0; i < spec->size(); ++i) {
    const auto& part = (*spec)[i];
    larql::fuzz::check(part.range.first <= part.range.last && !part.urls.empty());
    for (const auto& url : part.urls) larql::fuzz::check(url.starts_with("http://") || url.starts_with("https://"));
    if (part.part == larql::ShardPart::experts) larql::fuzz::check(part.experts.first <= part.experts.last);
    // Written out again here (not parts_overlap, which the parser uses): parts of common
    // layers hold experts beside the dense MLP, or disjoint expert ranges.
    for (size_t j = 0; j < i; ++j) {
      const auto& other = (*spec)[j];
      if (part.range.last < other.range.first || other.range.last < part.range.first) continue;
      using larql::ShardPart;
      const bool experts_and_dense = (part.part == ShardPart::experts && other.part == ShardPart::dense) ||
                                     (part.part == ShardPart::dense && other.part == ShardPart::experts);
      const bool disjoint_experts = part.part == ShardPart::experts && other.part == ShardPart::experts &&
                                    (part.experts.last < other.experts.first || other.experts.last < part.experts.first);
      larql::fuzz::check(experts_and_dense || disjoint_experts);
    }
  }
  auto range = larql::parse_layer_range(text);
  if (range) larql::fuzz::check(range->first <= range->last);
  return 0;
}
