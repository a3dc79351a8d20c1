#include "net/http_dispatch.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <charconv>

namespace larql {

namespace http = boost::beast::http;

namespace {

std::string_view view(boost::beast::string_view s) { return {s.data(), s.size()}; }
std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// A route's path names one path, or with a trailing '*' every path under that prefix
// (DELETE /v1/sessions/{id}).
bool route_matches(const std::string& route, std::string_view path) {
  if (!route.empty() && route.back() == '*') {
    const std::string_view prefix = std::string_view(route).substr(0, route.size() - 1);
    return path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix;
  }
  return route == path;
}

}  // namespace

std::optional<HttpReply> Dispatcher::refuse_before_body(const http::request_header<>& head) const {
  if (!options_.api_key) return std::nullopt;
  const std::string_view path = path_of(view(head.target()));
  const bool open = std::any_of(routes_.begin(), routes_.end(), [&](const Route& r) { return route_matches(r.path, path) && !r.needs_api_key; });
  if (open || bearer_key_matches(view(head[http::field::authorization]), *options_.api_key)) return std::nullopt;
  return error_for(options_, make_error(ErrorCode::unauthorized, "missing or wrong Authorization: Bearer key"));
}

HttpReply Dispatcher::answer(const http::request<http::string_body>& req, std::function<bool()> client_gone) const {
  const auto arrived = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (const std::string_view d = view(req[kDeadlineHeader]); !d.empty()) {
    int64_t ms = -1;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), ms);
    if (ec != std::errc() || end != d.data() + d.size() || ms < 0)
      return error_for(options_, make_error(ErrorCode::bad_request, std::string(kDeadlineHeader) + " is '" + std::string(d) +
                                                                "'; expected the milliseconds the caller will still wait"));
    deadline = arrived + std::chrono::milliseconds(ms);
  }
  const std::string_view path = path_of(view(req.target()));
  const std::string_view method = view(req.method_string());
  bool path_known = false;
  for (const auto& r : routes_) {
    if (!route_matches(r.path, path)) continue;
    path_known = true;
    if (r.method != method) continue;
    try {
      return r.handler({method, path, view(req[http::field::content_type]), view(req[http::field::accept]),
                        view(req[http::field::authorization]), req.body(), std::move(client_gone), deadline});
    } catch (const std::exception& e) {
      return error_for(options_, make_error(ErrorCode::internal, e.what()));
    }
  }
  if (path_known)
    return error_for(options_, make_error(ErrorCode::method_not_allowed, std::string(method) + " is not allowed on " + std::string(path)));
  return error_for(options_, make_error(ErrorCode::not_found, "no such path: " + std::string(path)));
}

bool bearer_key_matches(std::string_view authorization, const std::string& key) {
  const std::string expected = "Bearer " + key;
  // Constant time in the key's length: the comparison does not stop at the first difference.
  return authorization.size() == expected.size() && CRYPTO_memcmp(authorization.data(), expected.data(), expected.size()) == 0;
}

}  // namespace larql
