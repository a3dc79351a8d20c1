// A plain TCP connection to a test server on 127.0.0.1, for bytes no HTTP client library
// would send (broken heads, trickled bytes, a body that never comes). Every read gives up
// after a deadline, so a server that never answers fails the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace larql::test {

class RawConnection {
 public:
  explicit RawConnection(int port, std::chrono::milliseconds read_timeout = std::chrono::seconds(10)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    const timeval tv{time_t(read_timeout.count() / 1000), suseconds_t(read_timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send(const std::string& bytes) {
    return connected_ && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  // Whether the server has written something (or closed) that we have not read yet.
  bool readable() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
  // Everything the server writes until it closes the connection (or the read timeout).
  std::string read_until_close() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    return out;
  }
  // One HTTP response with a Content-Length body (enough for our servers' answers).
  std::string read_response() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) {
      out.append(buf, size_t(n));
      const size_t head_end = out.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      const size_t cl = out.find("Content-Length: ");
      if (cl == std::string::npos || cl > head_end) break;
      if (out.size() >= head_end + 4 + std::stoul(out.substr(cl + 16))) break;
    }
    return out;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Sends raw bytes to 127.0.0.1:port and returns everything the server writes back until
// it closes the connection.
inline std::string raw_exchange(int port, const std::string& bytes) {
  RawConnection c(port);
  if (!c.connected()) return "connect failed";
  if (!c.send(bytes)) return "write failed";
  return c.read_until_close();
}

// The status code of a raw HTTP response ("HTTP/1.1 404 ..." → 404), or 0.
inline int status_of(const std::string& response) {
  return response.starts_with("HTTP/1.1 ") && response.size() >= 12 ? std::stoi(response.substr(9, 3)) : 0;
}

// The body of a raw HTTP response.
inline std::string body_of(const std::string& response) {
  const size_t head_end = response.find("\r\n\r\n");
  return head_end == std::string::npos ? std::string() : response.substr(head_end + 4);
}

}  // namespace larql::test
