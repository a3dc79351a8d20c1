#include "loadtest/load_generator.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "net/http_client.h"
#include "net/shard_stats.h"
#include "wire/codec.h"
#include "wire/expert_codec.h"

namespace larql::loadtest {
namespace {

using Clock = std::chrono::steady_clock;
// Bodies each client builds before the clock starts and then cycles through, so the load
// generator spends its CPU on sending, not on encoding, while it shares the machine.
constexpr size_t kBodiesPerClient = 8;

HttpHeaders auth_headers(const std::optional<std::string>& api_key) {
  if (!api_key) return {};
  return {{"Authorization", "Bearer " + *api_key}};
}

// The encodings a shard names (unknown names skipped); f32 where it names none, as a
// reference-style server does.
wire::EncodingSet encodings_of(const std::optional<std::vector<std::string>>& names) {
  wire::EncodingSet set;
  for (const auto& n : names.value_or(std::vector<std::string>{}))
    if (auto e = wire::encoding_from_name(n)) set.insert(*e);
  if (set == wire::EncodingSet{}) set.insert(wire::Encoding::f32);
  return set;
}

struct PreparedRequest {
  std::string path = "/v1/walk-ffn";
  std::string body;
  std::string content_type, accept;
  size_t rows = 0, layers = 0;
  size_t assignments = 0;    // experts requests
  bool expert_rows = false;  // answered per expert, not as weighted sums
};

// Each of `rows` rows routed to k distinct experts of [first, last] (at most all of them),
// sorted as §12 wants, with positive weights.
std::vector<wire::ExpertAssignment> random_assignments(size_t rows, size_t k, const LayerRange& ids, std::mt19937_64& rng) {
  std::vector<uint32_t> all(ids.last - ids.first + 1);
  std::iota(all.begin(), all.end(), ids.first);
  k = std::clamp<size_t>(k, 1, all.size());
  std::vector<wire::ExpertAssignment> out;
  std::uniform_real_distribution<float> weight(0.05f, 1.0f);
  for (size_t r = 0; r < rows; ++r) {
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<uint32_t> chosen(all.begin(), all.begin() + long(k));
    std::sort(chosen.begin(), chosen.end());
    for (uint32_t e : chosen) out.push_back({uint32_t(r), e, weight(rng)});
  }
  return out;
}

class RequestFactory {
 public:
  RequestFactory(const LoadOptions& options, const Target& target, std::vector<wire::Encoding> requests,
                 std::vector<wire::Encoding> responses, uint64_t seed)
      : options_(options), target_(target), requests_(std::move(requests)), responses_(std::move(responses)), rng_(seed) {}

  Result<PreparedRequest> make() {
    const size_t owned = target_.last_layer - target_.first_layer + 1;
    const size_t rows = pick(options_.rows.min, options_.rows.max);
    const size_t n_layers = std::min(owned, pick(options_.layers.min, options_.layers.max));
    std::vector<uint32_t> layers(owned);
    std::iota(layers.begin(), layers.end(), target_.first_layer);
    std::shuffle(layers.begin(), layers.end(), rng_);
    layers.resize(n_layers);
    std::normal_distribution<float> value(0.0f, 1.0f);
    std::vector<float> values(rows * target_.hidden);
    for (float& v : values) v = value(rng_);
    const wire::Encoding request = requests_[pick(0, requests_.size() - 1)];
    const wire::Encoding response = responses_[pick(0, responses_.size() - 1)];
    PreparedRequest p{.body = {},
                      .content_type = std::string(wire::content_type(request)),
                      .accept = std::string(wire::content_type(response)),
                      .rows = rows,
                      .layers = n_layers};
    if (options_.experts) {  // one layer with experts, its rows routed at random
      const auto& candidates = target_.expert_layers;
      const uint32_t layer = candidates[pick(0, candidates.size() - 1)];
      const auto assignments = random_assignments(rows, target_.experts_used, *target_.experts, rng_);
      p.path = "/v1/walk-experts";
      p.layers = 1;
      p.assignments = assignments.size();
      p.expert_rows = pick(0, 1) == 1;
      auto encoded = wire::encode_expert_request(request, layer, uint32_t(rows), p.expert_rows, assignments, target_.hidden,
                                                 values, p.body);
      if (!encoded) return encoded.error();
      p.content_type = std::string(wire::content_type(encoded->encoding));
      return p;
    }
    wire::RequestHeader header{.batch = n_layers > 1, .layers = layers, .seq_len = uint32_t(rows)};
    auto encoded = wire::encode_request(request, header, target_.hidden, values, p.body);
    if (!encoded) return encoded.error();
    // A fallback to f32 (values f16/q8/i8 cannot carry) changes the body's type.
    p.content_type = std::string(wire::content_type(encoded->encoding));
    return p;
  }

 private:
  size_t pick(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng_); }

  const LoadOptions& options_;
  const Target& target_;
  std::vector<wire::Encoding> requests_, responses_;
  std::mt19937_64 rng_;
};

// Whether a 200's body is what was asked for: one record per layer, `rows` rows each,
// finite values.
bool well_formed(const HttpResponse& r, const PreparedRequest& p, size_t hidden) {
  std::optional<wire::Encoding> encoding;
  const std::string type = r.header("Content-Type");
  for (const auto& info : wire::kEncodings)
    if (type == info.content_type) encoding = info.encoding;
  if (!encoding) return false;
  if (p.expert_rows) {
    auto view = wire::parse_expert_rows_response(wire::as_bytes(r.body), *encoding, hidden);
    std::vector<float> out(p.assignments * hidden);
    return view && view->n == p.assignments && wire::decode_values(*encoding, view->values, p.assignments, hidden, out).ok();
  }
  auto view = wire::parse_response(wire::as_bytes(r.body), *encoding, hidden);
  if (!view || view->records.size() != p.layers) return false;
  std::vector<float> out(p.rows * hidden);
  for (const auto& record : view->records)
    if (record.seq_len != p.rows || !wire::decode_values(*encoding, record.values, p.rows, hidden, out)) return false;
  return true;
}

std::string answer_label(const HttpResponse& r) {
  std::string label = std::to_string(r.status);
  if (r.status / 100 != 2) {
    const auto doc = nlohmann::json::parse(r.body, nullptr, false);
    if (doc.is_object() && doc.contains("code") && doc["code"].is_string()) label += " " + doc["code"].get<std::string>();
  }
  return label;
}

struct ClientTally {
  LoadReport part;
  std::vector<double> latencies_ms;
  std::optional<Error> setup_error;
};

void run_client(const LoadOptions& options, const Target& target, const std::vector<wire::Encoding>& mix, size_t index,
                Clock::time_point start, ClientTally& tally) {
  std::vector<wire::Encoding> requests, responses;
  for (wire::Encoding e : mix) {
    if (target.requests.contains(e)) requests.push_back(e);
    if (target.responses.contains(e)) responses.push_back(e);
  }
  RequestFactory factory(options, target, requests, responses, options.seed * 1'000'003 + index);
  std::vector<PreparedRequest> bodies;
  for (size_t i = 0; i < kBodiesPerClient; ++i) {
    auto p = factory.make();
    if (!p) {
      tally.setup_error = p.error();
      return;
    }
    bodies.push_back(std::move(*p));
  }
  auto client = HttpClient::open(options.url, {.timeout_ms = options.timeout_ms, .ca_cert = {}});
  if (!client) {
    tally.setup_error = client.error();
    return;
  }
  const HttpHeaders auth = auth_headers(options.api_key);
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  for (size_t i = 0; Clock::now() < deadline; ++i) {
    const PreparedRequest& p = bodies[i % bodies.size()];
    HttpHeaders headers = auth;
    headers.emplace_back("Accept", p.accept);
    const auto sent = Clock::now();
    auto r = (*client)->post(p.path, p.body, p.content_type, headers);
    tally.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    LoadReport& t = tally.part;
    ++t.requests;
    t.bytes_sent += p.body.size();
    if (!r) {
      ++t.answers["transport " + std::string(error_code_name(r.error().code))];
      continue;
    }
    t.bytes_received += r->body.size();
    if (r->status == 200 && !well_formed(*r, p, target.hidden)) {
      ++t.answers["200 malformed"];
      continue;
    }
    ++t.answers[answer_label(*r)];
    if (r->status == 200) {
      ++t.ok;
      t.rows += p.rows;
      t.layer_rows += p.rows * p.layers;
    }
  }
}

double percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, size_t(q * double(sorted.size())))];
}

}  // namespace

Result<Target> read_target(const std::string& url, const std::optional<std::string>& api_key, int timeout_ms) {
  auto client = HttpClient::open(url, {.timeout_ms = timeout_ms, .ca_cert = {}});
  if (!client) return client.error();
  auto r = (*client)->get("/v1/stats", auth_headers(api_key));
  if (!r) return r.error();
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, url + "/v1/stats: " + what); };
  if (r->status != 200) return fail("answered " + std::to_string(r->status) + ": " + r->body);
  auto stats = parse_shard_stats(r->body);  // the router's and the client's parser (PROTOCOL §8)
  if (!stats) return fail(stats.error().message);
  if (!stats->layers || stats->layers->last >= wire::kMaxBatchLayers)
    return fail("expected layers {start, end} (PROTOCOL §8), the end below " + std::to_string(wire::kMaxBatchLayers));
  Target t;
  t.mode = stats->mode;
  t.hidden = stats->hidden;
  t.first_layer = stats->layers->first;
  t.last_layer = stats->layers->last;
  t.requests = encodings_of(stats->request_encodings);
  t.responses = encodings_of(stats->response_encodings);
  if (stats->experts) {
    t.experts = stats->experts->owned;
    t.experts_used = stats->experts->used;
    if (stats->expert_fingerprints)
      for (const auto& [layer, fp] : *stats->expert_fingerprints) t.expert_layers.push_back(layer);
    if (t.expert_layers.empty())
      for (uint32_t l = t.first_layer; l <= t.last_layer; ++l) t.expert_layers.push_back(l);
  }
  return t;
}

Result<std::vector<wire::Encoding>> resolve_mix(const LoadOptions& options, const Target& target) {
  std::vector<wire::Encoding> mix;
  if (options.mix.empty()) {
    for (const auto& info : wire::kEncodings)
      if (target.requests.contains(info.encoding) || target.responses.contains(info.encoding)) mix.push_back(info.encoding);
    return mix;
  }
  bool any_request = false, any_response = false;
  for (wire::Encoding e : options.mix) {
    if (!target.requests.contains(e) && !target.responses.contains(e))
      return make_error(ErrorCode::invalid_argument, "--mix " + std::string(wire::encoding_name(e)) + ": " + options.url +
                                                         " neither accepts nor sends it (its /v1/stats wire lists)");
    any_request |= target.requests.contains(e);
    any_response |= target.responses.contains(e);
  }
  if (!any_request || !any_response)
    return make_error(ErrorCode::invalid_argument, "--mix needs at least one encoding the target accepts and one it sends");
  return options.mix;
}

namespace {

Status post_one_row_on(HttpClient& client, const LoadOptions& options, const Target& target, uint32_t layer) {
  const std::vector<float> values(target.hidden, 0.5f);
  std::string body;
  const bool experts = options.experts && std::count(target.expert_layers.begin(), target.expert_layers.end(), layer);
  if (options.experts && !experts) return Ok{};  // a dense layer: not this traffic's
  auto e = experts ? wire::encode_expert_request(wire::Encoding::f32, layer, 1, false,
                                                 std::vector<wire::ExpertAssignment>{{0, target.experts->first, 1.0f}},
                                                 target.hidden, values, body)
                   : wire::encode_request(wire::Encoding::f32, {.layers = {layer}, .seq_len = 1}, target.hidden, values, body);
  if (!e) return e.error();
  auto r = client.post(experts ? "/v1/walk-experts" : "/v1/walk-ffn", body, wire::content_type(wire::Encoding::f32),
                       auth_headers(options.api_key));
  if (!r) return r.error();
  if (r->status != 200)
    return make_error(ErrorCode::invalid_argument,
                      "a valid request for layer " + std::to_string(layer) + " answered " + std::to_string(r->status) + ": " + r->body);
  return Ok{};
}

}  // namespace

Status post_one_row(const LoadOptions& options, const Target& target, uint32_t layer) {
  auto client = HttpClient::open(options.url, {.timeout_ms = options.timeout_ms, .ca_cert = {}});
  if (!client) return client.error();
  return post_one_row_on(**client, options, target, layer);
}

Status warm_up(const LoadOptions& options, const Target& target) {
  auto client = HttpClient::open(options.url, {.timeout_ms = options.timeout_ms, .ca_cert = {}});
  if (!client) return client.error();
  for (uint32_t layer = target.first_layer; layer <= target.last_layer; ++layer)
    if (auto s = post_one_row_on(**client, options, target, layer); !s) return s;
  return Ok{};
}

Result<LoadReport> run_load(const LoadOptions& options, const Target& target) {
  if (options.experts && !target.experts)
    return make_error(ErrorCode::invalid_argument, options.url + " lists no experts in /v1/stats: --experts needs a shard or "
                                                                 "router of a mixture-of-experts model");
  auto mix = resolve_mix(options, target);
  if (!mix) return mix.error();
  std::vector<ClientTally> tallies(options.clients);
  const auto start = Clock::now();
  {
    std::vector<std::jthread> clients;
    for (size_t i = 0; i < options.clients; ++i)
      clients.emplace_back([&, i] { run_client(options, target, *mix, i, start, tallies[i]); });
  }
  LoadReport report;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.mix = *mix;
  std::vector<double> latencies;
  for (auto& t : tallies) {
    if (t.setup_error) return *t.setup_error;
    report.requests += t.part.requests;
    report.rows += t.part.rows;
    report.layer_rows += t.part.layer_rows;
    report.bytes_sent += t.part.bytes_sent;
    report.bytes_received += t.part.bytes_received;
    report.ok += t.part.ok;
    for (const auto& [label, n] : t.part.answers) report.answers[label] += n;
    latencies.insert(latencies.end(), t.latencies_ms.begin(), t.latencies_ms.end());
  }
  std::sort(latencies.begin(), latencies.end());
  report.latency = {percentile(latencies, 0.50), percentile(latencies, 0.99), latencies.empty() ? 0 : latencies.back()};
  return report;
}

}  // namespace larql::loadtest
