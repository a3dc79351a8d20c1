#include "net/session_service.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/memory_size.h"
#include "kernels/attention.h"
#include "model/fingerprint.h"
#include "net/session_ids.h"
#include "wire/accept.h"
#include "wire/codec.h"

namespace larql {

using wire::Encoding;
using wire::SessionId;

namespace {

using Clock = std::chrono::steady_clock;

std::string str(uint64_t v) { return std::to_string(v); }

Error session_unknown(const std::string& what) {
  return make_error(ErrorCode::session_unknown, what + ": no such session here (never opened, closed, expired, or opened with another key)");
}

}  // namespace

// One session: its cache and where its steps stand. `turn` orders the requests naming it;
// the fields below it are read and written only by the holder of `turn`.
struct SessionService::Session {
  SessionId id{};
  std::string key;  // authorization_hash of the opener's Authorization
  size_t max_positions = 0;
  size_t reserved_bytes = 0;
  FifoMutex turn;
  std::atomic<size_t> users{0};  // requests holding or waiting for `turn`: never idle then
  std::atomic<int64_t> last_used_ns{0};
  bool closed = false;  // deleted or expired while a request waited for it
  KvCache cache;
  size_t held = 0;
  uint32_t last_step = 0, last_start = 0, last_rows = 0;
  std::atomic<size_t> kv_bytes{0};  // the cache's allocation, for stats without the turn

  void touch(Clock::time_point now = Clock::now()) { last_used_ns = now.time_since_epoch().count(); }
  Clock::time_point last_used() const { return Clock::time_point(Clock::duration(last_used_ns.load())); }
  // The smallest legal start other than 0 (PROTOCOL §13): held − rewind_positions.
  size_t min_start() const { return held > kKvRewindPositions ? held - kKvRewindPositions : 0; }
  bool legal_start(size_t start) const { return start == 0 || (start >= min_start() && start <= held); }
  nlohmann::json position_json() const { return {{"held", held}, {"min_start", min_start()}, {"last_step", last_step}}; }
};

SessionService::SessionService(const Model& model, Transformer& layers, FifoMutex& compute_turns, SessionServiceOptions options)
    : model_(model), layers_(layers), compute_turns_(compute_turns), options_(std::move(options)) {
  if (!options_.kv_budget_bytes) options_.kv_budget_bytes = quarter_of_memory();
  if (!options_.max_positions || options_.max_positions > model.config.context) options_.max_positions = model.config.context;
  if (!wire::encoding_fits_hidden(Encoding::q8, model.config.hidden)) options_.encodings.erase(Encoding::q8);
  for (uint32_t l = options_.layers.first; l <= options_.layers.last; ++l) fingerprints_.push_back(layer_session_fingerprint(model, l));
  config_fingerprint_ = session_config_fingerprint(model.config, options_.layers.first, options_.layers.last);
  globals_fingerprint_ = session_globals_fingerprint(model);
  reaper_ = std::thread([this] {
    std::unique_lock lock(reaper_mutex_);
    while (!reaper_wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
      lock.unlock();
      expire_idle();
      // Caches freed since the last second go back to the system, not only to malloc's
      // arenas (a cache of a few hundred KB per layer is below its mmap threshold).
      if (freed_.exchange(false)) malloc_trim(0);
      lock.lock();
    }
  });
}

SessionService::~SessionService() {
  {
    std::lock_guard lock(reaper_mutex_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  reaper_.join();
}

SessionId SessionService::new_id() {
  return new_session_id([this](const SessionId& id) { return sessions_.count(id) > 0; });
}

SessionService::SessionPtr SessionService::find(const SessionId& id, const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->key != key) return nullptr;
  return it->second;
}

HttpReply SessionService::fail(const Error& e) { return error_reply(e); }

HttpReply SessionService::fail_sessions(const Error& e, const std::vector<size_t>& indices, const std::vector<SessionPtr>& sessions) {
  HttpReply reply = error_reply(e);
  nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
  body["sessions"] = indices;
  if (e.code == ErrorCode::bad_position || e.code == ErrorCode::stale_step) {
    nlohmann::json held = nlohmann::json::array(), min_start = nlohmann::json::array(), last = nlohmann::json::array();
    for (size_t i : indices) {
      const Session& s = *sessions[i];
      held.push_back(s.held), min_start.push_back(s.min_start()), last.push_back(s.last_step);
    }
    body["held"] = held, body["min_start"] = min_start, body["last_step"] = last;
  }
  reply.body = json_text(body);
  return reply;
}

HttpReply SessionService::overloaded(const std::string& why) {
  // Retry-After: the seconds until the oldest idle session expires (at least 1).
  double soonest = options_.idle_timeout_s;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, s] : sessions_)
      if (s->users == 0)
        soonest = std::min(soonest, options_.idle_timeout_s - std::chrono::duration<double>(now - s->last_used()).count());
  }
  HttpReply reply = error_reply(make_error(ErrorCode::overloaded, why));
  reply.retry_after_s = std::max(1, int(std::ceil(soonest)));
  return reply;
}

Error SessionService::refuse_content_type(std::string_view content_type) const {
  std::string expected;
  for (Encoding e : options_.encodings.members()) expected += (expected.empty() ? "" : ", ") + std::string(wire::content_type(e));
  std::string why;
  if (wire::body_type_from_content_type(content_type).binary == Encoding::i8)
    why = " (i8 residuals are off on this shard: --session-wire-i8)";
  return make_error(ErrorCode::unsupported_media_type, "Content-Type '" + std::string(content_type) +
                                                           "' is not accepted by /v1/walk-layers; expected " + expected + why);
}

HttpReply SessionService::open(std::string_view body, std::string_view content_type, std::string_view authorization) {
  if (!wire::body_type_from_content_type(content_type).json)
    return fail(make_error(ErrorCode::unsupported_media_type, "POST /v1/sessions takes application/json; got '" +
                                                                  std::string(content_type) + "'"));
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return fail(make_error(ErrorCode::invalid_json, "POST /v1/sessions takes a JSON object {\"max_positions\": N}"));
  const auto n = doc.find("max_positions");
  const std::string bound = "1 to " + str(options_.max_positions);
  if (n == doc.end() || !n->is_number_integer() || n->get<int64_t>() < 1 || uint64_t(n->get<int64_t>()) > options_.max_positions)
    return fail(make_error(ErrorCode::bad_max_positions, "max_positions must be an integer from " + bound +
                                                             (n == doc.end() ? "; it is missing" : "; got " + n->dump())));
  const size_t max_positions = n->get<size_t>();
  const std::string key = authorization_hash(authorization);

  // A fork: the source's first p positions, copied here under the source's turn.
  SessionPtr source;
  size_t fork_positions = 0;
  if (const auto fork = doc.find("fork"); fork != doc.end()) {
    const auto p = doc.find("positions");
    if (p == doc.end() || !p->is_number_integer() || p->get<int64_t>() < 0)
      return fail(make_error(ErrorCode::invalid_json, "a fork needs \"positions\": a non-negative integer"));
    fork_positions = p->get<size_t>();
    if (max_positions < fork_positions)
      return fail(make_error(ErrorCode::bad_max_positions, "max_positions " + str(max_positions) + " is below the fork's " +
                                                               str(fork_positions) + " positions"));
    const auto id = fork->is_string() ? wire::parse_session_id(fork->get<std::string>()) : std::nullopt;
    if (id) source = find(*id, key);
    if (!source) return fail(session_unknown("fork"));
  }

  auto session = std::make_shared<Session>();
  session->key = key;
  session->max_positions = max_positions;
  session->cache.max_slots = kv_capacity_positions(model_.config, max_positions, options_.max_rows);
  session->reserved_bytes = kv_capacity_bytes(model_.config, session->cache.max_slots, options_.layers.first, options_.layers.last);
  session->touch();
  // The reservation first: a fork that then fails gives it back.
  std::string refusal;
  {
    std::lock_guard lock(mutex_);
    if (sessions_.size() >= options_.max_sessions) {
      refusal = "the shard holds its most sessions (--max-sessions " + str(options_.max_sessions) + ")";
    } else if (reserved_ + session->reserved_bytes > options_.kv_budget_bytes) {
      refusal = "a session of " + str(max_positions) + " positions reserves " + str(session->reserved_bytes) +
                " bytes of KV cache; " + str(options_.kv_budget_bytes - reserved_) + " of the budget's " +
                str(options_.kv_budget_bytes) + " are left (--session-kv-bytes)";
    } else {
      reserved_ += session->reserved_bytes;
      session->id = new_id();
      if (!source) sessions_[session->id] = session;
    }
  }
  if (!refusal.empty()) return overloaded(refusal);
  if (source) {
    ++source->users;
    std::lock_guard turn(source->turn);
    --source->users;
    source->touch();
    auto refuse = [&](const Error& e) {
      std::lock_guard lock(mutex_);
      reserved_ -= session->reserved_bytes;
      return e;
    };
    if (source->closed) return fail(refuse(session_unknown("fork")));
    if (!source->legal_start(fork_positions)) {
      HttpReply r = error_reply(refuse(make_error(ErrorCode::bad_position, "a fork at " + str(fork_positions) +
                                                                               " positions: the source holds " + str(source->held) +
                                                                               " and can go back to " + str(source->min_start()))));
      nlohmann::json b = nlohmann::json::parse(r.body, nullptr, false);
      b.update(source->position_json());
      r.body = json_text(b);
      return r;
    }
    // Only the first p positions: a fork holds no more than its own reservation.
    session->cache.layers.resize(source->cache.layers.size());
    for (size_t l = 0; l < source->cache.layers.size(); ++l) {
      const KvCache::Layer& from = source->cache.layers[l];
      KvCache::Layer& to = session->cache.layers[l];
      const size_t hd = model_.config.layer(l).head_dim;
      const size_t slots = fork_positions > from.first ? fork_positions - from.first : 0;
      to.first = from.first;
      for (size_t h = 0; h < from.keys.size(); ++h) {
        const size_t key_count = std::min(from.keys[h].size(), key_floats(slots, hd));
        const size_t value_count = std::min(from.values[h].size(), slots * hd);
        to.keys.emplace_back(from.keys[h].begin(), from.keys[h].begin() + long(key_count));
        to.values.emplace_back(from.values[h].begin(), from.values[h].begin() + long(value_count));
      }
    }
    session->held = fork_positions;
    session->kv_bytes = session->cache.capacity_bytes();
    std::lock_guard lock(mutex_);
    sessions_[session->id] = session;
  }
  ++opens_;
  HttpReply reply = json_reply({{"session", wire::session_id_hex(session->id)},
                                {"layers", {{"start", options_.layers.first}, {"end", options_.layers.last}}},
                                {"max_positions", max_positions},
                                {"reserved_bytes", session->reserved_bytes},
                                {"idle_timeout_s", options_.idle_timeout_s}});
  reply.status = 201;
  return reply;
}

HttpReply SessionService::close(std::string_view id_hex, std::string_view authorization) {
  const auto id = wire::parse_session_id(id_hex);
  SessionPtr session = id ? find(*id, authorization_hash(authorization)) : nullptr;
  if (!session) return fail(session_unknown("DELETE"));
  ++session->users;
  std::lock_guard turn(session->turn);  // after the step in flight
  --session->users;
  {
    std::lock_guard lock(mutex_);
    if (session->closed) return fail(session_unknown("DELETE"));
    session->closed = true;
    sessions_.erase(session->id);
    reserved_ -= session->reserved_bytes;
  }
  session->cache = {};
  session->kv_bytes = 0;
  ++closes_;
  freed_ = true;
  return HttpReply{204, "", ""};
}

void SessionService::expire_idle(Clock::time_point now) {
  std::vector<SessionPtr> expired;
  {
    std::lock_guard lock(mutex_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      Session& s = *it->second;
      if (s.users == 0 && std::chrono::duration<double>(now - s.last_used()).count() >= options_.idle_timeout_s) {
        s.closed = true;
        reserved_ -= s.reserved_bytes;
        expired.push_back(it->second);
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const SessionPtr& s : expired) {
    std::lock_guard turn(s->turn);  // a request that found it before it went waits no more
    s->cache = {};
    s->kv_bytes = 0;
  }
  expiries_ += expired.size();
  if (!expired.empty()) freed_ = true;
}

HttpReply SessionService::walk_layers(std::string_view body, std::string_view content_type, std::string_view accept,
                                      std::string_view authorization, const ClientGone& client_gone, Deadline deadline) {
  // §13's order: (401 by the HTTP layer) 413, 415, framing, bad_seq_len, duplicate_session,
  // bad_token, work_too_large, then per session, then values, then the queue.
  if (body.size() > options_.max_body_bytes)
    return fail(make_error(ErrorCode::body_too_large, "the body has " + str(body.size()) + " bytes; this shard takes at most " +
                                                          str(options_.max_body_bytes)));
  const auto encoding = wire::body_type_from_content_type(content_type).binary;
  if (!encoding || !options_.encodings.contains(*encoding)) return fail(refuse_content_type(content_type));
  const size_t hidden = model_.config.hidden;
  auto view = wire::parse_walk_layers_request({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, *encoding, hidden,
                                              options_.max_sessions);
  if (!view) return fail(view.error());
  const auto& steps = view->steps;
  std::vector<size_t> indices;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].out_from > steps[i].rows) indices.push_back(i);
  if (!indices.empty())
    return fail_sessions(make_error(ErrorCode::bad_seq_len, "out_from is above rows"), indices, {});
  if (view->total_rows > options_.max_rows)
    return fail(make_error(ErrorCode::bad_seq_len, "the step has " + str(view->total_rows) + " rows in all; this shard takes at most " +
                                                       str(options_.max_rows) + " (sessions.max_rows)"));
  {
    std::map<SessionId, size_t> seen;
    for (size_t i = 0; i < steps.size(); ++i)
      if (auto [it, fresh] = seen.emplace(steps[i].id, i); !fresh) {
        return fail_sessions(make_error(ErrorCode::duplicate_session, "the request names one session twice"), {it->second, i}, {});
      }
  }
  for (size_t r = 0; r < view->tokens.size(); ++r)
    if (view->tokens[r] >= model_.config.vocab)
      return fail(make_error(ErrorCode::bad_token, "row " + str(r) + "'s token id " + str(view->tokens[r]) +
                                                       " is outside the vocabulary (0.." + str(model_.config.vocab - 1) + ")"));
  const uint64_t layer_count = options_.layers.last - options_.layers.first + 1;
  if (view->total_rows * layer_count > options_.max_work)
    return fail(make_error(ErrorCode::work_too_large, str(view->total_rows) + " rows × " + str(layer_count) + " layers is above this shard's " +
                                                          str(options_.max_work) + " (--max-work)"));

  // Each named session, held in id order (two requests naming the same sessions cannot
  // each wait for the other).
  const std::string key = authorization_hash(authorization);
  std::vector<SessionPtr> sessions(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    sessions[i] = find(steps[i].id, key);
    if (!sessions[i]) indices.push_back(i);
  }
  if (!indices.empty()) return fail_sessions(session_unknown("walk-layers"), indices, sessions);
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return steps[a].id < steps[b].id; });
  for (size_t i : order) ++sessions[i]->users;
  for (size_t i : order) sessions[i]->turn.lock();
  struct Release {
    std::vector<SessionPtr>& s;
    ~Release() {
      for (auto& p : s) {
        p->touch();
        p->turn.unlock();
        --p->users;
      }
    }
  } release{sessions};
  return run_step(*view, *encoding, accept, sessions, client_gone, deadline);
}

HttpReply SessionService::run_step(const wire::WalkLayersRequestView& view, Encoding encoding, std::string_view accept,
                                   std::vector<SessionPtr>& sessions, const ClientGone& client_gone, Deadline deadline) {
  const auto& steps = view.steps;
  auto check = [&](ErrorCode code, auto broken) -> std::optional<HttpReply> {
    std::vector<size_t> indices;
    for (size_t i = 0; i < steps.size(); ++i)
      if (broken(*sessions[i], steps[i])) indices.push_back(i);
    if (indices.empty()) return std::nullopt;
    if (code == ErrorCode::stale_step) stale_steps_ += indices.size();
    const char* what = code == ErrorCode::session_unknown ? "no such session here (closed or expired while the request waited)"
                       : code == ErrorCode::stale_step   ? "a step number that is neither the next nor a retry of the last"
                       : code == ErrorCode::context_full ? "start + rows is beyond the session's max_positions"
                                                          : "start is neither 0 nor within [held − rewind_positions, held]";
    return fail_sessions(make_error(code, what), indices, sessions);
  };
  auto is_retry = [](const Session& s, const wire::SessionStep& st) {
    return s.last_step != 0 && st.step == s.last_step && st.start == s.last_start && st.rows == s.last_rows;
  };
  if (auto r = check(ErrorCode::session_unknown, [](const Session& s, const auto&) { return s.closed; })) return *r;
  if (auto r = check(ErrorCode::stale_step, [&](const Session& s, const auto& st) {
        return !(uint64_t(st.step) == uint64_t(s.last_step) + 1 || is_retry(s, st));
      }))
    return *r;
  if (auto r = check(ErrorCode::context_full, [](const Session& s, const auto& st) {
        return uint64_t(st.start) + st.rows > s.max_positions;
      }))
    return *r;
  if (auto r = check(ErrorCode::bad_position, [&](const Session& s, const auto& st) {
        return !is_retry(s, st) && !s.legal_start(st.start);
      }))
    return *r;

  const size_t hidden = model_.config.hidden;
  std::vector<float> x(view.total_rows * hidden);
  if (auto s = wire::decode_values(encoding, view.values, view.total_rows, hidden, x); !s) return fail(s.error());
  if (waiting_ >= options_.max_queue) return overloaded("the shard's compute queue is full (--max-queue " + str(options_.max_queue) + ")");

  // The pass: every session with rows, in request order; rows = 0 only drops.
  std::vector<SequenceChunk> chunks;
  std::vector<float> pass_x;
  pass_x.reserve(x.size());
  std::vector<std::vector<int>> tokens(steps.size());
  size_t row = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& st = steps[i];
    if (st.rows > 0) {
      tokens[i].assign(view.tokens.begin() + long(row), view.tokens.begin() + long(row + st.rows));
      chunks.push_back({&sessions[i]->cache, tokens[i], st.start, st.out_from});
      pass_x.insert(pass_x.end(), x.begin() + long(row * hidden), x.begin() + long((row + st.rows) * hidden));
    }
    row += st.rows;
  }
  // A failure leaves each session holding min(held, start), its last step unchanged.
  for (size_t i = 0; i < steps.size(); ++i) sessions[i]->held = std::min<size_t>(sessions[i]->held, steps[i].start);
  const auto started = Clock::now();
  std::vector<float> out;
  if (!chunks.empty()) {
    ++waiting_;
    // One pass at a time through the layers' scratch; within it, the shard's compute turn
    // layer by layer, so that /v1/walk-ffn work takes its turns between our layers.
    std::lock_guard<FifoMutex> pass(passes_);
    std::unique_lock<FifoMutex> turn(compute_turns_);  // the pass's preparation uses the threads too
    const size_t first = options_.layers.first;
    auto before_layer = [&](size_t layer) -> Status {
      if (layer > first) turn.unlock(), turn.lock();
      if (layer > first && client_gone && client_gone())
        return make_error(ErrorCode::cancelled, "the client closed its connection at layer " + str(layer) + "; the step was dropped");
      if (deadline && Clock::now() > *deadline)
        return make_error(ErrorCode::deadline_exceeded, "the caller's deadline (" + std::string(kDeadlineHeader) + ") passed before layer " +
                                                            str(layer) + "; the step was dropped");
      return Ok{};
    };
    Status s = layers_.forward_range(chunks, options_.layers.first, options_.layers.last, pass_x, out, before_layer);
    --waiting_;
    for (auto& session : sessions) session->kv_bytes = session->cache.capacity_bytes();
    if (!s) return fail(s.error().code == ErrorCode::invalid_argument ? make_error(ErrorCode::internal, s.error().message) : s.error());
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  // Encoded before the sessions move on: an output that is not finite (non_finite_output)
  // leaves them as a failed step does, accepting its retry.
  HttpReply reply;
  const Encoding chosen = wire::negotiate_response_encoding(accept, options_.encodings);
  auto enc = wire::encode_walk_layers_response(chosen, uint32_t(steps.size()), float(ms), hidden, out, reply.body);
  if (!enc) return fail(make_error(enc.error().code, "layers " + options_.layers.str() + ": " + enc.error().message));
  reply.content_type = std::string(wire::content_type(enc->encoding));
  for (size_t i = 0; i < steps.size(); ++i) {
    Session& s = *sessions[i];
    s.held = size_t(steps[i].start) + steps[i].rows;
    s.last_step = steps[i].step, s.last_start = steps[i].start, s.last_rows = steps[i].rows;
  }
  ++steps_;
  rows_ += view.total_rows;
  return reply;
}

size_t SessionService::open_sessions() {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

size_t SessionService::reserved_bytes() {
  std::lock_guard lock(mutex_);
  return reserved_;
}

size_t SessionService::kv_bytes() {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const auto& [id, s] : sessions_) bytes += s->kv_bytes;
  return bytes;
}

nlohmann::json SessionService::stats() {
  nlohmann::json wire = nlohmann::json::array();
  for (Encoding e : options_.encodings.members()) wire.push_back(wire::encoding_name(e));
  nlohmann::json groups = nlohmann::json::array();
  const ModelConfig& c = model_.config;
  for (size_t l = options_.layers.first; l <= options_.layers.last; ++l) {
    if (!c.owns_kv(l)) continue;
    nlohmann::json group{l};
    for (size_t r = l + 1; r < c.layers; ++r)
      if (c.layer(r).kv_from == l) group.push_back(r);
    if (group.size() > 1) groups.push_back(group);
  }
  return {{"open", open_sessions()},
          {"max", options_.max_sessions},
          {"kv_bytes", kv_bytes()},
          {"kv_reserved_bytes", reserved_bytes()},
          {"kv_budget_bytes", options_.kv_budget_bytes},
          {"max_positions", options_.max_positions},
          {"max_rows", options_.max_rows},
          {"rewind_positions", kKvRewindPositions},
          {"idle_timeout_s", options_.idle_timeout_s},
          {"wire", wire},
          {"kv_dtype", "f32"},
          {"kv_groups", groups},
          {"layers_arithmetic", model_.layers_arithmetic(options_.layers.first, options_.layers.last).name()}};
}

nlohmann::json SessionService::fingerprints() const {
  nlohmann::json layers = nlohmann::json::object();
  for (size_t i = 0; i < fingerprints_.size(); ++i) layers[str(options_.layers.first + i)] = fingerprints_[i];
  return {{"session_fingerprints", layers},
          {"session_config_fingerprint", config_fingerprint_},
          {"session_globals_fingerprint", globals_fingerprint_}};
}

std::string SessionService::render_metrics() {
  std::string out;
  auto line = [&](const char* name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP larql_shard_sessions_") + name + " " + help + "\n# TYPE larql_shard_sessions_" + name + " " + type +
           "\nlarql_shard_sessions_" + name + " " + str(v) + "\n";
  };
  line("opened_total", "counter", "Sessions opened (forks included).", opens_);
  line("closed_total", "counter", "Sessions closed by DELETE.", closes_);
  line("expired_total", "counter", "Sessions closed after their idle timeout.", expiries_);
  line("steps_total", "counter", "walk-layers steps run.", steps_);
  line("stale_steps_total", "counter", "Sessions named with a stale step number.", stale_steps_);
  line("rows_total", "counter", "Rows (positions) the steps ran through the layers.", rows_);
  line("open", "gauge", "Sessions open.", open_sessions());
  line("kv_bytes", "gauge", "KV cache bytes allocated by open sessions.", kv_bytes());
  line("kv_reserved_bytes", "gauge", "KV cache bytes reserved by open sessions.", reserved_bytes());
  line("kv_budget_bytes", "gauge", "The KV cache budget (--session-kv-bytes).", options_.kv_budget_bytes);
  return out;
}

}  // namespace larql
