// What a shard server does, without sockets: POST /v1/walk-ffn and /v1/walk-experts decoded,
// computed with the same LocalFfn the client uses, and encoded as negotiated (PROTOCOL
// §3–§7, §12); the reference's expert layouts; /v1/stats and /v1/health documents. The
// HTTP layer (serve_command.cc's routes) only moves bytes in and out.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infer/ffn_backend.h"
#include "wire/expert_codec.h"
#include "model/model.h"
#include "net/fifo_mutex.h"
#include "net/http_reply.h"
#include "net/layer_range.h"
#include "net/metrics.h"

namespace larql {

struct FfnServiceOptions {
  LayerRange layers;             // owned, inclusive
  // Owned expert ids of the owned mixture-of-experts layers, inclusive (PROTOCOL §12);
  // narrowed to the model's experts.
  LayerRange experts{0, UINT32_MAX};
  // Binary encodings offered for requests and responses (f32 is always taken; q8 is dropped
  // when the model's hidden size is not a multiple of 32).
  wire::EncodingSet encodings{wire::Encoding::f32, wire::Encoding::f16, wire::Encoding::q8};
  size_t max_body_bytes = 64u << 20;
  size_t max_queue = 64;         // requests waiting for compute beyond this get 503
  size_t max_work = 65536;       // positions × layers of one request beyond this get 413 work_too_large
};

// Whether the client that sent a request has gone (closed its connection): work for it
// stops at the next layer. Empty: the client is never gone.
using ClientGone = std::function<bool()>;
// When the caller stops waiting: work not finished by then is dropped (504 deadline_exceeded).
using Deadline = std::optional<std::chrono::steady_clock::time_point>;

class FfnService {
 public:
  FfnService(const Model& model, FfnBackend& compute, FfnServiceOptions options);

  HttpReply walk_ffn(std::string_view body, std::string_view content_type, std::string_view accept,
                     const ClientGone& client_gone = {}, Deadline deadline = {});
  // POST /v1/walk-experts (PROTOCOL §12): the owned experts of one layer, as weighted sums
  // or per-expert rows.
  HttpReply walk_experts(std::string_view body, std::string_view content_type, std::string_view accept,
                         const ClientGone& client_gone = {}, Deadline deadline = {});
  // POST /v1/experts/layer-batch(-f16): the reference implementation's one-position expert
  // layout (wire/reference_experts_codec.h), for reference clients.
  HttpReply reference_layer_batch(std::string_view body, bool f16, const ClientGone& client_gone = {}, Deadline deadline = {});
  nlohmann::json stats() const;
  nlohmann::json health() const;
  const Metrics& metrics() const { return metrics_; }
  // Layer computations registered and waiting for their turn (for tests and diagnostics).
  size_t pending_layer_work() {
    std::lock_guard lock(pending_mutex_);
    return pending_.size();
  }
  Metrics& metrics() { return metrics_; }
  // The shard's turns at compute, one layer at a time: a session shard's steps take them too.
  FifoMutex& compute_turns() { return compute_turns_; }

 private:
  // Owned, distinct layers, and no more work than max_work.
  Status check_work(const std::vector<uint32_t>& layers, size_t rows) const;
  Status check_layer(uint32_t layer) const;  // in range and owned
  Status check_body_size(size_t bytes) const;  // within max_body_bytes
  bool owns_all_experts() const;
  // A layer's work waiting for its turn. The first request of several for the same layer
  // (and kind) to get the turn computes them all in one matmul (rows are independent, so
  // each result is exactly what it would be alone); the others find theirs done when their
  // turn comes. Experts work answers per-expert rows (out: [assignments][hidden]).
  struct LayerWork {
    uint32_t layer;
    const float* x;
    size_t rows;
    float* out;
    std::span<const ExpertAssignment> assignments = {};  // experts work when not empty
    bool done = false;
    std::optional<Error> error = {};
    double ms = 0;
    bool experts() const { return !assignments.empty(); }
    size_t work() const { return experts() ? assignments.size() : rows; }
  };
  // Runs each work in turn, one per turn of the compute lock; returns the compute ms (turns
  // waited for not included).
  Result<double> compute(std::span<LayerWork> works, const ClientGone& client_gone, Deadline deadline);
  Result<double> compute_dense(const std::vector<uint32_t>& layers, const std::vector<float>& x, size_t rows,
                               std::vector<std::vector<float>>& outputs, const ClientGone& client_gone, Deadline deadline);
  HttpReply walk_ffn_json(std::string_view body, const ClientGone& client_gone, Deadline deadline);
  HttpReply fail(const Error& e);
  // 415 for a Content-Type this server does not take, listing those it does and, for a
  // known encoding it does not offer, why.
  Error refuse_content_type(std::string_view content_type, std::optional<wire::Encoding> known) const;

  Status compute_layer(LayerWork& work, double& ms);
  // One product over the batch's rows: dense, or every batch's assignments together.
  Status compute_batch(const std::vector<LayerWork*>& batch);

  const Model& model_;
  FfnBackend& compute_;
  FfnServiceOptions options_;
  std::vector<std::string> fingerprints_;  // per owned layer
  std::vector<std::string> expert_fingerprints_;  // per owned layer: its owned experts' (empty for a dense layer)
  FifoMutex compute_turns_;                // one layer at a time (it uses every core), in arrival order
  std::atomic<size_t> waiting_{0};
  std::mutex pending_mutex_;
  std::vector<LayerWork*> pending_;        // registered, not yet taken by a computation
  Metrics metrics_{"larql_shard"};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace larql
