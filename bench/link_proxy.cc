// A TCP proxy that behaves like a network link, for measuring decode over latency and
// bandwidth on one machine (this machine's kernel has no tc netem):
//
//   link_proxy --to 127.0.0.1:8081 --link 100Mbit/20ms
//   # prints: link_proxy: 100 Mbit/s, RTT 20 ms, listening on http://127.0.0.1:PORT
//
// Each direction of each connection is a link of its own: a chunk read at time t starts
// transmitting at max(t, when the link is free), takes its bytes plus Ethernet/IP/TCP
// framing (eval/link_model.h: 90 bytes per 1448-byte segment, as `larql bench` projects)
// at the given rate, and arrives RTT/2 later.
// TCP's own behaviour over a long path (slow start, ACK clocking) is not modelled: the
// proxy's two TCP connections are on loopback. --stall-every N --stall-ms M holds every Nth
// chunk towards the server M ms longer: a replica with a slow tail, for hedging.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eval/link_model.h"

namespace {

using Clock = std::chrono::steady_clock;

struct LinkSpec {
  double one_way_s = 0;
  double bytes_per_s = 0;
  size_t stall_every = 0;  // every Nth chunk towards the server waits stall_s more (0: none)
  double stall_s = 0;
};

double wire_seconds(size_t bytes, const LinkSpec& link) {
  return larql::framed_bytes(double(bytes), 1) / link.bytes_per_s;
}

// One direction: a reader stamps each chunk with its arrival time at the far end, a writer
// delivers it then. Ends when either side closes; then shuts down the other side's write.
class Pipe {
 public:
  Pipe(int from, int to, LinkSpec link) : from_(from), to_(to), link_(link) {}
  Pipe(int from, int to, LinkSpec link, std::atomic<size_t>* chunks) : from_(from), to_(to), link_(link), chunks_(chunks) {}

  void run() {
    std::thread writer([this] { deliver(); });
    Clock::time_point link_free = Clock::now();
    std::vector<char> buf(1 << 16);
    for (;;) {
      const ssize_t n = ::recv(from_, buf.data(), buf.size(), 0);
      const auto now = Clock::now();
      std::lock_guard lock(mutex_);
      if (n <= 0) {
        closed_ = true;
        ready_.notify_one();
        break;
      }
      const auto start = std::max(now, link_free);
      link_free = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wire_seconds(size_t(n), link_)));
      double delay_s = link_.one_way_s;
      if (chunks_ && link_.stall_every && ++*chunks_ % link_.stall_every == 0) delay_s += link_.stall_s;  // a tail event
      const auto arrive = link_free + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay_s));
      queue_.push_back({arrive, std::string(buf.data(), size_t(n))});
      ready_.notify_one();
    }
    writer.join();
    ::shutdown(to_, SHUT_WR);
  }

 private:
  struct Chunk {
    Clock::time_point arrive;
    std::string bytes;
  };

  void deliver() {
    for (;;) {
      Chunk c;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        c = std::move(queue_.front());
        queue_.pop_front();
      }
      std::this_thread::sleep_until(c.arrive);  // the link's delay: what this tool is for
      for (size_t sent = 0; sent < c.bytes.size();) {
        const ssize_t n = ::send(to_, c.bytes.data() + sent, c.bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
          ::shutdown(from_, SHUT_RD);  // the far side is gone: stop reading too
          return;
        }
        sent += size_t(n);
      }
    }
  }

  int from_, to_;
  LinkSpec link_;
  std::atomic<size_t>* chunks_ = nullptr;  // counted across connections, towards the server only
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Chunk> queue_;
  bool closed_ = false;
};

int connect_to(const sockaddr_in& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a TCP proxy with a link's latency and bandwidth"};
  std::string to;
  std::string link_text = "1Gbit/0ms";
  app.add_option("--to", to, "upstream 127.0.0.1:PORT")->required();
  app.add_option("--link", link_text, "rate of each direction and round trip to add, as larql bench --links takes them")
      ->capture_default_str();
  size_t stall_every = 0;
  double stall_ms = 0;
  app.add_option("--stall-every", stall_every, "hold every Nth chunk sent towards the server --stall-ms longer: a slow tail");
  app.add_option("--stall-ms", stall_ms, "how long a stalled chunk waits")->check(CLI::Range(0.0, 60000.0));
  CLI11_PARSE(app, argc, argv);

  sockaddr_in upstream{};
  upstream.sin_family = AF_INET;
  const size_t colon = to.rfind(':');
  if (colon == std::string::npos || inet_pton(AF_INET, to.substr(0, colon).c_str(), &upstream.sin_addr) != 1) {
    std::fprintf(stderr, "link_proxy: --to must be IPv4:PORT\n");
    return 2;
  }
  upstream.sin_port = htons(uint16_t(std::stoi(to.substr(colon + 1))));
  auto links = larql::parse_links(link_text);
  if (!links || links->size() != 1) {
    std::fprintf(stderr, "link_proxy: --link %s\n", links ? "takes one link" : links.error().message.c_str());
    return 2;
  }
  const double mbit = links->front().megabits_per_second, rtt_ms = links->front().rtt_ms;
  const LinkSpec link{rtt_ms / 2000.0, mbit * 1e6 / 8, stall_every, stall_ms / 1000.0};
  static std::atomic<size_t> chunks_to_server{0};

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof local;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 || ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    std::perror("link_proxy: listen");
    return 2;
  }
  std::printf("link_proxy: %g Mbit/s, RTT %g ms, listening on http://127.0.0.1:%d\n", mbit, rtt_ms, ntohs(local.sin_port));
  std::fflush(stdout);
  for (;;) {  // until killed: a benchmark's helper process
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int server = connect_to(upstream);
    if (server < 0) {
      ::close(client);
      continue;
    }
    no_delay(client);
    no_delay(server);
    std::thread([client, server, link] {
      Pipe up(client, server, link, &chunks_to_server), down(server, client, link);
      std::thread back([&] { down.run(); });
      up.run();
      back.join();
      ::close(client);
      ::close(server);
    }).detach();
  }
}
