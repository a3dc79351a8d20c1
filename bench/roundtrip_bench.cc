// Per-layer round-trip overhead of the remote FFN on loopback, next to a raw TCP
// request/response of the same payload sizes measured in the same run.
//
//   build/bench/roundtrip_bench [--hidden 4096] [--calls 3000] [--reps 5] [--pin cross|same|none]
//
// --pin places the processes like a deployment would be placed (cross, the default: this
// client on CPU 0, every server and peer on CPU 1) or all on CPU 0 (same). Unpinned, the
// scheduler decides per run whether the two ends share a core, and on a VM whose idle
// cores halt at once the two cases differ by ~40 us per round trip: numbers only compare
// within one placement.
//
// Overhead = the client's wall time per call (encode, HTTP both ways, server decode and
// encode, client decode) minus the server's own compute time (the response's latency_ms),
// through the real RemoteFfn client against a real `larql serve` child process. The shard
// serves a synthetic model with hidden H, S = 1, and an FFN of width 16 so compute is
// negligible. The same calls through a `larql router` in front of the shard give the
// router's cost (total per call, direct versus routed). Also measured, with a handler that
// only answers the same number of bytes: our HTTP layer alone (Boost.Beast, serve_http and
// HttpClient, in this process) and cpp-httplib alone (what we used before). Raw TCP, bare
// HTTP and the formats are interleaved in batches; percentiles pool all batches.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <thread>

#include <httplib.h>

#include "model/loader.h"
#include "model/synth.h"
#include "net/child_process.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/remote_ffn.h"

namespace {

using namespace larql;
using Clock = std::chrono::steady_clock;

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A raw TCP peer: reads `request` bytes, answers `response` bytes, until the client leaves.
// Either a thread of this process, or a child process: the shard's topology, where the
// kernel must wake another process, often on the other core. On a VM whose idle cores
// halt at once (cpuidle haltpoll with guest_halt_poll_ns = 0, as here) each such wake-up
// costs tens of microseconds, which a same-process thread often avoids.
struct RawTcpPeer {
  int listen_fd = -1, port = 0;
  std::thread thread;
  pid_t child = -1;
  RawTcpPeer(size_t request, size_t response, bool separate_process) {
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd, 1);
    socklen_t len = sizeof a;
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    auto serve = [fd = listen_fd, in = std::string(request, '\0'), out = std::string(response, 'r')]() mutable {
      const int conn = accept(fd, nullptr, nullptr);
      nodelay(conn);
      while (read_all(conn, in.data(), in.size()) && write_all(conn, out.data(), out.size())) {
      }
      close(conn);
    };
    if (!separate_process) {
      thread = std::thread(std::move(serve));
    } else if ((child = fork()) == 0) {  // no other thread exists yet: safe to fork
      serve();
      _exit(0);
    }
  }
  ~RawTcpPeer() {
    if (thread.joinable()) thread.join();
    if (child > 0) waitpid(child, nullptr, 0);
    close(listen_fd);
  }
  // A kept-open client connection to this peer.
  int connect_client() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    nodelay(fd);
    return fd;
  }
};

// Pins the calling thread (and the threads and processes it starts later) to one CPU.
void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

// One raw request/response over a kept-open connection, in microseconds.
double raw_round_trip(int fd, const std::string& out, std::string& in) {
  const auto t0 = Clock::now();
  write_all(fd, out.data(), out.size());
  read_all(fd, in.data(), in.size());
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"larql remote FFN round-trip overhead on loopback against raw TCP"};
  size_t hidden = 4096, calls = 3000, reps = 5;
  std::string larql_binary = std::filesystem::path(argv[0]).parent_path().parent_path() / "larql";
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--calls", calls, "calls per format per repetition");
  app.add_option("--reps", reps, "interleaved repetitions");
  app.add_option("--larql", larql_binary, "path of the larql binary");
  std::string pin = "cross";
  app.add_option("--pin", pin, "cross: client on CPU 0, servers on CPU 1; same: all on CPU 0; none")
      ->check(CLI::IsMember({"cross", "same", "none"}));
  CLI11_PARSE(app, argc, argv);
  const bool pinned = pin != "none" && std::thread::hardware_concurrency() >= 2;
  if (pinned) pin_to_cpu(pin == "cross" ? 1 : 0);  // everything started from here on: the servers' side
  block_termination_signals();  // our echo server's signal thread stops it at the end

  const auto dir = std::filesystem::temp_directory_path() / ("larql_roundtrip_h" + std::to_string(hidden));
  if (!std::filesystem::exists(dir / "model.safetensors") &&
      !write_synthetic_checkpoint(dir.string(), {.hidden = hidden, .layers = 1, .ffn = 16, .heads = hidden / 128,
                                                 .kv_heads = hidden / 128, .vocab = 256, .context = 16,
                                                 .dtype = DType::f32, .seed = 1}))
    return 1;
  auto model = load_model(dir.string());
  if (!model) return 1;

  // The shard, and a router in front of it, as child processes on free ports.
  const auto shard = spawn_server(larql_binary, {"serve", dir.string(), "--port", "0", "--wire-i8", "--threads", "1"},
                                  std::chrono::seconds(30));
  if (!shard) {
    std::fprintf(stderr, "roundtrip_bench: %s\n", shard.error().message.c_str());
    return 1;
  }
  const std::string url = shard->url;
  const auto routed = spawn_server(larql_binary, {"router", "--shards", "0-0=" + url, "--port", "0"}, std::chrono::seconds(30));
  if (!routed) {
    std::fprintf(stderr, "roundtrip_bench: %s\n", routed.error().message.c_str());
    return 1;
  }
  const std::string router_url = routed->url;

  const size_t request_bytes = 16 + 4 * hidden, response_bytes = 12 + 4 * hidden;
  RawTcpPeer peer_process(request_bytes, response_bytes, true), peer_thread(request_bytes, response_bytes, false);
  const int raw = peer_process.connect_client(), raw_thread = peer_thread.connect_client();
  std::string raw_out(request_bytes, 'q'), raw_in(response_bytes, '\0');

  // cpp-httplib alone: keep-alive client, a handler that only answers the same number of
  // bytes. What the HTTP library costs before any of our code runs.
  httplib::Server bare;
  const std::string bare_reply(response_bytes, 'b');
  bare.Post("/echo", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(bare_reply, "application/octet-stream");
  });
  bare.set_keep_alive_max_count(1u << 30);
  bare.set_tcp_nodelay(true);
  const int bare_port = bare.bind_to_any_port("127.0.0.1");
  std::thread bare_thread([&] { bare.listen_after_bind(); });
  httplib::Client bare_client("127.0.0.1", bare_port);
  bare_client.set_keep_alive(true);
  bare_client.set_tcp_nodelay(true);
  std::vector<double> bare_us;

  // Our HTTP layer alone: serve_http with a route that only answers the same bytes.
  std::promise<int> ours_port;
  HttpServerOptions ours_options;
  ours_options.port = 0;
  ours_options.on_listening = [&](int port) { ours_port.set_value(port); };
  const std::vector<Route> echo{
      {"POST", "/echo", [&](const HttpRequest&) { return HttpReply{200, "application/octet-stream", bare_reply}; }}};
  std::thread ours_thread([&] { serve_http(echo, ours_options, "roundtrip_bench: echo server"); });
  auto ours_client = HttpClient::open("http://127.0.0.1:" + std::to_string(ours_port.get_future().get()), {10000, std::nullopt});
  if (!ours_client) return 1;
  std::vector<double> ours_us;

  // Direct to the shard in each format, then through the router.
  const char* names[] = {"f32", "f16", "i8", "f32 via router", "f16 via router", "i8 via router"};
  constexpr int kFormats = 6;
  std::vector<std::unique_ptr<RemoteFfn>> clients;
  for (int f = 0; f < kFormats; ++f) {
    std::vector<std::string> warnings;
    const char* wire_name = f % 3 == 0 ? "f32" : (f % 3 == 1 ? "f16" : "i8");
    auto c = RemoteFfn::connect(
        *model, {f < 3 ? url : router_url, *wire::client_wire(wire_name, [](const char*) { return nullptr; }), {}, {}, 10000},
        &warnings);
    if (!c) {
      std::fprintf(stderr, "roundtrip_bench: %s\n", c.error().message.c_str());
      return 1;
    }
    clients.push_back(std::move(*c));
  }
  std::vector<float> x(hidden), y(hidden);
  for (size_t i = 0; i < hidden; ++i) x[i] = std::sin(float(i)) * 3.0f;
  if (pinned) pin_to_cpu(0);  // the client's side: this thread only, from here on

  std::vector<double> raw_us, raw_thread_us, overhead_us[kFormats], total_us[kFormats];
  for (size_t rep = 0; rep <= reps; ++rep) {  // rep 0 warms up and is dropped
    for (size_t i = 0; i < calls; ++i) {
      const double us = raw_round_trip(raw, raw_out, raw_in);
      if (rep) raw_us.push_back(us);
    }
    for (size_t i = 0; i < calls; ++i) {
      const double us = raw_round_trip(raw_thread, raw_out, raw_in);
      if (rep) raw_thread_us.push_back(us);
    }
    for (size_t i = 0; i < calls; ++i) {
      const auto t0 = Clock::now();
      auto res = bare_client.Post("/echo", raw_out, "application/octet-stream");
      if (!res) return 1;
      if (rep) bare_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    for (size_t i = 0; i < calls; ++i) {
      const auto t0 = Clock::now();
      auto res = (*ours_client)->post("/echo", raw_out, "application/octet-stream");
      if (!res || res->body.size() != response_bytes) return 1;
      if (rep) ours_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    for (int f = 0; f < kFormats; ++f) {
      for (size_t i = 0; i < calls; ++i) {
        const double server_before = clients[f]->stats().server_ms;
        const auto t0 = Clock::now();
        if (auto s = clients[f]->forward(0, x, 1, y); !s) {
          std::fprintf(stderr, "roundtrip_bench: %s\n", s.error().message.c_str());
          return 1;
        }
        const double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        const double server = (clients[f]->stats().server_ms - server_before) * 1000.0;
        if (rep) {
          total_us[f].push_back(wall);
          overhead_us[f].push_back(wall - server);
        }
      }
    }
  }
  close(raw);
  close(raw_thread);
  bare.stop();
  bare_thread.join();
  kill(getpid(), SIGTERM);  // received by the echo server's signal thread only
  ours_thread.join();
  for (const auto* child : {&*routed, &*shard}) {
    kill(child->pid, SIGTERM);
    waitpid(child->pid, nullptr, 0);
    close(child->stdout_fd);
  }

  const double raw50 = pct(raw_us, 0.5);
  std::printf("hidden %zu, S=1, %zu calls per format (pooled over %zu interleaved repetitions), placement: %s\n", hidden,
              calls * reps, reps,
              !pinned ? "unpinned" : pin == "cross" ? "client on CPU 0, servers on CPU 1" : "all on CPU 0");
  std::printf("raw TCP request/response (%zu B / %zu B), peer in another process: p50 %.1f us, p99 %.1f us\n",
              request_bytes, response_bytes, raw50, pct(raw_us, 0.99));
  std::printf("raw TCP, peer thread in this process (no cross-process wake-up): p50 %.1f us, p99 %.1f us\n",
              pct(raw_thread_us, 0.5), pct(raw_thread_us, 0.99));
  std::printf("our HTTP layer alone (Beast), empty handler, same sizes: p50 %.1f us (%.2fx raw), p99 %.1f us\n",
              pct(ours_us, 0.5), pct(ours_us, 0.5) / raw50, pct(ours_us, 0.99));
  std::printf("cpp-httplib alone, empty handler, same sizes: p50 %.1f us (%.2fx raw), p99 %.1f us\n", pct(bare_us, 0.5),
              pct(bare_us, 0.5) / raw50, pct(bare_us, 0.99));
  std::printf("%-15s %12s %12s %12s %12s %10s %12s %12s\n", "wire", "req bytes", "resp bytes", "overhead p50", "overhead p99",
              "p50/raw", "total p50", "server p50");
  for (int f = 0; f < kFormats; ++f) {
    const auto& st = clients[f]->stats();
    std::vector<double> server(total_us[f].size());
    for (size_t i = 0; i < server.size(); ++i) server[i] = total_us[f][i] - overhead_us[f][i];
    std::printf("%-15s %12zu %12zu %10.1f us %10.1f us %9.2fx %10.1f us %10.1f us\n", names[f], st.bytes_sent / st.calls,
                st.bytes_received / st.calls, pct(overhead_us[f], 0.5), pct(overhead_us[f], 0.99),
                pct(overhead_us[f], 0.5) / raw50, pct(total_us[f], 0.5), pct(server, 0.5));
  }
  std::printf("router: total p50 via the router vs direct, same format (target: at most 2x direct + 20 us)\n");
  for (int f = 0; f < 3; ++f) {
    const double direct = pct(total_us[f], 0.5), routed = pct(total_us[f + 3], 0.5);
    std::printf("  %-4s direct %7.1f us p50 / %7.1f us p99, via router %7.1f us p50 / %7.1f us p99: %.2fx + %.1f us\n",
                names[f], direct, pct(total_us[f], 0.99), routed, pct(total_us[f + 3], 0.99), routed / direct, routed - direct);
  }
  return 0;
}
