// The layer-range router (PROTOCOL §9): the same /v1/walk-ffn, /v1/stats and /v1/health as
// a shard, in front of shards. A request whose layers one range owns is forwarded byte for
// byte with its Content-Type, Accept and Authorization; one spanning ranges is split,
// sent in parallel and spliced back in request order. Connection errors, timeouts and 5xx
// go to the next healthy replica (calls are idempotent); 4xx are the caller's and pass on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/ffn_service.h"
#include "net/range_attempts.h"
#include "net/range_split.h"
#include "net/shard_spec.h"

namespace larql {

struct RouterOptions {
  std::string spec;
  int timeout_ms = 5000;
  int health_interval_ms = 1000;
  std::optional<std::string> shard_key;   // for the router's own /v1/health and /v1/stats calls
  std::optional<std::string> shard_ca_cert;  // PEM CA that https:// shards' certificates chain to
  std::optional<std::string> admin_key;   // enables /admin/shards
  // Hedged requests: after this long without an answer, the call also goes to a second
  // healthy replica of the range (0: never); with hedge_auto, after the first replica's
  // recent 95th-percentile round trip.
  double hedge_after_ms = 0;
  bool hedge_auto = false;
  // What a split /v1/walk-experts asks its parts in: f32 (exact), or f16 (half the bytes;
  // never q8 or i8, which would quantise twice).
  wire::Encoding shard_wire = wire::Encoding::f32;
};

class Router {
 public:
  // Reads every replica's /v1/stats: hidden sizes must agree, and replicas of a layer must
  // have the same fingerprint, or start-up fails naming them.
  static Result<std::unique_ptr<Router>> create(const RouterOptions& options);
  ~Router();

  // `deadline`: when the caller stops waiting (X-Larql-Deadline-Ms); what is left of it,
  // capped by --timeout-ms, goes on to the shard with each try.
  HttpReply walk_ffn(const std::string& body, const std::string& content_type, const std::string& accept,
                     const std::string& authorization, Deadline deadline = {});
  // PROTOCOL §12: forwarded byte for byte when one expert range owns every assigned expert;
  // else split by range, each part asking for per-expert rows, and summed or spliced here
  // (router_experts.cc).
  HttpReply walk_experts(const std::string& body, const std::string& content_type, const std::string& accept,
                         const std::string& authorization, Deadline deadline = {});
  nlohmann::json stats();
  nlohmann::json health();
  std::string metrics() const;  // Prometheus text
  // GET lists the map; POST changes it ({"add": [...], "remove": [...]}) and lists it.
  Result<nlohmann::json> admin(const std::string& method, const std::string& body, const std::string& authorization);
  bool admin_enabled() const { return options_.admin_key.has_value(); }

  struct Replica;
  struct Map;

 private:
  explicit Router(RouterOptions options);
  Status add_replica(Map& map, const ShardRange& part, const std::string& url);
  // Once the shards have said how many experts a layer has: every layer that has expert
  // ranges has all its experts covered, or the error names the gap.
  Status check_expert_coverage(const Map& map) const;
  std::shared_ptr<const Map> current_map() const;
  void poll_health();

  // What a walk-ffn request came to, before HTTP (to_http): a shard's answer passed on
  // (any status: a 4xx and a deterministic 500 are the caller's) or spliced, or the
  // router's own error.
  struct Answer {
    int status = 200;
    std::string content_type, body;
    std::string shards;  // who answered (X-Larql-Shard)
    bool reencoded_f32 = false;
  };
  struct WalkOutcome {
    std::optional<Answer> answer;
    std::optional<Error> error;
    int retry_after_s = 0;  // with an overloaded error
  };
  WalkOutcome walk(const std::string& body, const std::string& content_type, const std::string& accept,
                   const std::string& authorization, Deadline deadline);
  WalkOutcome forward(const Map& map, const RangePart& part, const std::string& path, const std::string& body,
                      const std::string& content_type, const std::string& accept, const std::string& authorization,
                      Deadline deadline);
  WalkOutcome walk_experts_outcome(const std::string& body, const std::string& content_type, const std::string& accept,
                                   const std::string& authorization, Deadline deadline);
  static HttpReply to_http(WalkOutcome outcome);
  // A data-path request: counted, shed with 503 while descriptors run out, else `walk`'s
  // outcome, its errors counted, as HTTP.
  // larql_router_bytes_total: a call's body in and its answer out, by their encodings.
  void count_bytes(const std::string& body, const std::string& content_type, const HttpReply& reply);
  HttpReply answer(const std::function<WalkOutcome()>& walk);
  void count_errors(const WalkOutcome& outcome);

  // Reads a replica's /v1/stats and checks it against what the router already knows.
  Status load_stats(Replica& replica, const ShardRange& part);

  RouterOptions options_;
  std::map<uint32_t, std::string> fingerprints_;  // per layer, guarded by map_mutex_
  size_t hidden_ = 0;
  size_t num_layers_ = 0;
  // Per MoE layer, once a shard has said (guarded by map_mutex_): expert ids (routed and shared), of them shared, used.
  size_t experts_ = 0, shared_experts_ = 0, experts_used_ = 0;
  std::string model_name_, family_, ffn_arithmetic_;
  mutable std::mutex map_mutex_;
  std::shared_ptr<const Map> map_;
  std::vector<std::shared_ptr<Replica>> all_replicas_;  // guarded by map_mutex_
  Metrics metrics_{"larql_router"};
  bool hedging() const { return options_.hedge_auto || options_.hedge_after_ms > 0; }
  std::atomic<uint64_t> retries_{0};  // calls sent again to another replica after one failed
  std::atomic<uint64_t> hedges_{0}, hedge_wins_{0};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> stopping_{false};
  std::mutex poll_mutex_;
  std::condition_variable poll_wake_;
  std::thread poller_;
};

}  // namespace larql
