// Connections to one server kept open between calls (a router's to one shard replica):
// callers in parallel each take their own and give it back when the exchange succeeded.
// One idle for longer than kIdleLifetime belonged to a burst that has ended; closing it
// gives both sides' descriptors and the connection's buffers back.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/http_client.h"

namespace larql {

class ConnectionPool {
 public:
  static constexpr auto kIdleLifetime = std::chrono::seconds(5);
  static constexpr size_t kMaxIdle = 16;

  // The most recently returned idle connection, else a new one (nullptr: `url` is not one).
  std::unique_ptr<HttpClient> take(const std::string& url, const HttpClientOptions& options) {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back().client);
        idle_.pop_back();
        return c;
      }
    }
    auto c = HttpClient::open(url, options);
    return c ? std::move(*c) : nullptr;
  }
  void give(std::unique_ptr<HttpClient> c) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdle) idle_.push_back({std::move(c), std::chrono::steady_clock::now()});
  }
  void close_stale(std::chrono::steady_clock::time_point now) {
    std::vector<Idle> stale;  // closed outside the lock
    std::lock_guard lock(mutex_);
    const auto fresh = std::find_if(idle_.begin(), idle_.end(), [&](const Idle& p) { return now - p.returned < kIdleLifetime; });
    stale.assign(std::make_move_iterator(idle_.begin()), std::make_move_iterator(fresh));
    idle_.erase(idle_.begin(), fresh);
  }

 private:
  struct Idle {
    std::unique_ptr<HttpClient> client;
    std::chrono::steady_clock::time_point returned;
  };
  std::mutex mutex_;
  std::vector<Idle> idle_;  // the most recently returned last
};

}  // namespace larql
