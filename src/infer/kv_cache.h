// One sequence's keys and values, and which positions of them a sliding layer keeps.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "base/errors.h"
#include "infer/draft_tree.h"
#include "model/model.h"

namespace larql {

// Positions a sliding layer keeps before its window, so that a sequence may start a pass up
// to this many positions before its last one (a draft model going back past the drafts the
// target rejected: at most --draft-max).
inline constexpr size_t kKvRewindPositions = kMaxDraft;

// Each layer's keys and values, grown with the positions used (never sized by the model's
// whole context). Each key-value head's apart, [head]: attention reads one head's positions
// as one contiguous stream. Values [slot][head_dim]; keys in blocks of positions, each block
// dimension by dimension (attention.h's key_offset). A layer whose readers all attend over a
// sliding window drops the positions no pass can read again, whole key blocks at a time, so
// that its cache stays near its window however long the sequence (kv_windows).
struct KvCache {
  struct Layer {
    std::vector<std::vector<float>> keys, values;
    size_t first = 0;  // the first position held, a multiple of kKeyBlock: position p is at slot p − first
  };
  std::vector<Layer> layers;
  size_t rewind = kKvRewindPositions;  // kept before a window; SIZE_MAX keeps every position
  // Per layer, the most positions its buffers may ever hold (kv_capacity_positions'), for a
  // cache whose memory was reserved up front (a session's, PROTOCOL §13): its buffers then
  // grow in whole key blocks up to that and never beyond. Empty: they grow as vectors do.
  std::vector<size_t> max_slots;
  // Where the layers run elsewhere (layer-range sessions): that backend's state for this
  // sequence (its sessions on the shards), released with the sequence.
  std::shared_ptr<void> remote;

  size_t bytes() const;           // of the keys and values held
  size_t capacity_bytes() const;  // of the memory allocated for them
};

// The positions layer buffers of a sequence of at most `positions`, run in passes of at
// most `pass_rows`, hold at most, in whole key blocks (what KvCache::max_slots bounds):
// per layer of `config` (0 for a layer that keeps no cache).
std::vector<size_t> kv_capacity_positions(const ModelConfig& config, size_t positions, size_t pass_rows);
// The bytes those take for layers first…last (a session's reservation).
size_t kv_capacity_bytes(const ModelConfig& config, std::span<const size_t> capacity, size_t first, size_t last);

// The window each layer's cache must keep: the widest of the sliding layers that read it
// (itself, and the KV-shared layers that read its cache), or 0 (all) if a full layer reads
// it; 0 for a layer that keeps no cache. Derived from the config once, by its users.
std::vector<size_t> kv_windows(const ModelConfig& config);

// The most positions a layer whose readers see `window` keys (0: all) holds for a sequence
// of `positions`, run in passes of at most `pass_rows` rows: all of them, or about its window.
size_t kv_positions_held(size_t window, size_t positions, size_t pass_rows);

// Checks, before a pass at `pos`, that every layer still holds the positions the pass reads
// (`windows`: kv_windows'); a pass at 0 starts the sequence afresh. Sizes `cache.layers` to
// the model's.
Status check_kv_reach(std::span<const size_t> windows, KvCache& cache, size_t pos);

// How many first tokens a and b share: how much of a prompt a cache of the other's keys and
// values can give it.
size_t common_prefix(std::span<const int> a, std::span<const int> b);

// Whether `cache`, holding a sequence's positions [0, pos) at least, can serve a pass at
// `pos` (`windows`: kv_windows'): every layer still keeps what that pass reads.
bool kv_serves_pass(std::span<const size_t> windows, const KvCache& cache, size_t pos);

// A cache of the first `positions` of `from` (which holds them), sized to them: where a
// new sequence that starts the same way continues.
KvCache copy_kv_prefix(const ModelConfig& config, const KvCache& from, size_t positions);

// Drops what `cache` holds past its first `positions`, and memory it holds beyond them.
void trim_kv(const ModelConfig& config, KvCache& cache, size_t positions);

// Makes layer l's cache, whose readers see `window` keys (0: all), hold the slots of
// positions [pos, end) for a pass at `pos`, after dropping the positions before its window
// that no later pass can read.
void reserve_kv(const ModelConfig& config, KvCache& cache, size_t l, size_t window, size_t pos, size_t end);

// Moves the cache entries of chunk rows `path` (row 0, then each row's child, …) of a pass
// at `pos` to positions pos, pos + 1, …: the cache the path alone would have left.
void keep_path(const ModelConfig& config, KvCache& cache, std::span<const size_t> path, size_t pos);

}  // namespace larql
