// What a shard server does, without sockets: POST /v1/walk-ffn decoded, computed with the
// same LocalFfn the client uses, and encoded as negotiated (PROTOCOL §3–§7); /v1/stats and
// /v1/health documents. The HTTP layer (shard_server.cc) only moves bytes in and out.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infer/ffn_backend.h"
#include "model/model.h"
#include "net/layer_range.h"
#include "net/metrics.h"

namespace larql {

struct FfnServiceOptions {
  LayerRange layers;             // owned, inclusive
  bool i8_enabled = false;
  size_t max_body_bytes = 64u << 20;
  size_t max_queue = 64;         // requests waiting for compute beyond this get 503
};

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  bool retry_after = false;      // 503: add Retry-After
  std::vector<std::pair<std::string, std::string>> headers = {};  // extra response headers
};

// The JSON error body of PROTOCOL §7.
HttpReply error_reply(const Error& e);

class FfnService {
 public:
  FfnService(const Model& model, FfnBackend& compute, FfnServiceOptions options);

  HttpReply walk_ffn(std::string_view body, std::string_view content_type, std::string_view accept);
  nlohmann::json stats() const;
  nlohmann::json health() const;
  const Metrics& metrics() const { return metrics_; }
  Metrics& metrics() { return metrics_; }

 private:
  Status check_layers(const std::vector<uint32_t>& layers) const;
  // Runs the FFN of every listed layer on x (rows × hidden) into outputs; returns compute ms.
  Result<double> compute(const std::vector<uint32_t>& layers, const std::vector<float>& x, size_t rows,
                         std::vector<std::vector<float>>& outputs);
  HttpReply walk_ffn_json(std::string_view body);
  HttpReply fail(const Error& e);

  const Model& model_;
  FfnBackend& compute_;
  FfnServiceOptions options_;
  std::vector<std::string> fingerprints_;  // per owned layer
  std::mutex compute_mutex_;               // one computation at a time: it uses every core
  std::atomic<size_t> waiting_{0};
  Metrics metrics_{"larql_shard"};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace larql
