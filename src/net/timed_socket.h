// A blocking TCP socket whose connect, reads and writes give up after a timeout, for
// Beast's synchronous HTTP on both ends (it is the SyncReadStream/SyncWriteStream under
// http::read/write, and the next layer of an ssl::stream).
//
// Why not asio's own sync operations: when the kernel's SO_RCVTIMEO/SO_SNDTIMEO fires
// they fall back to poll() with no timeout, so a hung peer would hang us. Here every
// read and write is one system call that returns when data moved or the timeout passed:
// the fewest system calls per round trip, which is what the loopback latency is made of.
#pragma once

#include <sys/uio.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <optional>

namespace larql {

class TimedSocket {
 public:
  using tcp = boost::asio::ip::tcp;
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;

  // An accepted connection; reads and writes wait at most `timeout` each.
  TimedSocket(tcp::socket socket, std::chrono::milliseconds timeout);
  // Connects to the first endpoint that answers within `timeout`, with TCP_NODELAY;
  // nullopt with `ec` saying why when none does.
  static std::optional<TimedSocket> connect(boost::asio::io_context& io, const tcp::resolver::results_type& endpoints,
                             std::chrono::milliseconds timeout, boost::system::error_code& ec);

  // From now on a read fails with timed_out once `deadline` has passed, however steadily
  // bytes trickle in (the per-read timeout alone restarts with every byte); each byte
  // received moves the deadline `per_byte` later, which makes it a minimum rate.
  void set_read_deadline(std::chrono::steady_clock::time_point deadline, std::chrono::nanoseconds per_byte = {});
  // Back to the per-read timeout alone.
  void clear_read_deadline();

  executor_type get_executor() { return socket_.get_executor(); }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
  int native_handle() { return socket_.native_handle(); }
  bool is_open() const { return socket_.is_open(); }
  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    iovec iov[kMaxIov];
    const size_t n = gather(buffers, iov);
    return n == 0 ? (ec = {}, 0) : receive(iov, n, ec);
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, boost::system::error_code& ec) {
    iovec iov[kMaxIov];
    const size_t n = gather(buffers, iov);
    return n == 0 ? (ec = {}, 0) : send(iov, n, ec);
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    boost::system::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  static constexpr size_t kMaxIov = 16;
  void set_timeouts(std::chrono::milliseconds timeout);
  void set_receive_timeout(std::chrono::milliseconds timeout);
  size_t receive(iovec* iov, size_t n, boost::system::error_code& ec);
  size_t send(const iovec* iov, size_t n, boost::system::error_code& ec);

  template <class Buffers>
  static size_t gather(const Buffers& buffers, iovec* iov) {
    size_t n = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers) && n < kMaxIov;
         ++it) {
      const auto b = boost::asio::buffer(*it);
      if (b.size() == 0) continue;
      iov[n++] = {const_cast<void*>(static_cast<const void*>(b.data())), b.size()};
    }
    return n;
  }

  tcp::socket socket_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds receive_timeout_;  // what SO_RCVTIMEO is set to now
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::chrono::nanoseconds per_byte_{0};
};

}  // namespace larql
