#include "net/http_server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <openssl/crypto.h>
#include <thread>
#include <vector>

#include "net/http_dispatch.h"
#include "net/systemd_notify.h"
#include "net/timed_socket.h"

namespace larql {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// The open connections: each one's state, so that when every slot is taken the one that
// has waited longest without a complete request can be closed to make room, and so that
// a stop can wake the idle ones (shutdown of the read side: a blocked read returns, a
// request being answered still gets its response) and then wait for every thread.
class ConnectionSet {
 public:
  enum class State { idle, reading, busy };  // between requests; a request arriving; being answered

  explicit ConnectionSet(size_t max) : max_(max) {}

  // An id for a new connection, or 0 when stopping or when every connection is busy.
  uint64_t add(int fd) {
    std::lock_guard lock(mutex_);
    if (stopping_ || entries_.size() >= 2 * max_) return 0;  // evicted ones not gone yet count too
    if (live_ >= max_ && !evict_one()) return 0;
    entries_[++next_id_] = {fd, State::idle, Clock::now()};
    ++live_;
    return next_id_;
  }
  void set_state(uint64_t id, State state) {
    std::lock_guard lock(mutex_);
    Entry& e = entries_.at(id);
    if (e.state != state) e = {e.fd, state, Clock::now(), e.evicted};
  }
  // The thread is about to close the socket: from now on it must not be shut down by us.
  void forget_fd(uint64_t id) {
    std::lock_guard lock(mutex_);
    entries_.at(id).fd = -1;
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    if (!entries_.at(id).evicted) --live_;
    entries_.erase(id);
    if (entries_.empty()) drained_.notify_all();
  }
  void stop_all() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& [id, e] : entries_)
      if (e.fd >= 0) ::shutdown(e.fd, SHUT_RD);
  }
  // Waits until every connection has ended, or `timeout`; then closes what is left in both
  // directions (a write blocked on a client that never reads fails at once, a computation
  // stops at its next layer) and waits `grace` more. Whether all ended.
  bool wait_drained(std::chrono::milliseconds timeout, std::chrono::milliseconds grace) {
    std::unique_lock lock(mutex_);
    if (drained_.wait_for(lock, timeout, [this] { return entries_.empty(); })) return true;
    std::cerr << "larql: " << entries_.size() << " connections still open after the shutdown timeout; closing them\n";
    for (const auto& [id, e] : entries_)
      if (e.fd >= 0) ::shutdown(e.fd, SHUT_RDWR);
    return drained_.wait_for(lock, grace, [this] { return entries_.empty(); });
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    int fd;
    State state;
    Clock::time_point since;
    bool evicted = false;
  };

  // Closes the connection idle longest, else the one whose request has been arriving
  // longest (a trickling peer); never one being answered. Its thread sees end of stream.
  bool evict_one() {
    Entry* victim = nullptr;
    for (auto& [id, e] : entries_) {
      if (e.evicted || e.fd < 0 || e.state == State::busy) continue;
      if (!victim || std::pair(e.state != State::idle, e.since) < std::pair(victim->state != State::idle, victim->since))
        victim = &e;
    }
    if (!victim) return false;
    victim->evicted = true;
    --live_;
    ::shutdown(victim->fd, SHUT_RDWR);
    return true;
  }

  std::mutex mutex_;
  std::condition_variable drained_;
  std::map<uint64_t, Entry> entries_;
  size_t live_ = 0;  // entries not evicted
  uint64_t next_id_ = 0;
  size_t max_;
  bool stopping_ = false;
};

// A streamed reply: the head with chunked transfer encoding, then each piece the route
// sends as one chunk, then the last chunk. The route learns of a gone client from send.
template <class Stream>
void write_streamed_reply(Stream& stream, HttpReply reply, unsigned version, bool keep_alive, boost::system::error_code& ec) {
  http::response<http::empty_body> res;
  res.version(version);
  res.result(unsigned(reply.status));
  if (!reply.content_type.empty()) res.set(http::field::content_type, reply.content_type);
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.chunked(true);
  http::response_serializer<http::empty_body> head(res);
  http::write_header(stream, head, ec);
  if (ec) return;
  reply.stream([&](std::string_view piece) {
    if (!ec && !piece.empty()) asio::write(stream, http::make_chunk(asio::const_buffer(piece.data(), piece.size())), ec);
    return !ec;
  });
  if (!ec) asio::write(stream, http::make_chunk_last(), ec);
}

template <class Stream>
void write_reply(Stream& stream, HttpReply reply, unsigned version, bool keep_alive, boost::system::error_code& ec) {
  if (reply.stream) return write_streamed_reply(stream, std::move(reply), version, keep_alive, ec);
  http::response<http::string_body> res;
  res.version(version);
  res.result(unsigned(reply.status));
  if (!reply.content_type.empty()) res.set(http::field::content_type, reply.content_type);
  if (reply.retry_after_s > 0) res.set(http::field::retry_after, std::to_string(reply.retry_after_s));
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.body() = std::move(reply.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  http::write(stream, res, ec);
}

// Answers a request we will not read (too large, malformed, late, unauthorized) and closes
// the connection without resetting it: a client still sending its body would otherwise
// get a connection reset instead of our answer. So: answer, stop writing, then read and
// drop what the client still sends, bounded in bytes and in time.
template <class Stream>
void answer_and_close(Stream& stream, TimedSocket& socket, HttpReply reply, uint64_t drain_limit) {
  boost::system::error_code ec;
  write_reply(stream, std::move(reply), 11, false, ec);
  if (ec) return;
  ::shutdown(socket.native_handle(), SHUT_WR);
  socket.set_read_deadline(std::chrono::steady_clock::now() + std::chrono::seconds(2));
  // On the heap and only here: as a thread_local it was static TLS, which every thread of
  // the process (a connection's included) zeroes at its start and keeps resident.
  std::vector<char> scratch(64 << 10);
  for (uint64_t drained = 0; drained < drain_limit;) {
    const size_t n = socket.read_some(asio::buffer(scratch), ec);
    if (ec || n == 0) break;
    drained += n;
  }
}

HttpReply late_request(const HttpServerOptions& o, const char* part, int limit_ms) {
  HttpReply reply = error_for(o, make_error(ErrorCode::bad_request, std::string("the request ") + part + " did not arrive in time (" +
                                                                        std::to_string(limit_ms) + " ms allowed)"));
  reply.status = 408;
  return reply;
}

HttpReply shutting_down(const HttpServerOptions& o) {
  return error_for(o, make_error(ErrorCode::overloaded, "the server is shutting down; send the request elsewhere"));
}

HttpReply body_too_large(const HttpServerOptions& o, size_t limit) {
  return error_for(o, make_error(ErrorCode::body_too_large, "body above the limit of " + std::to_string(limit) + " bytes"));
}

// Whether a read failed because the client went away (or was evicted): nothing to answer.
bool client_left(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset;
}

// Whether the peer has closed (or reset) its side: a request's long work may stop.
bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

struct ServerContext {
  const Dispatcher& dispatcher;
  const HttpServerOptions& options;
  ConnectionSet& connections;
  const std::atomic<bool>& stopping;
};

// Requests on one kept-alive connection until the client leaves, a read times out, the
// framing is broken, the connection is evicted, or the server stops.
template <class Stream>
void serve_connection(Stream& stream, TimedSocket& socket, uint64_t id, const ServerContext& cx) {
  using Clock = std::chrono::steady_clock;
  using State = ConnectionSet::State;
  const HttpServerOptions& o = cx.options;
  const uint64_t drain_limit = 4 * uint64_t(o.max_body_bytes) + (1 << 20);
  boost::beast::flat_buffer buffer;
  buffer.reserve(64 << 10);  // whole small requests in one read, not 512-byte steps
  for (;;) {
    cx.connections.set_state(id, State::idle);
    boost::system::error_code ec;
    if (buffer.size() == 0) {  // wait (up to the idle timeout) for the first bytes of a request
      const size_t n = stream.read_some(buffer.prepare(64 << 10), ec);
      if (ec) return;  // the client left, went quiet, or was evicted: nothing to answer
      buffer.commit(n);
    }
    cx.connections.set_state(id, State::reading);
    http::request_parser<http::string_body> parser;
    parser.body_limit(o.max_body_bytes);
    socket.set_read_deadline(Clock::now() + std::chrono::milliseconds(o.head_timeout_ms));
    http::read_header(stream, buffer, parser, ec);
    std::optional<HttpReply> refusal;
    if (ec == http::error::body_limit)
      refusal = body_too_large(o, o.max_body_bytes);
    else if (ec == asio::error::timed_out)
      refusal = late_request(o, "head", o.head_timeout_ms);
    else if (cx.stopping && ec)
      refusal = shutting_down(o);  // woken mid-head by the stop: say so, so that the client can go elsewhere
    else if (client_left(ec))
      return;  // mid-head, or evicted
    else if (ec)
      refusal = error_for(o, make_error(ErrorCode::bad_request, "malformed HTTP request head: " + ec.message()));
    else
      refusal = cx.dispatcher.refuse_before_body(parser.get());
    if (refusal) {
      answer_and_close(stream, socket, std::move(*refusal), drain_limit);
      return;
    }
    if (parser.get()[http::field::expect] == "100-continue")  // curl sends it for bodies over 1 KiB
      asio::write(stream, asio::buffer(std::string_view("HTTP/1.1 100 Continue\r\n\r\n")), ec);
    if (!ec && !parser.is_done()) {
      // The body gets head_timeout_ms of grace plus the time its bytes earn at the minimum rate.
      socket.set_read_deadline(Clock::now() + std::chrono::milliseconds(o.head_timeout_ms),
                               std::chrono::nanoseconds(1'000'000'000 / std::max<size_t>(1, o.min_body_bytes_per_s)));
      http::read(stream, buffer, parser, ec);
    }
    socket.clear_read_deadline();
    if (ec && cx.stopping) {  // woken mid-body by the stop: 503, which a router retries elsewhere
      answer_and_close(stream, socket, shutting_down(o), drain_limit);
      return;
    }
    if (client_left(ec)) return;
    if (ec) {
      answer_and_close(stream, socket,
                       ec == http::error::body_limit ? body_too_large(o, o.max_body_bytes)
                       : ec == asio::error::timed_out
                           ? late_request(o, "body", o.head_timeout_ms)
                           : error_for(o, make_error(ErrorCode::bad_request, "malformed HTTP request body: " + ec.message())),
                       drain_limit);
      return;
    }
    cx.connections.set_state(id, State::busy);
    const auto& req = parser.get();
    const bool keep_alive = req.keep_alive() && !cx.stopping;
    const int fd = socket.native_handle();
    write_reply(stream, cx.dispatcher.answer(req, [fd] { return peer_closed(fd); }), req.version(), keep_alive, ec);
    if (ec || !keep_alive) return;
  }
}

}  // namespace

void block_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Raises the soft limit on open descriptors to the hard one: every connection, in and out,
// is a descriptor, and a router holds two per request in flight.
static void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int serve_http(const std::vector<Route>& routes, const HttpServerOptions& o, const std::string& describe) {
  raise_descriptor_limit();
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
  notify_systemd("READY=1");  // a Type=notify unit is started once it listens

  const Dispatcher dispatcher(routes, o);
  ConnectionSet connections(o.max_connections);
  std::atomic<bool> stopping{false};
  const ServerContext context{dispatcher, o, connections, stopping};

  // SIGINT/SIGTERM arrive here (block_termination_signals() made every other thread ignore
  // them): stop accepting, wake idle connections, let requests in flight finish.
  std::thread signals([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    notify_systemd("STOPPING=1");
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
    // On the heap, so that the connection's thread can destroy it before it says it is
    // done: an asio socket, even a moved-from one, reaches into `io` when destroyed, and
    // `io` ends with this function once every connection is done.
    auto conn = std::make_unique<TimedSocket>(std::move(socket), timeout);
    const uint64_t id = connections.add(conn->native_handle());
    if (id == 0) {
      boost::system::error_code ignored;
      write_reply(*conn,
                  error_for(o, make_error(ErrorCode::overloaded, "server busy: more than " +
                                                                    std::to_string(o.max_connections) + " connections")),
                  11, false, ignored);
      continue;
    }
    auto serve = [&, id](std::unique_ptr<TimedSocket> accepted) {
      // Declared after the stream, so destroyed before the socket closes, however we leave.
      struct ForgetFd {
        ConnectionSet& set;
        uint64_t id;
        ~ForgetFd() { set.forget_fd(id); }
      };
      try {
        if (tls) {
          ssl::stream<TimedSocket> stream(std::move(*accepted), *tls);
          const ForgetFd forget{connections, id};
          boost::system::error_code handshake;
          stream.handshake(ssl::stream_base::server, handshake);
          if (!handshake) serve_connection(stream, stream.next_layer(), id, context);
        } else {
          const ForgetFd forget{connections, id};
          serve_connection(*accepted, *accepted, id, context);
        }
      } catch (const std::exception& e) {  // nothing may end the server from here
        std::cerr << "larql: connection dropped after an unexpected error: " << e.what() << "\n";
      } catch (...) {
        std::cerr << "larql: connection dropped after an unexpected error\n";
      }
      accepted.reset();
      // OpenSSL keeps per-thread state (its error queue, the random generators a handshake
      // draws from) that it frees as the thread exits, after remove() below: the process
      // could end first, and LeakSanitizer report it. Freed here instead.
      OPENSSL_thread_stop();
      connections.remove(id);  // last: after this, serve_http may return and destroy `io`
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

  if (!connections.wait_drained(std::chrono::milliseconds(o.shutdown_timeout_ms), std::chrono::seconds(2))) {
    // A thread that still runs would outlive this frame's objects: end the process here.
    std::cerr << "larql: connections did not end; exiting" << std::endl;
    std::_Exit(0);
  }
  pthread_kill(signals.native_handle(), SIGTERM);  // release the signal thread if the server ended by itself
  signals.join();
  std::cerr << "larql: server stopped\n";
  return 0;
}

}  // namespace larql
