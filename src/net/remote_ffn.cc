#include "net/remote_ffn.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <chrono>
#include <thread>
#include <nlohmann/json.hpp>

#include "model/fingerprint.h"
#include "net/http_client.h"
#include "net/http_reply.h"
#include "net/range_attempts.h"
#include "net/shard_spec.h"
#include "net/shard_stats.h"
#include "wire/codec.h"
#include "wire/expert_codec.h"
#include "wire/wire_config.h"

namespace larql {

using nlohmann::json;
using namespace wire;

struct RemoteFfn::Shard {
  std::string url;
  ShardRange part;   // its layers and what of them it serves
  LayerRange range;  // part.range, narrowed to the model
  std::unique_ptr<HttpClient> client;  // for /v1/stats, and the first of `idle`
  HttpClientOptions client_options;
  Encoding request_encoding = Encoding::f32;  // the best of the client's ladder that the shard takes
  size_t max_body_bytes = 64u << 20;
  size_t max_work = SIZE_MAX;   // positions × layers per request (a shard's --max-work)
  int retry_after_s = 1;        // from its last 503
  // Keep-alive connections not in use (guarded by RemoteFfn::hedge_mutex_): a hedged call's
  // loser holds its own until it ends, so the next call to this shard opens another.
  std::vector<std::unique_ptr<HttpClient>> idle;
};

// Threads kept for hedged calls, each taking the next job: starting a thread per call cost
// 1–5 ms on our VMs, more than most hedges save.
class RemoteFfn::CallThreads {
 public:
  ~CallThreads() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs `job` on an idle thread, or a new one when none is idle (throws std::system_error
  // when none can be started).
  void run(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    if (idle_ == jobs_.size()) threads_.emplace_back([this] { loop(); });
    jobs_.push_back(std::move(job));
    wake_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// A hedged call and the one racing it (hedge_after_ms): each runs on a kept thread with its
// own request buffer and leaves its response here; forward() takes the first that
// succeeded. The loser runs on to its end (bounded by --timeout-ms) on its own connection.
struct RemoteFfn::Race {
  std::vector<std::optional<Result<HttpResponse>>> responses{2};
  std::vector<std::string> bodies{2};
  size_t finished = 0;
};

// One call's work: a layer's dense rows, or an expert range's share of a MoE layer's rows.
struct RemoteFfn::Request {
  uint32_t layer = 0;
  const float* x = nullptr;  // rows × hidden
  size_t rows = 0;
  std::vector<ExpertAssignment> assignments = {};  // an experts call when not empty
  bool expert_rows = false;                        // answer per-expert rows, not weighted sums
  float* out = nullptr;                            // out_rows() × hidden
  size_t max_row_assignments = 1;                  // the most assignments a row has (request size per row)

  bool experts() const { return !assignments.empty(); }
  size_t out_rows() const { return expert_rows ? assignments.size() : rows; }
  // Rows [first, first + n) with their assignments, renumbered.
  Request rows_slice(size_t first, size_t n, size_t hidden) const {
    Request r{layer, x + first * hidden, n, {}, expert_rows, out + first * hidden, max_row_assignments};
    if (!experts()) return r;
    size_t first_assignment = assignments.size();
    for (size_t i = 0; i < assignments.size(); ++i) {
      if (assignments[i].row < first || assignments[i].row >= first + n) continue;
      first_assignment = std::min(first_assignment, i);
      r.assignments.push_back({uint32_t(assignments[i].row - first), assignments[i].expert, assignments[i].weight});
    }
    if (expert_rows) r.out = out + first_assignment * hidden;
    return r;
  }
};

namespace {

HttpHeaders auth_headers(const RemoteFfnOptions& o) {
  HttpHeaders h;
  if (o.api_key) h.emplace_back("Authorization", "Bearer " + *o.api_key);
  return h;
}


// Calls that ran side by side counted as the client waited for them: remote_ms as the wall
// time since they started, server_ms as the slowest one's (the stats would otherwise add
// overlapping times, and larql bench would project more waiting than there is).
class ParallelTime {
 public:
  ParallelTime(const RemoteFfnStats& stats, std::chrono::steady_clock::time_point start)
      : start_(start), remote_ms_(stats.remote_ms), server_ms_(stats.server_ms) {}
  void settle(RemoteFfnStats& stats, double slowest_server_ms) const {
    stats.remote_ms = remote_ms_ + std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    stats.server_ms = server_ms_ + slowest_server_ms;
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double remote_ms_, server_ms_;
};

// A call that failed this way may succeed on another replica, or later.
bool worth_retrying(ErrorCode code) {
  return code == ErrorCode::overloaded || code == ErrorCode::shard_unavailable || code == ErrorCode::shard_timeout;
}

Error shard_error(ErrorCode code, const std::string& url, const std::string& what) {
  return make_error(code, "shard " + url + ": " + what);
}

}  // namespace

RemoteFfn::RemoteFfn(const Model& model, RemoteFfnOptions options)
    : model_(model), options_(std::move(options)), call_threads_(std::make_unique<CallThreads>()) {}
RemoteFfn::~RemoteFfn() {
  std::unique_lock lock(hedge_mutex_);
  hedge_done_.wait(lock, [&] { return running_calls_ == 0; });  // a hedged call's loser ends within --timeout-ms
}

Result<std::unique_ptr<RemoteFfn>> RemoteFfn::connect(const Model& model, const RemoteFfnOptions& options,
                                                      std::vector<std::string>* warnings) {
  auto spec = parse_shard_spec(options.spec);
  if (!spec) return spec.error();
  auto remote = std::unique_ptr<RemoteFfn>(new RemoteFfn(model, options));
  const uint32_t layers = uint32_t(model.config.layers);
  const size_t experts = model.config.moe.expert_ids();  // the shared ones' ids follow the routed ones'
  remote->layer_shards_.resize(layers);
  remote->expert_groups_.resize(layers);
  for (auto& part : *spec) {
    part.range.last = std::min(part.range.last, layers - 1);
    if (part.range.first >= layers)
      return make_error(ErrorCode::invalid_argument, "--ffn range " + part.str() + " is beyond the model's " +
                                                         std::to_string(layers) + " layers");
    if (part.part != ShardPart::all && !experts)
      return make_error(ErrorCode::invalid_argument, "--ffn part " + part.str() + " names experts or a dense part, but model " +
                                                         model.config.name + " has no mixture-of-experts layers");
    if (part.part == ShardPart::experts) {
      if (part.experts.first >= experts)
        return make_error(ErrorCode::invalid_argument, "--ffn part " + part.str() + " is beyond the model's " +
                                                           std::to_string(experts) + " experts");
      part.experts.last = std::min<uint32_t>(part.experts.last, uint32_t(experts - 1));
    }
    const LayerRange all_experts{0, uint32_t(std::max<size_t>(experts, 1) - 1)};
    std::string unreachable;
    size_t reachable = 0;
    for (const auto& url : part.urls) {
      auto shard = std::make_unique<Shard>();
      shard->url = url;
      shard->part = part;
      shard->range = part.range;
      auto client = HttpClient::open(url, {options.timeout_ms, options.ca_cert});
      if (!client) return shard_error(ErrorCode::invalid_argument, url, client.error().message);
      shard->client = std::move(*client);
      shard->client_options = {options.timeout_ms, options.ca_cert};
      auto res = shard->client->get("/v1/stats", auth_headers(options));
      if (!res || res->status >= 500) {  // a replica that is down now: the others may serve
        unreachable += (unreachable.empty() ? "" : "; ") + url + " (" + describe_call(res) + ")";
        continue;
      }
      if (res->status != 200)
        return shard_error(ErrorCode::invalid_argument, url, "GET /v1/stats failed: " + describe_call(res));
      if (auto s = remote->check_shard(*shard, res->body, warnings); !s) return s.error();
      ++reachable;
      for (uint32_t l = part.range.first; l <= part.range.last; ++l) {
        if (part.has_dense()) remote->layer_shards_[l].push_back(shard.get());
        if (part.part == ShardPart::dense || !model.config.layer(l).sparse) continue;
        const LayerRange owned = part.part == ShardPart::experts ? part.experts : all_experts;
        auto& groups = remote->expert_groups_[l];
        auto group = std::find_if(groups.begin(), groups.end(), [&](const ExpertGroup& g) { return g.experts.first == owned.first; });
        if (group == groups.end()) group = groups.insert(groups.end(), ExpertGroup{owned, {}});
        group->replicas.push_back(shard.get());
      }
      remote->shards_.push_back(std::move(shard));
    }
    if (reachable == 0)
      return make_error(ErrorCode::shard_unavailable, "no replica of layers " + part.str() + " answers: " + unreachable);
    if (!unreachable.empty()) warnings->push_back("skipping unreachable replicas of layers " + part.str() + ": " + unreachable);
  }
  for (auto& groups : remote->expert_groups_)
    std::sort(groups.begin(), groups.end(), [](const ExpertGroup& a, const ExpertGroup& b) { return a.experts.first < b.experts.first; });
  if (auto s = remote->check_coverage(); !s) return s.error();
  return remote;
}

Status RemoteFfn::check_coverage() const {
  const ModelConfig& c = model_.config;
  for (uint32_t l = 0; l < c.layers; ++l) {
    const bool sparse = c.layer(l).sparse;
    if ((!sparse || c.moe.beside_dense) && layer_shards_[l].empty())
      return make_error(ErrorCode::no_owning_shard, "--ffn map covers no shard for layer " + std::to_string(l) +
                                                        (sparse ? "'s dense MLP (a plain or a '/dense' part serves it)"
                                                         : c.moe.experts ? " (a dense layer: a plain or a '/dense' part serves it)" : ""));
    if (!sparse) continue;
    std::vector<LayerRange> ranges;
    for (const ExpertGroup& g : expert_groups_[l]) ranges.push_back(g.experts);
    if (const auto gap = first_uncovered(ranges, uint32_t(c.moe.expert_ids())))
      return make_error(ErrorCode::no_owning_shard, "--ffn map covers no shard for experts " + gap->str() + " of layer " +
                                                        std::to_string(l));
  }
  return Ok{};
}

const std::string& RemoteFfn::local_fingerprint(uint32_t layer) {
  auto [it, added] = local_fingerprints_.try_emplace(layer);
  if (added) it->second = layer_fingerprint(model_, layer);
  return it->second;
}

EncodingSet RemoteFfn::request_encodings() const {
  EncodingSet used;
  for (const auto& shard : shards_) used.insert(shard->request_encoding);
  return used;
}

Status RemoteFfn::check_shard(Shard& shard, const std::string& body, std::vector<std::string>* warnings) {
  const std::string& url = shard.url;
  const LayerRange& range = shard.range;
  auto stats = parse_shard_stats(body);
  if (!stats) return shard_error(stats.error().code, url, stats.error().message);
  if (stats->hidden != model_.config.hidden)
    return shard_error(ErrorCode::invalid_argument, url, "serves hidden size " + std::to_string(stats->hidden) +
                                                             "; the local model has " + std::to_string(model_.config.hidden));
  if (stats->layers) {
    if (!stats->layers->contains(range.first) || !stats->layers->contains(range.last))
      return shard_error(ErrorCode::invalid_argument, url, "serves layers " + stats->layers->str() + " but is asked for " + range.str());
  } else {
    warnings->push_back("shard " + url + " does not list its layers (a reference server?); coverage not checked");
  }
  // Remote results equal local ones only when both compute the FFN the same way. The
  // K-quants' arithmetic is the file's, so a difference there is another build: refused. A
  // client whose bf16 weights compute exactly refuses a shard that uses bf16-dot; the other
  // way round only costs the client its own arithmetic's speed, so it is said but allowed.
  {
    const std::string& theirs = stats->ffn_arithmetic;
    const RangeArithmetic ours = model_.ffn_arithmetic(range.first, range.last);
    const auto parsed = RangeArithmetic::from_name(theirs);
    if (theirs != ours.name()) {
      const std::string what = "computes the FFN with the " + theirs + " arithmetic, this client with " + ours.name();
      if (!parsed)
        return shard_error(ErrorCode::invalid_argument, url, what + ", which this build does not know (update it)");
      if (parsed->q8k != ours.q8k)
        return shard_error(ErrorCode::invalid_argument, url,
                           what + ": the two builds compute K-quant weights differently (update the older one)");
      if (!ours.bf16_dot)
        return shard_error(ErrorCode::invalid_argument, url,
                           what + ": remote results would differ from local ones (start the shard with --arithmetic f32, "
                                  "or pass --arithmetic bf16-dot here)");
      warnings->push_back("shard " + url + " " + what);
    }
  }
  if (stats->fingerprints) {
    for (uint32_t l = range.first; l <= range.last; ++l) {
      const std::string& local = local_fingerprint(l);
      const auto theirs = stats->fingerprints->find(l);
      if (theirs == stats->fingerprints->end() || theirs->second != local)
        return shard_error(ErrorCode::invalid_argument, url, "layer " + std::to_string(l) + " fingerprint " +
                                                                 (theirs == stats->fingerprints->end() ? "missing" : "\"" + theirs->second + "\"") +
                                                                 " differs from the local model's \"" + local +
                                                                 "\": the shard serves a different model");
    }
  } else {
    warnings->push_back("shard " + url + " sends no layer fingerprints; it is not checked to hold the same model");
  }
  if (shard.part.part == ShardPart::experts) {
    if (!stats->experts)
      return shard_error(ErrorCode::invalid_argument, url, "is asked for experts " + shard.part.experts.str() +
                                                               " but does not list its experts (not an expert shard of this model?)");
    const LayerRange owned = stats->experts->owned;
    if (!owned.contains(shard.part.experts.first) || !owned.contains(shard.part.experts.last))
      return shard_error(ErrorCode::invalid_argument, url, "serves experts " + owned.str() + " but is asked for " +
                                                               shard.part.experts.str());
    for (uint32_t l = range.first; l <= range.last; ++l) {
      if (!model_.config.layer(l).sparse || !stats->expert_fingerprints) continue;
      const std::string local = expert_fingerprint(model_, l, owned.first, owned.last);
      const auto theirs = stats->expert_fingerprints->find(l);
      if (theirs == stats->expert_fingerprints->end() || theirs->second != local)
        return shard_error(ErrorCode::invalid_argument, url, "layer " + std::to_string(l) + " experts " + owned.str() +
                                                                 ": fingerprint differs from the local model's \"" + local +
                                                                 "\": the shard serves different experts");
    }
  } else if (shard.part.part == ShardPart::all && stats->experts &&
             (stats->experts->owned.first != 0 || stats->experts->owned.last + 1 < stats->experts->count + stats->experts->shared)) {
    return shard_error(ErrorCode::invalid_argument, url, "owns only experts " + stats->experts->owned.str() +
                                                             "; name them in the map: '" + range.str() + "/" +
                                                             stats->experts->owned.str() + "=" + url + "'");
  }
  if (stats->request_encodings) {
    EncodingSet accepts{Encoding::f32};
    for (const auto& name : *stats->request_encodings)
      if (auto e = encoding_from_name(name)) accepts.insert(*e);
    shard.request_encoding = options_.wire.request_encoding(accepts);
    if (shard.request_encoding != options_.wire.preferred)
      warnings->push_back("shard " + url + " does not take " + std::string(encoding_name(options_.wire.preferred)) +
                          " requests (it lists " + describe(accepts) + "); sending " +
                          std::string(encoding_name(shard.request_encoding)));
  } else {
    warnings->push_back("shard " + url + " does not list its wire formats; sending f32 requests");
  }
  if (stats->max_body_bytes) shard.max_body_bytes = *stats->max_body_bytes;
  if (stats->max_work) shard.max_work = *stats->max_work;
  return Ok{};
}

Result<HttpResponse> RemoteFfn::exchange(Shard& shard, const Request& req, std::chrono::steady_clock::time_point deadline,
                                         std::string& body) const {
  const size_t hidden = model_.config.hidden;
  const std::span<const float> x{req.x, req.rows * hidden};
  auto enc = req.experts() ? encode_expert_request(shard.request_encoding, req.layer, uint32_t(req.rows), req.expert_rows,
                                                   req.assignments, hidden, x, body)
                           : encode_request(shard.request_encoding, {.layers = {req.layer}, .seq_len = uint32_t(req.rows)}, hidden, x, body);
  if (!enc)
    return make_error(ErrorCode::non_finite_input, "refusing to send layer " + std::to_string(req.layer) + "'s FFN input: " +
                                                       enc.error().message);
  HttpHeaders headers = auth_headers(options_);
  headers.emplace_back("Accept", options_.wire.accept);
  const auto now = std::chrono::steady_clock::now();
  headers.emplace_back(kDeadlineHeader,
                       std::to_string(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count())));
  auto client = take_connection(shard);
  if (!client) return client.error();
  auto res = (*client)->post(req.experts() ? "/v1/walk-experts" : "/v1/walk-ffn", body, content_type(enc->encoding), headers);
  give_connection(shard, std::move(*client));
  return res;
}

Status RemoteFfn::accept(Shard& shard, const Request& req, const Result<HttpResponse>& res, size_t body_bytes) {
  const size_t hidden = model_.config.hidden;
  if (!res && res.error().code == ErrorCode::non_finite_input) return res.error();  // never sent
  ++stats_.calls;
  stats_.bytes_sent += body_bytes;
  auto fail = [&](ErrorCode code, const std::string& what) {
    return shard_error(code, shard.url, "layer " + std::to_string(req.layer) + ": " + what);
  };
  if (!res) return fail(res.error().code, res.error().message);
  stats_.bytes_received += res->body.size();
  stats_.head_bytes_sent += res->head_bytes_sent;
  stats_.head_bytes_received += res->head_bytes_received;
  if (res->status == 503) {  // busy, not broken (PROTOCOL §9): the caller backs off
    shard.retry_after_s = res->retry_after_s();
    return fail(ErrorCode::overloaded, describe_call(res));
  }
  if (res->status != 200)
    return fail(res->status >= 500 ? ErrorCode::shard_unavailable : ErrorCode::invalid_argument, describe_call(res));
  const auto response_encoding = body_type_from_content_type(res->header("Content-Type")).binary;
  if (!response_encoding)
    return fail(ErrorCode::shard_unavailable, "answered with Content-Type '" + res->header("Content-Type") +
                                                  "', expected one of the binary FFN types");
  if (*response_encoding == Encoding::f32 && options_.wire.preferred != Encoding::f32) ++stats_.f32_fallbacks;
  const size_t n = req.out_rows();
  Bytes values;
  float latency_ms = 0;
  if (req.expert_rows) {
    auto view = parse_expert_rows_response(as_bytes(res->body), *response_encoding, hidden);
    if (!view) return fail(ErrorCode::shard_unavailable, "malformed response: " + view.error().message);
    if (view->layer != req.layer || view->n != n)
      return fail(ErrorCode::shard_unavailable, "response is for another request (layer or row count differ)");
    values = view->values, latency_ms = view->latency_ms;
  } else {
    auto view = parse_response(as_bytes(res->body), *response_encoding, hidden);
    if (!view) return fail(ErrorCode::shard_unavailable, "malformed response: " + view.error().message);
    if (view->records.size() != 1 || view->records[0].layer != req.layer || view->records[0].seq_len != n)
      return fail(ErrorCode::shard_unavailable, "response is for another request (layer or seq_len differ)");
    values = view->records[0].values, latency_ms = view->latency_ms;
  }
  if (auto s = decode_values(*response_encoding, values, n, hidden, {req.out, n * hidden}); !s)
    return fail(ErrorCode::shard_unavailable, "response values rejected: " + s.error().message);
  stats_.server_ms += latency_ms;
  return Ok{};
}

Status RemoteFfn::call(Shard& shard, const Request& req, std::chrono::steady_clock::time_point deadline) {
  const auto start = std::chrono::steady_clock::now();
  ++stats_.round_trips;
  auto res = exchange(shard, req, deadline, body_);
  stats_.remote_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return accept(shard, req, res, body_.size());
}

std::optional<Status> RemoteFfn::hedged_call(Shard& first, Shard& second, const Request& req,
                                             std::chrono::steady_clock::time_point deadline) {
  auto race = std::make_shared<Race>();
  Shard* shards[2] = {&first, &second};
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(hedge_mutex_);
  if (!launch(race, 0, first, req, deadline)) return std::nullopt;  // no thread to be had: the caller tries in turn
  ++stats_.round_trips;  // the two race side by side
  size_t started = 1;
  if (!hedge_done_.wait_for(lock, std::chrono::duration<double, std::milli>(options_.hedge_after_ms),
                            [&] { return race->finished > 0; })) {
    if (launch(race, 1, second, req, deadline)) {
      ++stats_.hedges;
      started = 2;
    }
  }
  // The first call to succeed wins; a failure waits for the other (each ends by the deadline).
  std::optional<Status> last;
  std::vector<bool> taken(2, false);
  for (size_t seen = 0; seen < started; ++seen) {
    hedge_done_.wait(lock, [&] { return race->finished > seen; });
    const size_t i = race->responses[0] && !taken[0] ? 0 : 1;
    taken[i] = true;
    const Result<HttpResponse>& res = *race->responses[i];
    stats_.remote_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Status status = accept(*shards[i], req, res, race->bodies[i].size());
    if (status) {
      if (i == 1) ++stats_.hedge_wins;
      return status;
    }
    last = std::move(status);
  }
  return last;
}

Result<std::unique_ptr<HttpClient>> RemoteFfn::take_connection(Shard& shard) const {
  {
    std::lock_guard lock(hedge_mutex_);
    if (shard.client) return std::move(shard.client);
    if (!shard.idle.empty()) {
      auto c = std::move(shard.idle.back());
      shard.idle.pop_back();
      return c;
    }
  }
  return HttpClient::open(shard.url, shard.client_options);  // every open one is held by a call
}

void RemoteFfn::give_connection(Shard& shard, std::unique_ptr<HttpClient> connection) const {
  std::lock_guard lock(hedge_mutex_);
  if (!shard.client) shard.client = std::move(connection);
  else if (shard.idle.size() < 2) shard.idle.push_back(std::move(connection));  // more are closed
}

Status RemoteFfn::forward(uint32_t layer, std::span<const float> x, size_t rows, std::span<float> out) {
  if (layer >= layer_shards_.size())
    return make_error(ErrorCode::layer_out_of_range, "layer " + std::to_string(layer) + " is out of range");
  return send(layer_shards_[layer], {.layer = layer, .x = x.data(), .rows = rows, .out = out.data()});
}

Status RemoteFfn::experts(uint32_t layer, std::span<const float> x, size_t rows, std::span<const ExpertAssignment> assignments,
                          std::span<float> out) {
  const size_t H = model_.config.hidden;
  if (layer >= expert_groups_.size() || expert_groups_[layer].empty())
    return make_error(ErrorCode::not_moe_layer, "layer " + std::to_string(layer) + " has no expert shards");
  const std::vector<ExpertGroup>& groups = expert_groups_[layer];
  const bool expert_rows = options_.expert_rows;
  // Each expert range's share: only the rows routed to it, renumbered.
  std::vector<ExpertPart> parts;
  std::vector<Request> requests;
  part_x_.resize(groups.size()), part_out_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    ExpertPart& part = parts.emplace_back(take_expert_range(assignments, groups[g].experts.first, groups[g].experts.last));
    const size_t m = part.rows.size();
    Request& req = requests.emplace_back(Request{.layer = layer, .x = x.data(), .rows = m, .assignments = part.assignments,
                                                 .expert_rows = expert_rows});
    if (m == 0) continue;
    if (m != rows) {
      part_x_[g].resize(m * H);
      for (size_t i = 0; i < m; ++i) std::copy_n(x.data() + part.rows[i] * H, H, part_x_[g].data() + i * H);
      req.x = part_x_[g].data();
    }
    for (size_t i = 0, run = 0; i < req.assignments.size(); ++i) {
      run = i > 0 && req.assignments[i - 1].row == req.assignments[i].row ? run + 1 : 1;
      req.max_row_assignments = std::max(req.max_row_assignments, run);
    }
    part_out_[g].resize(req.out_rows() * H);
    req.out = part_out_[g].data();
  }
  // The ranges' calls go out together: every range but the first starts on a kept thread
  // (its first replica, where it needs no chunks and no hedging), the first runs here; a
  // started call that failed goes through send()'s replicas and retries after.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(options_.timeout_ms);
  std::vector<std::shared_ptr<Race>> started(groups.size());
  size_t first = groups.size();
  for (size_t g = 0; g < groups.size(); ++g) {
    if (requests[g].rows == 0) continue;
    if (first == groups.size()) {
      first = g;
      continue;
    }
    Shard& shard = *groups[g].replicas[0];
    if (options_.hedge_after_ms == 0 && chunk_rows(shard, requests[g]) == requests[g].rows)
      started[g] = start_call(shard, requests[g], deadline);
  }
  std::optional<Error> error;
  const ParallelTime overlap(stats_, start);
  double slowest_server_ms = 0;  // the parts compute side by side: the client waits for the slowest
  for (size_t g = first; g < groups.size(); ++g) {
    if (requests[g].rows == 0) continue;
    const double server_before = stats_.server_ms;
    Status s = Ok{};
    if (started[g]) {
      s = finish_call(*groups[g].replicas[0], requests[g], started[g], start);
      if (!s && !error && worth_retrying(s.error().code)) s = send(groups[g].replicas, requests[g]);
    } else if (!error) {
      s = send(groups[g].replicas, requests[g]);
    }
    if (!s && !error) error = s.error();  // the other started calls are still waited for
    slowest_server_ms = std::max(slowest_server_ms, stats_.server_ms - server_before);
  }
  overlap.settle(stats_, slowest_server_ms);
  if (error) return *error;

  // Per-expert rows go back into assignment order and are summed here (the one order,
  // §12); the ranges' weighted sums are added in range order.
  if (expert_rows) {
    expert_rows_.resize(assignments.size() * H);
    for (size_t g = 0; g < groups.size(); ++g)
      for (size_t i = 0; i < parts[g].sources.size(); ++i)
        std::copy_n(part_out_[g].data() + i * H, H, expert_rows_.data() + size_t{parts[g].sources[i]} * H);
    sum_expert_rows(assignments, expert_rows_.data(), H, out.data());
    return Ok{};
  }
  row_written_.assign(rows, 0);
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < parts[g].rows.size(); ++i) {
      const uint32_t row = parts[g].rows[i];
      float* o = out.data() + row * H;
      const float* y = part_out_[g].data() + i * H;
      if (!row_written_[row]) std::copy_n(y, H, o);
      else for (size_t k = 0; k < H; ++k) o[k] += y[k];
      row_written_[row] = 1;
    }
  return Ok{};
}

Status RemoteFfn::forward_with_experts(uint32_t layer, std::span<const float> x, std::span<const float> expert_x, size_t rows,
                                       std::span<const ExpertAssignment> assignments, std::span<float> out,
                                       std::span<float> expert_out) {
  if (layer >= layer_shards_.size() || layer_shards_[layer].empty())
    return make_error(ErrorCode::layer_out_of_range, "layer " + std::to_string(layer) + " has no dense MLP shard");
  const Request dense{.layer = layer, .x = x.data(), .rows = rows, .out = out.data()};
  Shard& shard = *layer_shards_[layer][0];
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Race> started;
  if (options_.hedge_after_ms == 0 && chunk_rows(shard, dense) == rows)
    started = start_call(shard, dense, start + std::chrono::milliseconds(options_.timeout_ms));
  if (!started) {
    if (auto s = send(layer_shards_[layer], dense); !s) return s;
    return experts(layer, expert_x, rows, assignments, expert_out);
  }
  const ParallelTime overlap(stats_, start);
  const double server_before = stats_.server_ms;
  Status experts_status = experts(layer, expert_x, rows, assignments, expert_out);
  const double experts_server_ms = stats_.server_ms - server_before;
  Status dense_status = finish_call(shard, dense, started, start);  // waited for whatever the experts did
  overlap.settle(stats_, std::max(experts_server_ms, stats_.server_ms - server_before - experts_server_ms));
  if (!dense_status) {
    if (!worth_retrying(dense_status.error().code)) return dense_status;
    if (auto s = send(layer_shards_[layer], dense); !s) return s;
  }
  return experts_status;
}

size_t RemoteFfn::chunk_rows(const Shard& shard, const Request& req) const {
  // A row costs its f32 input and, for per-expert rows, one output per assignment.
  const size_t k = req.max_row_assignments;
  const size_t per_row = *values_byte_size(Encoding::f32, 1, model_.config.hidden) * (req.expert_rows ? 1 + k : 1) +
                         (req.experts() ? 12 * k : 0);
  const size_t fit = shard.max_body_bytes > 64 ? (shard.max_body_bytes - 64) / per_row : 1;
  const size_t work = req.experts() ? shard.max_work / k : shard.max_work;
  return std::max<size_t>(1, std::min({req.rows, fit, work}));
}

bool RemoteFfn::launch(const std::shared_ptr<Race>& race, size_t slot, Shard& shard, const Request& req,
                       std::chrono::steady_clock::time_point deadline) {
  ++running_calls_;
  try {
    // The input is copied: the call may outlive its caller (a hedge's loser, or a caller
    // that returns early).
    call_threads_->run([this, race, slot, shard = &shard, deadline, request = req,
                        input = std::vector<float>(req.x, req.x + req.rows * model_.config.hidden)]() mutable {
      request.x = input.data();
      std::string body;
      auto res = exchange(*shard, request, deadline, body);
      std::lock_guard lock(hedge_mutex_);
      race->bodies[slot] = std::move(body);
      race->responses[slot] = std::move(res);
      ++race->finished;
      --running_calls_;
      hedge_done_.notify_all();
    });
  } catch (const std::system_error&) {
    --running_calls_;
    return false;
  }
  return true;
}

std::shared_ptr<RemoteFfn::Race> RemoteFfn::start_call(Shard& shard, const Request& req,
                                                       std::chrono::steady_clock::time_point deadline) {
  auto race = std::make_shared<Race>();
  std::lock_guard lock(hedge_mutex_);
  return launch(race, 0, shard, req, deadline) ? race : nullptr;  // none: the caller calls in turn
}

Status RemoteFfn::finish_call(Shard& shard, const Request& req, const std::shared_ptr<Race>& race,
                              std::chrono::steady_clock::time_point started) {
  std::unique_lock lock(hedge_mutex_);
  hedge_done_.wait(lock, [&] { return race->finished > 0; });
  stats_.remote_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return accept(shard, req, *race->responses[0], race->bodies[0].size());
}

Status RemoteFfn::send(const std::vector<Shard*>& replicas, const Request& req) {
  const size_t hidden = model_.config.hidden, rows = req.rows;
  const uint32_t layer = req.layer;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  for (int attempt = 0;; ++attempt) {
    std::string failures;
    int busy_retry_after_s = 0;  // smallest Retry-After of the replicas that were busy
    // A prefill whose message would exceed a server's body or work limit goes in chunks of
    // positions. A row costs its f32 input and, for per-expert rows, one output per assignment.
    auto chunk_for = [&](const Shard& shard) { return chunk_rows(shard, req); };
    size_t next = 0;
    // Hedging ("The Tail at Scale"): the first two replicas race when the first has not
    // answered within hedge_after_ms; only calls that need no chunks are hedged.
    // A call that failed: busy ones give their Retry-After, other failures move on, and an
    // error that is the caller's ends the request.
    auto failed = [&](const Shard& shard, const Status& status) -> std::optional<Error> {
      const ErrorCode code = status.error().code;
      if (code == ErrorCode::overloaded)
        busy_retry_after_s = busy_retry_after_s == 0 ? shard.retry_after_s : std::min(busy_retry_after_s, shard.retry_after_s);
      else if (!worth_retrying(code))
        return status.error();
      failures += (failures.empty() ? "" : "; ") + status.error().message;
      return std::nullopt;
    };
    if (options_.hedge_after_ms > 0 && replicas.size() >= 2 && chunk_for(*replicas[0]) == rows && chunk_for(*replicas[1]) == rows)
      if (auto status = hedged_call(*replicas[0], *replicas[1], req, deadline)) {
        if (*status) return Ok{};
        if (auto e = failed(*replicas[0], *status)) return *e;
        next = 2;
      }
    for (size_t k = next; k < replicas.size(); ++k) {  // replicas in turn
      Shard* shard = replicas[k];
      const size_t chunk = chunk_for(*shard);
      Status status = Ok{};
      if (chunk == rows) status = call(*shard, req, deadline);
      for (size_t r = 0; chunk != rows && r < rows && status; r += chunk)
        status = call(*shard, req.rows_slice(r, std::min(chunk, rows - r), hidden), deadline);
      if (status) return Ok{};
      if (auto e = failed(*shard, status)) return *e;
    }
    if (busy_retry_after_s == 0)
      return make_error(ErrorCode::shard_unavailable, "every replica for layer " + std::to_string(layer) + " failed: " + failures);
    // Busy is not broken: wait and try again, exponentially longer (10 ms, 20 ms, ... up to
    // the smallest Retry-After), jittered so clients busy together do not return together,
    // for as long as --timeout-ms allows.
    const double cap_ms = std::min(1000.0 * busy_retry_after_s, 10.0 * double(1u << std::min(attempt, 10)));
    const auto wait = std::chrono::duration<double, std::milli>(cap_ms * std::uniform_real_distribution<double>(0.5, 1.0)(jitter_));
    if (Clock::now() + wait > deadline)
      return make_error(ErrorCode::overloaded, "every replica for layer " + std::to_string(layer) + " stayed busy for " +
                                                   std::to_string(options_.timeout_ms) + " ms (--timeout-ms): " + failures);
    ++stats_.backoffs;
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace larql
