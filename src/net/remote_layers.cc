#include "net/remote_layers.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "infer/transformer.h"
#include "model/fingerprint.h"
#include "net/http_client.h"
#include "net/range_attempts.h"
#include "net/shard_spec.h"
#include "net/shard_stats.h"
#include "wire/codec.h"
#include "wire/session_codec.h"

namespace larql {

using nlohmann::json;
using namespace wire;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxReplays = 2;        // per sequence, then the error names the range
constexpr int kMaxBusyRetries = 3;       // 503s waited out per step
constexpr size_t kEntryMargin = 28 * 256;  // a request's session entries, kept out of the row budget

std::string str(uint64_t v) { return std::to_string(v); }
std::string str(std::chrono::milliseconds t) { return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count()) + " s"; }

// A full shard's Retry-After waited out, not past `give_up`; false when that has passed.
bool wait_for_room(Clock::time_point give_up, int retry_after_s) {
  const auto now = Clock::now();
  if (now >= give_up) return false;
  std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::seconds(retry_after_s), give_up - now));
  return true;
}


// How long a replica that refused connections is passed over for new sessions before it is
// tried again (a restarted shard is back, without the sessions it had).
constexpr auto kDownFor = std::chrono::seconds(2);

struct Replica {
  std::string url;
  std::unique_ptr<HttpClient> client;
  size_t open = 0;  // our sessions on it
  Clock::time_point down_until{};  // refused connections: new sessions go elsewhere until then
  bool live() const { return Clock::now() >= down_until; }
};

struct PartRef {
  size_t range, replica;
  SessionId id;
};

// Per chunk: the earlier chunk it repeats, or SIZE_MAX. n > 1 answers to one prompt start
// with the same rows at position 0: the later ones fork the first's sessions once it has
// run, and take its rows. (A repeat's source is not itself a repeat.)
std::vector<size_t> repeated_chunks(std::span<const SequenceChunk> chunks) {
  std::vector<size_t> source(chunks.size(), SIZE_MAX);
  for (size_t c = 0; c < chunks.size(); ++c)
    for (size_t k = 0; k < c && chunks[c].pos == 0; ++k)
      if (source[k] == SIZE_MAX && chunks[k].pos == 0 && chunks[k].first_logit == chunks[c].first_logit &&
          std::equal(chunks[k].tokens.begin(), chunks[k].tokens.end(), chunks[c].tokens.begin(), chunks[c].tokens.end())) {
        source[c] = k;
        break;
      }
  return source;
}

// DELETEs owed for sequences that are gone; sent at the next pass and at the end.
struct Closer {
  std::mutex mutex;
  std::vector<PartRef> pending;
};

}  // namespace

struct RemoteLayers::Sequence {
  struct Part {
    bool open = false;
    size_t replica = 0;
    SessionId id{};
    uint32_t step = 0;
  };
  std::vector<Part> parts;   // per range
  std::vector<int> history;  // every token fed so far, the current pass's included
  size_t replays = 0;
  // Continuing another sequence's first fork_at positions (a prefix cache's hit, or a repeat
  // whose fork found no room): each range's session is a fork of that one's, made when the
  // sequence is admitted or at its next pass. Held until every range has forked.
  std::shared_ptr<const Sequence> fork_from;
  size_t fork_at = 0;
  // Set at its first admission (Range::admit): until when it waits for room on full shards.
  std::optional<Clock::time_point> admit_by;
  std::shared_ptr<Closer> closer;
  bool all_open() const {
    return std::all_of(parts.begin(), parts.end(), [](const Part& p) { return p.open; });
  }
  ~Sequence() {
    std::lock_guard lock(closer->mutex);
    for (size_t r = 0; r < parts.size(); ++r)
      if (parts[r].open) closer->pending.push_back({r, parts[r].replica, parts[r].id});
  }
};

class RemoteLayers::Range : public LayerRangeBackend {
 public:
  Range(Impl& impl, size_t index, LayerRange layers) : impl_(impl), index_(index), layers_(layers) {}
  size_t first_layer() const override { return layers_.first; }
  size_t last_layer() const override { return layers_.last; }
  Status run(std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) override;
  std::shared_ptr<void> continue_from(const std::shared_ptr<void>& from, size_t positions) override;
  void admit(std::span<const SequenceChunk> chunks, std::span<Admission> admissions) override;

  Impl& impl_;
  size_t index_;
  LayerRange layers_;
  std::vector<Replica> replicas;
  Encoding request_encoding = Encoding::f32;
  size_t max_positions = 0, rewind_positions = 0;
  size_t row_limit = 1;  // rows of one request: the shard's max_rows, and its body limit in f32
  std::string name() const { return layers_.str(); }
};

// One session's part of a request: `rows` rows of `tokens` and `x` at `start`; the rows from
// out_from on come back into `out`.
struct StepItem {
  RemoteLayers::Sequence* seq;
  uint32_t start;
  std::span<const int> tokens;
  const float* x;
  uint32_t out_from;
  float* out;
};

struct RemoteLayers::Impl {
  const Model& model;
  RemoteLayersOptions options;
  std::vector<std::unique_ptr<Range>> ranges;
  std::shared_ptr<Closer> closer = std::make_shared<Closer>();
  RemoteLayersStats stats;
  size_t max_positions = 0;
  std::vector<std::weak_ptr<Sequence>> live;  // sequences whose caches may still be alive
  std::atomic<size_t> replays{0};             // stats.replays, for other threads
  std::function<bool()> relieve;              // set_overload_relief's

  Impl(const Model& m, RemoteLayersOptions o) : model(m), options(std::move(o)) {}

  HttpHeaders headers() const {
    HttpHeaders h;
    if (options.api_key) h.emplace_back("Authorization", "Bearer " + *options.api_key);
    return h;
  }

  std::shared_ptr<Sequence> new_sequence() {
    auto seq = std::make_shared<Sequence>();
    seq->parts.resize(ranges.size());
    seq->closer = closer;
    std::erase_if(live, [](const std::weak_ptr<Sequence>& w) { return w.expired(); });
    live.push_back(seq);
    return seq;
  }

  Sequence& sequence(KvCache& cache) {
    if (!cache.remote) cache.remote = new_sequence();
    return *static_cast<Sequence*>(cache.remote.get());
  }

  // A sequence continuing `from`'s first `positions`, forked on the shards at its first
  // pass; null when a fork there would start too far back (PROTOCOL §13: held −
  // rewind_positions at least) or `from` never ran.
  std::shared_ptr<void> continue_from(const std::shared_ptr<void>& from, size_t positions) {
    auto source = std::static_pointer_cast<const Sequence>(from);
    if (!source || positions == 0 || positions > source->history.size()) return nullptr;
    size_t rewind = SIZE_MAX;
    for (size_t r = 0; r < ranges.size(); ++r) {
      if (!source->parts[r].open) return nullptr;
      rewind = std::min(rewind, ranges[r]->rewind_positions);
    }
    if (source->history.size() - positions > rewind) return nullptr;
    auto seq = new_sequence();
    seq->history.assign(source->history.begin(), source->history.begin() + long(positions));
    seq->fork_from = std::move(source);
    seq->fork_at = positions;
    return seq;
  }

  // A 503 from a shard with no room for one more session: the prefix cache (if any) lets
  // a kept sequence's sessions go; true when one went (their DELETEs are sent now).
  bool relieved() {
    if (!relieve || !relieve()) return false;
    flush_closes();
    return true;
  }

  void flush_closes() {
    std::vector<PartRef> pending;
    {
      std::lock_guard lock(closer->mutex);
      pending.swap(closer->pending);
    }
    for (const PartRef& p : pending) {
      Replica& replica = ranges[p.range]->replicas[p.replica];
      if (replica.open) --replica.open;
      if (replica.live()) (void)replica.client->send_delete("/v1/sessions/" + session_id_hex(p.id), headers());
    }
  }

  // Replica i of range r refused connections: new sessions go elsewhere for a while, and
  // every session there is lost (the next pass replays those sequences).
  void mark_down(size_t r, size_t i) {
    ranges[r]->replicas[i].down_until = Clock::now() + kDownFor;
    for (const auto& weak : live)
      if (auto seq = weak.lock(); seq && seq->parts[r].open && seq->parts[r].replica == i) {
        seq->parts[r].open = false;
        if (ranges[r]->replicas[i].open) --ranges[r]->replicas[i].open;
      }
  }

  // Opens range r's session of `seq` on its live replica with the fewest of our sessions.
  // Every replica full: waits for room, or with `full_retry_after_s` returns `overloaded` at
  // once and sets it to the shards' smallest Retry-After.
  Status open_part(size_t r, Sequence& seq, int* full_retry_after_s = nullptr) {
    Range& range = *ranges[r];
    Sequence::Part& part = seq.parts[r];
    if (part.open) {
      std::lock_guard lock(closer->mutex);  // the old one, if its replica still has it
      closer->pending.push_back({r, part.replica, part.id});
      part.open = false;
    }
    const size_t positions = std::min(max_positions ? max_positions : model.config.context, range.max_positions);
    const std::string body = json{{"max_positions", positions}}.dump();
    std::string last_error = "no replica answers";
    // Every replica full (503): waited out, each time for the smallest Retry-After, until
    // options.room_wait has passed; a full shard frees room as idle sessions expire.
    const auto give_up = Clock::now() + options.room_wait;
    for (;;) {
      // Live replicas first, the fewest of our sessions first; then those passed over lately
      // (a restarted shard answers again), the longest passed over first.
      std::vector<size_t> order(range.replicas.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const Replica &x = range.replicas[a], &y = range.replicas[b];
        if (x.live() != y.live()) return x.live();
        return x.live() ? x.open < y.open : x.down_until < y.down_until;
      });
      int wait_s = 0;  // > 0: a replica was full; the smallest Retry-After
      for (size_t k = 0; k < order.size();) {
        const size_t best = order[k];
        Replica& replica = range.replicas[best];
        auto res = replica.client->post("/v1/sessions", body, "application/json", headers());
        if (!res && res.error().code == ErrorCode::shard_unavailable) {
          mark_down(r, best);  // refused: the next replica
          last_error = replica.url + ": " + res.error().message;
          ++k;
          continue;
        }
        if (res && res->status == 503 && relieved()) continue;  // a kept prefix's sessions made room
        if (res && res->status == 503) {  // full: the next replica
          wait_s = wait_s ? std::min(wait_s, res->retry_after_s()) : res->retry_after_s();
          last_error = replica.url + ": " + describe_call(res);
          ++k;
          continue;
        }
        if (!res || res->status != 201)
          return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + ": opening a session on " + replica.url +
                                                              " failed: " + describe_call(res));
        const auto j = json::parse(res->body, nullptr, false);
        const auto id = !j.is_discarded() && j.is_object() && j.contains("session") && j["session"].is_string()
                            ? parse_session_id(j["session"].get<std::string>())
                            : std::nullopt;
        if (!id) return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + ": " + replica.url + " answered an open without a session id");
        part = {true, best, *id, 0};
        ++replica.open;
        ++stats.sessions_opened;
        return Ok{};
      }
      if (!wait_s) break;
      if (full_retry_after_s) {
        *full_retry_after_s = wait_s;
        return make_error(ErrorCode::overloaded, "layers " + range.name() + ": every replica is full (" + last_error + ")");
      }
      if (!wait_for_room(give_up, wait_s))
        return make_error(ErrorCode::overloaded, "layers " + range.name() + ": every replica was full for " +
                                                     str(options.room_wait) + " (" + last_error + ")");
    }
    return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + ": cannot open a session (" + last_error + ")");
  }

  // Range r's session of `seq` as a fork of `source`'s first `positions` (PROTOCOL §13: made
  // on the shard, no values on the wire), on the source's replica. That one full: as open_part.
  Status fork_part(size_t r, Sequence& seq, const Sequence& source, size_t positions, int* full_retry_after_s = nullptr) {
    Range& range = *ranges[r];
    Sequence::Part& part = seq.parts[r];
    if (part.open) {
      std::lock_guard lock(closer->mutex);
      closer->pending.push_back({r, part.replica, part.id});
      part.open = false;
    }
    const Sequence::Part& from = source.parts[r];
    Replica& replica = range.replicas[from.replica];
    const size_t max_positions = std::min(this->max_positions ? this->max_positions : model.config.context, range.max_positions);
    const std::string body = json{{"max_positions", max_positions}, {"fork", session_id_hex(from.id)}, {"positions", positions}}.dump();
    // The source's replica full (503): room made from a kept prefix, or waited for as an open waits.
    const auto give_up = Clock::now() + options.room_wait;
    auto res = replica.client->post("/v1/sessions", body, "application/json", headers());
    while (res && res->status == 503) {
      if (!relieved() && (full_retry_after_s || !wait_for_room(give_up, res->retry_after_s()))) break;
      res = replica.client->post("/v1/sessions", body, "application/json", headers());
    }
    if (res && res->status == 503 && full_retry_after_s) {
      *full_retry_after_s = res->retry_after_s();
      return make_error(ErrorCode::overloaded, "layers " + range.name() + ": " + replica.url + " is full (" + describe_call(res) + ")");
    }
    if (!res || res->status != 201)
      return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + ": forking a session on " + replica.url + " failed: " + describe_call(res));
    const auto j = json::parse(res->body, nullptr, false);
    const auto id = !j.is_discarded() && j.is_object() && j.contains("session") && j["session"].is_string()
                        ? parse_session_id(j["session"].get<std::string>())
                        : std::nullopt;
    if (!id) return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + ": " + replica.url + " answered a fork without an id");
    part = {true, from.replica, *id, 0};
    ++replica.open;
    ++stats.sessions_opened;
    return Ok{};
  }

  // One walk-layers request of `items` (all with open parts on `replica` of range r). On a
  // lost session (session_unknown, or the replica refusing connections) the items lost are
  // listed in `lost` and the error's code is session_unknown.
  Status send(size_t r, size_t replica_index, std::span<const StepItem> items, std::vector<size_t>& lost) {
    Range& range = *ranges[r];
    Replica& replica = range.replicas[replica_index];
    const size_t H = model.config.hidden;
    std::vector<SessionStep> steps;
    std::vector<uint32_t> tokens;
    std::vector<float> values;
    uint64_t rows_back = 0;
    for (const StepItem& item : items) {
      const Sequence::Part& part = item.seq->parts[r];
      steps.push_back({part.id, part.step + 1, item.start, uint32_t(item.tokens.size()), item.out_from});
      tokens.insert(tokens.end(), item.tokens.begin(), item.tokens.end());
      values.insert(values.end(), item.x, item.x + item.tokens.size() * H);
      rows_back += item.tokens.size() - item.out_from;
    }
    std::string body;
    auto encoded = encode_walk_layers_request(range.request_encoding, steps, tokens, H, values, body);
    if (!encoded) return encoded.error();
    const auto start = Clock::now();
    Result<HttpResponse> res = make_error(ErrorCode::shard_unavailable, "not sent");
    for (int attempt = 0;; ++attempt) {
      res = replica.client->post("/v1/walk-layers", body, content_type(encoded->encoding),
                                 [&] {
                                   HttpHeaders h = headers();
                                   h.emplace_back("Accept", r + 1 == ranges.size() ? options.wire.accept_for_logits : options.wire.accept);
                                   return h;
                                 }());
      // A timeout may have run the step: the same step again is a retry the shard accepts.
      const bool transport = !res && attempt == 0;
      const bool busy = res && res->status == 503 && attempt < kMaxBusyRetries;
      if (busy) std::this_thread::sleep_for(std::chrono::seconds(std::min(res->retry_after_s(), 5)));
      if (!transport && !busy) break;
    }
    stats.remote_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    ++stats.steps, ++stats.round_trips;
    stats.bytes_sent += body.size();
    if (res) {
      stats.bytes_received += res->body.size();
      stats.head_bytes_sent += res->head_bytes_sent, stats.head_bytes_received += res->head_bytes_received;
    }
    if (!res && res.error().code == ErrorCode::shard_unavailable) {
      mark_down(r, replica_index);  // refusing connections after a retry: every session there is lost
      for (size_t i = 0; i < items.size(); ++i) lost.push_back(i);
      return make_error(ErrorCode::session_unknown, replica.url + " refuses connections: " + res.error().message);
    }
    if (res && res->status == 410) {
      const auto j = json::parse(res->body, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("sessions") && j["sessions"].is_array()) {
        for (const auto& i : j["sessions"])
          if (i.is_number_unsigned() && i.get<size_t>() < items.size()) lost.push_back(i.get<size_t>());
      }
      if (lost.empty())
        for (size_t i = 0; i < items.size(); ++i) lost.push_back(i);
      return make_error(ErrorCode::session_unknown, replica.url + ": " + describe_call(res));
    }
    if (!res || res->status != 200) {
      const ErrorCode code = res && (error_code_of(res->body) == "bad_position" || error_code_of(res->body) == "stale_step")
                                 ? ErrorCode::internal  // our own bug: never retried
                                 : ErrorCode::shard_unavailable;
      return make_error(code, "layers " + range.name() + " on " + replica.url + ": " + describe_call(res));
    }
    const auto response_encoding = body_type_from_content_type(res->header("Content-Type")).binary;
    if (!response_encoding)
      return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + " on " + replica.url + " answered Content-Type '" +
                                                          res->header("Content-Type") + "'");
    if (*response_encoding == Encoding::f32 && options.wire.preferred != Encoding::f32) ++stats.f32_fallbacks;
    auto view = parse_walk_layers_response(as_bytes(res->body), *response_encoding, H, uint32_t(items.size()), rows_back);
    if (!view) return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + " on " + replica.url + ": " + view.error().message);
    stats.server_ms += view->latency_ms;
    std::vector<float> out(rows_back * H);
    if (auto s = decode_values(*response_encoding, view->values, rows_back, H, out); !s)
      return make_error(ErrorCode::shard_unavailable, "layers " + range.name() + " on " + replica.url + ": " + s.error().message);
    size_t o = 0;
    for (const StepItem& item : items) {
      ++item.seq->parts[r].step;
      const size_t back = item.tokens.size() - item.out_from;
      std::copy_n(out.begin() + long(o * H), back * H, item.out);
      o += back;
    }
    return Ok{};
  }

  // Range r's steps for `items`, each on its own part's replica: grouped by replica, each
  // request within the range's row limit (an item longer than it goes in pieces). Items
  // whose session is lost are replayed and sent again.
  Status step(size_t r, std::vector<StepItem> items) {
    Range& range = *ranges[r];
    const size_t H = model.config.hidden;
    // Pieces of at most row_limit rows; a piece's out_from and out follow its offset.
    std::vector<StepItem> pieces;
    for (const StepItem& item : items)
      for (size_t off = 0; off < item.tokens.size(); off += range.row_limit) {
        const size_t n = std::min(range.row_limit, item.tokens.size() - off);
        const size_t out_from = item.out_from > off ? std::min<size_t>(item.out_from - off, n) : 0;
        const size_t written = off > item.out_from ? off - item.out_from : 0;  // rows of out before this piece
        pieces.push_back({item.seq, uint32_t(item.start + off), item.tokens.subspan(off, n), item.x + off * H, uint32_t(out_from),
                          item.out + written * H});
      }
    // Requests in order: a piece joins the open request of its replica unless that request
    // has its sequence already or no room; a sequence's pieces stay in order.
    size_t done = 0;
    while (done < pieces.size()) {
      const size_t replica = pieces[done].seq->parts[r].replica;
      std::vector<StepItem> request;
      size_t rows = 0;
      size_t next = done;
      for (; next < pieces.size(); ++next) {
        const StepItem& p = pieces[next];
        const bool same_seq = std::any_of(request.begin(), request.end(), [&](const StepItem& q) { return q.seq == p.seq; });
        if (p.seq->parts[r].replica != replica || same_seq || rows + p.tokens.size() > range.row_limit) break;
        request.push_back(p);
        rows += p.tokens.size();
      }
      std::vector<size_t> lost;
      Status s = send(r, replica, request, lost);
      if (!s && s.error().code != ErrorCode::session_unknown) return s;
      if (!s) {
        // Nothing of the request ran (a shard checks every session first) or only part of it
        // (a router's earlier hops): the lost items are replayed, and every item sent again,
        // alone, with its step number (a retry where a hop had run it).
        for (size_t i : lost)
          if (auto rs = replay(*request[i].seq, r, request[i].start, s.error().message); !rs) return rs;
        for (const StepItem& p : request) {
          std::vector<size_t> again;
          if (auto rs = send(r, p.seq->parts[r].replica, {&p, 1}, again); !rs)
            return make_error(rs.error().code == ErrorCode::session_unknown ? ErrorCode::shard_unavailable : rs.error().code,
                              "layers " + range.name() + ": " + rs.error().message);
        }
      }
      done = next;
    }
    return Ok{};
  }

  // Rebuilds `seq`'s range r on a new session holding its first `upto` positions: the
  // tokens again from position 0 through ranges 0…r (the earlier ranges restart at 0 over
  // every token fed, so they end holding what they held), at most kMaxReplays times.
  Status replay(Sequence& seq, size_t r, size_t upto, const std::string& why) {
    if (seq.replays >= kMaxReplays)
      return make_error(ErrorCode::shard_unavailable, "layers " + ranges[r]->name() + ": the session was lost again after " +
                                                          str(kMaxReplays) + " replays (" + why + ")");
    if (seq.replays++ == 0) std::cerr << "larql: a session of layers " << ranges[r]->name() << " was lost (" << why << "); replaying its tokens\n";
    ++stats.replays, ++replays;
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * seq.replays));  // backoff before the new session
    if (auto s = open_part(r, seq); !s) return s;
    const size_t H = model.config.hidden;
    const size_t fed = r == 0 ? upto : seq.history.size();
    std::vector<float> x(fed * H), next(fed * H);
    for (size_t t = 0; t < fed; ++t) embed_token(model, seq.history[t], &x[t * H]);
    for (size_t k = 0; k <= r; ++k) {
      const size_t rows = k == r ? upto : fed;
      if (rows == 0) break;
      if (!seq.parts[k].open)
        if (auto s = open_part(k, seq); !s) return s;
      const StepItem item{&seq, 0, {seq.history.data(), rows}, x.data(), uint32_t(k == r ? rows : 0), next.data()};
      std::vector<size_t> lost;
      if (auto s = step(k, {item}); !s) return s;
      x.swap(next);
    }
    return Ok{};
  }

  // Range r's sessions of the chunks' new sequences: opened at position 0, or forked where a
  // kept prefix continues (repeats fork in the pass, after their source has run). No room on
  // any replica: the chunk waits, until options.room_wait after its first try. A fork whose
  // source is gone is left to the pass, which rebuilds the prefix.
  void admit(size_t r, std::span<const SequenceChunk> chunks, std::span<Admission> admissions) {
    if (r == 0) flush_closes();  // ended sequences' sessions make room first
    const std::vector<size_t> repeats = repeated_chunks(chunks);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const SequenceChunk& ch = chunks[c];
      if (admissions[c].state != Admission::State::ready || repeats[c] != SIZE_MAX) continue;
      Sequence& seq = sequence(*ch.cache);
      const bool fork = seq.fork_from && ch.pos == seq.fork_at;
      if (seq.parts[r].open || (!fork && ch.pos != 0)) continue;  // (lost sessions are the pass's to replay)
      const auto now = Clock::now();
      if (!seq.admit_by) seq.admit_by = now + options.room_wait;
      int retry_after_s = 0;
      Status s = fork ? fork_part(r, seq, *seq.fork_from, seq.fork_at, &retry_after_s) : open_part(r, seq, &retry_after_s);
      if (s && fork && seq.all_open()) seq.fork_from.reset();  // every range forked: the source may go
      if (s) continue;
      if (s.error().code == ErrorCode::overloaded && now < *seq.admit_by) {
        admissions[c] = {Admission::State::wait, std::chrono::seconds(retry_after_s)};
      } else if (s.error().code == ErrorCode::overloaded) {
        admissions[c] = {Admission::State::failed, {}, Error{ErrorCode::overloaded, "waited " + str(options.room_wait) + " for room: " + s.error().message}};
      } else if (fork) {
        seq.fork_from.reset();
      } else {
        admissions[c] = {Admission::State::failed, {}, s.error()};
      }
    }
    for (size_t c = 0; c < chunks.size(); ++c)  // a repeat goes with its source
      if (repeats[c] != SIZE_MAX && admissions[repeats[c]].state != Admission::State::ready) admissions[c] = admissions[repeats[c]];
  }

  Status run(size_t r, std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) {
    const size_t H = model.config.hidden;
    if (r == 0) flush_closes();
    std::vector<StepItem> items;
    // A sequence starting with the same rows as an earlier one of this pass (n > 1 answers
    // to one prompt) forks that one's session once it has run, and takes its rows.
    struct Twin {
      size_t source;  // index into items
      Sequence* seq;
      size_t rows;
      float* out;
      size_t out_rows;
      std::shared_ptr<const Sequence> source_seq;
    };
    std::vector<Twin> twins;
    const std::vector<size_t> repeats = repeated_chunks(chunks);
    std::vector<size_t> item_of;  // per chunk: its item, or SIZE_MAX for a twin
    size_t in_row = 0, out_rows = 0;
    for (const SequenceChunk& ch : chunks) out_rows += logit_rows_only ? ch.tokens.size() - ch.first_logit : ch.tokens.size();
    std::vector<float> out(out_rows * H);
    size_t out_row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const SequenceChunk& ch = chunks[c];
      for (size_t t = 1; t < ch.parents.size(); ++t)
        if (ch.parents[t] != int(t) - 1)
          return make_error(ErrorCode::invalid_argument, "layer-range sessions verify chains of drafts, not trees (PROTOCOL §13)");
      Sequence& seq = sequence(*ch.cache);
      if (r == 0) {
        seq.history.resize(std::min(seq.history.size(), ch.pos));
        seq.history.insert(seq.history.end(), ch.tokens.begin(), ch.tokens.end());
      }
      const size_t n = ch.tokens.size(), out_from = logit_rows_only ? ch.first_logit : 0;
      const bool twin = repeats[c] != SIZE_MAX;
      item_of.push_back(twin ? SIZE_MAX : items.size());
      if (twin) {
        twins.push_back({item_of[repeats[c]], &seq, n, out.data() + out_row * H, n - out_from,
                         std::static_pointer_cast<const Sequence>(chunks[repeats[c]].cache->remote)});
      } else {
        Sequence::Part& part = seq.parts[r];
        if (!part.open && seq.fork_from && ch.pos == seq.fork_at) {
          // A cached prefix: this range's session forks the one that holds it. Its session
          // gone (expired, its shard restarted), the prefix is rebuilt here as a lost one is.
          if (auto s = fork_part(r, seq, *seq.fork_from, seq.fork_at); !s) {
            seq.fork_from.reset();
            if (auto rs = replay(seq, r, ch.pos, "the cached prefix's session is gone: " + s.error().message); !rs) return rs;
          } else if (seq.all_open()) {
            seq.fork_from.reset();  // every range forked: the source may go
          }
        }
        if (!part.open) {  // never opened, or lost with its replica
          if (ch.pos == 0) {
            if (auto s = open_part(r, seq); !s) return s;
          } else if (auto s = replay(seq, r, ch.pos, part.open ? "its replica is down" : "no session"); !s) {
            return s;
          }
        }
        std::span<const int> tokens(ch.tokens.data(), n);
        items.push_back({&seq, uint32_t(ch.pos), tokens, x.data() + in_row * H, uint32_t(out_from), out.data() + out_row * H});
      }
      in_row += n;
      out_row += n - out_from;
    }
    if (auto s = step(r, items); !s) return s;
    for (const Twin& t : twins) {
      std::copy_n(items[t.source].out, t.out_rows * H, t.out);
      // The source's replica full (or failing): the repeat forks it later as a kept prefix is
      // forked, waiting for room outside the pass when a batch admits it, else at its next
      // pass; a fork that cannot be made then is replayed. Neither holds up this pass.
      int retry_after_s = 0;
      if (!fork_part(r, *t.seq, *t.source_seq, t.rows, &retry_after_s)) t.seq->fork_from = t.source_seq, t.seq->fork_at = t.rows;
    }
    x.swap(out);
    return Ok{};
  }
};

Status RemoteLayers::Range::run(std::span<const SequenceChunk> chunks, std::vector<float>& x, bool logit_rows_only) {
  return impl_.run(index_, chunks, x, logit_rows_only);
}

std::shared_ptr<void> RemoteLayers::Range::continue_from(const std::shared_ptr<void>& from, size_t positions) {
  return impl_.continue_from(from, positions);
}

void RemoteLayers::Range::admit(std::span<const SequenceChunk> chunks, std::span<Admission> admissions) {
  impl_.admit(index_, chunks, admissions);
}

RemoteLayers::RemoteLayers(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteLayers::~RemoteLayers() {
  // Sequences whose caches outlive this: their sessions are closed now, not left to expire.
  for (const auto& weak : impl_->live)
    if (auto seq = weak.lock()) {
      std::lock_guard lock(impl_->closer->mutex);
      for (size_t r = 0; r < seq->parts.size(); ++r)
        if (seq->parts[r].open) impl_->closer->pending.push_back({r, seq->parts[r].replica, seq->parts[r].id}), seq->parts[r].open = false;
    }
  impl_->flush_closes();
}

std::vector<LayerRangeBackend*> RemoteLayers::ranges() {
  std::vector<LayerRangeBackend*> out;
  for (auto& r : impl_->ranges) out.push_back(r.get());
  return out;
}

const RemoteLayersStats& RemoteLayers::stats() const { return impl_->stats; }

size_t RemoteLayers::replays() const { return impl_->replays; }

void RemoteLayers::set_max_positions(size_t positions) { impl_->max_positions = positions; }

void RemoteLayers::set_overload_relief(std::function<bool()> relieve) { impl_->relieve = std::move(relieve); }

size_t RemoteLayers::rewind_positions() const {
  size_t rewind = SIZE_MAX;
  for (const auto& r : impl_->ranges) rewind = std::min(rewind, r->rewind_positions);
  return rewind;
}

Result<std::unique_ptr<RemoteLayers>> RemoteLayers::connect(const Model& model, const RemoteLayersOptions& options,
                                                            std::vector<std::string>* warnings) {
  const ModelConfig& c = model.config;
  auto parts = parse_shard_spec(options.spec);
  if (!parts) return make_error(ErrorCode::invalid_argument, "--remote-layers: " + parts.error().message);
  std::sort(parts->begin(), parts->end(), [](const ShardRange& a, const ShardRange& b) { return a.range.first < b.range.first; });
  auto impl = std::make_unique<Impl>(model, options);
  uint32_t next = 0;
  for (ShardRange& part : *parts) {
    if (part.part != ShardPart::all)
      return make_error(ErrorCode::invalid_argument, "--remote-layers " + part.str() + ": a session shard runs whole layers, every expert of them");
    part.range.last = std::min<uint32_t>(part.range.last, uint32_t(c.layers - 1));
    if (part.range.first != next)
      return make_error(ErrorCode::invalid_argument, "--remote-layers leaves layers " + str(next) + "-" + str(part.range.first - 1) +
                                                         " uncovered: the ranges must cover layers 0-" + str(c.layers - 1));
    next = part.range.last + 1;
    impl->ranges.push_back(std::make_unique<Range>(*impl, impl->ranges.size(), part.range));
    Range& range = *impl->ranges.back();
    const std::string globals_fp = session_globals_fingerprint(model);
    std::string unreachable;
    size_t answered = 0;  // replicas whose stats were read
    for (const std::string& url : part.urls) {
      auto client = HttpClient::open(url, {options.timeout_ms, options.ca_cert});
      if (!client) return make_error(ErrorCode::invalid_argument, "--remote-layers " + url + ": " + client.error().message);
      auto res = (*client)->get("/v1/stats", impl->headers());
      if (!res) {
        unreachable += (unreachable.empty() ? "" : "; ") + url + " (" + res.error().message + ")";
        range.replicas.push_back({url, std::move(*client), 0, Clock::now() + kDownFor});
        continue;
      }
      auto fail = [&](const std::string& what) { return make_error(ErrorCode::invalid_argument, "--remote-layers " + url + ": " + what); };
      if (res->status != 200) return fail("GET /v1/stats failed: " + describe_call(res));
      auto stats = parse_shard_stats(res->body);
      if (!stats) return fail(stats.error().message);
      if (!stats->sessions) return fail("it does not serve layer-range sessions (start it with larql serve --sessions)");
      if (stats->hidden != c.hidden) return fail("hidden size " + str(stats->hidden) + ", this model's is " + str(c.hidden));
      if (!stats->layers || stats->layers->first != part.range.first || stats->layers->last != part.range.last)
        return fail("it runs layers " + (stats->layers ? stats->layers->str() : std::string("(not said)")) + ", the map says " +
                    part.range.str());
      const auto& ss = *stats->sessions;
      for (uint32_t l = part.range.first; l <= part.range.last; ++l) {
        const auto it = ss.fingerprints.find(l);
        if (it == ss.fingerprints.end() || it->second != layer_session_fingerprint(model, l))
          return fail("layer " + str(l) + "'s weights differ from this model's (session_fingerprints)");
      }
      // A router lists the ranges behind it, each with its own; a shard is one range.
      std::vector<ShardStats::Sessions::RangeInfo> behind = ss.ranges;
      if (behind.empty()) behind.push_back({part.range, ss.config_fingerprint, ss.layers_arithmetic});
      for (const auto& r : behind) {
        if (r.layers.first < part.range.first || r.layers.last > part.range.last)
          return fail("it lists layers " + r.layers.str() + " outside " + part.range.str());
        if (r.config_fingerprint != session_config_fingerprint(c, r.layers.first, r.layers.last))
          return fail("layers " + r.layers.str() + ": their configuration differs from this model's (session_config_fingerprint)");
        const std::string ours = model.layers_arithmetic(r.layers.first, r.layers.last).name();
        if (r.layers_arithmetic != ours)
          return fail("it computes layers " + r.layers.str() + " as '" + r.layers_arithmetic + "', this client as '" + ours +
                      "' (--arithmetic, on both sides the same)");
      }
      if (ss.globals_fingerprint != globals_fp) return fail("its RoPE or per-layer tables differ from this model's (session_globals_fingerprint)");
      EncodingSet accepted;
      for (const std::string& name : ss.wire)
        if (auto e = encoding_from_name(name)) accepted.insert(*e);
      const Encoding chosen = options.wire.request_encoding(accepted);
      const size_t body_limit = stats->max_body_bytes.value_or(64u << 20);
      const size_t by_body = body_limit > kEntryMargin + 8 ? (body_limit - kEntryMargin - 8) / (4 * c.hidden + 4) : 1;
      const size_t limit = std::max<size_t>(1, std::min(ss.max_rows, by_body));
      if (!answered++) {  // the first replica that answers sets the range's limits
        range.request_encoding = chosen, range.row_limit = limit, range.max_positions = ss.max_positions;
        range.rewind_positions = ss.rewind_positions;
      } else {
        range.request_encoding = std::min(range.request_encoding, chosen);  // f32 first in the enum: the lowest common one
        range.row_limit = std::min(range.row_limit, limit), range.max_positions = std::min(range.max_positions, ss.max_positions);
        range.rewind_positions = std::min(range.rewind_positions, ss.rewind_positions);
      }
      range.replicas.push_back({url, std::move(*client), 0});
    }
    if (answered == 0)
      return make_error(ErrorCode::shard_unavailable, "--remote-layers: no replica of layers " + part.range.str() + " answers: " + unreachable);
    if (!unreachable.empty() && warnings) warnings->push_back("skipping unreachable replicas of layers " + part.range.str() + ": " + unreachable);
  }
  if (next != c.layers)
    return make_error(ErrorCode::invalid_argument, "--remote-layers leaves layers " + str(next) + "-" + str(c.layers - 1) +
                                                       " uncovered: the ranges must cover layers 0-" + str(c.layers - 1));
  return std::unique_ptr<RemoteLayers>(new RemoteLayers(std::move(impl)));
}

}  // namespace larql
