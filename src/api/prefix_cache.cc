#include "api/prefix_cache.h"

#include <algorithm>

namespace larql {

size_t common_prefix(std::span<const int> a, std::span<const int> b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(n), b.begin()).first - a.begin());
}

PrefixCache::PrefixCache(const ModelConfig& config, size_t max_bytes)
    : config_(config), windows_(kv_windows(config)), max_bytes_(max_bytes) {}

PrefixCache::Match PrefixCache::find(std::span<const int> prompt, size_t limit, std::span<const Source> running) {
  Match best;
  if (!enabled()) return best;
  auto consider = [&](std::span<const int> tokens, const KvCache& cache) {
    const size_t n = std::min(common_prefix(tokens, prompt), limit);
    if (n > best.positions && kv_serves_pass(windows_, cache, n)) best = {n, &cache};
    return best.cache == &cache;
  };
  auto best_entry = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (consider(it->tokens, it->cache)) best_entry = it;
  for (const Source& s : running) consider(s.tokens, *s.cache);
  if (best_entry != entries_.end() && best.cache == &best_entry->cache) entries_.splice(entries_.begin(), entries_, best_entry);
  return best;
}

void PrefixCache::count_lookup(size_t reused) {
  ++stats_.lookups;
  stats_.hits += reused > 0;
  stats_.tokens_reused += reused;
}

void PrefixCache::forget(std::list<Entry>::iterator it) {
  stats_.bytes -= it->bytes;
  --stats_.sequences;
  entries_.erase(it);
}

void PrefixCache::keep(std::vector<int> tokens, KvCache cache) {
  if (!enabled() || tokens.empty()) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const size_t shared = common_prefix(it->tokens, tokens);
    if (shared == tokens.size() && kv_serves_pass(windows_, it->cache, shared)) {  // already held by a longer one
      entries_.splice(entries_.begin(), entries_, it);
      return;
    }
    if (shared == it->tokens.size() && kv_serves_pass(windows_, cache, shared)) forget(it++);  // it serves this one's prefix
    else ++it;
  }
  trim_kv(config_, cache, tokens.size());
  const size_t bytes = cache.capacity_bytes();
  if (bytes > max_bytes_) return;  // alone beyond the bound: not kept
  while (stats_.bytes + bytes > max_bytes_) {
    forget(std::prev(entries_.end()));
    ++stats_.evicted;
  }
  entries_.push_front({std::move(tokens), std::move(cache), bytes});
  stats_.bytes += bytes;
  ++stats_.sequences;
}

}  // namespace larql
