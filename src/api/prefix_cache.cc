#include "api/prefix_cache.h"

#include <algorithm>

namespace larql {

PrefixCache::PrefixCache(const ModelConfig& config, size_t max_bytes, size_t fork_reach)
    : config_(config), windows_(kv_windows(config)), max_bytes_(max_bytes), fork_reach_(fork_reach) {}

namespace {

// Whether a sequence of `held` positions can serve the first `n` of a prompt.
bool serves(std::span<const size_t> windows, size_t fork_reach, const KvCache& cache, size_t held, size_t n) {
  return cache.remote ? held - n <= fork_reach : kv_serves_pass(windows, cache, n);
}

}  // namespace

PrefixCache::Match PrefixCache::find(std::span<const int> prompt, size_t limit, std::span<const Source> running) {
  Match best;
  if (!enabled()) return best;
  auto consider = [&](std::span<const int> tokens, const KvCache& cache) {
    const size_t n = std::min(common_prefix(tokens, prompt), limit);
    if (n > best.positions && serves(windows_, fork_reach_, cache, tokens.size(), n)) best = {n, &cache};
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

bool PrefixCache::drop_least_recent() {
  if (entries_.empty()) return false;
  forget(std::prev(entries_.end()));
  ++stats_.evicted;
  return true;
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
    if (shared == tokens.size() && serves(windows_, fork_reach_, it->cache, it->tokens.size(), shared)) {  // held by a longer one
      entries_.splice(entries_.begin(), entries_, it);
      return;
    }
    if (shared == it->tokens.size() && serves(windows_, fork_reach_, cache, tokens.size(), shared)) forget(it++);  // serves its prefix
    else ++it;
  }
  trim_kv(config_, cache, tokens.size());
  const size_t bytes = cache.remote ? tokens.size() * config_.kv_bytes_per_position() : cache.capacity_bytes();
  if (bytes > max_bytes_) return;  // alone beyond the bound: not kept
  while (stats_.bytes + bytes > max_bytes_) drop_least_recent();
  entries_.push_front({std::move(tokens), std::move(cache), bytes});
  stats_.bytes += bytes;
  ++stats_.sequences;
}

}  // namespace larql
