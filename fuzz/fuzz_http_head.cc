// Any bytes as an HTTP request to a keyed server: Beast parses them with the server's
// limits, then the dispatcher checks the key and routes, as http_server.cc does. Never
// crashes, never throws, and every answer's body is valid JSON (peer bytes that are not
// UTF-8 once aborted a server from inside nlohmann's dump()).
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_common.h"
#include "net/http_dispatch.h"

namespace http = boost::beast::http;
using namespace larql;

namespace {

// Routes that echo what they were given into JSON, so the handler path sees peer bytes too.
HttpReply echo(const HttpRequest& r) {
  return json_reply({{"path", r.path}, {"content_type", r.content_type}, {"accept", r.accept}, {"body", r.body}});
}

void check_json_body(const HttpReply& reply) {
  fuzz::check(!nlohmann::json::parse(reply.body, nullptr, false).is_discarded());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Route> routes{{"POST", "/v1/walk-ffn", echo}, {"GET", "/v1/health", echo, false}};
  static const HttpServerOptions options = [] {
    HttpServerOptions o;
    o.api_key = "key";
    o.max_body_bytes = 4096;
    return o;
  }();
  static const Dispatcher dispatcher(routes, options);

  http::request_parser<http::string_body> parser;
  parser.body_limit(options.max_body_bytes);
  boost::system::error_code ec;
  size_t used = parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && parser.is_header_done() && !parser.is_done()) {
    parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (!ec && !parser.is_done()) parser.put_eof(ec);
  }
  if (!parser.is_header_done()) return 0;  // the server answers 400/408 with a fixed text
  if (auto refusal = dispatcher.refuse_before_body(parser.get())) {
    fuzz::check(refusal->status == 401);
    check_json_body(*refusal);
    return 0;
  }
  if (ec || !parser.is_done()) return 0;
  const HttpReply reply = dispatcher.answer(parser.get(), [] { return false; });
  fuzz::check(reply.status == 200 || reply.status == 404 || reply.status == 405);
  check_json_body(reply);
  return 0;
}
