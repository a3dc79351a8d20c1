#include "loadtest/malformed_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace larql::loadtest {
namespace {

constexpr const char* kPost = "POST /v1/walk-ffn HTTP/1.1\r\n";
constexpr const char* kF32 = "Content-Type: application/x-larql-ffn\r\n";

std::string head(const std::string& host, const std::string& request_line, const std::string& headers) {
  return request_line + "Host: " + host + "\r\n" + headers + "\r\n";
}

std::string many_headers(size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += "X-Filler-" + std::to_string(i) + ": " + std::string(16, 'a') + "\r\n";
  return out;
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

int connect_to(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

// Whether the server has sent something (or closed) within `wait`.
bool readable(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, int(wait.count())) == 1;
}

// Writes what the socket takes without blocking for long; false once the peer is gone
// (it may have answered and closed before reading everything, which is fine).
bool send_bytes(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 5000) != 1) return false;
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

RawAnswer read_status(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string got;
  char buf[4096];
  while (got.find("\r\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !readable(fd, left)) return {RawAnswer::Kind::timeout};
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // closed or reset
    got.append(buf, size_t(n));
  }
  // "HTTP/1.1 400 Bad Request"
  if (got.starts_with("HTTP/1.") && got.size() >= 12) {
    const std::string code = got.substr(9, 3);
    if (code.find_first_not_of("0123456789") == std::string::npos) return {RawAnswer::Kind::status, std::stoi(code)};
  }
  return {RawAnswer::Kind::closed};
}

}  // namespace

std::vector<MalformedCase> malformed_http_corpus(const std::string& h) {
  const std::string chunked = "Transfer-Encoding: chunked\r\n";
  return {
      {"request-line", "not-http", "THIS IS NOT HTTP\r\n\r\n"},
      {"request-line", "no-version", "GET /v1/health\r\n\r\n"},
      {"request-line", "unknown-version", head(h, "GET /v1/health HTTP/7.3\r\n", "")},
      {"request-line", "nul-in-path", head(h, "GET /v1/" + std::string(1, '\0') + "health HTTP/1.1\r\n", "")},
      {"request-line", "64KiB-method", head(h, std::string(64 << 10, 'G') + " /v1/health HTTP/1.1\r\n", "")},
      {"request-line", "64KiB-path", head(h, "GET /" + std::string(64 << 10, 'p') + " HTTP/1.1\r\n", "")},
      {"request-line", "bare-newlines", "GET /v1/health HTTP/1.1\nHost: " + h + "\n\n"},
      {"non-utf8", "path", head(h, "GET /v1/\xff\xfe\xfd HTTP/1.1\r\n", "")},
      {"non-utf8", "header-value", head(h, "GET /v1/health HTTP/1.1\r\n", "X-Bytes: \xc3\x28\xff\r\n"), SendMode::all_at_once, true},
      {"non-utf8", "header-name", head(h, "GET /v1/health HTTP/1.1\r\n", "X-\x80\x81: 1\r\n")},
      {"non-utf8", "content-type", head(h, kPost, "Content-Type: application/\xff\xfe\r\nContent-Length: 0\r\n")},
      {"large-head", "64KiB-header", head(h, "GET /v1/health HTTP/1.1\r\n", "X-Big: " + std::string(64 << 10, 'b') + "\r\n")},
      {"large-head", "1MiB-header", head(h, "GET /v1/health HTTP/1.1\r\n", "X-Big: " + std::string(1 << 20, 'b') + "\r\n")},
      {"large-head", "4000-headers", head(h, "GET /v1/health HTTP/1.1\r\n", many_headers(4000))},
      {"content-length", "not-a-number", head(h, kPost, std::string(kF32) + "Content-Length: abc\r\n")},
      {"content-length", "negative", head(h, kPost, std::string(kF32) + "Content-Length: -1\r\n")},
      {"content-length", "overflowing", head(h, kPost, std::string(kF32) + "Content-Length: 99999999999999999999999999\r\n")},
      {"content-length", "2^64", head(h, kPost, std::string(kF32) + "Content-Length: 18446744073709551616\r\n")},
      {"content-length", "1TiB", head(h, kPost, std::string(kF32) + "Content-Length: 1099511627776\r\n")},
      {"content-length", "conflicting", head(h, kPost, std::string(kF32) + "Content-Length: 4\r\nContent-Length: 8\r\n") + "abcdefgh"},
      {"content-length", "with-transfer-encoding",
       head(h, kPost, std::string(kF32) + "Content-Length: 5\r\n" + chunked) + "0\r\n\r\n"},
      {"chunked", "not-hex", head(h, kPost, std::string(kF32) + chunked) + "ZZ\r\nabc\r\n0\r\n\r\n"},
      {"chunked", "overflowing-size", head(h, kPost, std::string(kF32) + chunked) + "FFFFFFFFFFFFFFFFFFFF\r\nabc\r\n0\r\n\r\n"},
      {"chunked", "size-past-data", head(h, kPost, std::string(kF32) + chunked) + "10\r\nabc\r\n0\r\n\r\n", SendMode::half_close},
      {"chunked", "unknown-coding", head(h, kPost, std::string(kF32) + "Transfer-Encoding: gzip\r\n") + "abc"},
      {"short-body", "announced-100-sent-10", head(h, kPost, std::string(kF32) + "Content-Length: 100\r\n") + std::string(10, 'x'),
       SendMode::half_close},
      {"short-body", "head-only", head(h, kPost, std::string(kF32) + "Content-Length: 4096\r\n"), SendMode::half_close},
      {"trickled-head", "one-byte-at-a-time",
       head(h, "GET /v1/health HTTP/1.1\r\n", "X-Slow: " + std::string(400, 's') + "\r\n"), SendMode::trickle},
  };
}

std::string RawAnswer::describe() const {
  switch (kind) {
    case Kind::status: return std::to_string(status);
    case Kind::closed: return "closed";
    case Kind::timeout: return "no answer";
    case Kind::connect_failed: return "connect failed";
  }
  return "?";
}

bool acceptable(const MalformedCase& c, const RawAnswer& answer) {
  return answer.refused() || (c.may_succeed && answer.kind == RawAnswer::Kind::status && answer.status / 100 == 2);
}

RawAnswer raw_exchange(const std::string& host, const std::string& port, const MalformedCase& c,
                       const RawExchangeOptions& options) {
  Socket s(connect_to(host, port));
  if (s.fd() < 0) return {RawAnswer::Kind::connect_failed};
  const auto deadline = std::chrono::steady_clock::now() + options.answer_timeout;
  if (c.mode == SendMode::trickle) {
    for (size_t i = 0; i < c.bytes.size() && std::chrono::steady_clock::now() < deadline; ++i) {
      if (!send_bytes(s.fd(), std::string_view(c.bytes).substr(i, 1))) break;
      if (readable(s.fd(), options.trickle_interval)) break;  // the server answered (or closed): stop
    }
  } else {
    send_bytes(s.fd(), c.bytes);
    if (c.mode == SendMode::half_close) ::shutdown(s.fd(), SHUT_WR);
  }
  return read_status(s.fd(), deadline);
}

}  // namespace larql::loadtest
