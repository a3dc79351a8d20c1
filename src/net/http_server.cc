#include "net/http_server.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "net/timed_socket.h"

namespace larql {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// The open connections, so that a stop can wake the idle ones (shutdown of the read
// side: a blocked read returns, a request being answered still gets its response) and
// then wait until every connection thread has finished.
class ConnectionSet {
 public:
  explicit ConnectionSet(size_t max) : max_(max) {}

  // An id for the connection, or 0 when stopping or full.
  uint64_t add(int fd) {
    std::lock_guard lock(mutex_);
    if (stopping_ || fds_.size() >= max_) return 0;
    fds_[++next_id_] = fd;
    return next_id_;
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    fds_.erase(id);
    if (fds_.empty()) drained_.notify_all();
  }
  void stop_all() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& [id, fd] : fds_) ::shutdown(fd, SHUT_RD);
  }
  void wait_drained() {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return fds_.empty(); });
  }

 private:
  std::mutex mutex_;
  std::condition_variable drained_;
  std::map<uint64_t, int> fds_;
  uint64_t next_id_ = 0;
  size_t max_;
  bool stopping_ = false;
};

// Authorization, then the route table: the answer to one request as an HttpReply.
class Dispatcher {
 public:
  Dispatcher(const std::vector<Route>& routes, const HttpServerOptions& options) : routes_(routes), options_(options) {}

  HttpReply answer(const http::request<http::string_body>& req) const {
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    const std::string method(req.method_string());
    const std::string authorization(req[http::field::authorization]);
    if (options_.api_key && path != "/v1/health" && !bearer_key_matches(authorization, *options_.api_key))
      return error_reply(make_error(ErrorCode::unauthorized, "missing or wrong Authorization: Bearer key"));
    bool path_known = false;
    for (const auto& r : routes_) {
      if (r.path != path) continue;
      path_known = true;
      if (r.method != method) continue;
      try {
        return r.handler(req.body(), std::string(req[http::field::content_type]), std::string(req[http::field::accept]),
                         authorization);
      } catch (const std::exception& e) {
        return error_reply(make_error(ErrorCode::internal, e.what()));
      }
    }
    if (path_known) return error_reply(make_error(ErrorCode::method_not_allowed, method + " is not allowed on " + path));
    return error_reply(make_error(ErrorCode::not_found, "no such path: " + path));
  }

 private:
  const std::vector<Route>& routes_;
  const HttpServerOptions& options_;
};

template <class Stream>
void write_reply(Stream& stream, HttpReply reply, unsigned version, bool keep_alive, boost::system::error_code& ec) {
  http::response<http::string_body> res;
  res.version(version);
  res.result(unsigned(reply.status));
  if (!reply.content_type.empty()) res.set(http::field::content_type, reply.content_type);
  if (reply.retry_after) res.set(http::field::retry_after, "1");
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.body() = std::move(reply.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  http::write(stream, res, ec);
}

// Answers a request we will not read (too large, malformed) and closes the connection
// without resetting it: a client still sending its body would otherwise get a
// connection reset instead of our answer. So: answer, stop writing, then read and drop
// what the client still sends (bounded in bytes, and in time by the read timeout).
template <class Stream>
void answer_and_close(Stream& stream, const Error& error, uint64_t drain_limit) {
  boost::system::error_code ec;
  write_reply(stream, error_reply(error), 11, false, ec);
  if (ec) return;
  const int fd = stream.lowest_layer().native_handle();
  ::shutdown(fd, SHUT_WR);
  char scratch[64 << 10];
  for (uint64_t drained = 0; drained < drain_limit;) {
    const ssize_t n = ::recv(fd, scratch, sizeof scratch, 0);
    if (n <= 0) break;
    drained += uint64_t(n);
  }
}

// Requests on one kept-alive connection until the client leaves, a read times out, the
// framing is broken, or the server stops.
template <class Stream>
void serve_connection(Stream& stream, const Dispatcher& dispatcher, const HttpServerOptions& o,
                      const std::atomic<bool>& stopping) {
  boost::beast::flat_buffer buffer;
  buffer.reserve(64 << 10);  // whole small requests in one read, not 512-byte steps
  for (;;) {
    boost::system::error_code ec;
    http::request_parser<http::string_body> parser;
    parser.body_limit(o.max_body_bytes);
    http::read_header(stream, buffer, parser, ec);
    if (!ec && parser.get()[http::field::expect] == "100-continue")  // curl sends it for bodies over 1 KiB
      asio::write(stream, asio::buffer(std::string_view("HTTP/1.1 100 Continue\r\n\r\n")), ec);
    if (!ec) http::read(stream, buffer, parser, ec);
    const uint64_t drain_limit = 4 * uint64_t(o.max_body_bytes) + (1 << 20);
    if (ec == http::error::body_limit) {
      answer_and_close(stream,
                       make_error(ErrorCode::body_too_large,
                                  "body above the limit of " + std::to_string(o.max_body_bytes) + " bytes"),
                       drain_limit);
      return;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::timed_out ||
        ec == asio::error::connection_reset || !parser.got_some())
      return;  // the client left (or went quiet); nothing to answer
    if (ec) {
      answer_and_close(stream, make_error(ErrorCode::bad_request, "malformed HTTP request: " + ec.message()), drain_limit);
      return;
    }
    const auto& req = parser.get();
    const bool keep_alive = req.keep_alive() && !stopping;
    write_reply(stream, dispatcher.answer(req), req.version(), keep_alive, ec);
    if (ec || !keep_alive) return;
  }
}

}  // namespace

bool bearer_key_matches(const std::string& authorization, const std::string& key) {
  const std::string expected = "Bearer " + key;
  // Constant time in the key's length: the comparison does not stop at the first difference.
  return authorization.size() == expected.size() && CRYPTO_memcmp(authorization.data(), expected.data(), expected.size()) == 0;
}

void block_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int serve_http(const std::vector<Route>& routes, const HttpServerOptions& o, const std::string& describe) {
  std::optional<ssl::context> tls;
  if (o.tls_cert || o.tls_key) {
    if (!o.tls_cert || !o.tls_key) {
      std::cerr << "larql: --tls-cert and --tls-key go together\n";
      return 2;
    }
    boost::system::error_code ec;
    tls.emplace(ssl::context::tls_server);
    tls->use_certificate_chain_file(*o.tls_cert, ec);
    if (!ec) tls->use_private_key_file(*o.tls_key, ssl::context::pem, ec);
    if (ec) {
      std::cerr << "larql: cannot use TLS certificate " << *o.tls_cert << " with key " << *o.tls_key << ": "
                << ec.message() << "\n";
      return 2;
    }
  }

  asio::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) {
    std::cerr << "larql: --host " << o.host << " is not an IP address\n";
    return 2;
  }
  const tcp::endpoint endpoint(address, uint16_t(o.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::cerr << "larql: cannot listen on " << o.host << ":" << o.port << " (" << ec.message() << ")\n";
    return 2;
  }
  std::cout << describe << ", listening on " << (tls ? "https" : "http") << "://" << o.host << ":"
            << acceptor.local_endpoint().port() << std::endl;
  if (o.on_listening) o.on_listening(acceptor.local_endpoint().port());

  const Dispatcher dispatcher(routes, o);
  ConnectionSet connections(o.max_connections);
  std::atomic<bool> stopping{false};

  // SIGINT/SIGTERM arrive here (block_termination_signals() made every other thread ignore
  // them): stop accepting, wake idle connections, let requests in flight finish.
  std::thread signals([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    stopping = true;
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);  // wakes the blocking accept()
    connections.stop_all();
  });

  const auto timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  while (!stopping) {
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (stopping) break;
    if (ec) {
      // Out of file descriptors, most likely: give the open connections a moment to end.
      std::cerr << "larql: accept failed: " << ec.message() << "\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    TimedSocket conn(std::move(socket), timeout);
    const uint64_t id = connections.add(conn.native_handle());
    if (id == 0) {
      boost::system::error_code ignored;
      write_reply(conn,
                  error_reply(make_error(ErrorCode::overloaded, "server busy: more than " +
                                                                    std::to_string(o.max_connections) + " connections")),
                  11, false, ignored);
      continue;
    }
    auto serve = [&, id](TimedSocket accepted) {
      if (tls) {
        ssl::stream<TimedSocket> stream(std::move(accepted), *tls);
        boost::system::error_code handshake;
        stream.handshake(ssl::stream_base::server, handshake);
        if (!handshake) serve_connection(stream, dispatcher, o, stopping);
      } else {
        serve_connection(accepted, dispatcher, o, stopping);
        accepted.close();
      }
      connections.remove(id);  // last: after this, serve_http may return
    };
    try {
      std::thread(serve, std::move(conn)).detach();
    } catch (const std::system_error& e) {
      // No thread to be had: this connection is dropped (its socket closed with the failed
      // thread's arguments) and the server goes on; the client sees a reset and retries.
      std::cerr << "larql: cannot start a connection thread: " << e.what() << "\n";
      connections.remove(id);
    }
  }

  connections.wait_drained();
  pthread_kill(signals.native_handle(), SIGTERM);  // release the signal thread if the server ended by itself
  signals.join();
  std::cerr << "larql: server stopped\n";
  return 0;
}

}  // namespace larql
