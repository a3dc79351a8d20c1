#include "loadtest/session_load.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/byte_io.h"
#include "net/http_client.h"
#include "net/range_attempts.h"
#include "wire/session_codec.h"

namespace larql::loadtest {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using wire::SessionId;

constexpr size_t kSessionsPerClient = 3;
constexpr uint32_t kTokenIds = 256;  // below any vocabulary the tests use

HttpHeaders headers(const LoadOptions& o) {
  if (!o.api_key) return {};
  return {{"Authorization", "Bearer " + *o.api_key}};
}


struct Owned {
  SessionId id{};
  uint32_t step = 0;
  size_t held = 0, max_positions = 0;
};

struct Tally {
  SessionLoadReport part;
  std::vector<double> step_ms;
  std::optional<Error> setup_error;
};

class SessionClient {
 public:
  SessionClient(const LoadOptions& o, const Target& t, size_t rewind, uint64_t seed, Tally& tally)
      : o_(o), t_(t), rewind_(rewind), rng_(seed), tally_(tally) {}

  void run(Clock::time_point end) {
    auto client = HttpClient::open(o_.url, {o_.timeout_ms, std::nullopt});
    if (!client) return void(tally_.setup_error = client.error());
    http_ = std::move(*client);
    while (Clock::now() < end) {
      const int dice = int(rng_() % 100);
      if (owned_.empty() || (dice < 15 && owned_.size() < kSessionsPerClient)) open(std::nullopt);
      else if (dice < 70) step(pick());
      else if (dice < 78) open(pick());
      else if (dice < 86) close(pick(), true);
      else if (dice < 90) close(pick(), false);  // abandoned: the idle timeout closes it
      else malformed(pick());
    }
    for (size_t i = owned_.size(); i-- > 0;) close(i, rng_() % 2 == 0);  // some left to the idle timeout
  }

 private:
  size_t pick() { return rng_() % owned_.size(); }
  void count(const std::string& label, bool fine) {
    ++tally_.part.answers[label];
    if (!fine) ++tally_.part.unexpected;
  }
  void count(const Result<HttpResponse>& r, bool (*fine)(int)) {
    if (!r) return count("transport " + std::string(error_code_name(r.error().code)), false);
    const std::string code = error_code_of(r->body);
    count(std::to_string(r->status) + (code.empty() ? "" : " " + code), fine(r->status));
  }
  static bool success(int status) { return status / 100 == 2; }

  // A new session, or a fork of owned_[source] at what it holds.
  void open(std::optional<size_t> source) {
    const size_t max_positions = 16 + rng_() % 240;
    json body{{"max_positions", max_positions}};
    if (source) {
      const Owned& s = owned_[*source];
      body["fork"] = wire::session_id_hex(s.id);
      body["positions"] = s.held;
      body["max_positions"] = std::max(max_positions, s.held);
    }
    auto r = http_->post("/v1/sessions", body.dump(), "application/json", headers(o_));
    // A full shard answers 503 (with Retry-After): expected under load, not a failure. A
    // fork's source may be gone (410: expired while idle, or lost with a replica): dropped.
    if (source) count(r, [](int status) { return status == 201 || status == 503 || status == 410; });
    else count(r, [](int status) { return status == 201 || status == 503; });
    if (source && r && r->status == 410) return void(owned_.erase(owned_.begin() + long(*source)));
    if (!r || r->status != 201) return;
    const json j = json::parse(r->body, nullptr, false);
    const auto id = wire::parse_session_id(j.value("session", ""));
    if (!id) return count("201 without an id", false);
    owned_.push_back({*id, 0, source ? owned_[*source].held : 0, body["max_positions"].get<size_t>()});
    ++(source ? tally_.part.forks : tally_.part.opens);
  }

  // The next step of owned_[i]: from what it holds, or a few positions back; a few rows.
  void step(size_t i) {
    Owned& s = owned_[i];
    size_t start = s.held;
    if (s.held > 0 && rng_() % 4 == 0) start = s.held - std::min<size_t>(s.held, 1 + rng_() % std::max<size_t>(rewind_, 1));
    if (start >= s.max_positions) start = 0;
    const uint32_t rows = uint32_t(std::min<size_t>(1 + rng_() % 8, s.max_positions - start));
    const wire::SessionStep st{s.id, s.step + 1, uint32_t(start), rows, uint32_t(rng_() % (rows + 1))};
    std::string body;
    const wire::Encoding e = o_.mix[rng_() % o_.mix.size()];
    if (!encode(e, {&st, 1}, body)) return;
    const auto t0 = Clock::now();
    auto r = http_->post("/v1/walk-layers", body, wire::content_type(e), headers(o_));
    tally_.step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    // 410: the idle timeout closed it while this client was busy with its others.
    count(r, [](int status) { return status == 200 || status == 503 || status == 410; });
    ++tally_.part.steps;
    if (r && r->status == 200) s.step = st.step, s.held = start + rows;
    if (r && r->status == 410) owned_.erase(owned_.begin() + long(i));  // expired while idle: nothing to keep
  }

  void close(size_t i, bool send_delete) {
    if (send_delete) {
      auto r = http_->send_delete("/v1/sessions/" + wire::session_id_hex(owned_[i].id), headers(o_));
      count(r, [](int status) { return status == 204 || status == 410; });
      ++tally_.part.deletes;
    } else {
      ++tally_.part.abandoned;
    }
    owned_.erase(owned_.begin() + long(i));
  }

  // One malformed request for owned_[i], checked for the code it must get; nothing changes.
  void malformed(size_t i) {
    const Owned& s = owned_[i];
    const wire::SessionStep st{s.id, s.step + 1, uint32_t(s.held), 1, 0};
    std::string body;
    if (!encode(wire::Encoding::f32, {&st, 1}, body)) return;
    std::string expected;
    switch (rng_() % 5) {
      case 0: body.resize(body.size() - 1 - rng_() % std::min<size_t>(body.size() - 1, 64)), expected = ""; break;  // 400 of a framing code
      case 1: store_u32(reinterpret_cast<uint8_t*>(body.data()) + 4, 2), expected = "bad_flags"; break;
      case 2: {
        const wire::SessionStep unknown{SessionId{}, 1, 0, 1, 0};
        encode(wire::Encoding::f32, {&unknown, 1}, body);
        expected = "session_unknown";
        break;
      }
      case 3: {
        const wire::SessionStep stale{s.id, s.step + 2, uint32_t(s.held), 1, 0};
        encode(wire::Encoding::f32, {&stale, 1}, body);
        expected = "stale_step";
        break;
      }
      default: {
        const wire::SessionStep twice[] = {st, st};
        encode(wire::Encoding::f32, twice, body);
        expected = "duplicate_session";
      }
    }
    auto r = http_->post("/v1/walk-layers", body, wire::content_type(wire::Encoding::f32), headers(o_));
    ++tally_.part.malformed;
    if (!r) return count("transport " + std::string(error_code_name(r.error().code)), false);
    const std::string code = error_code_of(r->body);
    // A stale step of a session the idle timeout closed meanwhile is session_unknown; one
    // whose part died with its replica, through a router, session_lost.
    const bool expired = expected == "stale_step" && (code == "session_unknown" || code == "session_lost");
    const bool fine = r->status / 100 == 4 && (expected.empty() || code == expected || expired);
    count(std::to_string(r->status) + " " + code + " (asked for)", fine);
    if (expired) owned_.erase(owned_.begin() + long(i));
  }

  bool encode(wire::Encoding e, std::span<const wire::SessionStep> steps, std::string& body) {
    size_t rows = 0;
    for (const auto& s : steps) rows += s.rows;
    std::vector<uint32_t> tokens(rows);
    for (uint32_t& t : tokens) t = uint32_t(rng_() % kTokenIds);
    std::normal_distribution<float> value(0.0f, 1.0f);
    std::vector<float> x(rows * t_.hidden);
    for (float& v : x) v = value(rng_);
    auto r = wire::encode_walk_layers_request(e, steps, tokens, t_.hidden, x, body);
    if (!r) count("encode " + r.error().message, false);
    return r.ok();
  }

  const LoadOptions& o_;
  const Target& t_;
  size_t rewind_;
  std::mt19937_64 rng_;
  Tally& tally_;
  std::unique_ptr<HttpClient> http_;
  std::vector<Owned> owned_;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

Result<SessionMemory> read_session_memory(const LoadOptions& options) {
  auto client = HttpClient::open(options.url, {options.timeout_ms, std::nullopt});
  if (!client) return client.error();
  auto r = (*client)->get("/v1/stats", headers(options));
  if (!r) return r.error();
  const json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("sessions") || !j["sessions"].is_object())
    return make_error(ErrorCode::invalid_argument, options.url + " serves no sessions (start it with larql serve --sessions)");
  const json& s = j["sessions"];
  return SessionMemory{s.value("open", size_t(0)), s.value("kv_bytes", size_t(0)), s.value("kv_reserved_bytes", size_t(0))};
}

Result<SessionLoadReport> run_session_load(const LoadOptions& options, const Target& target) {
  auto stats_client = HttpClient::open(options.url, {options.timeout_ms, std::nullopt});
  if (!stats_client) return stats_client.error();
  auto stats = (*stats_client)->get("/v1/stats", headers(options));
  if (!stats) return stats.error();
  const json j = json::parse(stats->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("sessions"))
    return make_error(ErrorCode::invalid_argument, options.url + " serves no sessions (start it with larql serve --sessions)");
  const size_t rewind = j["sessions"].value("rewind_positions", size_t(0));
  LoadOptions o = options;
  if (o.mix.empty())
    for (const auto& name : j["sessions"].value("wire", json::array()))
      if (auto e = name.is_string() ? wire::encoding_from_name(name.get<std::string>()) : std::nullopt) o.mix.push_back(*e);
  if (o.mix.empty()) o.mix.push_back(wire::Encoding::f32);
  std::vector<Tally> tallies(o.clients);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  {
    std::vector<std::jthread> clients;
    for (size_t i = 0; i < o.clients; ++i)
      clients.emplace_back([&, i] { SessionClient(o, target, rewind, o.seed + i, tallies[i]).run(end); });
  }
  SessionLoadReport report;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> latencies;
  for (auto& t : tallies) {
    if (t.setup_error) return *t.setup_error;
    const SessionLoadReport& p = t.part;
    report.opens += p.opens, report.forks += p.forks, report.steps += p.steps, report.deletes += p.deletes;
    report.abandoned += p.abandoned, report.malformed += p.malformed, report.unexpected += p.unexpected;
    for (const auto& [label, n] : p.answers) report.answers[label] += n;
    latencies.insert(latencies.end(), t.step_ms.begin(), t.step_ms.end());
  }
  report.step_latency = {percentile(latencies, 0.5), percentile(latencies, 0.99), latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end())};
  return report;
}

}  // namespace larql::loadtest
