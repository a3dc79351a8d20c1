// Outgoing HTTP/1.1 (client to shard, router to shard, health polls): Boost.Beast over
// one kept-alive connection with TCP_NODELAY, http:// or https:// (certificate and host
// name verified, optionally against a private CA), one timeout for connect, each read
// and each write. A request that fails on a reused connection (the server may have
// closed it while idle) is sent once more on a fresh one: every call here is idempotent.
// Not thread-safe: one client per thread or per pooled connection.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"

namespace larql {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 0;
  std::string body;
  HttpHeaders headers;
  // Bytes of the request's and the response's HTTP heads (request or status line and
  // fields), for what a link carries besides the bodies.
  size_t head_bytes_sent = 0, head_bytes_received = 0;
  // The value of a header (case-insensitive name), or "" when absent.
  std::string header(std::string_view name) const;
  // The seconds of a 503's Retry-After; at least 1 (absent or unreadable: 1).
  int retry_after_s() const;
};

struct HttpClientOptions {
  int timeout_ms = 5000;
  std::optional<std::string> ca_cert;  // PEM file trusted for https://, instead of the system's CAs
};

class HttpClient {
 public:
  // `url` is http://HOST[:PORT] or https://HOST[:PORT]; a trailing "/" is allowed.
  static Result<std::unique_ptr<HttpClient>> open(const std::string& url, const HttpClientOptions& options = {});
  ~HttpClient();

  // Transport failures are errors with code shard_timeout (a timeout) or shard_unavailable
  // (anything else), their message saying what happened; any HTTP status is a response.
  Result<HttpResponse> get(std::string_view path, const HttpHeaders& headers = {});
  Result<HttpResponse> post(std::string_view path, std::string_view body, std::string_view content_type,
                            const HttpHeaders& headers = {});
  Result<HttpResponse> send_delete(std::string_view path, const HttpHeaders& headers = {});

  const std::string& url() const { return url_; }

 private:
  struct Connection;
  HttpClient(std::string url, HttpClientOptions options);
  enum class Method { get, post, del };
  Result<HttpResponse> send(Method method, std::string_view path, std::string_view body, std::string_view content_type,
                            const HttpHeaders& headers);

  std::string url_;
  HttpClientOptions options_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace larql
