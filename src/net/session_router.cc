#include "net/session_router.h"

#include <algorithm>
#include <chrono>
#include <malloc.h>
#include <sstream>
#include <thread>

#include "net/connection_pool.h"
#include "net/fifo_mutex.h"
#include "net/http_client.h"
#include "net/range_attempts.h"
#include "net/session_ids.h"
#include "net/shard_spec.h"
#include "net/shard_stats.h"
#include "wire/codec.h"

namespace larql {

using nlohmann::json;
using wire::Encoding;
using wire::SessionId;
using Clock = std::chrono::steady_clock;

namespace {

std::string str(uint64_t v) { return std::to_string(v); }
std::string seconds_text(double s) {  // 0.5, 60: as the user wrote it
  std::ostringstream out;
  out << s;
  return out.str();
}

// How long a replica that refused a connection gets no new sessions before it is tried again.
constexpr auto kDownFor = std::chrono::seconds(2);

HttpReply passed_on(const HttpResponse& r) {
  HttpReply reply{r.status, r.header("Content-Type"), r.body};
  if (r.status == 503) reply.retry_after_s = r.retry_after_s();
  return reply;
}


HttpHeaders with_authorization(std::string_view authorization, HttpHeaders h = {}) {
  if (!authorization.empty()) h.emplace_back("Authorization", std::string(authorization));
  return h;
}

}  // namespace

struct SessionRouter::Replica {
  std::string url;
  HttpClientOptions client;
  std::atomic<size_t> open{0};
  std::atomic<int64_t> down_until{0};  // steady-clock ticks
  ConnectionPool connections;

  bool live() const { return Clock::now().time_since_epoch().count() >= down_until.load(); }
  void mark_down() { down_until = (Clock::now() + kDownFor).time_since_epoch().count(); }
  // A POST or DELETE on a pooled connection; a connection that failed is dropped.
  Result<HttpResponse> call(bool post, const std::string& path, std::string_view body, std::string_view content_type,
                            const HttpHeaders& headers) {
    auto c = connections.take(url, client);
    if (!c) return make_error(ErrorCode::shard_unavailable, "cannot connect to " + url);
    auto r = post ? c->post(path, body, content_type, headers) : c->send_delete(path, headers);
    if (r) connections.give(std::move(c));
    return r;
  }
};

struct SessionRouter::Range {
  LayerRange layers;
  std::vector<std::unique_ptr<Replica>> replicas;
};

struct SessionRouter::Session {
  SessionId id{};
  std::string key, authorization;  // the hash to compare, the raw value to forward
  struct Part {
    size_t replica;
    SessionId id;
  };
  std::vector<Part> parts;  // per range
  FifoMutex turn;
  std::atomic<size_t> users{0};
  std::atomic<int64_t> last_used{0};
  bool closed = false;  // under turn
  void touch() { last_used = Clock::now().time_since_epoch().count(); }
};

SessionRouter::SessionRouter(SessionRouterOptions options) : options_(std::move(options)) {}

SessionRouter::~SessionRouter() {
  if (!forgetter_.joinable()) return;
  {
    std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_wake_.notify_all();
  forgetter_.join();
}

Result<std::unique_ptr<SessionRouter>> SessionRouter::create(const SessionRouterOptions& options, bool* none_answered) {
  auto spec = parse_shard_spec(options.spec);
  if (!spec) return spec.error();
  std::sort(spec->begin(), spec->end(), [](const ShardRange& a, const ShardRange& b) { return a.range.first < b.range.first; });
  // Shards started beside the router may still be loading: a range none of whose replicas
  // answers yet, where others serve sessions, is waited for (polled) up to the deadline.
  const auto give_up = Clock::now() + std::chrono::milliseconds(int64_t(options.wait_for_shards_s * 1000));
  for (;;) {
    std::string unread;
    bool none = false;
    auto router = read_grid(options, *spec, unread, none);
    if (none_answered) *none_answered = none;
    if (!router || unread.empty()) return router;
    if (Clock::now() >= give_up)
      return make_error(ErrorCode::invalid_argument, "--shards: no replica of " + unread + " answered /v1/stats within " +
                                                         seconds_text(options.wait_for_shards_s) +
                                                         " s (--wait-for-shards-s), and the other ranges serve sessions");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the poll's period
  }
}

Result<std::unique_ptr<SessionRouter>> SessionRouter::read_grid(const SessionRouterOptions& options, const std::vector<ShardRange>& spec,
                                                                std::string& unread, bool& none_answered) {
  none_answered = true;
  auto router = std::unique_ptr<SessionRouter>(new SessionRouter(options));
  HttpHeaders key;
  if (options.shard_key) key.emplace_back("Authorization", "Bearer " + *options.shard_key);
  std::vector<std::string> with, without;
  std::optional<ShardStats::Sessions> first_stats;
  json fingerprints = json::object(), ranges = json::array();
  uint32_t next = 0;
  for (const ShardRange& part : spec) {
    auto range = std::make_unique<Range>();
    range->layers = part.range;
    std::optional<ShardStats::Sessions> agreed;
    std::vector<std::string> range_with, range_without;
    std::string why;  // what the replicas that did not answer said
    for (const std::string& url : part.urls) {
      auto replica = std::make_unique<Replica>();
      replica->url = url;
      replica->client = {options.timeout_ms, options.ca_cert};
      auto client = HttpClient::open(url, replica->client);
      if (!client) return make_error(ErrorCode::invalid_argument, "--shards " + url + ": " + client.error().message);
      auto res = (*client)->get("/v1/stats", key);
      if (!res || res->status != 200) {
        why += (why.empty() ? "" : "; ") + url + ": " + (res ? "HTTP " + std::to_string(res->status) : res.error().message);
        replica->mark_down();  // not answering now: its sessions are placed elsewhere until it does
        range->replicas.push_back(std::move(replica));
        continue;
      }
      none_answered = false;
      auto stats = parse_shard_stats(res->body);
      if (!stats) {  // the layer-range router keeps it down and names it; so do sessions
        replica->mark_down();
        range->replicas.push_back(std::move(replica));
        continue;
      }
      (stats->sessions ? range_with : range_without).push_back(url);
      if (stats->sessions) {
        const auto& s = *stats->sessions;
        if (agreed && (agreed->fingerprints != s.fingerprints || agreed->config_fingerprint != s.config_fingerprint ||
                       agreed->globals_fingerprint != s.globals_fingerprint || agreed->layers_arithmetic != s.layers_arithmetic))
          return make_error(ErrorCode::invalid_argument, "--shards: the session replicas of layers " + part.range.str() +
                                                             " disagree on their fingerprints or arithmetic (" + url + ")");
        agreed = s;
        router->hidden_ = stats->hidden;
        router->layers_ = std::max(router->layers_, stats->num_layers);
      }
      range->replicas.push_back(std::move(replica));
    }
    if (!range_with.empty() && !range_without.empty()) {
      std::string names;
      for (const auto& u : range_without) names += (names.empty() ? "" : ", ") + u;
      return make_error(ErrorCode::invalid_argument, "--shards: layers " + part.range.str() + " mix session replicas with FFN-only ones (" +
                                                         names + "): start every replica of a range with --sessions, or none");
    }
    if (range_with.empty() && range_without.empty()) {  // none answered: known once one does
      unread += (unread.empty() ? "layers " : ", layers ") + part.range.str() + " (" + why + ")";
      next = part.range.last + 1;
    }
    with.insert(with.end(), range_with.begin(), range_with.end());
    without.insert(without.end(), range_without.begin(), range_without.end());
    if (agreed) {
      if (part.part != ShardPart::all)
        return make_error(ErrorCode::invalid_argument, "--shards " + part.str() + ": session shards run whole layers, not expert ranges");
      if (part.range.first != next)
        return make_error(ErrorCode::invalid_argument, "--shards: the session ranges leave layers " + str(next) + "-" +
                                                           str(part.range.first - 1) + " uncovered");
      next = part.range.last + 1;
      for (const auto& [layer, fp] : agreed->fingerprints) fingerprints[str(layer)] = fp;
      ranges.push_back({{"layers", part.range.str()}, {"config_fingerprint", agreed->config_fingerprint},
                        {"layers_arithmetic", agreed->layers_arithmetic}});
      if (!first_stats) first_stats = agreed;
      router->max_positions_ = router->max_positions_ ? std::min(router->max_positions_, agreed->max_positions) : agreed->max_positions;
      router->max_rows_ = router->max_rows_ ? std::min(router->max_rows_, agreed->max_rows) : agreed->max_rows;
      router->rewind_ = router->rewind_ ? std::min(router->rewind_, agreed->rewind_positions) : agreed->rewind_positions;
      router->idle_s_ = router->idle_s_ > 0 ? std::min(router->idle_s_, agreed->idle_timeout_s) : agreed->idle_timeout_s;
      std::vector<std::string> wire;
      for (const auto& w : agreed->wire)
        if (router->wire_.empty() && router->ranges_.empty()) wire.push_back(w);
        else if (std::find(router->wire_.begin(), router->wire_.end(), w) != router->wire_.end()) wire.push_back(w);
      router->wire_ = wire;
    }
    router->ranges_.push_back(std::move(range));
  }
  if (with.empty()) {  // an FFN-only grid, as far as one can tell
    unread.clear();
    return std::unique_ptr<SessionRouter>();
  }
  if (!unread.empty()) return std::unique_ptr<SessionRouter>();  // the caller waits for them
  if (!without.empty()) {
    std::string names;
    for (const auto& u : without) names += (names.empty() ? "" : ", ") + u;
    return make_error(ErrorCode::invalid_argument, "--shards: some ranges serve sessions and others do not (" + names +
                                                       "): start every shard with --sessions, or none");
  }
  if (next != router->layers_)
    return make_error(ErrorCode::invalid_argument, "--shards: the session ranges leave layers " + str(next) + "-" +
                                                       str(router->layers_ - 1) + " uncovered");
  router->fingerprints_ = fingerprints;
  router->range_info_ = ranges;
  router->globals_fingerprint_ = first_stats->globals_fingerprint;
  router->forgetter_ = std::thread([r = router.get()] {
    std::unique_lock lock(r->stop_mutex_);
    while (!r->stop_wake_.wait_for(lock, std::chrono::seconds(1), [r] { return r->stopping_; })) {
      lock.unlock();
      r->forget_idle();
      r->close_stale_connections();
      // What closed sessions' steps left in malloc's per-thread arenas goes back to the
      // system, as a session shard's freed caches do (the router's memory returns to
      // its start when its sessions end).
      if (r->freed_.exchange(false)) malloc_trim(0);
      lock.lock();
    }
  });
  return router;
}

std::shared_ptr<SessionRouter::Session> SessionRouter::find(const SessionId& id, const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(id);
  return it == sessions_.end() || it->second->key != key ? nullptr : it->second;
}

void SessionRouter::delete_part(size_t range, size_t replica, const SessionId& id, const std::string& authorization) {
  Replica& r = *ranges_[range]->replicas[replica];
  if (r.open) --r.open;
  (void)r.call(false, "/v1/sessions/" + wire::session_id_hex(id), {}, {}, with_authorization(authorization));
}

void SessionRouter::forget(const std::shared_ptr<Session>& session, size_t except_range) {
  {
    std::lock_guard lock(mutex_);
    sessions_.erase(session->id);
  }
  freed_ = true;
  session->closed = true;
  for (size_t r = 0; r < session->parts.size(); ++r)
    if (r != except_range) delete_part(r, session->parts[r].replica, session->parts[r].id, session->authorization);
    else if (ranges_[r]->replicas[session->parts[r].replica]->open) --ranges_[r]->replicas[session->parts[r].replica]->open;
}

HttpReply SessionRouter::open(std::string_view body, std::string_view content_type, std::string_view authorization) {
  if (!wire::body_type_from_content_type(content_type).json)
    return error_reply(make_error(ErrorCode::unsupported_media_type, "POST /v1/sessions takes application/json"));
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return error_reply(make_error(ErrorCode::invalid_json, "POST /v1/sessions takes a JSON object {\"max_positions\": N}"));
  const std::string key = authorization_hash(authorization);
  std::shared_ptr<Session> source;
  if (doc.contains("fork")) {
    const auto id = doc["fork"].is_string() ? wire::parse_session_id(doc["fork"].get<std::string>()) : std::nullopt;
    if (id) source = find(*id, key);
    if (!source) return error_reply(make_error(ErrorCode::session_unknown, "fork: no such session here"));
  }
  {
    std::lock_guard lock(mutex_);
    if (sessions_.size() >= options_.max_sessions) {
      HttpReply r = error_reply(make_error(ErrorCode::overloaded, "the router holds its most sessions (--max-sessions " +
                                                                      str(options_.max_sessions) + ")"));
      r.retry_after_s = 1;
      return r;
    }
  }
  auto session = std::make_shared<Session>();
  session->key = key;
  session->authorization = std::string(authorization);
  size_t reserved = 0, positions = SIZE_MAX;
  auto undo = [&](HttpReply reply) {
    for (size_t r = 0; r < session->parts.size(); ++r)
      delete_part(r, session->parts[r].replica, session->parts[r].id, session->authorization);
    return reply;
  };
  for (size_t r = 0; r < ranges_.size(); ++r) {
    Range& range = *ranges_[r];
    // A fork goes where the source's part is; a new session to the live replica with the
    // fewest of ours (ties to the first listed), the next one if it refuses.
    std::vector<size_t> order;
    if (source) {
      order.push_back(source->parts[r].replica);
      doc["fork"] = wire::session_id_hex(source->parts[r].id);
    } else {  // then those passed over lately (a restarted shard answers again), the longest passed over first
      for (size_t i = 0; i < range.replicas.size(); ++i) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const Replica &x = *range.replicas[a], &y = *range.replicas[b];
        if (x.live() != y.live()) return x.live();
        return x.live() ? x.open < y.open : x.down_until < y.down_until;
      });
    }
    std::optional<Session::Part> part;
    std::string why = "no replica answers";
    std::optional<HttpReply> busy;  // a full replica's 503, the smallest Retry-After: a new session tries the others
    for (size_t i : order) {
      Replica& replica = *range.replicas[i];
      auto res = replica.call(true, "/v1/sessions", doc.dump(), "application/json", with_authorization(authorization));
      if (!res && res.error().code == ErrorCode::shard_unavailable && !source) {
        replica.mark_down();
        why = replica.url + ": " + res.error().message;
        continue;
      }
      // A fork whose source part died with its replica, or that a restarted replica does not
      // know: what it would continue is lost (410 session_lost); the source's own next step
      // finds the same and says so to its owner.
      const bool dead = !res && res.error().code == ErrorCode::shard_unavailable;
      if (source && (dead || (res && res->status == 410))) {
        if (dead) replica.mark_down();
        return undo(error_reply(make_error(ErrorCode::session_lost, "fork: layers " + range.layers.str() + " of the source session on " +
                                                                        replica.url + ": " + (dead ? res.error().message : error_code_of(res->body)))));
      }
      if (!res) return undo(error_reply(make_error(res.error().code, "layers " + range.layers.str() + " on " + replica.url + ": " + res.error().message)));
      if (res->status == 503 && !source) {
        HttpReply reply = passed_on(*res);
        if (!busy || reply.retry_after_s < busy->retry_after_s) busy = std::move(reply);
        continue;
      }
      if (res->status != 201) return undo(passed_on(*res));
      const json j = json::parse(res->body, nullptr, false);
      const auto id = !j.is_discarded() && j.is_object() && j.contains("session") && j["session"].is_string()
                          ? wire::parse_session_id(j["session"].get<std::string>())
                          : std::nullopt;
      if (!id) return undo(error_reply(make_error(ErrorCode::shard_unavailable, replica.url + " answered an open without an id")));
      part = Session::Part{i, *id};
      reserved += j.value("reserved_bytes", size_t(0));
      positions = std::min(positions, j.value("max_positions", SIZE_MAX));
      ++replica.open;
      break;
    }
    if (!part && busy) return undo(*busy);
    if (!part) return undo(error_reply(make_error(ErrorCode::shard_unavailable, "layers " + range.layers.str() + ": " + why)));
    session->parts.push_back(*part);
  }
  session->touch();
  {
    std::lock_guard lock(mutex_);
    session->id = new_session_id([this](const SessionId& id) { return sessions_.count(id) > 0; });
    sessions_[session->id] = session;
  }
  ++opened_;
  HttpReply reply = json_reply({{"session", wire::session_id_hex(session->id)},
                                {"layers", {{"start", 0}, {"end", layers_ - 1}}},
                                {"max_positions", positions},
                                {"reserved_bytes", reserved},
                                {"idle_timeout_s", std::max(1.0, idle_s_ - options_.timeout_ms / 1000.0)}});
  reply.status = 201;
  return reply;
}

HttpReply SessionRouter::close(std::string_view id_hex, std::string_view authorization) {
  const auto id = wire::parse_session_id(id_hex);
  auto session = id ? find(*id, authorization_hash(authorization)) : nullptr;
  if (!session) return error_reply(make_error(ErrorCode::session_unknown, "DELETE: no such session here"));
  ++session->users;
  std::lock_guard turn(session->turn);
  --session->users;
  if (session->closed) return error_reply(make_error(ErrorCode::session_unknown, "DELETE: no such session here"));
  forget(session);
  ++closed_;
  return HttpReply{204, "", ""};
}

void SessionRouter::forget_idle(Clock::time_point now) {
  const double idle = std::max(1.0, idle_s_ - options_.timeout_ms / 1000.0);
  std::vector<std::shared_ptr<Session>> stale;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, s] : sessions_)
      if (s->users == 0 && std::chrono::duration<double>(now - Clock::time_point(Clock::duration(s->last_used.load()))).count() >= idle)
        stale.push_back(s);
  }
  for (const auto& s : stale) {
    std::lock_guard turn(s->turn);
    if (s->closed) continue;
    forget(s);
    ++forgotten_;
  }
}

void SessionRouter::close_stale_connections() {
  const auto now = Clock::now();
  for (const auto& range : ranges_)
    for (const auto& r : range->replicas) r->connections.close_stale(now);
}

HttpReply SessionRouter::walk_layers(std::string_view body, std::string_view content_type, std::string_view accept,
                                     std::string_view authorization, Deadline deadline) {
  const auto encoding = wire::body_type_from_content_type(content_type).binary;
  if (!encoding || std::find(wire_.begin(), wire_.end(), std::string(wire::encoding_name(*encoding))) == wire_.end())
    return error_reply(make_error(ErrorCode::unsupported_media_type, "Content-Type '" + std::string(content_type) +
                                                                         "' is not one the session shards take"));
  auto view = wire::parse_walk_layers_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, *encoding, hidden_,
                                              options_.max_sessions);
  if (!view) return error_reply(view.error());
  const size_t n = view->steps.size();
  const std::string key = authorization_hash(authorization);
  std::vector<std::shared_ptr<Session>> sessions(n);
  std::vector<size_t> unknown;
  for (size_t i = 0; i < n; ++i) {
    sessions[i] = find(view->steps[i].id, key);
    if (!sessions[i]) unknown.push_back(i);
    for (size_t k = 0; k < i && sessions[i]; ++k)
      if (sessions[k] == sessions[i]) {
        HttpReply r = error_reply(make_error(ErrorCode::duplicate_session, "the request names one session twice"));
        json b = json::parse(r.body);
        b["sessions"] = {k, i};
        r.body = json_text(b);
        return r;
      }
  }
  if (!unknown.empty()) {
    HttpReply r = error_reply(make_error(ErrorCode::session_unknown, "no such session here"));
    json b = json::parse(r.body);
    b["sessions"] = unknown;
    r.body = json_text(b);
    return r;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return view->steps[a].id < view->steps[b].id; });
  for (size_t i : order) ++sessions[i]->users, sessions[i]->turn.lock();
  struct Release {
    std::vector<std::shared_ptr<Session>>& s;
    ~Release() {
      for (auto& p : s) p->touch(), p->turn.unlock(), --p->users;
    }
  } release{sessions};
  for (size_t i = 0; i < n; ++i)
    if (sessions[i]->closed) return error_reply(make_error(ErrorCode::session_unknown, "the session was closed meanwhile"));

  // Rows of each session in, and out of the last hop.
  std::vector<size_t> in_rows(n), row_offset(n);
  for (size_t i = 0, r = 0; i < n; ++i) in_rows[i] = view->steps[i].rows, row_offset[i] = r, r += in_rows[i];
  std::string values(reinterpret_cast<const char*>(view->values.data()), view->values.size());
  Encoding values_encoding = *encoding;
  float latency_ms = 0;
  for (size_t r = 0; r < ranges_.size(); ++r) {
    const bool last = r + 1 == ranges_.size();
    const size_t row_bytes = *wire::values_byte_size(values_encoding, 1, hidden_);
    // The hop split by replica: each group's sessions in request order.
    std::map<size_t, std::vector<size_t>> groups;
    for (size_t i = 0; i < n; ++i) groups[sessions[i]->parts[r].replica].push_back(i);
    struct Answered {
      Encoding encoding = Encoding::f32;
      std::string bytes;
    };
    std::vector<Answered> out_rows(n);  // each session's answered rows
    std::optional<Encoding> out_encoding;
    bool mixed = false;
    float slowest = 0;
    for (const auto& [replica_index, members] : groups) {
      Replica& replica = *ranges_[r]->replicas[replica_index];
      std::vector<wire::SessionStep> steps;
      std::vector<uint32_t> tokens;
      std::string hop_values;
      uint64_t back = 0;
      for (size_t i : members) {
        wire::SessionStep st = view->steps[i];
        st.id = sessions[i]->parts[r].id;
        if (!last) st.out_from = 0;
        steps.push_back(st);
        tokens.insert(tokens.end(), view->tokens.begin() + long(row_offset[i]), view->tokens.begin() + long(row_offset[i] + in_rows[i]));
        hop_values.append(values, row_offset[i] * row_bytes, in_rows[i] * row_bytes);
        back += st.rows - st.out_from;
      }
      std::string hop;
      wire::write_walk_layers_request(steps, tokens, wire::as_bytes(hop_values), hop);
      HttpHeaders headers = with_authorization(authorization, {{"Accept", std::string(accept)}});
      if (deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
        if (left <= 0) return error_reply(make_error(ErrorCode::deadline_exceeded, "the caller's deadline passed at layers " + ranges_[r]->layers.str()));
        headers.emplace_back(kDeadlineHeader, std::to_string(left));
      }
      const auto hop_start = Clock::now();
      auto res = replica.call(true, "/v1/walk-layers", hop, wire::content_type(values_encoding), headers);
      if (!res && res.error().code == ErrorCode::shard_unavailable)  // one more try on a fresh connection
        res = replica.call(true, "/v1/walk-layers", hop, wire::content_type(values_encoding), headers);
      ++hop_count_;
      hop_ms_.fetch_add(std::chrono::duration<double, std::milli>(Clock::now() - hop_start).count());
      const bool dead = !res && res.error().code == ErrorCode::shard_unavailable;
      if (dead || (res && res->status == 410)) {
        // The part's cache is gone: the router sessions are lost; their other parts closed.
        if (dead) replica.mark_down();
        for (size_t i : members) {
          forget(sessions[i], dead ? r : SIZE_MAX);
          ++lost_;
        }
        HttpReply reply = error_reply(make_error(ErrorCode::session_lost, "layers " + ranges_[r]->layers.str() + " on " + replica.url + ": " +
                                                                            (dead ? res.error().message : error_code_of(res->body))));
        json b = json::parse(reply.body);
        b["range"] = ranges_[r]->layers.str();
        b["replica"] = replica.url;
        b["sessions"] = members;
        reply.body = json_text(b);
        return reply;
      }
      if (!res) return error_reply(make_error(res.error().code, "layers " + ranges_[r]->layers.str() + " on " + replica.url + ": " + res.error().message));
      if (res->status != 200) return passed_on(*res);  // 503, 504, 500: the session stays open
      const auto answered = wire::body_type_from_content_type(res->header("Content-Type")).binary;
      if (!answered) return error_reply(make_error(ErrorCode::shard_unavailable, replica.url + " answered no binary encoding"));
      auto parsed = wire::parse_walk_layers_response(wire::as_bytes(res->body), *answered, hidden_, uint32_t(steps.size()), back);
      if (!parsed) return error_reply(make_error(ErrorCode::shard_unavailable, replica.url + ": " + parsed.error().message));
      slowest = std::max(slowest, parsed->latency_ms);
      if (out_encoding && *out_encoding != *answered) mixed = true;
      if (!out_encoding) out_encoding = answered;
      const size_t answered_row = *wire::values_byte_size(*answered, 1, hidden_);
      size_t at = 0;
      for (size_t k = 0; k < members.size(); ++k) {
        const size_t rows = steps[k].rows - steps[k].out_from;
        out_rows[members[k]] = {*answered, std::string(reinterpret_cast<const char*>(parsed->values.data()) + at, rows * answered_row)};
        at += rows * answered_row;
      }
    }
    latency_ms += slowest;
    // Spliced in request order, byte for byte when every group answered in one encoding,
    // else each decoded and the whole sent on in f32.
    values.clear();
    const Encoding next = mixed ? Encoding::f32 : *out_encoding;
    for (size_t i = 0; i < n; ++i) {
      const std::string& bytes = out_rows[i].bytes;
      if (!mixed) {
        values.append(bytes);
        continue;
      }
      const Encoding e = out_rows[i].encoding;
      const size_t rows = bytes.size() / *wire::values_byte_size(e, 1, hidden_);
      std::vector<float> f(rows * hidden_);
      if (auto s = wire::decode_values(e, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, rows, hidden_, f); !s)
        return error_reply(s.error());
      values.append(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
    }
    values_encoding = next;
    // The next hop's rows per session are all of this one's (out_from is 0 but on the last).
    for (size_t i = 0, row = 0; i < n; ++i) row_offset[i] = row, row += in_rows[i];
  }
  ++steps_;
  HttpReply reply;
  wire::write_walk_layers_response(uint32_t(n), latency_ms, wire::as_bytes(values), reply.body);
  reply.content_type = std::string(wire::content_type(values_encoding));
  return reply;
}

size_t SessionRouter::open_sessions() {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

json SessionRouter::stats() {
  json replicas = json::array();
  for (const auto& range : ranges_)
    for (const auto& r : range->replicas)
      replicas.push_back({{"layers", range->layers.str()}, {"url", r->url}, {"open", r->open.load()}, {"live", r->live()}});
  return {{"sessions",
           {{"open", open_sessions()},
            {"max", options_.max_sessions},
            {"max_positions", max_positions_},
            {"max_rows", max_rows_},
            {"rewind_positions", rewind_},
            {"idle_timeout_s", std::max(1.0, idle_s_ - options_.timeout_ms / 1000.0)},
            {"wire", wire_},
            {"kv_dtype", "f32"},
            {"layers_arithmetic", range_info_.empty() ? "" : range_info_[0]["layers_arithmetic"]},
            {"replicas", replicas}}},
          {"session_fingerprints", fingerprints_},
          {"session_ranges", range_info_},
          {"session_config_fingerprint", range_info_.empty() ? "" : range_info_[0]["config_fingerprint"]},
          {"session_globals_fingerprint", globals_fingerprint_}};
}

std::string SessionRouter::metrics() {
  std::string out;
  auto line = [&](const std::string& name, const char* type, const char* help, double v) {
    out += "# HELP larql_router_sessions_" + name + " " + help + "\n# TYPE larql_router_sessions_" + name + " " + type +
           "\nlarql_router_sessions_" + name + " " + std::to_string(v) + "\n";
  };
  line("opened_total", "counter", "Router sessions opened.", double(opened_));
  line("closed_total", "counter", "Router sessions closed by DELETE.", double(closed_));
  line("forgotten_total", "counter", "Router sessions forgotten after their idle time.", double(forgotten_));
  line("lost_total", "counter", "Router sessions lost with a part's cache (410 session_lost).", double(lost_));
  line("steps_total", "counter", "walk-layers steps chained over the ranges.", double(steps_));
  line("open", "gauge", "Router sessions open.", double(open_sessions()));
  line("hops_total", "counter", "Requests to session shards (one a range a step, or more when split by replica).", double(hop_count_));
  line("hop_ms_total", "counter", "Their wall time, ms (hop latency = hop_ms_total / hops_total).", hop_ms_.load());
  return out;
}

Result<std::unique_ptr<SessionRoutes>> SessionRoutes::create(const SessionRouterOptions& options) {
  auto routes = std::make_unique<SessionRoutes>();
  routes->options_ = options;
  bool none_answered = false;
  auto router = SessionRouter::create(options, &none_answered);
  if (!router) return router.error();
  routes->router_ = std::move(*router);
  routes->ready_ = routes->router_.get();
  routes->decided_ = !none_answered;
  return routes;
}

Result<SessionRouter*> SessionRoutes::get() {
  if (decided_) return ready_.load();
  std::lock_guard lock(mutex_);
  if (decided_) return ready_.load();
  SessionRouterOptions now = options_;
  now.wait_for_shards_s = 0;  // a request is waiting: what the grid says now
  bool none_answered = false;
  auto router = SessionRouter::create(now, &none_answered);
  if (!router) return make_error(ErrorCode::shard_unavailable, "the router cannot serve sessions yet: " + router.error().message);
  if (none_answered) return nullptr;
  router_ = std::move(*router);
  ready_ = router_.get();
  decided_ = true;
  return ready_.load();
}

}  // namespace larql
