// Whole layer ranges on session shards (PROTOCOL §13): each range of the map runs on a
// session shard that keeps the range's KV cache, so a token costs one round trip per range
// instead of one per layer. One session per sequence on one replica of each range, opened
// when a batch admits the sequence (else at its first pass) and deleted when the
// sequence's KvCache goes. A session that
// is gone (session_unknown, or its replica refusing connections) is rebuilt without the
// caller noticing: a new session on a live replica, fed the sequence's tokens again from
// position 0 (bit-identical over f32), at most twice per sequence.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/layer_range_backend.h"
#include "model/model.h"
#include "wire/wire_config.h"

namespace larql {

struct RemoteLayersOptions {
  std::string spec;                    // "0-2=URL|URL,3-5=URL": ranges covering every layer
  wire::ClientWire wire;               // the residuals' encoding (i8 only when asked for and listed)
  std::optional<std::string> api_key = {};  // sent as Authorization: Bearer
  std::optional<std::string> ca_cert = {};
  int timeout_ms = 30000;
  size_t max_positions = 0;            // each session's; 0: the model's context (within the shards' bound)
  // Every replica of a range full (503): how long opening a sequence's session waits for room.
  std::chrono::milliseconds room_wait = std::chrono::seconds(30);
};

struct RemoteLayersStats {
  size_t steps = 0;            // walk-layers requests
  size_t round_trips = 0;      // of those, waited for one after another
  size_t bytes_sent = 0, bytes_received = 0;            // bodies
  size_t head_bytes_sent = 0, head_bytes_received = 0;  // HTTP heads
  size_t sessions_opened = 0;
  size_t replays = 0;          // sequences rebuilt on a new session
  size_t f32_fallbacks = 0;    // answers in f32 although another encoding was asked for
  double remote_ms = 0;        // wall time of the steps
  double server_ms = 0;        // the shards' own (latency_ms)
};

class RemoteLayers {
 public:
  // Connects to every replica and checks it against `model`: it serves sessions over exactly
  // its range, its three session fingerprints and its layers_arithmetic equal ours. A map
  // that leaves a layer uncovered is refused, naming the gap. Warnings go to `warnings`.
  static Result<std::unique_ptr<RemoteLayers>> connect(const Model& model, const RemoteLayersOptions& options,
                                                       std::vector<std::string>* warnings);
  ~RemoteLayers();  // deletes the sessions still open

  // The ranges in order, for Transformer::set_layer_ranges.
  std::vector<LayerRangeBackend*> ranges();
  const RemoteLayersStats& stats() const;  // the calling thread's view (the one that runs the passes)
  size_t replays() const;                   // stats().replays, readable from any thread
  // Each new session's max_positions from now on (the prompt plus the tokens wanted).
  void set_max_positions(size_t positions);
  // The rewind the shards allow (rewind_positions; drafts are taken back within it).
  size_t rewind_positions() const;
  // Called (on the thread that runs the passes) when a shard answers 503 for want of room
  // for a new session: true when it let sessions go (a prefix cache dropping a kept
  // sequence), and the open is tried again at once.
  void set_overload_relief(std::function<bool()> relieve);

  class Range;
  struct Sequence;
  struct Impl;

 private:
  explicit RemoteLayers(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace larql
