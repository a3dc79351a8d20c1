// Any text as a --shards / --ffn layer map: never crashes; an accepted map has valid,
// non-overlapping ranges, each with at least one http(s) URL.
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
    for (size_t j = 0; j < i; ++j)
      larql::fuzz::check(part.range.last < (*spec)[j].range.first || (*spec)[j].range.last < part.range.first);
  }
  auto range = larql::parse_layer_range(text);
  if (range) larql::fuzz::check(range->first <= range->last);
  return 0;
}
