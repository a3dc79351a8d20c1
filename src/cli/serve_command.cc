#include "cli/number_checks.h"
#include "cli/arithmetic_option.h"
#include "cli/command_model.h"
#include "cli/huge_pages_option.h"
#include "cli/serve_command.h"

#include "cli/http_options.h"

#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "infer/local_ffn.h"
#include "infer/transformer.h"
#include "model/kv_sharing.h"
#include "model/loader.h"
#include "net/ffn_service.h"
#include "net/session_service.h"
#include "net/http_server.h"
#include "wire/wire_config.h"

namespace larql::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::optional<std::string> tokenizer;  // accepted for symmetry with run; the server never tokenizes
  std::optional<std::string> layers;
  std::optional<std::string> experts;
  wire::ServerWireFlags wire;
  size_t max_body_mb = 64;
  size_t threads = 0;
  size_t max_queue = 64;
  size_t max_work = 65536;
  HttpServerOptions http;
  std::optional<std::string> arithmetic;
  bool no_huge_pages = false;
  // Layer-range sessions (PROTOCOL §13)
  bool sessions = false;
  SessionServiceOptions session;
  bool session_wire_i8 = false;
};

int serve(ServeOptions o) {
  block_termination_signals();  // before any thread starts: the server's signal thread takes them
  auto fail = [](const std::string& m) {
    std::cerr << "larql serve: " << m << "\n";
    return 2;
  };
  if (!o.http.api_key)
    if (const char* key = std::getenv("LARQL_API_KEY"); key && *key) o.http.api_key = key;
  auto model = load_command_model("larql serve", o.model, o.arithmetic);
  if (!model) return fail(model.error().message);
  auto encodings = wire::server_encodings(o.wire, model->config.hidden, wire::process_env());
  if (!encodings) return fail(encodings.error().message);
  LayerRange owned{0, uint32_t(model->config.layers - 1)};
  if (o.layers) {
    auto r = parse_layer_range(*o.layers);
    if (!r) return fail(r.error().message);
    if (r->last >= model->config.layers)
      return fail("--layers " + r->str() + " goes beyond the model's " + std::to_string(model->config.layers) + " layers");
    owned = *r;
  }
  // Expert ids: the routed ones, then the shared ones (PROTOCOL §12).
  const size_t expert_ids = model->config.moe.expert_ids();
  LayerRange experts{0, uint32_t(std::max<size_t>(expert_ids, 1) - 1)};
  if (o.experts) {
    if (!expert_ids) return fail("--experts: model " + model->config.name + " has no mixture-of-experts layers");
    auto r = parse_layer_range(*o.experts);
    if (!r) return fail("--experts: " + r.error().message);
    if (r->last >= expert_ids)
      return fail("--experts " + r->str() + " goes beyond the model's " + std::to_string(expert_ids) + " experts (0-" +
                  std::to_string(expert_ids - 1) + ")");
    experts = *r;
  }
  if (o.sessions) {
    if (o.experts && (experts.first != 0 || experts.last + 1 != expert_ids))
      return fail("--sessions runs whole layers, every expert of them included; it cannot take --experts " + experts.str());
    if (auto s = check_range_keeps_kv_groups(model->config, owned.first, owned.last); !s) return fail(s.error().message);
  }
  if (auto placed = place_weights(*model, o.no_huge_pages,
                                  {.used = o.sessions ? WeightsUsed::layers : WeightsUsed::ffn, .first = owned.first, .last = owned.last,
                                   .first_expert = experts.first, .last_expert = experts.last});
      !placed)
    return fail(placed.error().message);
  const size_t threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(threads);
  LocalFfn ffn(*model, pool);
  o.http.max_body_bytes = o.max_body_mb << 20;
  FfnService service(*model, ffn, {owned, experts, *encodings, o.http.max_body_bytes, o.max_queue, o.max_work});
  // A session shard runs its layers whole, with the same forward-pass code as a local run.
  std::optional<Transformer> layers;
  std::optional<SessionService> sessions;
  if (o.sessions) {
    layers.emplace(*model, ffn, pool);
    SessionServiceOptions so = o.session;
    so.layers = owned;
    so.max_body_bytes = o.http.max_body_bytes;
    so.max_work = o.max_work;
    so.max_queue = o.max_queue;
    if (o.session_wire_i8) so.encodings.insert(wire::Encoding::i8);
    sessions.emplace(*model, *layers, service.compute_turns(), so);
  }

  std::vector<Route> routes{
      {"POST", "/v1/walk-ffn",
       [&](const HttpRequest& r) { return service.walk_ffn(r.body, r.content_type, r.accept, r.client_gone, r.deadline); }},
      {"POST", "/v1/walk-experts",
       [&](const HttpRequest& r) { return service.walk_experts(r.body, r.content_type, r.accept, r.client_gone, r.deadline); }},
      {"POST", "/v1/experts/layer-batch",
       [&](const HttpRequest& r) { return service.reference_layer_batch(r.body, false, r.client_gone, r.deadline); }},
      {"POST", "/v1/experts/layer-batch-f16",
       [&](const HttpRequest& r) { return service.reference_layer_batch(r.body, true, r.client_gone, r.deadline); }},
      {"GET", "/v1/stats",
       [&](const HttpRequest&) {
         nlohmann::json stats = service.stats();
         if (sessions) stats["sessions"] = sessions->stats(), stats.update(sessions->fingerprints());
         return json_reply(stats);
       }},
      {"GET", "/v1/health", [&](const HttpRequest&) { return json_reply(service.health()); }, false},
      {"GET", "/metrics",
       [&](const HttpRequest&) {
         return metrics_reply(service.metrics().render() + (sessions ? sessions->render_metrics() : ""));
       }},
  };
  if (sessions) {
    routes.push_back({"POST", "/v1/sessions",
                      [&](const HttpRequest& r) { return sessions->open(r.body, r.content_type, r.authorization); }});
    routes.push_back({"DELETE", "/v1/sessions/*", [&](const HttpRequest& r) {
                        return sessions->close(r.path.substr(std::string_view("/v1/sessions/").size()), r.authorization);
                      }});
    routes.push_back({"POST", "/v1/walk-layers", [&](const HttpRequest& r) {
                        return sessions->walk_layers(r.body, r.content_type, r.accept, r.authorization, r.client_gone, r.deadline);
                      }});
  }
  const std::string describe = "larql serve: model " + model->config.name + ", layers " + owned.str() + " of " +
                               std::to_string(model->config.layers) +
                               (expert_ids ? ", experts " + experts.str() + " of " + std::to_string(expert_ids) : "") +
                               ", hidden " + std::to_string(model->config.hidden) +
                               ", wire " + wire::describe(*encodings) + ", ffn arithmetic " +
                               model->ffn_arithmetic(owned.first, owned.last).name() + ", " +
                               std::to_string(threads) + " threads" +
                               (o.sessions ? ", sessions (layers arithmetic " +
                                                 model->layers_arithmetic(owned.first, owned.last).name() + ")"
                                           : "") +
                               (o.http.api_key ? ", key required" : "");
  return serve_http(routes, o.http, describe);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the FFN of a layer range over HTTP (a shard)");
  cmd->add_option("model", o->model, "llama2.c checkpoint or Hugging Face directory")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "ignored (a shard never tokenizes); accepted so run and serve share flags");
  cmd->add_option("--host", o->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "port (0: any free port, printed at start-up)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--layers", o->layers, "owned layers, inclusive (A-B); default all");
  cmd->add_option("--experts", o->experts,
                  "owned experts of the mixture-of-experts layers, inclusive (C-D); default all. Served by /v1/walk-experts");
  cmd->add_flag("--wire-i8", o->wire.i8, "offer i8 (also LARQL_I8_WIRE=1)");
  cmd->add_flag("--no-wire-q8", o->wire.no_q8, "do not offer q8 (also LARQL_Q8_WIRE=0); offered by default when hidden % 32 = 0");
  cmd->add_option("--api-key", o->http.api_key, "require Authorization: Bearer KEY (also LARQL_API_KEY)");
  cmd->add_option("--tls-cert", o->http.tls_cert, "serve HTTPS with this certificate (PEM)");
  cmd->add_option("--tls-key", o->http.tls_key, "private key of --tls-cert (PEM)");
  cmd->add_option("--max-body-mb", o->max_body_mb, "largest request body in MiB")->capture_default_str();
  cmd->add_option("--threads", o->threads, "compute threads (default: all cores)");
  add_arithmetic_option(cmd, o->arithmetic);
  add_huge_pages_option(cmd, o->no_huge_pages);
  cmd->add_option("--max-queue", o->max_queue, "requests that may wait for compute before 503")->capture_default_str();
  cmd->add_option("--max-work", o->max_work, "largest positions × layers of one request (more: 413 work_too_large)")
      ->capture_default_str();
  add_connection_limit_options(*cmd, o->http);
  cmd->add_flag("--sessions", o->sessions,
                "run whole layers for layer-range sessions (PROTOCOL §13): /v1/sessions and /v1/walk-layers, beside /v1/walk-ffn");
  cmd->add_option("--session-kv-bytes", o->session.kv_budget_bytes, "KV cache budget of all sessions (default: a quarter of memory)");
  cmd->add_option("--max-sessions", o->session.max_sessions, "sessions open at once")->capture_default_str();
  cmd->add_option("--session-idle-s", o->session.idle_timeout_s, "close a session no request named for this long")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--session-max-positions", o->session.max_positions, "largest max_positions of a session (default: the model's context)");
  cmd->add_option("--session-max-rows", o->session.max_rows, "rows of one walk-layers step, all sessions together")->capture_default_str();
  cmd->add_flag("--session-wire-i8", o->session_wire_i8, "accept i8 residuals on /v1/walk-layers (off by default; --wire-i8 does not turn it on)");
  cmd->callback([o] {
    if (int rc = serve(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
