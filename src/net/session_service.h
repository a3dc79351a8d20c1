// What a session shard does beside the FFN (PROTOCOL §13), without sockets: it opens,
// forks and closes sessions over layers a…b, each with its own KV cache reserved against a
// budget, and steps them (POST /v1/walk-layers) through the same layer loop a local run uses
// (Transformer::forward_range). Checks run in §13's order and touch nothing until all have
// passed; the layers take the shard's compute turn one at a time, as /v1/walk-ffn's do.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "infer/kv_cache.h"
#include "infer/transformer.h"
#include "model/model.h"
#include "net/fifo_mutex.h"
#include "net/ffn_service.h"
#include "net/http_reply.h"
#include "net/layer_range.h"
#include "wire/encoding.h"
#include "wire/session_codec.h"

namespace larql {

struct SessionServiceOptions {
  LayerRange layers;                   // owned, inclusive
  // Encodings of /v1/walk-layers: f32, f16 and q8 by default; i8 only with --session-wire-i8.
  wire::EncodingSet encodings{wire::Encoding::f32, wire::Encoding::f16, wire::Encoding::q8};
  size_t max_body_bytes = 64u << 20;
  size_t max_sessions = 256;           // open at once, and per request
  size_t kv_budget_bytes = 0;          // 0: a quarter of the machine's memory
  size_t max_positions = 0;            // the largest max_positions an open may ask; 0: the model's context
  double idle_timeout_s = 300;
  size_t max_rows = 2048;              // Σrows of one step
  size_t max_work = 65536;             // Σrows × layers of one step
  size_t max_queue = 64;               // steps waiting for compute beyond this get 503
};

class SessionService {
 public:
  // `layers` runs the owned range (its FFN local); `compute_turns` is the shard's, shared
  // with FfnService so that both kinds of work take turns layer by layer.
  SessionService(const Model& model, Transformer& layers, FifoMutex& compute_turns, SessionServiceOptions options);
  ~SessionService();

  // POST /v1/sessions, fork included. `authorization` binds the session to the caller's key.
  HttpReply open(std::string_view body, std::string_view content_type, std::string_view authorization);
  // POST /v1/walk-layers.
  HttpReply walk_layers(std::string_view body, std::string_view content_type, std::string_view accept,
                        std::string_view authorization, const ClientGone& client_gone = {}, Deadline deadline = {});
  // DELETE /v1/sessions/{id}.
  HttpReply close(std::string_view id_hex, std::string_view authorization);

  // /v1/stats' "sessions" object, and the three fingerprints beside it.
  nlohmann::json stats();
  nlohmann::json fingerprints() const;
  // Prometheus lines (opens, closes, expiries, steps, stale steps, KV bytes): never by id.
  std::string render_metrics();
  // Closes the sessions no request has named for idle_timeout_s (a background thread calls
  // it every second; tests call it with a clock of their own).
  void expire_idle(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  size_t kv_bytes();           // allocated by open sessions
  size_t reserved_bytes();     // reserved by open sessions
  size_t budget_bytes() const { return options_.kv_budget_bytes; }
  size_t open_sessions();

 private:
  struct Session;
  using SessionPtr = std::shared_ptr<Session>;
  // The live session of that id bound to that key, or nullptr.
  SessionPtr find(const wire::SessionId& id, const std::string& key_hash);
  wire::SessionId new_id();  // from getrandom, redrawn on a collision (under mutex_)
  // 503 overloaded with the seconds until the oldest idle session expires.
  HttpReply overloaded(const std::string& why);
  HttpReply fail(const Error& e);
  HttpReply fail_sessions(const Error& e, const std::vector<size_t>& indices, const std::vector<SessionPtr>& sessions);
  Error refuse_content_type(std::string_view content_type) const;
  // The step itself, under every named session's turn.
  HttpReply run_step(const wire::WalkLayersRequestView& view, wire::Encoding encoding, std::string_view accept,
                     std::vector<SessionPtr>& sessions, const ClientGone& client_gone, Deadline deadline);

  const Model& model_;
  Transformer& layers_;
  FifoMutex& compute_turns_;
  FifoMutex passes_;  // steps' passes, one at a time (the layers' transformer has one scratch)
  SessionServiceOptions options_;
  std::vector<std::string> fingerprints_;  // per owned layer
  std::string config_fingerprint_, globals_fingerprint_;
  std::mutex mutex_;  // sessions_, reserved_
  std::map<wire::SessionId, SessionPtr> sessions_;
  size_t reserved_ = 0;
  std::atomic<size_t> waiting_{0};
  std::atomic<uint64_t> opens_{0}, closes_{0}, expiries_{0}, steps_{0}, stale_steps_{0}, rows_{0};
  std::atomic<bool> freed_{false};  // a cache was freed since the reaper last trimmed the heap
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace larql
