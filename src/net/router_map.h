// The router's map and its replicas (router.h), shared by router.cc (layer ranges) and
// router_experts.cc (expert ranges).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/connection_pool.h"
#include "net/http_client.h"
#include "net/router.h"
#include "net/shard_spec.h"
#include "net/shard_stats.h"

namespace larql {

struct Router::Replica {
  std::string url;
  LayerRange range;
  ShardRange part;  // what of its layers it serves
  std::atomic<bool> healthy{true};
  std::atomic<bool> refused{false};    // fingerprints disagree with the other replicas
  std::atomic<bool> needs_key{false};  // its /v1/stats answered 401 to the router's key (or to none)
  std::atomic<double> latency_ms{0};   // recent round trips, exponentially weighted
  std::mutex mutex;                    // guards stats and recent_ms
  std::optional<ShardStats> stats;     // none until read
  ConnectionPool connections;
  HttpClientOptions client;  // timeout and CA for connections to this replica

  // A pooled connection to this replica (callers in parallel each get their own).
  std::unique_ptr<HttpClient> take() { return connections.take(url, client); }  // the URL was checked when the map was made
  void give(std::unique_ptr<HttpClient> c) { connections.give(std::move(c)); }
  std::deque<double> recent_ms;  // the last kRecent round trips, for --hedge-after-ms auto (guarded by mutex)
  static constexpr size_t kRecent = 64;

  void observe(double ms) {
    const double old = latency_ms.load();
    latency_ms.store(old == 0 ? ms : 0.8 * old + 0.2 * ms);
    std::lock_guard lock(mutex);
    recent_ms.push_back(ms);
    if (recent_ms.size() > kRecent) recent_ms.pop_front();
  }
  // The 95th percentile of the recent round trips; `fallback` until there are 20 of them.
  double recent_p95(double fallback) {
    std::vector<double> v;
    {
      std::lock_guard lock(mutex);
      if (recent_ms.size() < 20) return fallback;
      v.assign(recent_ms.begin(), recent_ms.end());
    }
    const size_t at = v.size() * 95 / 100;
    std::nth_element(v.begin(), v.begin() + long(at), v.end());
    return v[at];
  }
};

struct Router::Map {
  struct Entry {
    ShardRange part;  // its layers and what of them (urls unused: the replicas are below)
    std::vector<std::shared_ptr<Replica>> replicas;
    const LayerRange& range_of_layers() const { return part.range; }
  };
  std::vector<Entry> entries;  // sorted by first layer, then first expert; never overlapping (parts_overlap)

  // The entry that serves a layer's /v1/walk-ffn (its dense MLP, or all of it).
  int owner(uint32_t layer) const {
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].part.range.contains(layer) && entries[i].part.has_dense()) return int(i);
    return -1;
  }
  // The entries that serve a layer's experts, in ascending expert id.
  std::vector<size_t> expert_owners(uint32_t layer) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].part.range.contains(layer) && entries[i].part.part != ShardPart::dense) out.push_back(i);
    std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return entries[a].part.experts.first < entries[b].part.experts.first; });
    return out;
  }
  std::string covered() const {
    std::string out;
    for (const auto& e : entries) out += (out.empty() ? "" : ", ") + e.part.str();
    return out.empty() ? "none" : out;
  }
};

// A shard's error passed on, its message naming the shard and its part ("0-7", "0-7/0-31").
void name_shard_in_error(std::string& body, const std::string& url, const std::string& part);

}  // namespace larql
