#include "net/router.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <iostream>
#include <openssl/crypto.h>
#include <set>

#include "net/descriptors.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/range_attempts.h"
#include "net/router_map.h"
#include "net/shard_stats.h"

namespace larql {

using nlohmann::json;
using namespace wire;

namespace {

HttpHeaders key_headers(const std::optional<std::string>& key) {
  HttpHeaders h;
  if (key) h.emplace_back("Authorization", "Bearer " + *key);
  return h;
}

}  // namespace

void name_shard_in_error(std::string& body, const std::string& url, const std::string& part) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()) {
    j["error"] = "shard " + url + " (layers " + part + "): " + j["error"].get<std::string>();
    body = json_text(j);
  }
}

Router::Router(RouterOptions options) : options_(std::move(options)) {}

Router::~Router() {
  {
    std::lock_guard lock(poll_mutex_);
    stopping_ = true;
  }
  poll_wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

Status Router::load_stats(Replica& replica, const ShardRange& part) {
  const LayerRange& range = part.range;
  auto client = HttpClient::open(replica.url, replica.client);
  if (!client) return make_error(ErrorCode::invalid_argument, "shard " + replica.url + ": " + client.error().message);
  auto res = (*client)->get("/v1/stats", key_headers(options_.shard_key));
  if (!res)
    return make_error(ErrorCode::shard_unavailable, "shard " + replica.url + " does not answer /v1/stats: " + res.error().message);
  if (res->status == 401)
    return make_error(ErrorCode::unauthorized,
                      "shard " + replica.url + (options_.shard_key ? " refuses the router's --shard-key"
                                                                   : " requires a key: pass --shard-key (or LARQL_SHARD_KEY)"));
  if (res->status != 200)
    return make_error(ErrorCode::shard_unavailable, "shard " + replica.url + ": /v1/stats answered HTTP " +
                                                        std::to_string(res->status) + " without a shard's stats");
  auto stats = parse_shard_stats(res->body);
  if (!stats) return make_error(stats.error().code, "shard " + replica.url + ": " + stats.error().message);
  std::lock_guard lock(map_mutex_);
  if (hidden_ == 0) {
    hidden_ = stats->hidden;
    num_layers_ = stats->num_layers;
    model_name_ = stats->model;
    family_ = stats->family;
    ffn_arithmetic_ = stats->ffn_arithmetic;
  } else if (stats->hidden != hidden_) {
    return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " serves hidden size " +
                                                       std::to_string(stats->hidden) + "; the other shards serve " +
                                                       std::to_string(hidden_));
  } else if (stats->ffn_arithmetic != ffn_arithmetic_) {
    return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " computes the FFN with the " +
                                                       stats->ffn_arithmetic + " arithmetic; the other shards with " +
                                                       ffn_arithmetic_ + ": one grid computes one way, so it is refused");
  }
  if (part.part == ShardPart::experts) {
    if (!stats->experts)
      return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " is mapped to experts " + part.str() +
                                                         " but lists no experts (not a shard of a mixture-of-experts model?)");
    const LayerRange owned = stats->experts->owned;
    const uint32_t last = std::min<uint32_t>(part.experts.last, uint32_t(stats->experts->count + stats->experts->shared - 1));
    if (!owned.contains(part.experts.first) || !owned.contains(last))
      return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " owns experts " + owned.str() +
                                                         " but is mapped to " + part.str());
  }
  if (stats->experts) {
    const size_t all = stats->experts->count + stats->experts->shared;
    if (experts_ == 0) experts_ = all, shared_experts_ = stats->experts->shared, experts_used_ = stats->experts->used;
    if (all != experts_)
      return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " has " + std::to_string(all) +
                                                         " experts per layer; the other shards " + std::to_string(experts_));
  }
  if (stats->layers && (!stats->layers->contains(range.first) || !stats->layers->contains(range.last)))
    return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " serves layers " + stats->layers->str() +
                                                       " but is mapped to " + range.str());
  for (uint32_t l = range.first; l <= range.last && stats->fingerprints; ++l) {
    const auto theirs = stats->fingerprints->find(l);
    if (theirs == stats->fingerprints->end()) continue;
    auto [it, inserted] = fingerprints_.emplace(l, theirs->second);
    if (!inserted && it->second != theirs->second)
      return make_error(ErrorCode::invalid_argument, "shard " + replica.url + " has fingerprint " + theirs->second +
                                                         " for layer " + std::to_string(l) + ", other replicas have " +
                                                         it->second + ": it serves a different model and is refused");
  }
  std::lock_guard replica_lock(replica.mutex);
  replica.stats = std::move(*stats);
  return Ok{};
}

Status Router::add_replica(Map& map, const ShardRange& part, const std::string& url) {
  const LayerRange& range = part.range;
  for (const auto& e : map.entries) {
    if (e.part.same_part(part)) continue;
    if (parts_overlap(part, e.part))
      return make_error(ErrorCode::invalid_argument, "layers " + part.str() + " overlap the mapped range " + e.part.str());
    for (const auto& r : e.replicas)
      if (r->url == url && !(e.part.part != ShardPart::all && part.part != ShardPart::all))
        return make_error(ErrorCode::invalid_argument, url + " already serves layers " + e.part.str());
  }
  auto replica = std::make_shared<Replica>();
  replica->url = url;
  replica->range = range;
  replica->part = part;
  replica->client = {options_.timeout_ms, options_.shard_ca_cert};
  if (auto s = load_stats(*replica, part); !s) {
    if (s.error().code == ErrorCode::unauthorized) {
      std::cerr << "larql router: " << s.error().message << "\n";
      replica->needs_key = true;
    } else if (s.error().code != ErrorCode::shard_unavailable) {
      return s.error();
    }
    replica->healthy = false;  // down for now: the health poller reads its stats when it comes up
  }
  auto it = std::find_if(map.entries.begin(), map.entries.end(), [&](const Map::Entry& e) { return e.part.same_part(part); });
  if (it == map.entries.end()) {
    ShardRange key = part;
    key.urls.clear();
    map.entries.push_back({key, {}});
    std::sort(map.entries.begin(), map.entries.end(), [](const Map::Entry& a, const Map::Entry& b) {
      return a.part.range.first != b.part.range.first ? a.part.range.first < b.part.range.first
                                                      : a.part.experts.first < b.part.experts.first;
    });
    it = std::find_if(map.entries.begin(), map.entries.end(), [&](const Map::Entry& e) { return e.part.same_part(part); });
  } else if (std::any_of(it->replicas.begin(), it->replicas.end(), [&](const auto& r) { return r->url == url; })) {
    return make_error(ErrorCode::invalid_argument, url + " is already a replica of layers " + part.str());
  }
  it->replicas.push_back(replica);
  std::lock_guard lock(map_mutex_);
  all_replicas_.push_back(replica);
  return Ok{};
}

Result<std::unique_ptr<Router>> Router::create(const RouterOptions& options) {
  auto spec = parse_shard_spec(options.spec);
  if (!spec) return spec.error();
  auto router = std::unique_ptr<Router>(new Router(options));
  auto map = std::make_shared<Map>();
  for (const auto& part : *spec) {
    if (part.range.last == std::numeric_limits<uint32_t>::max())
      return make_error(ErrorCode::invalid_argument, "--shards needs layer ranges: RANGE=URL[|URL],...");
    for (const auto& url : part.urls)
      if (auto s = router->add_replica(*map, part, url); !s) return s.error();
  }
  if (auto s = router->check_expert_coverage(*map); !s) return s.error();
  if (router->hidden_ == 0) {  // no replica has answered its stats: is a key the reason?
    std::string keyed;
    for (const auto& e : map->entries)
      for (const auto& r : e.replicas)
        if (r->needs_key) keyed += (keyed.empty() ? "" : ", ") + r->url;
    if (!keyed.empty())
      return make_error(ErrorCode::invalid_argument,
                        "no layer range can be covered: " + keyed +
                            (options.shard_key ? " refuse the --shard-key given" : " require a key; pass --shard-key (or LARQL_SHARD_KEY)"));
  }
  router->map_ = std::move(map);
  router->poller_ = std::thread([r = router.get()] { r->poll_health(); });
  return router;
}

std::shared_ptr<const Router::Map> Router::current_map() const {
  std::lock_guard lock(map_mutex_);
  return map_;
}

void Router::poll_health() {
  std::map<std::string, std::unique_ptr<HttpClient>> clients;
  const int poll_timeout_ms = std::min(options_.timeout_ms, std::max(100, options_.health_interval_ms));
  for (;;) {
    std::vector<std::shared_ptr<Replica>> replicas;
    {
      std::lock_guard lock(map_mutex_);
      replicas = all_replicas_;
    }
    for (const auto& r : replicas) {
      auto& c = clients[r->url];
      if (!c)
        if (auto opened = HttpClient::open(r->url, {poll_timeout_ms, r->client.ca_cert})) c = std::move(*opened);
      bool up = false;
      if (c)
        if (auto res = c->get("/v1/health", key_headers(options_.shard_key))) up = res->status == 200;
      bool needs_stats;
      {
        std::lock_guard lock(r->mutex);
        needs_stats = !r->stats;
      }
      if (up && needs_stats && !r->refused) {
        auto s = load_stats(*r, r->part);
        r->needs_key = !s && s.error().code == ErrorCode::unauthorized;
        if (!s) {
          up = false;
          if (s.error().code != ErrorCode::shard_unavailable && !r->needs_key) r->refused = true;
        }
      }
      r->healthy = up && !r->refused;
      r->connections.close_stale(std::chrono::steady_clock::now());
    }
    std::unique_lock lock(poll_mutex_);
    if (poll_wake_.wait_for(lock, std::chrono::milliseconds(options_.health_interval_ms), [this] { return stopping_.load(); }))
      return;
  }
}

namespace {

// One call to one replica: the HTTP exchange, the replica's health and latency, and what
// it came to by §9's rules (range_attempts.h).
CallResult call_replica(Router::Replica& r, const std::string& path, const std::string& body, const std::string& content_type,
                        const HttpHeaders& headers) {
  auto client = r.take();
  if (!client) {
    CallResult unusable;
    unusable.note = " (not an http[s]:// URL)";
    return unusable;
  }
  const auto start = std::chrono::steady_clock::now();
  auto res = client->post(path, body, content_type, headers);
  const bool own_shortage = !res && descriptors_scarce(descriptor_use());
  if (res) {
    r.observe(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    r.give(std::move(client));
  } else if (!own_shortage) {
    r.healthy = false;
  }
  return classify_call(res, own_shortage);
}

// One call of a hedge race on a thread of its own; a loser runs on to its own end (bounded
// by the router's timeout) and only touches the race and its replica. The thread's OpenSSL
// state is freed before it reports, not at its exit, which the process may not wait for
// (as a connection thread does, http_server.cc).
void start_call(const std::shared_ptr<HedgeRace>& race, size_t index, std::shared_ptr<Router::Replica> replica, std::string path,
                std::shared_ptr<const std::string> body, std::string content_type, HttpHeaders headers) {
  std::thread([=] {
    CallResult result = call_replica(*replica, path, *body, content_type, headers);
    OPENSSL_thread_stop();
    race->finish(index, std::move(result));
  }).detach();
}

}  // namespace

Router::WalkOutcome Router::forward(const Map& map, const RangePart& part, const std::string& path, const std::string& body,
                                   const std::string& content_type, const std::string& accept,
                                   const std::string& authorization, Deadline deadline) {
  // Healthy replicas first, the quickest of them first; the others as a last resort.
  std::vector<std::shared_ptr<Replica>> order;
  for (const auto& r : map.entries[part.owner.index].replicas)
    if (!r->refused) order.push_back(r);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a->healthy != b->healthy) return bool(a->healthy);
    return a->latency_ms < b->latency_ms;
  });
  HttpHeaders headers;
  if (!accept.empty()) headers.emplace_back("Accept", accept);
  if (!authorization.empty()) headers.emplace_back("Authorization", authorization);
  headers.emplace_back(kDeadlineHeader, "");
  RangeAttempts attempts(map.entries[part.owner.index].part.str());
  auto budget = [&] { return try_budget(options_.timeout_ms, deadline, std::chrono::steady_clock::now()); };
  auto url_of = [&](size_t i) { return order[i]->url; };
  // The range's result as the request's outcome.
  auto outcome = [&](RangeResult result) {
    WalkOutcome out;
    if (result.answer) {
      out.answer = Answer{result.answer->status, result.answer->header("Content-Type"), std::move(result.answer->body),
                          order[*result.replica]->url};
    } else {
      out.error = std::move(result.error);
      out.retry_after_s = result.retry_after_s;
    }
    return out;
  };
  size_t next = 0;
  // Hedging ("The Tail at Scale"): when the first replica has not answered within the
  // hedge delay, the same idempotent call goes to the second, and the first answer wins.
  if (hedging() && order.size() >= 2 && order[0]->healthy && order[1]->healthy) {
    const auto left = budget();
    if (!left) return outcome(RangeResult::failed(attempts.deadline_passed()));
    headers.back().second = std::to_string(*left);
    const double after_ms = options_.hedge_auto ? order[0]->recent_p95(options_.timeout_ms) : options_.hedge_after_ms;
    auto race = std::make_shared<HedgeRace>();
    auto shared_body = std::make_shared<const std::string>(body);
    RangeResult raced = race->run(
        after_ms, [&](size_t i) { start_call(race, i, order[i], path, shared_body, content_type, headers); }, [&] { ++hedges_; },
        attempts, url_of, real_race_clock());
    if (raced.answer) {
      if (*raced.replica == 1) ++hedge_wins_;
      return outcome(std::move(raced));
    }
    next = race->started();
  }
  // PROTOCOL §9, range_attempts.h: a failure moves on to the next replica, an answer
  // (4xx and a deterministic 500 included) is passed on, a busy one gets one more try.
  return outcome(try_in_order(
      next, order.size(), attempts, url_of, budget,
      [&](size_t i, int64_t budget_ms) {
        headers.back().second = std::to_string(budget_ms);
        return call_replica(*order[i], path, body, content_type, headers);
      },
      [&] { ++retries_; }));
}

// The one place a request's outcome becomes HTTP: an answer as the shard gave it (or as
// spliced), naming the shards; an error as a §7 body, with Retry-After when overloaded.
HttpReply Router::to_http(WalkOutcome outcome) {
  if (outcome.answer) {
    Answer& a = *outcome.answer;
    HttpReply reply{a.status, std::move(a.content_type), std::move(a.body)};
    reply.headers.emplace_back("X-Larql-Shard", a.shards);
    if (a.reencoded_f32) reply.headers.emplace_back("X-Larql-Reencoded", "f32");
    return reply;
  }
  HttpReply reply = error_reply(*outcome.error);
  if (outcome.error->code == ErrorCode::overloaded) reply.retry_after_s = outcome.retry_after_s;
  return reply;
}

// larql_router_errors_total: the router's own errors, and the server-side failures of
// shards it passes on (a shard's 4xx is the caller's request, which the router checked).
void Router::count_errors(const WalkOutcome& outcome) {
  if (outcome.error) {
    metrics_.count_error(outcome.error->code);
    return;
  }
  if (outcome.answer->status < 500) return;
  const std::string code = error_code_of(outcome.answer->body);
  for (ErrorCode c : {ErrorCode::shard_unavailable, ErrorCode::shard_timeout, ErrorCode::internal, ErrorCode::overloaded,
                      ErrorCode::non_finite_output})
    if (code == error_code_name(c)) metrics_.count_error(c);
}

HttpReply Router::answer(const std::function<WalkOutcome()>& walk) {
  metrics_.count_request();
  WalkOutcome outcome;
  // Shed while the descriptors that calls to the shards need are running out (each takes
  // one, a hedge two): a 503 the client retries, not a 500 "Too many open files".
  if (const DescriptorUse use = descriptor_use(); descriptors_scarce(use))
    outcome = {std::nullopt,
               make_error(ErrorCode::overloaded, "router busy: " + std::to_string(use.lowest_free) + " or more of its " +
                                                     std::to_string(use.limit) + " file descriptors are open; retry shortly"),
               1};
  else
    outcome = walk();
  count_errors(outcome);
  return to_http(std::move(outcome));
}

HttpReply Router::walk_ffn(const std::string& body, const std::string& content_type, const std::string& accept,
                           const std::string& authorization, Deadline deadline) {
  HttpReply reply = answer([&] { return walk(body, content_type, accept, authorization, deadline); });
  count_bytes(body, content_type, reply);
  return reply;
}

void Router::count_bytes(const std::string& body, const std::string& content_type, const HttpReply& reply) {
  const wire::BodyType in = wire::body_type_from_content_type(content_type), out = wire::body_type_from_content_type(reply.content_type);
  if (in.binary) metrics_.count_bytes_in(*in.binary, body.size());
  else if (in.json) metrics_.count_json_bytes(body.size(), 0);
  if (out.binary) metrics_.count_bytes_out(*out.binary, reply.body.size());
  else if (out.json) metrics_.count_json_bytes(0, reply.body.size());
}

Router::WalkOutcome Router::walk(const std::string& body, const std::string& content_type, const std::string& accept,
                                 const std::string& authorization, Deadline deadline) {
  auto fail = [](Error e, int retry_after_s = 0) { return WalkOutcome{std::nullopt, std::move(e), retry_after_s}; };
  const auto map = current_map();
  size_t hidden;
  {
    std::lock_guard lock(map_mutex_);
    hidden = hidden_;
  }
  const BodyType type = body_type_from_content_type(content_type);
  if (hidden == 0 && (type.binary || type.json))  // an unknown Content-Type is 415 even then
    return fail(make_error(ErrorCode::shard_unavailable, "no shard has answered yet"));
  auto request = read_walk_request(body, content_type, hidden);
  if (!request) return fail(request.error());
  auto parts = split_by_range(
      request->layers(),
      [&](uint32_t layer) -> std::optional<LayerOwner> {
        const int e = map->owner(layer);
        if (e < 0) return std::nullopt;
        return LayerOwner{size_t(e), map->entries[size_t(e)].part.range};
      },
      map->covered());
  if (!parts) return fail(parts.error());

  if (parts->size() == 1)  // one range: the body goes through byte for byte
    return forward(*map, parts->front(), "/v1/walk-ffn", body, content_type, accept, authorization, deadline);

  std::vector<std::future<WalkOutcome>> pending;
  for (const RangePart& part : *parts)
    pending.push_back(std::async(std::launch::async, [&, body = part_body(*request, part)] {
      return forward(*map, part, "/v1/walk-ffn", body, content_type, accept, authorization, deadline);
    }));
  std::vector<WalkOutcome> outcomes;
  for (auto& f : pending) outcomes.push_back(f.get());
  std::vector<PartAnswer> answers;
  std::string shards;
  for (size_t p = 0; p < parts->size(); ++p) {
    WalkOutcome& o = outcomes[p];
    if (!o.answer) return std::move(o);  // the router's error names the range already
    if (o.answer->status != 200) {       // a shard's own error: name it
      name_shard_in_error(o.answer->body, o.answer->shards, (*parts)[p].owner.extent.str());
      return std::move(o);
    }
    shards += (shards.empty() ? "" : ",") + o.answer->shards;
    answers.push_back({std::move(o.answer->shards), std::move(o.answer->content_type), std::move(o.answer->body)});
  }
  auto spliced = splice_answers(*request, *parts, answers, hidden);
  if (!spliced) return fail(spliced.error());
  return {Answer{200, std::move(spliced->content_type), std::move(spliced->body), shards, spliced->reencoded_f32}, {}, 0};
}

json Router::stats() {
  const auto map = current_map();
  std::lock_guard lock(map_mutex_);
  std::optional<std::set<std::string>> wire;
  size_t max_body = 0;
  json shards = json::array();
  for (const auto& e : map->entries) {
    json replicas = json::array();
    for (const auto& r : e.replicas) {
      const bool up = r->healthy && !r->refused;
      replicas.push_back({{"url", r->url}, {"state", r->refused ? "refused" : r->needs_key ? "needs key" : (up ? "up" : "down")},
                          {"latency_ms", r->latency_ms.load()}});
      std::lock_guard replica_lock(r->mutex);
      if (!up || !r->stats) continue;
      const auto& listed = r->stats->request_encodings;
      const std::set<std::string> formats = listed ? std::set<std::string>(listed->begin(), listed->end()) : std::set<std::string>{"f32"};
      if (!wire) {
        wire = formats;
      } else {
        std::set<std::string> both;
        std::set_intersection(wire->begin(), wire->end(), formats.begin(), formats.end(), std::inserter(both, both.begin()));
        wire = both;
      }
      const size_t limit = r->stats->max_body_bytes.value_or(size_t{64u << 20});
      max_body = max_body == 0 ? limit : std::min(max_body, limit);
    }
    shards.push_back({{"layers", e.part.str()}, {"replicas", replicas}});
  }
  std::vector<std::string> formats;
  for (const auto& info : kEncodings)  // in this order, as shards list them
    if (wire && wire->count(std::string(info.name))) formats.push_back(std::string(info.name));
  json fps = json::object();
  for (const auto& [layer, fp] : fingerprints_)
    if (map->owner(layer) >= 0 || !map->expert_owners(layer).empty()) fps[std::to_string(layer)] = fp;
  json layers_json = nullptr;
  if (!map->entries.empty()) {
    uint32_t last = 0;
    for (const auto& e : map->entries) last = std::max(last, e.part.range.last);
    layers_json = {{"start", map->entries.front().part.range.first}, {"end", last}};
  }
  json doc({{"ffn_arithmetic", ffn_arithmetic_},
                     {"model", model_name_},
                     {"family", family_},
                     {"hidden_size", hidden_},
                     {"num_layers", num_layers_},
                     {"layers", layers_json},
                     {"mode", "router"},
                     {"max_body_bytes", max_body},
                     {"wire", {{"request", formats}, {"response", formats}}},
                     {"layer_fingerprints", fps},
                     {"shards", shards}});
  // The grid's experts: all of them through this router (check_expert_coverage).
  if (experts_)
    doc["experts"] = {{"count", experts_ - shared_experts_}, {"shared", shared_experts_}, {"used", experts_used_}, {"start", 0}, {"end", experts_ - 1}};
  return doc;
}

json Router::health() {
  const auto map = current_map();
  json uncovered = json::array(), problems = json::array();
  for (const auto& e : map->entries) {
    if (std::none_of(e.replicas.begin(), e.replicas.end(), [](const auto& r) { return r->healthy && !r->refused; }))
      uncovered.push_back(e.part.str());
    for (const auto& r : e.replicas)
      if (r->needs_key)
        problems.push_back("shard " + r->url + (options_.shard_key ? " refuses the router's --shard-key"
                                                                   : " requires a key: pass --shard-key"));
  }
  const double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return json({{"status", uncovered.empty() ? "ok" : "degraded"},
                     {"uptime_seconds", up},
                     {"requests_served", metrics_.requests()},
                     {"uncovered", uncovered},
                     {"problems", problems}});
}

std::string Router::metrics() const {
  return metrics_.render() + "# HELP larql_router_retries_total Calls sent again to another replica after one failed.\n" +
         "# TYPE larql_router_retries_total counter\nlarql_router_retries_total " + std::to_string(retries_) + "\n" +
         "# HELP larql_router_hedges_total Calls also sent to a second replica because the first was slow.\n" +
         "# TYPE larql_router_hedges_total counter\nlarql_router_hedges_total " + std::to_string(hedges_) + "\n" +
         "# HELP larql_router_hedge_wins_total Hedged calls the second replica answered first.\n" +
         "# TYPE larql_router_hedge_wins_total counter\nlarql_router_hedge_wins_total " + std::to_string(hedge_wins_) + "\n";
}

Result<json> Router::admin(const std::string& method, const std::string& body, const std::string& authorization) {
  if (!options_.admin_key || !bearer_key_matches(authorization, *options_.admin_key))
    return make_error(ErrorCode::unauthorized, "the admin endpoint needs Authorization: Bearer <admin key>");
  if (method == "POST") {
    auto j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return make_error(ErrorCode::invalid_json, R"(expected {"add": [{"layers": "A-B", "url": "..."}], "remove": ["url"]})");
    auto next = std::make_shared<Map>(*current_map());
    for (const auto& url : j.value("remove", json::array())) {
      if (!url.is_string()) return make_error(ErrorCode::invalid_json, "'remove' lists URLs");
      for (auto& e : next->entries)
        std::erase_if(e.replicas, [&](const auto& r) { return r->url == url.get<std::string>(); });
      std::erase_if(next->entries, [](const Map::Entry& e) { return e.replicas.empty(); });
    }
    for (const auto& add : j.value("add", json::array())) {
      if (!add.is_object() || !add.contains("layers") || !add.contains("url") || !add["layers"].is_string() || !add["url"].is_string())
        return make_error(ErrorCode::invalid_json, R"(each of 'add' is {"layers": "A-B", "url": "http://..."})");
      // "A-B", "A-B/C-D" (experts) or "A-B/dense", as in --shards.
      auto part = parse_shard_spec(add["layers"].get<std::string>() + "=" + add["url"].get<std::string>());
      if (!part || part->size() != 1) return make_error(ErrorCode::invalid_json, part ? "one part expected" : part.error().message);
      if (auto s = add_replica(*next, part->front(), add["url"].get<std::string>()); !s)
        return make_error(ErrorCode::invalid_json, s.error().message);
    }
    if (auto s = check_expert_coverage(*next); !s) return make_error(ErrorCode::invalid_json, s.error().message);
    std::lock_guard lock(map_mutex_);
    map_ = next;  // requests in flight keep the map they started with
    all_replicas_.clear();
    for (const auto& e : next->entries) all_replicas_.insert(all_replicas_.end(), e.replicas.begin(), e.replicas.end());
  }
  json entries = json::array();
  for (const auto& e : current_map()->entries) {
    json urls = json::array();
    for (const auto& r : e.replicas) urls.push_back(r->url);
    entries.push_back({{"layers", e.part.str()}, {"replicas", urls}});
  }
  return json{{"shards", entries}};
}

}  // namespace larql
