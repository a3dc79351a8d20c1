#include "infer/kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/attention.h"

namespace larql {

size_t KvCache::bytes() const {
  size_t floats = 0;
  for (const Layer& layer : layers)
    for (size_t h = 0; h < layer.keys.size(); ++h) floats += layer.keys[h].size() + layer.values[h].size();
  return floats * sizeof(float);
}

size_t KvCache::capacity_bytes() const {
  size_t floats = 0;
  for (const Layer& layer : layers)
    for (size_t h = 0; h < layer.keys.size(); ++h) floats += layer.keys[h].capacity() + layer.values[h].capacity();
  return floats * sizeof(float);
}

std::vector<size_t> kv_windows(const ModelConfig& config) {
  std::vector<size_t> windows(config.layers, 0);
  std::vector<bool> read_whole(config.layers, false);  // a full layer reads this cache
  for (size_t l = 0; l < config.layers; ++l) {
    const size_t owner = config.kv_layer(l);
    const LayerConfig& lc = config.layer(l);
    if (lc.attention != AttentionKind::sliding || lc.window == 0) read_whole[owner] = true;
    else windows[owner] = std::max(windows[owner], lc.window);
  }
  for (size_t l = 0; l < config.layers; ++l)
    if (read_whole[l]) windows[l] = 0;
  return windows;
}

namespace {

// The first position a pass at `pos` reads through a window (0: every position).
size_t first_read(size_t window, size_t pos) { return window && pos + 1 > window ? pos + 1 - window : 0; }

// Positions a windowed layer drops at a time: a quarter window (at least 64), so that each
// is moved about four times over a long sequence.
size_t drop_step(size_t window) { return (std::max<size_t>(window / 4, 64) + kKeyBlock - 1) / kKeyBlock * kKeyBlock; }

// What a windowed layer holds at most between drops, besides a pass's rows: its window, what
// a sequence may go back, a drop's step, and the rounding of each end to key blocks.
size_t windowed_span(size_t window, size_t rewind) { return window + rewind + drop_step(window) + 2 * kKeyBlock; }

}  // namespace

size_t kv_positions_held(size_t window, size_t positions, size_t pass_rows) {
  return window ? std::min(positions, windowed_span(window, kKvRewindPositions) + pass_rows) : positions;
}

std::vector<size_t> kv_capacity_positions(const ModelConfig& config, size_t positions, size_t pass_rows) {
  const std::vector<size_t> windows = kv_windows(config);
  std::vector<size_t> out(config.layers, 0);
  for (size_t l = 0; l < config.layers; ++l)
    if (config.owns_kv(l)) out[l] = key_floats(kv_positions_held(windows[l], positions, pass_rows), 1);
  return out;
}

size_t kv_capacity_bytes(const ModelConfig& config, std::span<const size_t> capacity, size_t first, size_t last) {
  size_t bytes = 0;
  for (size_t l = first; l <= last && l < capacity.size(); ++l) bytes += 2 * capacity[l] * config.kv_dim(l) * sizeof(float);
  return bytes;
}

Status check_kv_reach(std::span<const size_t> windows, KvCache& cache, size_t pos) {
  if (cache.layers.size() < windows.size()) cache.layers.resize(windows.size());
  for (size_t l = 0; l < windows.size(); ++l) {
    KvCache::Layer& layer = cache.layers[l];
    if (pos == 0) {  // a new sequence: what the cache held is not read again
      layer.first = 0;
      continue;
    }
    const size_t window = windows[l], needed = first_read(window, pos);
    if (needed < layer.first)
      return make_error(ErrorCode::invalid_argument,
                        "a pass at position " + std::to_string(pos) + " reads layer " + std::to_string(l) + "'s keys from position " +
                            std::to_string(needed) + " on, but its cache keeps only positions from " + std::to_string(layer.first) +
                            " on (its window of " + std::to_string(window) + " and " + std::to_string(cache.rewind) +
                            " before it): a sequence may go back at most that far, or start again at 0");
  }
  return Ok{};
}

size_t common_prefix(std::span<const int> a, std::span<const int> b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(n), b.begin()).first - a.begin());
}

bool kv_serves_pass(std::span<const size_t> windows, const KvCache& cache, size_t pos) {
  if (pos == 0) return true;
  if (cache.layers.size() < windows.size()) return false;  // (a cache that ran a pass has every layer's)
  for (size_t l = 0; l < windows.size(); ++l)
    if (first_read(windows[l], pos) < cache.layers[l].first) return false;
  return true;
}

namespace {

// Layer l's slots of positions before `positions`, in floats: keys (whole key blocks), values.
std::pair<size_t, size_t> prefix_floats(const ModelConfig& config, const KvCache::Layer& layer, size_t l, size_t positions) {
  const size_t hd = config.layer(l).head_dim, slots = positions > layer.first ? positions - layer.first : 0;
  return {key_floats(slots, hd), slots * hd};
}

}  // namespace

KvCache copy_kv_prefix(const ModelConfig& config, const KvCache& from, size_t positions) {
  KvCache out;
  out.rewind = from.rewind;
  out.layers.resize(from.layers.size());
  for (size_t l = 0; l < from.layers.size(); ++l) {
    const KvCache::Layer& in = from.layers[l];
    KvCache::Layer& layer = out.layers[l];
    layer.first = in.first;
    const auto [key_n, value_n] = prefix_floats(config, in, l, positions);
    for (size_t h = 0; h < in.keys.size(); ++h) {
      layer.keys.emplace_back(in.keys[h].begin(), in.keys[h].begin() + std::ptrdiff_t(std::min(key_n, in.keys[h].size())));
      layer.values.emplace_back(in.values[h].begin(), in.values[h].begin() + std::ptrdiff_t(std::min(value_n, in.values[h].size())));
    }
  }
  return out;
}

void trim_kv(const ModelConfig& config, KvCache& cache, size_t positions) {
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    KvCache::Layer& layer = cache.layers[l];
    const auto [key_n, value_n] = prefix_floats(config, layer, l, positions);
    for (size_t h = 0; h < layer.keys.size(); ++h)
      for (auto [v, n] : {std::pair{&layer.keys[h], key_n}, std::pair{&layer.values[h], value_n}}) {
        if (v->size() > n) v->resize(n);
        if (v->capacity() > v->size() + v->size() / 8) v->shrink_to_fit();  // (a vector grown by doubling)
      }
  }
}

void reserve_kv(const ModelConfig& config, KvCache& cache, size_t l, size_t window, size_t pos, size_t end) {
  KvCache::Layer& layer = cache.layers[l];
  const LayerConfig& lc = config.layer(l);
  const size_t hd = lc.head_dim;
  if (layer.keys.size() < lc.kv_heads) layer.keys.resize(lc.kv_heads), layer.values.resize(lc.kv_heads);
  const bool windowed = window > 0 && cache.rewind != SIZE_MAX;
  // Positions before `keep_from` are read by no pass that starts at most `rewind` before this one.
  if (windowed) {
    const size_t keep_from = first_read(window, pos) > cache.rewind ? (first_read(window, pos) - cache.rewind) / kKeyBlock * kKeyBlock : 0;
    if (keep_from >= layer.first + drop_step(window)) {
      const size_t dropped = keep_from - layer.first;
      for (size_t h = 0; h < lc.kv_heads; ++h)
        for (std::vector<float>* v : {&layer.keys[h], &layer.values[h]}) {
          v->erase(v->begin(), v->begin() + std::ptrdiff_t(std::min(v->size(), dropped * hd)));
          if (v->capacity() > 2 * v->size()) v->shrink_to_fit();  // after a long prompt's pass
        }
      layer.first = keep_from;
    }
  }
  // A windowed layer's buffers are sized once for the most it holds between drops (a pass's
  // rows beyond it grow them); a full layer's grow geometrically with the sequence.
  const size_t slots = end - layer.first, steady = windowed ? windowed_span(window, cache.rewind) + (end - pos) : 0;
  // A reserved cache grows by whole key blocks (a sixteenth of its bound at a time, so that
  // a long sequence moves its buffers a bounded number of times), never past its bound.
  const size_t bound = l < cache.max_slots.size() ? cache.max_slots[l] : 0;
  const size_t bounded_slots = bound ? std::min(bound, key_floats(std::max(slots, slots + bound / 16), 1)) : 0;
  auto grow = [&](std::vector<float>& v, size_t floats, size_t steady_floats, size_t bounded_floats) {
    if (v.capacity() < floats && bound) v.reserve(std::max(floats, bounded_floats));
    else if (v.capacity() < floats && windowed) v.reserve(std::max(floats, steady_floats));
    if (v.size() < floats) v.resize(floats);
  };
  for (size_t h = 0; h < lc.kv_heads; ++h) {
    grow(layer.keys[h], key_floats(slots, hd), key_floats(steady, hd), key_floats(bounded_slots, hd));
    grow(layer.values[h], slots * hd, steady * hd, bounded_slots * hd);
  }
}

void keep_path(const ModelConfig& config, KvCache& cache, std::span<const size_t> path, size_t pos) {
  // Row path[i] ≥ i, so moving in increasing i never overwrites an entry still to move.
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    KvCache::Layer& layer = cache.layers[l];
    const size_t hd = config.layer(l).head_dim, base = pos - layer.first;
    for (size_t h = 0; h < layer.keys.size(); ++h) {
      float* keys = layer.keys[h].data();
      float* values = layer.values[h].data();
      for (size_t i = 0; i < path.size(); ++i) {
        const size_t from = base + path[i], to = base + i;
        if (from == to) continue;
        for (size_t d = 0; d < hd; ++d) keys[key_offset(to, d, hd)] = keys[key_offset(from, d, hd)];
        std::memcpy(values + to * hd, values + from * hd, hd * sizeof(float));
      }
    }
  }
}

}  // namespace larql
