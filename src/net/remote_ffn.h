// The FFN over the wire: each layer's input goes to the shard that owns the layer, in the
// negotiated encoding, over a persistent keep-alive connection, and the output comes back
// decoded by its Content-Type. A mixture-of-experts layer's routed rows go, by expert range,
// to the shards that own those experts (/v1/walk-experts, PROTOCOL §12). A failed call is
// an error naming the shard, the layer and the cause, never zeros.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <memory>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include "infer/ffn_backend.h"
#include "net/http_client.h"
#include "net/layer_range.h"
#include "model/model.h"
#include "wire/encoding.h"
#include "wire/wire_config.h"

namespace larql {

struct RemoteFfnOptions {
  std::string spec;                      // URL, or "0-1=URL|URL,2-3=URL"
  wire::ClientWire wire;                 // preferred encoding and Accept header
  std::optional<std::string> api_key;    // sent as Authorization: Bearer
  std::optional<std::string> ca_cert;    // for https:// shards with a private CA
  int timeout_ms = 30000;
  // Hedged requests: a call the first free replica of a layer has not answered within this
  // many ms also goes to the second, and the first success wins (0: never).
  double hedge_after_ms = 0;
  // Mixture-of-experts layers: ask the expert shards for each expert's unweighted rows and
  // sum them here (f32 results bit-identical to local for any split of the experts), rather
  // than for weighted sums (fewer bytes).
  bool expert_rows = false;
};

struct RemoteFfnStats {
  size_t calls = 0;
  size_t round_trips = 0;     // calls waited for one after another (a layer's parallel calls count once)
  size_t bytes_sent = 0;      // message bodies
  size_t bytes_received = 0;
  size_t head_bytes_sent = 0;  // HTTP heads
  size_t head_bytes_received = 0;
  double remote_ms = 0;       // wall time of the calls
  double server_ms = 0;       // the servers' own compute time (latency_ms)
  size_t f32_fallbacks = 0;   // responses that came back as f32 although another encoding was asked for
  size_t backoffs = 0;        // waits because every replica of a layer answered 503 (busy)
  size_t hedges = 0;          // calls also sent to a second replica (hedge_after_ms)
  size_t hedge_wins = 0;      // of those, answered by the second first
};

class RemoteFfn : public FfnBackend {
 public:
  // Connects to every shard, checks it against `model` (hidden size, layer coverage,
  // fingerprints) and learns the request encodings it accepts and its body limit.
  // Warnings (a server that does not say) are appended to `warnings`.
  static Result<std::unique_ptr<RemoteFfn>> connect(const Model& model, const RemoteFfnOptions& options,
                                                    std::vector<std::string>* warnings);
  ~RemoteFfn() override;

  Status forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) override;
  Status experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                 std::span<float> out) override;
  // The dense MLP's call goes out first, on a kept thread, and the experts' beside it.
  Status forward_with_experts(uint32_t layer, std::span<const float> x, std::span<const float> expert_x, size_t rows,
                              std::span<const ExpertAssignment> assignments, std::span<float> out,
                              std::span<float> expert_out) override;
  const RemoteFfnStats& stats() const { return stats_; }
  // The encodings requests are sent in: the preferred one, or lower ones of the ladder for
  // shards that do not take it.
  wire::EncodingSet request_encodings() const;

  struct Shard;
  struct Race;
  struct Request;
  class CallThreads;

 private:
  // The shards of a range of one layer's experts (a plain part: all of them).
  struct ExpertGroup {
    LayerRange experts;
    std::vector<Shard*> replicas;
  };

  RemoteFfn(const Model& model, RemoteFfnOptions options);
  // A request to the first replica that answers it, in chunks of rows where a shard's body
  // or work limit needs them, hedged, and retried after backoff while replicas are busy.
  Status send(const std::vector<Shard*>& replicas, const Request& request);
  // One call; `deadline` (the end of this request's --timeout-ms) goes to the shard as
  // X-Larql-Deadline-Ms, so that it drops work nobody waits for any more.
  Status call(Shard& shard, const Request& request, std::chrono::steady_clock::time_point deadline);
  // The HTTP exchange of a call, into its own body buffer (safe on a hedge's thread), and
  // what send() makes of its response (statistics, checks, decoding into request.out).
  Result<HttpResponse> exchange(Shard& shard, const Request& request, std::chrono::steady_clock::time_point deadline,
                                std::string& body) const;
  Status accept(Shard& shard, const Request& request, const Result<HttpResponse>& response, size_t body_bytes);
  // `first`, and `second` too if `first` is slower than hedge_after_ms; none if no thread
  // could be started (then the caller goes on in turn).
  std::optional<Status> hedged_call(Shard& first, Shard& second, const Request& request,
                                    std::chrono::steady_clock::time_point deadline);
  // The most rows of `request` one call to `shard` may carry (its body and work limits).
  size_t chunk_rows(const Shard& shard, const Request& request) const;
  // Runs `request`'s exchange with `shard` on a kept thread into race slot `slot` (under
  // hedge_mutex_); false when no thread could be started.
  bool launch(const std::shared_ptr<Race>& race, size_t slot, Shard& shard, const Request& request,
              std::chrono::steady_clock::time_point deadline);
  // A call on a kept thread (nullptr when none could be started), and its end, accepted.
  std::shared_ptr<Race> start_call(Shard& shard, const Request& request, std::chrono::steady_clock::time_point deadline);
  Status finish_call(Shard& shard, const Request& request, const std::shared_ptr<Race>& race,
                     std::chrono::steady_clock::time_point started);
  // A keep-alive connection to the shard for one call, and back when it is done.
  Result<std::unique_ptr<HttpClient>> take_connection(Shard& shard) const;
  void give_connection(Shard& shard, std::unique_ptr<HttpClient> connection) const;
  // Checks a shard's /v1/stats against the local model and learns its wire and body limit.
  Status check_shard(Shard& shard, const std::string& stats_body, std::vector<std::string>* warnings);
  // The local model's fingerprint of a layer, computed once however many parts and
  // replicas cover it.
  const std::string& local_fingerprint(uint32_t layer);
  // Every layer has its dense MLP's shards and its experts' ranges covered without a gap.
  Status check_coverage() const;

  const Model& model_;
  RemoteFfnOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::vector<Shard*>> layer_shards_;  // per layer: its dense MLP's replicas, in the order given
  std::vector<std::vector<ExpertGroup>> expert_groups_;  // per layer: its experts' ranges, ascending
  std::map<uint32_t, std::string> local_fingerprints_;
  RemoteFfnStats stats_;
  std::string body_;  // request buffer, reused
  std::vector<std::vector<float>> part_x_, part_out_;  // experts() scratch, per expert range
  std::vector<float> expert_rows_;
  std::vector<uint8_t> row_written_;
  std::minstd_rand jitter_{std::random_device{}()};  // spreads the backoff of clients busy at the same time
  mutable std::mutex hedge_mutex_;         // guards Shard::client and idle, running_calls_ and every Race
  std::condition_variable hedge_done_;     // a hedged call ended
  size_t running_calls_ = 0;               // hedged calls on call_threads_
  std::unique_ptr<CallThreads> call_threads_;  // last: destroyed (joined) first
};

}  // namespace larql
