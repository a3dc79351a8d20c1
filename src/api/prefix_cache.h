// What `larql api` keeps of the sequences it ran: each one's keys and values with the
// tokens they are of, so that a later prompt that starts the same way prefills only the
// rest (chat clients resend the conversation, agents their system prompt and tools).
// Bounded by the bytes its buffers allocate; the least recently used go first. Owned and
// used by the engine thread alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "infer/kv_cache.h"
#include "model/model.h"

namespace larql {

class PrefixCache {
 public:
  // max_bytes 0: nothing is kept or looked up. Where the layers run elsewhere (a cache's
  // KvCache::remote: sessions on shards), a kept sequence serves a prefix only within
  // `fork_reach` positions of its end (the shards fork there, PROTOCOL §13), and counts the
  // bytes its positions take there.
  PrefixCache(const ModelConfig& config, size_t max_bytes, size_t fork_reach = SIZE_MAX);
  bool enabled() const { return max_bytes_ > 0; }

  // A sequence's keys and values of `tokens`, from position 0 (one still running).
  struct Source {
    std::span<const int> tokens;
    const KvCache* cache;
  };
  struct Match {
    size_t positions = 0;             // how many of the prompt's first tokens it holds
    const KvCache* cache = nullptr;   // where (valid until the next keep)
  };
  // The longest prefix of `prompt`, at most `limit` tokens, held by a kept sequence or one of
  // `running`, whose every layer still keeps what a pass at its end reads. A kept one found
  // becomes the most recently used.
  Match find(std::span<const int> prompt, size_t limit, std::span<const Source> running);

  // Keeps a sequence's cache of `tokens` (its positions [0, tokens.size())), trimmed to
  // them. A kept sequence it extends (and serves) goes; so does it when one kept already
  // extends it. Then the least recently used go until the rest fit.
  void keep(std::vector<int> tokens, KvCache cache);

  struct Stats {
    size_t bytes = 0, sequences = 0;
    uint64_t lookups = 0, hits = 0, tokens_reused = 0, evicted = 0;
  };
  Stats stats() const { return stats_; }
  // A lookup's outcome, counted by the caller once it uses the match.
  void count_lookup(size_t reused);
  // Drops the least recently used kept sequence (a shard wants its room); false when none is kept.
  bool drop_least_recent();

 private:
  struct Entry {
    std::vector<int> tokens;
    KvCache cache;
    size_t bytes = 0;
  };
  void forget(std::list<Entry>::iterator it);

  const ModelConfig& config_;
  const std::vector<size_t> windows_;
  const size_t max_bytes_;
  const size_t fork_reach_;
  std::list<Entry> entries_;  // most recently used first
  Stats stats_;
};

}  // namespace larql
