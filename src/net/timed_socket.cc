#include "net/timed_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/error.hpp>
#include <algorithm>
#include <cerrno>

namespace larql {

namespace {

boost::system::error_code from_errno(int err) {
  // EAGAIN from a blocking socket means SO_RCVTIMEO/SO_SNDTIMEO ran out.
  if (err == EAGAIN || err == EWOULDBLOCK || err == EINPROGRESS) return boost::asio::error::timed_out;
  return {err, boost::system::system_category()};
}

timeval as_timeval(std::chrono::milliseconds t) {
  return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
}

}  // namespace

TimedSocket::TimedSocket(tcp::socket socket, std::chrono::milliseconds timeout)
    : socket_(std::move(socket)), timeout_(timeout), receive_timeout_(timeout) {
  set_timeouts(timeout);
  int one = 1;
  setsockopt(native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void TimedSocket::set_timeouts(std::chrono::milliseconds timeout) {
  const timeval tv = as_timeval(timeout);
  setsockopt(native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void TimedSocket::set_receive_timeout(std::chrono::milliseconds timeout) {
  if (timeout == receive_timeout_) return;
  const timeval tv = as_timeval(timeout);
  setsockopt(native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  receive_timeout_ = timeout;
}

void TimedSocket::set_read_deadline(std::chrono::steady_clock::time_point deadline, std::chrono::nanoseconds per_byte) {
  deadline_ = deadline;
  per_byte_ = per_byte;
}

void TimedSocket::clear_read_deadline() {
  deadline_.reset();
  set_receive_timeout(timeout_);
}

std::optional<TimedSocket> TimedSocket::connect(boost::asio::io_context& io, const tcp::resolver::results_type& endpoints,
                                                std::chrono::milliseconds timeout, boost::system::error_code& ec) {
  ec = boost::asio::error::host_not_found;  // when there is no endpoint at all
  for (const auto& entry : endpoints) {
    tcp::socket socket(io);
    if (socket.open(entry.endpoint().protocol(), ec)) continue;
    TimedSocket s(std::move(socket), timeout);
    // A blocking connect honours SO_SNDTIMEO (EINPROGRESS when it runs out).
    int r;
    do r = ::connect(s.native_handle(), entry.endpoint().data(), socklen_t(entry.endpoint().size()));
    while (r != 0 && errno == EINTR);
    if (r == 0) {
      ec = {};
      return s;
    }
    ec = from_errno(errno);
  }
  return std::nullopt;
}

size_t TimedSocket::receive(iovec* iov, size_t n, boost::system::error_code& ec) {
  for (;;) {
    if (deadline_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ec = boost::asio::error::timed_out;
        return 0;
      }
      set_receive_timeout(std::min(timeout_, left));  // at least 1 ms: 0 would mean "no timeout"
    }
    const ssize_t r = ::readv(native_handle(), iov, int(n));
    if (r > 0) {
      if (deadline_) *deadline_ += per_byte_ * r;
      ec = {};
      return size_t(r);
    }
    if (r == 0) {
      ec = boost::asio::error::eof;
      return 0;
    }
    if (errno != EINTR) {
      ec = from_errno(errno);
      return 0;
    }
  }
}

size_t TimedSocket::send(const iovec* iov, size_t n, boost::system::error_code& ec) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = n;
  for (;;) {
    const ssize_t r = ::sendmsg(native_handle(), &msg, MSG_NOSIGNAL);  // a closed peer is an error, not SIGPIPE
    if (r >= 0) {
      ec = {};
      return size_t(r);
    }
    if (errno != EINTR) {
      ec = from_errno(errno);
      return 0;
    }
  }
}

}  // namespace larql
