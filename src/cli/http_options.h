// The connection-limit flags every larql server takes (serve, router): how many
// connections, and how long a request may take to arrive.
#pragma once

#include <CLI/CLI.hpp>

#include "net/http_server.h"

namespace larql::cli {

inline void add_connection_limit_options(CLI::App& cmd, HttpServerOptions& http) {
  cmd.add_option("--max-connections", http.max_connections,
                 "open connections; beyond it the one idle longest is closed, or 503 when all are busy")
      ->capture_default_str();
  cmd.add_option("--head-timeout-ms", http.head_timeout_ms,
                 "a request head must be complete this long after its first byte (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3'600'000));
  cmd.add_option("--min-body-rate", http.min_body_bytes_per_s,
                 "slowest accepted request body, bytes/s, after --head-timeout-ms of grace (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 40));
  cmd.add_option("--shutdown-timeout-ms", http.shutdown_timeout_ms,
                 "after SIGINT/SIGTERM, how long requests in flight may take before their connections are closed")
      ->capture_default_str()
      ->check(CLI::Range(0, 3'600'000));
}

}  // namespace larql::cli
