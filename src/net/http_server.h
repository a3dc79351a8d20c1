// The HTTP glue shared by the shard server and the router: Boost.Beast, one thread per
// kept-alive connection reading and writing with one system call each way (cpp-httplib
// cost 4.5x a raw TCP round trip on one core; see docs/benchmarks/history.md), TCP_NODELAY,
// optional TLS and bearer-key auth, JSON errors on every path (404, 405, 413 and
// malformed HTTP included), the real port in the start-up line, and graceful shutdown on
// SIGINT/SIGTERM.
//
// What a hostile or broken peer cannot do: take a slot for ever (a request head must be
// complete within head_timeout_ms of its first byte, a body must keep a minimum rate, and
// when every slot is taken the connection waiting longest without a complete request is
// closed to make room); make us read a body before its key is checked (401 as soon as
// the headers are in); kill the process (every string from the peer is JSON-escaped
// safely, and no exception leaves a connection's thread).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/http_reply.h"

namespace larql {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the start-up line says which)
  std::optional<std::string> api_key;       // every route with needs_api_key requires it
  std::optional<std::string> tls_cert, tls_key;
  // Open connections beyond this make room by closing the one idle longest (or trickling
  // its head longest); when every connection is busy being answered, 503 at once.
  size_t max_connections = 256;
  int idle_timeout_ms = 30000;    // a read or write that makes no progress this long ends the connection
  int head_timeout_ms = 10000;    // a request head not complete this long after its first byte: 408
  size_t min_body_bytes_per_s = 64u << 10;  // a body slower than this (after head_timeout_ms of grace): 408
  int shutdown_timeout_ms = 10000;  // after SIGINT/SIGTERM, requests in flight get this long, then are cut off
  std::function<void(int port)> on_listening;  // called once bound, with the real port
  size_t max_body_bytes = 64u << 20;
  // The body of every error the server itself answers (404, 413, 401, malformed HTTP…);
  // empty: PROTOCOL §7's. The OpenAI-compatible server answers in OpenAI's shape.
  std::function<HttpReply(const Error&)> render_error;
};

// An error reply in the server's shape (options.render_error, else PROTOCOL §7).
inline HttpReply error_for(const HttpServerOptions& options, const Error& e) {
  return options.render_error ? options.render_error(e) : error_reply(e);
}

// One request as a route sees it. The views are valid during the handler call.
struct HttpRequest {
  std::string_view method, path, content_type, accept, authorization;
  const std::string& body;
  // True once the client has closed its connection: long work for it may stop.
  std::function<bool()> client_gone;
  // When the caller stops waiting (X-Larql-Deadline-Ms, PROTOCOL §9, counted from the
  // request's arrival); none when it did not say.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct Route {
  std::string method;  // "GET", "POST" or "DELETE"
  std::string path;    // exact, or ending in '*': every path under that prefix
  std::function<HttpReply(const HttpRequest&)> handler;
  // false: open to all (health), or guarded by its own key inside the handler (admin).
  bool needs_api_key = true;
};

// Serves `routes` until SIGINT or SIGTERM, then finishes in-flight requests and returns 0.
// `describe` is printed (with "listening on http[s]://HOST:PORT" appended) once bound.
// Returns non-zero when the server cannot start (the reason on stderr).
int serve_http(const std::vector<Route>& routes, const HttpServerOptions& options, const std::string& describe);

// Whether an Authorization header value is "Bearer <key>", compared in constant time.
bool bearer_key_matches(std::string_view authorization, const std::string& key);

// Blocks SIGINT/SIGTERM in the calling thread (and threads it starts later), so that
// serve_http's signal thread is the one that receives them. Call first thing in main.
void block_termination_signals();

}  // namespace larql
