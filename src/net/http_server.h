// The HTTP glue shared by the shard server and the router: Boost.Beast, one thread per
// kept-alive connection reading and writing with one system call each way (cpp-httplib
// cost 4.5x a raw TCP round trip on one core; see docs/benchmarks.md), TCP_NODELAY,
// optional TLS and bearer-key auth, JSON errors on every path (404, 405, 413 and
// malformed HTTP included), the real port in the start-up line, and graceful shutdown on
// SIGINT/SIGTERM.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "net/ffn_service.h"

namespace larql {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the start-up line says which)
  std::optional<std::string> api_key;       // every path but /v1/health needs it
  std::optional<std::string> tls_cert, tls_key;
  size_t max_connections = 256;  // open connections beyond this get 503 at once
  int idle_timeout_ms = 30000;    // a read or write that makes no progress this long ends the connection
  std::function<void(int port)> on_listening;  // called once bound, with the real port
  size_t max_body_bytes = 64u << 20;
};

struct Route {
  std::string method;  // "GET" or "POST"
  std::string path;
  std::function<HttpReply(const std::string& body, const std::string& content_type, const std::string& accept,
                          const std::string& authorization)>
      handler;
};

// Serves `routes` until SIGINT or SIGTERM, then finishes in-flight requests and returns 0.
// `describe` is printed (with "listening on http[s]://HOST:PORT" appended) once bound.
// Returns non-zero when the server cannot start (the reason on stderr).
int serve_http(const std::vector<Route>& routes, const HttpServerOptions& options, const std::string& describe);

// Whether an Authorization header value is "Bearer <key>", compared in constant time.
bool bearer_key_matches(const std::string& authorization, const std::string& key);

// Blocks SIGINT/SIGTERM in the calling thread (and threads it starts later), so that
// serve_http's signal thread is the one that receives them. Call first thing in main.
void block_termination_signals();

}  // namespace larql
