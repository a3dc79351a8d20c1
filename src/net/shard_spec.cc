#include "net/shard_spec.h"

#include <algorithm>
#include <limits>

namespace larql {
namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

Result<std::vector<std::string>> parse_urls(std::string_view text, std::string_view part) {
  auto urls = split(text, '|');
  for (const auto& u : urls)
    if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0)
      return make_error(ErrorCode::invalid_argument, "shard '" + u + "' in '" + std::string(part) +
                                                         "' is not a URL: expected http://HOST:PORT or https://HOST:PORT");
  return urls;
}

}  // namespace

std::string ShardRange::str() const {
  switch (part) {
    case ShardPart::all: return range.str();
    case ShardPart::experts: return range.str() + "/" + experts.str();
    case ShardPart::dense: return range.str() + "/dense";
  }
  return range.str();
}

std::optional<LayerRange> first_uncovered(std::vector<LayerRange> ranges, uint32_t count) {
  std::sort(ranges.begin(), ranges.end(), [](const LayerRange& a, const LayerRange& b) { return a.first < b.first; });
  uint32_t next = 0;  // covered below this id
  for (const LayerRange& r : ranges) {
    if (r.first > next) return LayerRange{next, std::min(r.first, count) - 1};
    if (r.last >= count - 1) return std::nullopt;
    next = std::max(next, r.last + 1);
  }
  if (next < count) return LayerRange{next, count - 1};
  return std::nullopt;
}

bool parts_overlap(const ShardRange& a, const ShardRange& b) {
  if (a.range.first > b.range.last || b.range.first > a.range.last) return false;
  const bool apart = (a.part == ShardPart::experts && b.part == ShardPart::dense) ||
                     (a.part == ShardPart::dense && b.part == ShardPart::experts) ||
                     (a.part == ShardPart::experts && b.part == ShardPart::experts &&
                      (a.experts.first > b.experts.last || b.experts.first > a.experts.last));
  return !apart;
}

Result<std::vector<ShardRange>> parse_shard_spec(std::string_view spec) {
  std::vector<ShardRange> out;
  if (spec.empty()) return make_error(ErrorCode::invalid_argument, "the shard map is empty");
  const bool is_map = spec.find('=') != std::string_view::npos && spec.find('=') < spec.find("://");
  if (!is_map) {
    auto urls = parse_urls(spec, spec);
    if (!urls) return urls.error();
    out.push_back({{0, std::numeric_limits<uint32_t>::max()}, *urls});
    return out;
  }
  for (const auto& part : split(spec, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos)
      return make_error(ErrorCode::invalid_argument, "shard map part '" + part + "' has no '=': expected RANGE=URL[|URL...]");
    const std::string_view key = std::string_view(part).substr(0, eq);
    const size_t slash = key.find('/');
    ShardRange entry;
    auto range = parse_layer_range(key.substr(0, slash));
    if (!range) return make_error(ErrorCode::invalid_argument, "shard map part '" + part + "': " + range.error().message);
    entry.range = *range;
    if (slash != std::string_view::npos) {
      const std::string_view what = key.substr(slash + 1);
      if (what == "dense") {
        entry.part = ShardPart::dense;
      } else {
        auto experts = parse_layer_range(what);
        if (!experts)
          return make_error(ErrorCode::invalid_argument, "shard map part '" + part + "': after '/' expected an expert range (C-D) or 'dense': " +
                                                             experts.error().message);
        entry.part = ShardPart::experts;
        entry.experts = *experts;
      }
    }
    auto urls = parse_urls(std::string_view(part).substr(eq + 1), part);
    if (!urls) return urls.error();
    entry.urls = *urls;
    for (const auto& other : out)
      if (parts_overlap(entry, other))
        return make_error(ErrorCode::invalid_argument, "shard map part '" + part + "' overlaps layers " + other.str());
    out.push_back(std::move(entry));
  }
  std::stable_sort(out.begin(), out.end(), [](const ShardRange& a, const ShardRange& b) {
    return a.range.first != b.range.first ? a.range.first < b.range.first : a.experts.first < b.experts.first;
  });
  return out;
}

}  // namespace larql
