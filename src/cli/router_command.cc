#include "cli/number_checks.h"
#include "cli/router_command.h"

#include "cli/http_options.h"

#include <cstdlib>
#include <iostream>

#include "net/http_server.h"
#include "net/router.h"
#include "net/session_router.h"
#include "net/web_pages.h"

namespace larql::cli {
namespace {

struct Options {
  RouterOptions router;
  HttpServerOptions http;
  std::string hedge_after = "0";
  std::string shard_wire = "f32";
  size_t max_sessions = 4096;
  double wait_for_shards_s = 60;
};

int run_router(Options o) {
  block_termination_signals();
  if (o.hedge_after == "auto") {
    o.router.hedge_auto = true;
  } else {
    char* end = nullptr;
    o.router.hedge_after_ms = std::strtod(o.hedge_after.c_str(), &end);
    if (o.hedge_after.empty() || *end != '\0' || !(o.router.hedge_after_ms >= 0)) {
      std::cerr << "larql router: --hedge-after-ms '" << o.hedge_after << "': expected milliseconds (0: no hedging) or auto\n";
      return 2;
    }
  }
  o.router.shard_wire = o.shard_wire == "f16" ? wire::Encoding::f16 : wire::Encoding::f32;
  if (!o.router.shard_key)
    if (const char* key = std::getenv("LARQL_SHARD_KEY"); key && *key) o.router.shard_key = key;
  auto router = Router::create(o.router);
  if (!router) {
    std::cerr << "larql router: " << router.error().message << "\n";
    return 2;
  }
  Router& r = **router;
  // Layer-range sessions (PROTOCOL §13) when every shard serves them.
  auto sessions = SessionRoutes::create(
      {o.router.spec, o.router.timeout_ms, o.max_sessions, o.router.shard_key, o.router.shard_ca_cert, o.wait_for_shards_s});
  if (!sessions) {
    std::cerr << "larql router: " << sessions.error().message << "\n";
    return 2;
  }
  SessionRoutes& s = **sessions;
  auto session_router = [&s]() -> SessionRouter* {  // for stats and metrics: nullptr while none
    auto got = s.get();
    return got ? *got : nullptr;
  };
  // A session route: its router, or why there is none.
  auto with_sessions = [&s](auto call) {
    return [&s, call](const HttpRequest& q) -> HttpReply {
      auto got = s.get();
      if (!got) return error_reply(got.error());
      if (!*got && s.undecided())
        return error_reply(make_error(ErrorCode::shard_unavailable, "no shard of this router's map answers yet; sessions once they do"));
      if (!*got) return error_reply(make_error(ErrorCode::not_found, "this router's shards do not serve layer-range sessions (PROTOCOL §13)"));
      return call(**got, q);
    };
  };
  using Request = const HttpRequest&;
  std::vector<Route> routes{
      {"POST", "/v1/walk-ffn",
       [&](Request q) {
         return r.walk_ffn(q.body, std::string(q.content_type), std::string(q.accept), std::string(q.authorization),
                           q.deadline);
       }},
      {"POST", "/v1/walk-experts",
       [&](Request q) {
         return r.walk_experts(q.body, std::string(q.content_type), std::string(q.accept), std::string(q.authorization),
                               q.deadline);
       }},
      {"GET", "/v1/stats",
       [&](Request) {
         nlohmann::json stats = r.stats();
         if (auto* sr = session_router()) stats.update(sr->stats());
         return json_reply(stats);
       }},
      {"GET", "/v1/health", [&](Request) { return json_reply(r.health()); }, false},
      {"GET", "/metrics",
       [&](Request) {
         auto* sr = session_router();
         return metrics_reply(r.metrics() + (sr ? sr->metrics() : ""));
       }},
      // The grid at a glance (web/grid.html): open; its polls carry the key the user gives.
      {"GET", "/", [](Request) { return web_page_reply("grid"); }, false},
  };
  const bool sessions_now = session_router() != nullptr;
  if (sessions_now || s.undecided()) {
    routes.push_back({"POST", "/v1/sessions", with_sessions([](SessionRouter& sr, Request q) {
                        return sr.open(q.body, q.content_type, q.authorization);
                      })});
    routes.push_back({"DELETE", "/v1/sessions/*", with_sessions([](SessionRouter& sr, Request q) {
                        return sr.close(q.path.substr(std::string_view("/v1/sessions/").size()), q.authorization);
                      })});
    routes.push_back({"POST", "/v1/walk-layers", with_sessions([](SessionRouter& sr, Request q) {
                        return sr.walk_layers(q.body, q.content_type, q.accept, q.authorization, q.deadline);
                      })});
  }
  if (r.admin_enabled()) {  // without --admin-key the admin endpoint does not exist; it checks its own key
    for (const char* method : {"GET", "POST"})
      routes.push_back({method, "/admin/shards",
                        [&r, method](Request q) {
                          auto listed = r.admin(method, q.body, std::string(q.authorization));
                          return listed ? json_reply(*listed) : error_reply(listed.error());
                        },
                        false});
  }
  const std::string describe = "larql router: " + o.router.spec + ", hidden " + r.stats()["hidden_size"].dump() +
                               (sessions_now ? ", layer-range sessions"
                                : s.undecided() ? ", no shard answering yet (sessions once they do, if they serve them)"
                                                : "") +
                               (r.admin_enabled() ? ", admin enabled" : "") +
                               (o.http.api_key ? ", key required" : "");
  return serve_http(routes, o.http, describe);
}

}  // namespace

void add_router_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  o->http.port = 9090;
  CLI::App* cmd = app.add_subcommand("router", "Route /v1/walk-ffn and /v1/walk-experts to layer- and expert-range shards, with replicas and failover");
  cmd->add_option("--shards", o->router.spec, R"(layer map: "0-1=http://h:8081|http://h:8083,2-3=http://h:8082")")->required();
  cmd->add_option("--host", o->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "port (0: any free port, printed at start-up)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--timeout-ms", o->router.timeout_ms, "per-call timeout to a shard")->capture_default_str()->check(positive());
  cmd->add_option("--hedge-after-ms", o->hedge_after,
                  "send a call also to a second replica when the first has not answered within this many ms "
                  "(auto: its recent p95; 0: never)")
      ->capture_default_str();
  cmd->add_option("--health-interval-ms", o->router.health_interval_ms, "how often each shard's /v1/health is polled")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--admin-key", o->router.admin_key, "enables /admin/shards, which then needs this bearer key");
  cmd->add_option("--shard-wire", o->shard_wire,
                  "what a /v1/walk-experts split across expert ranges asks its parts in: f32 (exact) or f16")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
  cmd->add_option("--max-sessions", o->max_sessions,
                  "layer-range sessions (when every shard serves them) the router holds at once")
      ->capture_default_str();
  cmd->add_option("--wait-for-shards-s", o->wait_for_shards_s,
                  "at start, how long to wait for a range none of whose replicas answers yet while the others serve sessions")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--shard-key", o->router.shard_key, "bearer key for the router's own calls to shards (also LARQL_SHARD_KEY)");
  cmd->add_option("--shard-ca-cert", o->router.shard_ca_cert,
                  "CA certificate (PEM) for https:// shards with a private CA (default: the system's CAs)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--api-key", o->http.api_key,
                  "require Authorization: Bearer KEY on everything but /v1/health (also LARQL_API_KEY); "
                  "the data path forwards the caller's Authorization to the shards")
      ->envname("LARQL_API_KEY");
  add_connection_limit_options(*cmd, o->http);
  cmd->add_option("--tls-cert", o->http.tls_cert, "serve HTTPS with this certificate (PEM)");
  cmd->add_option("--tls-key", o->http.tls_key, "private key of --tls-cert (PEM)");
  cmd->callback([o] {
    if (int rc = run_router(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace larql::cli
