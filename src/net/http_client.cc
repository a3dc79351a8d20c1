#include "net/http_client.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <variant>

#include "net/timed_socket.h"
#include "net/url.h"

namespace larql {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint64_t kMaxResponseBytes = 1ull << 30;

// The size of a head as Beast writes it (our servers answer with Beast too), counted
// without writing it: a start line, "name: value\r\n" per field, and a blank line.
size_t fields_size(const http::fields& fields) {
  size_t n = 2;
  for (const auto& f : fields) n += f.name_string().size() + 2 + f.value().size() + 2;
  return n;
}
size_t head_size(const http::request_header<>& h) {
  return h.method_string().size() + 1 + h.target().size() + sizeof(" HTTP/1.1\r\n") - 1 + fields_size(h);
}
size_t head_size(const http::response_header<>& h) {
  return sizeof("HTTP/1.1 200 \r\n") - 1 + h.reason().size() + fields_size(h);
}

Error transport_error(const boost::system::error_code& ec, const std::string& doing, int timeout_ms) {
  if (ec == asio::error::timed_out)
    return make_error(ErrorCode::shard_timeout, doing + ": no progress within " + std::to_string(timeout_ms) + " ms");
  if (ec == asio::error::eof || ec == http::error::end_of_stream)
    return make_error(ErrorCode::shard_unavailable, doing + ": the server closed the connection");
  return make_error(ErrorCode::shard_unavailable, doing + ": " + ec.message());
}

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (boost::beast::iequals(n, boost::beast::string_view(name.data(), name.size()))) return v;
  return {};
}

int HttpResponse::retry_after_s() const { return std::max(1, std::atoi(header("Retry-After").c_str())); }

namespace {

// One io_context for every outgoing connection of the process. Each io_context's reactor
// holds descriptors of its own (epoll, eventfd, timerfd): one per connection made a
// router's idle pool cost four descriptors a connection. Our sockets only ever block, so
// they share one; it is never destroyed, so no socket can outlive it at exit.
asio::io_context& shared_io() {
  static auto* io = new asio::io_context;
  return *io;
}

}  // namespace

struct HttpClient::Connection {
  asio::io_context& io = shared_io();
  Url url;
  std::optional<ssl::context> tls;
  // The open connection, plain or TLS; monostate when there is none.
  std::variant<std::monostate, TimedSocket, std::unique_ptr<ssl::stream<TimedSocket>>> stream;
  boost::beast::flat_buffer buffer;
  bool used = false;  // a request went over this connection already

  void close() {
    stream = std::monostate{};
    buffer.clear();
    used = false;
  }
};

HttpClient::HttpClient(std::string url, HttpClientOptions options)
    : url_(std::move(url)), options_(std::move(options)), connection_(std::make_unique<Connection>()) {}
HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::open(const std::string& url, const HttpClientOptions& options) {
  auto parsed = parse_url(url);
  if (!parsed) return parsed.error();
  auto client = std::unique_ptr<HttpClient>(new HttpClient(url, options));
  client->connection_->url = *parsed;
  client->connection_->buffer.reserve(64 << 10);  // whole responses in one read, not 512-byte steps
  if (parsed->tls) {
    auto& ctx = client->connection_->tls.emplace(ssl::context::tls_client);
    boost::system::error_code ec;
    if (options.ca_cert) ctx.load_verify_file(*options.ca_cert, ec);
    else ctx.set_default_verify_paths(ec);
    if (ec)
      return make_error(ErrorCode::invalid_argument,
                        "cannot load CA certificates" + (options.ca_cert ? " from " + *options.ca_cert : "") + ": " + ec.message());
    ctx.set_verify_mode(ssl::verify_peer);
  } else if (options.ca_cert) {
    return make_error(ErrorCode::invalid_argument, "--ca-cert given for " + url + ", which is not https://");
  }
  return client;
}

Result<HttpResponse> HttpClient::get(std::string_view path, const HttpHeaders& headers) {
  return send(Method::get, path, {}, {}, headers);
}

Result<HttpResponse> HttpClient::send_delete(std::string_view path, const HttpHeaders& headers) {
  return send(Method::del, path, {}, {}, headers);
}

Result<HttpResponse> HttpClient::post(std::string_view path, std::string_view body, std::string_view content_type,
                                      const HttpHeaders& headers) {
  return send(Method::post, path, body, content_type, headers);
}

Result<HttpResponse> HttpClient::send(Method method, std::string_view path, std::string_view body,
                                      std::string_view content_type, const HttpHeaders& headers) {
  Connection& c = *connection_;
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);

  const bool post = method == Method::post;
  const http::verb verb = post ? http::verb::post : method == Method::del ? http::verb::delete_ : http::verb::get;
  http::request<http::span_body<const char>> req{verb,
                                                  boost::beast::string_view(path.data(), path.size()), 11};
  req.set(http::field::host, c.url.host_header);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (post) {
    req.set(http::field::content_type, boost::beast::string_view(content_type.data(), content_type.size()));
    req.body() = {body.data(), body.size()};
  }
  req.keep_alive(true);
  req.prepare_payload();

  for (int attempt = 0;; ++attempt) {
    if (std::holds_alternative<std::monostate>(c.stream)) {
      boost::system::error_code ec;
      tcp::resolver resolver(c.io);
      const auto endpoints = resolver.resolve(c.url.host, c.url.port, ec);
      if (ec) return make_error(ErrorCode::shard_unavailable, "cannot resolve " + c.url.host + ": " + ec.message());
      auto socket = TimedSocket::connect(c.io, endpoints, timeout, ec);
      if (!socket) return transport_error(ec, "cannot connect to " + c.url.host + ":" + c.url.port, options_.timeout_ms);
      if (c.tls) {
        auto tls = std::make_unique<ssl::stream<TimedSocket>>(std::move(*socket), *c.tls);
        SSL_set_tlsext_host_name(tls->native_handle(), c.url.host.c_str());
        tls->set_verify_callback(ssl::host_name_verification(c.url.host));
        tls->handshake(ssl::stream_base::client, ec);
        if (ec) return transport_error(ec, "TLS handshake with " + c.url.host + ":" + c.url.port, options_.timeout_ms);
        c.stream = std::move(tls);
      } else {
        c.stream = std::move(*socket);
      }
    }
    const bool reused = c.used;
    c.used = true;

    boost::system::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    bool wrote = false;
    auto exchange = [&](auto& stream) {
      http::write(stream, req, ec);
      if (ec) return;
      wrote = true;
      http::read(stream, c.buffer, parser, ec);
    };
    if (auto* plain = std::get_if<TimedSocket>(&c.stream)) exchange(*plain);
    else exchange(*std::get<std::unique_ptr<ssl::stream<TimedSocket>>>(c.stream));

    if (ec) {
      c.close();
      // A kept-alive connection the server closed while idle: once more on a fresh one.
      const bool stale = ec != asio::error::timed_out && !parser.got_some();
      if (reused && stale && attempt == 0) continue;
      return transport_error(ec, std::string(wrote ? "reading the response from " : "sending to ") + url_ +
                                     std::string(path),
                             options_.timeout_ms);
    }
    auto res = parser.release();
    HttpResponse out;
    out.status = int(res.result_int());
    for (const auto& field : res) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    out.body = std::move(res.body());
    out.head_bytes_sent = head_size(req.base());
    out.head_bytes_received = head_size(res.base());
    if (!res.keep_alive()) c.close();
    return out;
  }
}

}  // namespace larql
