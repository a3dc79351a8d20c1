// `larql loadtest`'s traffic: N concurrent keep-alive clients POSTing /v1/walk-ffn to a
// shard or router for a bounded time, each request with a random encoding from a mix, a
// random number of rows and a random set of distinct layers (a batch across ranges, through
// a router); or, with `experts`, /v1/walk-experts (PROTOCOL §12): one layer, each row
// routed to k random experts of the target's, weighted sums or per-expert rows at random. Every answer is counted by status and error code, timed, and a 200's body is
// parsed: a malformed success counts as a failure too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "net/layer_range.h"
#include "wire/encoding.h"

namespace larql::loadtest {

// What GET /v1/stats says about the target.
struct Target {
  std::string mode;  // "ffn-service" or "router"
  size_t hidden = 0;
  uint32_t first_layer = 0, last_layer = 0;
  wire::EncodingSet requests, responses;
  // A mixture-of-experts target: the expert ids it serves, how many a position uses, and
  // its layers with experts (all of first-last where it does not list them).
  std::optional<LayerRange> experts;
  size_t experts_used = 0;
  std::vector<uint32_t> expert_layers;
};
Result<Target> read_target(const std::string& url, const std::optional<std::string>& api_key, int timeout_ms);

struct Span {
  size_t min = 1, max = 1;
};

struct LoadOptions {
  std::string url;
  size_t clients = 8;
  double seconds = 10;
  std::vector<wire::Encoding> mix;  // empty: every encoding the target accepts and answers in
  Span rows{1, 64};
  Span layers{1, 1};  // distinct layers per request; more than one is a batch
  std::optional<std::string> api_key;
  int timeout_ms = 30000;
  uint64_t seed = 1;
  bool experts = false;  // /v1/walk-experts traffic
};

struct LatencyMs {
  double p50 = 0, p99 = 0, max = 0;
};

struct LoadReport {
  double seconds = 0;
  size_t requests = 0, rows = 0, layer_rows = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  // "200", "503 overloaded", "transport shard_timeout", "200 malformed": how many of each.
  std::map<std::string, size_t> answers;
  size_t ok = 0;  // well-formed 200s
  LatencyMs latency;
  std::vector<wire::Encoding> mix;  // what was sent
};

// The mix `options` asks for, checked against what `target` accepts and answers in.
Result<std::vector<wire::Encoding>> resolve_mix(const LoadOptions& options, const Target& target);

// One valid single-row f32 request for `layer` on a connection of its own: OK when it is
// answered 200.
Status post_one_row(const LoadOptions& options, const Target& target, uint32_t layer);

// One single-row request per owned layer: pages every layer's weights in before a baseline.
Status warm_up(const LoadOptions& options, const Target& target);

Result<LoadReport> run_load(const LoadOptions& options, const Target& target);

}  // namespace larql::loadtest
