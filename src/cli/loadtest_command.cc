#include "cli/loadtest_command.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "loadtest/load_generator.h"
#include "loadtest/loopback.h"
#include "loadtest/malformed_http.h"
#include "loadtest/process_probe.h"
#include "loadtest/session_load.h"
#include "net/layer_range.h"
#include "net/url.h"

namespace larql::cli {
namespace {

using nlohmann::json;
using namespace larql::loadtest;

struct Options {
  LoadOptions load;
  std::string mix = "", rows = "1-64", batch_layers = "1";
  std::vector<pid_t> pids;
  std::vector<int> tolerate;
  double settle_seconds = 30;
  double warm_up_seconds = -1;  // of load before the baseline sample; < 0: a fifth of --seconds, at most 5
  int case_timeout_ms = 15000;
  bool malformed = false, allow_remote = false, json = false, ignore_rss = false, sessions = false;
};

Result<Span> parse_span(const std::string& text, const std::string& flag) {
  auto r = parse_layer_range(text);  // "A-B" or "A"
  if (!r) return make_error(ErrorCode::invalid_argument, flag + " '" + text + "': expected N or A-B with 1 <= A <= B");
  if (r->first == 0) return make_error(ErrorCode::invalid_argument, flag + " '" + text + "' must start at 1 or more");
  return Span{r->first, r->last};
}

json sample_json(const ProcessSample& s) {
  return {{"alive", s.alive}, {"rss_mb", double(s.rss_bytes) / (1 << 20)}, {"descriptors", s.descriptors}};
}

std::string mb(size_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << double(bytes) / (1 << 20) << " MB";
  return out.str();
}

struct Verdict {
  std::vector<std::string> failures;
  json doc;
  std::string text;
};

void report_load(const LoadReport& r, const Options& o, Verdict& v) {
  json answers = json::object();
  size_t unexpected = 0;
  std::ostringstream text;
  text.precision(1);
  text << std::fixed;
  text << "load: " << o.load.clients << " clients for " << r.seconds << " s, mix";
  json mix = json::array();
  for (auto e : r.mix) {
    text << " " << wire::encoding_name(e);
    mix.push_back(wire::encoding_name(e));
  }
  text << ", rows " << o.load.rows.min << "-" << o.load.rows.max << ", layers " << o.load.layers.min << "-" << o.load.layers.max
       << " per request\n  answers:";
  for (const auto& [label, n] : r.answers) {
    answers[label] = n;
    text << " " << label << " ×" << n;
    const int status = std::atoi(label.c_str());
    const bool fine = (status / 100 == 2 && label.find("malformed") == std::string::npos) ||
                      std::find(o.tolerate.begin(), o.tolerate.end(), status) != o.tolerate.end();
    if (!fine) unexpected += n;
  }
  const double per_s = r.seconds > 0 ? 1 / r.seconds : 0;
  text << "\n  " << double(r.requests) * per_s << " requests/s, " << double(r.rows) * per_s << " rows/s, "
       << double(r.layer_rows) * per_s << " layer-rows/s, " << double(r.bytes_sent + r.bytes_received) * per_s / (1 << 20)
       << " MiB/s on the wire\n";
  text.precision(2);
  text << "  latency ms: p50 " << r.latency.p50 << ", p99 " << r.latency.p99 << ", max " << r.latency.max << "\n";
  if (unexpected) v.failures.push_back(std::to_string(unexpected) + " answers were neither 2xx nor tolerated");
  v.doc["load"] = {{"clients", o.load.clients},
                   {"seconds", r.seconds},
                   {"mix", mix},
                   {"rows", {o.load.rows.min, o.load.rows.max}},
                   {"layers_per_request", {o.load.layers.min, o.load.layers.max}},
                   {"requests", r.requests},
                   {"ok", r.ok},
                   {"unexpected", unexpected},
                   {"answers", answers},
                   {"requests_per_second", double(r.requests) * per_s},
                   {"rows_per_second", double(r.rows) * per_s},
                   {"bytes_sent", r.bytes_sent},
                   {"bytes_received", r.bytes_received},
                   {"latency_ms", {{"p50", r.latency.p50}, {"p99", r.latency.p99}, {"max", r.latency.max}}}};
  v.text += text.str();
}

void report_session_load(const SessionLoadReport& r, Verdict& v) {
  json answers = json::object();
  std::ostringstream text;
  text.precision(1);
  text << std::fixed << "sessions: " << r.seconds << " s, " << r.opens << " opened, " << r.forks << " forked, " << r.steps
       << " steps, " << r.deletes << " deleted, " << r.abandoned << " abandoned, " << r.malformed << " malformed\n  answers:";
  for (const auto& [label, n] : r.answers) {
    answers[label] = n;
    text << " " << label << " ×" << n;
  }
  text.precision(2);
  text << "\n  step latency ms: p50 " << r.step_latency.p50 << ", p99 " << r.step_latency.p99 << ", max " << r.step_latency.max << "\n";
  if (r.unexpected) v.failures.push_back(std::to_string(r.unexpected) + " session answers were not what was asked for");
  v.doc["sessions"] = {{"seconds", r.seconds}, {"opens", r.opens}, {"forks", r.forks}, {"steps", r.steps}, {"deletes", r.deletes},
                       {"abandoned", r.abandoned}, {"malformed", r.malformed}, {"unexpected", r.unexpected}, {"answers", answers},
                       {"step_latency_ms", {{"p50", r.step_latency.p50}, {"p99", r.step_latency.p99}, {"max", r.step_latency.max}}}};
  v.text += text.str();
}

// After session traffic: the shard's sessions (abandoned ones by their idle timeout) all
// close and their KV bytes return to 0 within `seconds`.
void wait_sessions_closed(const LoadOptions& load, double seconds, Verdict& v) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  Result<SessionMemory> m = make_error(ErrorCode::internal, "not read");
  for (;;) {
    m = read_session_memory(load);
    if (!m || (m->open == 0 && m->kv_bytes == 0 && m->reserved_bytes == 0) || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling the shard's stats, bounded by the deadline
  }
  if (!m) return v.failures.push_back("reading the shard's sessions: " + m.error().message);
  v.doc["sessions_left"] = {{"open", m->open}, {"kv_bytes", m->kv_bytes}, {"kv_reserved_bytes", m->reserved_bytes}};
  v.text += "  afterwards: " + std::to_string(m->open) + " sessions open, " + std::to_string(m->kv_bytes) + " KV bytes (" +
            std::to_string(m->reserved_bytes) + " reserved)\n";
  if (m->open || m->kv_bytes || m->reserved_bytes)
    v.failures.push_back("the shard's sessions did not all close within --settle-seconds (its --session-idle-s closes abandoned ones)");
}

void replay_corpus(const Url& url, const LoadOptions& load, const Target& target, const Options& o,
                   const std::vector<pid_t>& pids, Verdict& v) {
  json cases = json::array();
  std::ostringstream text;
  const auto corpus = malformed_http_corpus(url.host_header);
  text << "malformed HTTP (" << corpus.size() << " cases; each should get a 4xx or a closed connection, then a valid request a 200):\n";
  size_t failed = 0;
  for (const auto& c : corpus) {
    const RawAnswer answer = raw_exchange(url.host, url.port, c, {.answer_timeout = std::chrono::milliseconds(o.case_timeout_ms)});
    const Status served = post_one_row(load, target, target.first_layer);
    bool alive = true;
    for (pid_t pid : pids) alive &= sample_process(pid).alive;
    const bool pass = acceptable(c, answer) && served.ok() && alive;
    failed += !pass;
    cases.push_back({{"kind", c.kind}, {"case", c.name}, {"answer", answer.describe()}, {"served_after", served.ok()}, {"pass", pass}});
    text << "  " << (pass ? "ok  " : "FAIL") << " " << c.kind << "/" << c.name << ": " << answer.describe()
         << (served.ok() ? "" : "; then: " + served.error().message) << (alive ? "" : "; a watched process exited") << "\n";
  }
  if (failed) v.failures.push_back(std::to_string(failed) + " malformed-HTTP cases failed");
  v.doc["malformed"] = cases;
  v.text += text.str();
}

int run_loadtest(Options o) {
  auto fail = [](const std::string& m) {
    std::cerr << "larql loadtest: " << m << "\n";
    return 2;
  };
  auto url = parse_url(o.load.url);
  if (!url) return fail(url.error().message);
  if (url->tls && o.malformed) return fail("--malformed sends raw bytes over plain TCP; give an http:// URL");
  if (!o.allow_remote && !resolves_to_loopback_only(url->host))
    return fail(url->host + " is not a loopback address; pass --allow-remote to load a server you own elsewhere");
  auto rows = parse_span(o.rows, "--rows");
  if (!rows) return fail(rows.error().message);
  auto layers = parse_span(o.batch_layers, "--batch-layers");
  if (!layers) return fail(layers.error().message);
  o.load.rows = *rows;
  o.load.layers = *layers;
  std::stringstream names(o.mix);
  for (std::string name; std::getline(names, name, ',');) {
    auto e = wire::encoding_from_name(name);
    if (!e) return fail("--mix '" + name + "' is not one of " + wire::encoding_names());
    o.load.mix.push_back(*e);
  }
  for (pid_t pid : o.pids)
    if (!sample_process(pid).alive) return fail("--pids: no process " + std::to_string(pid) + " to watch");

  auto target = read_target(o.load.url, o.load.api_key, o.load.timeout_ms);
  if (!target) return fail(target.error().message);
  if (auto s = warm_up(o.load, *target); !s) return fail(s.error().message);
  Verdict v;
  v.doc["target"] = {{"url", o.load.url}, {"mode", target->mode}, {"hidden_size", target->hidden},
                     {"layers", {target->first_layer, target->last_layer}}};
  v.text = "target " + o.load.url + ": " + target->mode + ", layers " + std::to_string(target->first_layer) + "-" +
           std::to_string(target->last_layer) + ", hidden " + std::to_string(target->hidden) + "\n";

  // The baseline is taken after a warm-up load: what allocators keep from the first
  // requests is not a leak; growth after it is.
  std::vector<ProcessSample> cold, before, after;
  for (pid_t pid : o.pids) cold.push_back(sample_process(pid));
  const double warm = o.warm_up_seconds >= 0 ? o.warm_up_seconds : std::min(5.0, o.load.seconds / 5);
  if (o.load.seconds > 0 && warm > 0 && !o.pids.empty()) {
    LoadOptions warm_load = o.load;
    warm_load.seconds = warm;
    if (o.sessions) {  // and its sessions closed again, abandoned ones included
      if (auto report = run_session_load(warm_load, *target); !report) return fail(report.error().message);
      Verdict warm_verdict;
      wait_sessions_closed(o.load, o.settle_seconds, warm_verdict);
    } else if (auto report = run_load(warm_load, *target); !report) {
      return fail(report.error().message);
    }
  }
  for (pid_t pid : o.pids) before.push_back(sample_process(pid));
  if (o.load.seconds > 0 && o.sessions) {
    auto report = run_session_load(o.load, *target);
    if (!report) return fail(report.error().message);
    report_session_load(*report, v);
    wait_sessions_closed(o.load, o.settle_seconds, v);
  } else if (o.load.seconds > 0) {
    auto report = run_load(o.load, *target);
    if (!report) return fail(report.error().message);
    report_load(*report, o, v);
  }
  for (pid_t pid : o.pids) after.push_back(sample_process(pid));
  if (o.malformed) replay_corpus(*url, o.load, *target, o, o.pids, v);
  if (!o.pids.empty()) {
    const Settled settled =
        wait_until_recovered(o.pids, before, std::chrono::milliseconds(int64_t(o.settle_seconds * 1000)), !o.ignore_rss);
    json processes = json::array();
    v.text += "processes (resident memory, descriptors: before the load, after " + std::to_string(warm).substr(0, 3) +
              " s of warm-up load, after the load, settled):\n";
    for (size_t i = 0; i < o.pids.size(); ++i) {
      const auto& s = settled.samples.size() > i ? settled.samples[i] : ProcessSample{};
      const bool ok = recovered(before[i], s, !o.ignore_rss);
      processes.push_back({{"pid", o.pids[i]},
                           {"cold", sample_json(cold[i])},
                           {"before", sample_json(before[i])},
                           {"after", sample_json(after[i])},
                           {"settled", sample_json(s)},
                           {"settled_after_s", settled.seconds},
                           {"recovered", ok}});
      v.text += "  pid " + std::to_string(o.pids[i]) + ": " + mb(cold[i].rss_bytes) + " → " + mb(before[i].rss_bytes) + " → " +
                mb(after[i].rss_bytes) + " → " + mb(s.rss_bytes) + ", descriptors " + std::to_string(cold[i].descriptors) + " → " +
                std::to_string(before[i].descriptors) + " → " + std::to_string(after[i].descriptors) + " → " +
                std::to_string(s.descriptors) +
                (s.alive ? (ok ? "  (recovered)" : "  (NOT back within 20% + 4 MB of the warmed-up size and 10 descriptors)")
                         : "  (EXITED)") +
                (o.ignore_rss ? " (memory not judged)" : "") + "\n";
      if (!ok) v.failures.push_back("pid " + std::to_string(o.pids[i]) + (s.alive ? " did not recover" : " exited"));
    }
    v.doc["processes"] = processes;
  }
  v.doc["failures"] = v.failures;
  v.doc["pass"] = v.failures.empty();
  if (o.json) {
    std::cout << v.doc.dump(2) << "\n";
  } else {
    std::cout << v.text;
    for (const auto& f : v.failures) std::cout << "FAILED: " << f << "\n";
    if (v.failures.empty()) std::cout << "pass\n";
  }
  return v.failures.empty() ? 0 : 1;
}

}  // namespace

void add_loadtest_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "loadtest", "Load a shard or router with concurrent mixed traffic (and malformed HTTP); exit 1 on any failure");
  cmd->add_option("url", o->load.url, "the shard or router, http[s]://HOST:PORT")->required();
  cmd->add_option("--clients", o->load.clients, "concurrent keep-alive clients")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seconds", o->load.seconds, "how long to load (0: no load)")->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--mix", o->mix, "encodings to send and ask for, e.g. f32,f16,q8,i8 (default: all the target offers)");
  cmd->add_option("--rows", o->rows, "positions per request, N or A-B (uniformly drawn)")->capture_default_str();
  cmd->add_option("--batch-layers", o->batch_layers, "distinct layers per request, N or A-B (>1: a batch)")->capture_default_str();
  cmd->add_option("--pids", o->pids, "server processes to watch (resident memory, descriptors)")->delimiter(',');
  cmd->add_option("--warm-up-seconds", o->warm_up_seconds,
                  "load before the watched processes' baseline is sampled (default: a fifth of --seconds, at most 5)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--settle-seconds", o->settle_seconds, "after the load, how long the watched processes may take to recover")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_flag("--ignore-rss", o->ignore_rss, "report the watched processes' memory without judging it (AddressSanitizer keeps freed memory)");
  cmd->add_flag("--malformed", o->malformed, "replay the malformed-HTTP corpus after the load");
  cmd->add_option("--case-timeout-ms", o->case_timeout_ms, "how long a malformed case may wait for its answer")
      ->capture_default_str()
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--tolerate", o->tolerate, "statuses that are not failures (e.g. 503 when overload is the point)")->delimiter(',');
  cmd->add_option("--api-key", o->load.api_key, "bearer key the target requires");
  cmd->add_option("--timeout-ms", o->load.timeout_ms, "per-request timeout")->capture_default_str()->check(CLI::Range(1, 3'600'000));
  cmd->add_option("--seed", o->load.seed, "random seed of the traffic")->capture_default_str();
  cmd->add_flag("--experts", o->load.experts,
                "send /v1/walk-experts (PROTOCOL §12): each row to k random experts of the target's, sums or per-expert rows");
  cmd->add_flag("--sessions", o->sessions,
                "layer-range session traffic (a shard with --sessions): opens, steps, forks, deletes, abandoned sessions and "
                "malformed bodies; then every session must close (abandoned ones by the idle timeout) within --settle-seconds");
  cmd->add_flag("--allow-remote", o->allow_remote, "allow a target that is not a loopback address");
  cmd->add_flag("--json", o->json, "print the report as JSON");
  cmd->callback([o] {
    if (int rc = run_loadtest(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
