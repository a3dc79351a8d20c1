// What the HTTP server does with a request once Beast has parsed it, without sockets: the
// bearer-key check on the head alone (before any body byte is read), then the route
// table (404, 405, and 500 for a handler that throws). Kept apart so that it can be
// fuzzed with raw request bytes (fuzz/fuzz_http_head.cc).
#pragma once

#include <boost/beast/http.hpp>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "net/http_server.h"

namespace larql {

class Dispatcher {
 public:
  Dispatcher(const std::vector<Route>& routes, const HttpServerOptions& options) : routes_(routes), options_(options) {}

  // 401 as soon as the headers are in, when a key is set and the route needs it.
  std::optional<HttpReply> refuse_before_body(const boost::beast::http::request_header<>& head) const;
  // The route's answer, or the JSON error saying why there is none.
  HttpReply answer(const boost::beast::http::request<boost::beast::http::string_body>& req,
                   std::function<bool()> client_gone) const;

 private:
  const std::vector<Route>& routes_;
  const HttpServerOptions& options_;
};

}  // namespace larql
