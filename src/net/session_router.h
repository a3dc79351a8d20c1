// The router's side of layer-range sessions (PROTOCOL §13, "Router: one round trip per
// token"): when every replica of its map serves sessions, the router opens one session per
// range for each of its own (placed on the live replica with the fewest), and a step of its
// session runs the ranges in order, each hop's answer passed undecoded to the next, so a
// client far away pays one round trip a token. The router holds ids and keys, nothing of a
// session's cache: a part whose cache is gone makes the router session lost (410
// session_lost, the other parts closed), and the client replays it; a part's 503, 504 or
// 500 is passed back with the session left open.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/ffn_service.h"
#include "net/http_reply.h"
#include "net/layer_range.h"
#include "net/shard_spec.h"
#include "wire/session_codec.h"

namespace larql {

struct SessionRouterOptions {
  std::string spec;                      // the router's --shards map
  int timeout_ms = 5000;                 // per call to a shard
  size_t max_sessions = 4096;            // router sessions at once
  std::optional<std::string> shard_key;  // for the router's own /v1/stats calls
  std::optional<std::string> ca_cert;
  double wait_for_shards_s = 60;         // at start, for a range none of whose replicas answers yet
};

class SessionRouter {
 public:
  // Reads every replica's /v1/stats. None serving sessions: nullptr (the router then has no
  // session routes). All of them: checked (the ranges cover every layer in order, respect
  // each range's KV groups, and replicas of a range agree on the session fingerprints). A
  // range mixing session and FFN-only replicas is refused, naming them. A range none of
  // whose replicas answers, where the others serve sessions, is waited for up to
  // `wait_for_shards_s`, then named.
  // `none_answered`, when given, is set when no replica at all answered (nothing is known
  // of the grid yet: nullptr is returned, and the caller may ask again later).
  static Result<std::unique_ptr<SessionRouter>> create(const SessionRouterOptions& options, bool* none_answered = nullptr);
  ~SessionRouter();

  HttpReply open(std::string_view body, std::string_view content_type, std::string_view authorization);
  HttpReply walk_layers(std::string_view body, std::string_view content_type, std::string_view accept,
                        std::string_view authorization, Deadline deadline = {});
  HttpReply close(std::string_view id_hex, std::string_view authorization);

  // What the router's /v1/stats adds: "sessions" (with the open sessions per replica), the
  // layers' session fingerprints, and each range's configuration fingerprint and arithmetic.
  nlohmann::json stats();
  std::string metrics();
  // Forgets router sessions unused for the shards' idle time less a call's timeout, deleting
  // their parts (a background thread calls it every second).
  void forget_idle(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // Closes pooled connections to the shards that no call has used for a while (the same
  // thread, every second).
  void close_stale_connections();
  size_t open_sessions();

  struct Replica;
  struct Range;
  struct Session;

 private:
  explicit SessionRouter(SessionRouterOptions options);
  // One reading of every replica's /v1/stats; `unread` names the ranges none of whose
  // replicas answered when others serve sessions (nullptr is returned then).
  static Result<std::unique_ptr<SessionRouter>> read_grid(const SessionRouterOptions& options, const std::vector<ShardRange>& spec,
                                                          std::string& unread, bool& none_answered);
  std::shared_ptr<Session> find(const wire::SessionId& id, const std::string& key);
  void forget(const std::shared_ptr<Session>& session, size_t except_range = SIZE_MAX);
  void delete_part(size_t range, size_t replica, const wire::SessionId& id, const std::string& authorization);

  SessionRouterOptions options_;
  std::vector<std::unique_ptr<Range>> ranges_;
  size_t hidden_ = 0, layers_ = 0, max_positions_ = 0, max_rows_ = 0, rewind_ = 0;
  double idle_s_ = 0;
  std::vector<std::string> wire_;
  nlohmann::json fingerprints_, range_info_;
  std::string globals_fingerprint_;
  std::mutex mutex_;
  std::map<wire::SessionId, std::shared_ptr<Session>> sessions_;
  std::atomic<uint64_t> opened_{0}, closed_{0}, forgotten_{0}, lost_{0}, steps_{0};
  std::atomic<uint64_t> hop_count_{0};
  std::atomic<double> hop_ms_{0};
  std::mutex stop_mutex_;
  std::condition_variable stop_wake_;
  bool stopping_ = false;
  std::atomic<bool> freed_{false};  // a session ended since the forgetter last trimmed the heap
  std::thread forgetter_;
};

// A router's session routes when it started before any shard answered (shards started
// beside it still loading): whether the grid serves sessions is decided on the first use
// after one answers. Started with the shards answering, it is decided at once.
class SessionRoutes {
 public:
  static Result<std::unique_ptr<SessionRoutes>> create(const SessionRouterOptions& options);
  // The session router, or nullptr (an FFN-only grid, or no shard answering yet). An error
  // (shard_unavailable): the grid, read late, is not one a router can serve sessions over yet.
  Result<SessionRouter*> get();
  bool undecided() const { return !decided_.load(); }

 private:
  SessionRouterOptions options_;
  std::mutex mutex_;
  std::unique_ptr<SessionRouter> router_;
  std::atomic<SessionRouter*> ready_{nullptr};
  std::atomic<bool> decided_{false};
};

}  // namespace larql
