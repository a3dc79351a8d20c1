// Overload is "busy", not "broken" (PROTOCOL §9), with real shard and router processes on
// the demo model: busy shards make the router answer 503 with Retry-After, never 502; a
// deterministic 500 non_finite_output passes through at once; a client backs off and
// finishes instead of failing.
#include <gtest/gtest.h>
#include <httplib.h>

#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "infer/local_ffn.h"
#include "model/loader.h"
#include "net/remote_ffn.h"
#include "support/gated_proxy.h"
#include "support/http_result.h"
#include "support/command.h"
#include "support/demo_model.h"
#include "support/eventually.h"
#include "support/process.h"
#include "support/raw_socket.h"
#include "support/prometheus.h"
#include "wire/codec.h"

namespace larql {
namespace {

using nlohmann::json;
using test::ChildProcess;

using test::kDemo;
constexpr size_t kHidden = test::kDemoHidden;


// A client of `url` sending f32 (so its answers are exact) with a --timeout-ms of `timeout_ms`
// and a --hedge-after-ms of `hedge_after_ms`.
Result<std::unique_ptr<RemoteFfn>> connect_f32(const Model& model, const std::string& url, int timeout_ms,
                                               double hedge_after_ms = 0) {
  std::vector<std::string> warnings;
  return RemoteFfn::connect(
      model, {url, *wire::client_wire("f32", [](const char*) { return nullptr; }), {}, {}, timeout_ms, hedge_after_ms},
      &warnings);
}

TEST(Overload, FortyClientsAgainstBusyShardsGetOnly200And503WithRetryAfter) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--threads", "1", "--max-queue", "1"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--threads", "1", "--max-queue", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + a.url() + "|" + b.url()});
  const std::string body = test::demo_f32_request({2}, 128, 0.01f);
  std::mutex mutex;
  std::map<int, int> statuses;
  int busy_without_retry_after = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < 40; ++c)
    clients.emplace_back([&] {
      httplib::Client client(router.url());
      client.set_read_timeout(60, 0);
      for (int i = 0; i < 8; ++i) {
        auto res = client.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
        std::lock_guard lock(mutex);
        ++statuses[res ? res->status : -1];
        if (res && res->status == 503 &&
            (res->get_header_value("Retry-After").empty() || json::parse(res->body).value("code", "") != "overloaded"))
          ++busy_without_retry_after;
      }
    });
  for (auto& t : clients) t.join();
  std::string seen;
  for (auto [status, n] : statuses) seen.append(" ").append(std::to_string(status)).append("×").append(std::to_string(n));
  std::printf("40 clients × 8 requests through the router to two --max-queue 1 shards:%s\n", seen.c_str());
  for (auto [status, n] : statuses) EXPECT_TRUE(status == 200 || status == 503) << status << " × " << n;
  EXPECT_GT(statuses[200], 0);
  EXPECT_GT(statuses[503], 0) << "the shards were never busy: the test did not load them";
  EXPECT_EQ(busy_without_retry_after, 0);
}

// A router short of file descriptors sheds with 503 and Retry-After, naming them, instead of
// failing with "Too many open files"; it serves again once connections close. The router's
// limit is lowered to 128 from outside (prlimit) and 100 idle connections take most of it.
TEST(Overload, ARouterShortOfDescriptorsShedsWith503AndRecovers) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + shard.url()});
  const rlimit low{128, 128};
  ASSERT_EQ(prlimit(router.pid(), RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  const std::string body = test::demo_f32_request({2}, 1, 0.01f);
  // Status and body of one request; -1 when there was no answer.
  auto post = [&] {
    httplib::Client client(router.url());
    client.set_read_timeout(30, 0);
    auto res = client.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
    return res ? std::tuple{res->status, res->body, res->get_header_value("Retry-After")} : std::tuple{-1, std::string(), std::string()};
  };
  const auto [first, first_body, unused] = post();
  ASSERT_EQ(first, 200) << first_body;

  std::vector<std::unique_ptr<test::RawConnection>> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<test::RawConnection>(router.port()));
  std::tuple<int, std::string, std::string> shed;
  ASSERT_TRUE(test::eventually([&] {  // once the router has accepted them all
    shed = post();
    return std::get<0>(shed) == 503;
  })) << std::get<0>(shed) << " " << std::get<1>(shed);
  EXPECT_EQ(json::parse(std::get<1>(shed)).value("code", ""), "overloaded");
  EXPECT_NE(std::get<1>(shed).find("file descriptors"), std::string::npos) << std::get<1>(shed);
  EXPECT_FALSE(std::get<2>(shed).empty()) << "a 503 without Retry-After";

  idle.clear();
  int again = 0;
  EXPECT_TRUE(test::eventually([&] { return (again = std::get<0>(post())) == 200; })) << "last status " << again;
}

TEST(Overload, NonFiniteOutputPassesThroughAtOnce) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + a.url() + "|" + b.url()});
  httplib::Client c(router.url());
  // Legal inputs of 1e30 overflow inside the FFN: every replica would compute the same infinity.
  auto res = c.Post("/v1/walk-ffn", test::demo_f32_request({2}, 1, 1e30f), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500) << res->body;
  const auto j = json::parse(res->body);
  EXPECT_EQ(j.value("code", ""), "non_finite_output");
  EXPECT_NE(j.value("error", "").find("layer 2"), std::string::npos) << j;
  EXPECT_EQ(test::server_metric(router.url(), "larql_router_retries_total"), 0);  // not retried on the other replica
  EXPECT_EQ(test::server_metric(a.url(), "larql_shard_requests_total") + test::server_metric(b.url(), "larql_shard_requests_total"), 1);
}

TEST(Overload, AClientBacksOffFromABusyShardAndFinishes) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--max-queue", "0"});  // one request at a time, no queue
  std::atomic<bool> big_done{false};
  std::thread big([&] {  // holds the only compute slot for seconds: 6 layers × kBusyRows
    httplib::Client c(shard.url());
    c.set_read_timeout(300, 0);
    c.Post("/v1/walk-ffn", test::demo_f32_request({0, 1, 2, 3, 4, 5}, test::kBusyRows, 0.01f), "application/x-larql-ffn");
    big_done = true;
  });
  ASSERT_TRUE(test::eventually([&] { return test::server_metric(shard.url(), "larql_shard_compute_ms_count") >= 1; },
                               std::chrono::seconds(60)));

  auto model = load_model(kDemo);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto remote = connect_f32(*model, shard.url(), 60000);
  ASSERT_TRUE(remote.ok()) << remote.error().message;
  std::vector<float> x(kHidden, 0.01f), y(kHidden), expected(kHidden);
  ASSERT_FALSE(big_done) << "the big request finished before the client started: nothing was busy";
  ASSERT_TRUE((*remote)->forward(3, x, 1, y).ok());
  big.join();
  ThreadPool pool(1);
  LocalFfn local(*model, pool);
  ASSERT_TRUE(local.forward(3, x, 1, expected).ok());
  EXPECT_EQ(y, expected);
  std::printf("the client backed off %zu times from the busy shard\n", (*remote)->stats().backoffs);
  EXPECT_GT((*remote)->stats().backoffs, 0u);
  EXPECT_GT(test::server_metric(shard.url(), "larql_shard_errors_total"), 0);  // the 503s it was given
}

// Hedged requests: a replica that does not answer (held at a gate) is hedged after
// --hedge-after-ms and the second replica's answer is passed on; without hedging the same
// call waits for the router's timeout before it tries the second replica.
TEST(Hedging, AStuckReplicaIsHedgedAndTheOtherAnswers) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--threads", "1"});
  test::GatedProxy stuck(a.url());
  const std::string shards = "0-5=" + stuck.url() + "|" + b.url();  // the stuck replica is tried first
  ChildProcess hedged({"router", "--port", "0", "--shards", shards, "--timeout-ms", "1500", "--hedge-after-ms", "50"});
  ChildProcess plain({"router", "--port", "0", "--shards", shards, "--timeout-ms", "1500"});
  const std::string body = test::demo_f32_request({2}, 1, 0.01f);
  auto timed_post = [&](const std::string& url) {
    httplib::Client client(url);
    client.set_read_timeout(30, 0);
    const auto start = std::chrono::steady_clock::now();
    auto res = client.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    EXPECT_EQ(res ? res->get_header_value("X-Larql-Shard") : "", b.url());
    return ms;
  };
  const double with_hedge = timed_post(hedged.url());
  const double without = timed_post(plain.url());
  std::printf("a call whose first replica is stuck: %.0f ms hedged after 50 ms, %.0f ms without hedging (timeout 1500 ms)\n",
              with_hedge, without);
  EXPECT_LT(with_hedge * 2, without);  // same run: the hedge does not wait for the timeout
  EXPECT_EQ(test::server_metric(hedged.url(), "larql_router_hedges_total"), 1);
  EXPECT_EQ(test::server_metric(hedged.url(), "larql_router_hedge_wins_total"), 1);
  EXPECT_EQ(test::server_metric(plain.url(), "larql_router_hedges_total"), 0);
  stuck.open();  // the hedged router's first call finishes now, on its own thread, and is dropped
  const auto bad = test::run_command(std::string(LARQL_BINARY) + " router --port 0 --shards '" + shards + "' --hedge-after-ms soon 2>&1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--hedge-after-ms 'soon': expected milliseconds (0: no hedging) or auto"), std::string::npos) << bad.output;
}

// The client hedges too: with "0-5=STUCK|B" and --hedge-after-ms 50, a forward whose first
// replica is stuck is answered by the second, exactly, long before the timeout; while the
// loser still holds its connection, the next call opens another to the first replica and is
// hedged again; and without hedging the same forward waits out its timeout.
TEST(Hedging, AClientHedgesAStuckReplicaWhileItsLosersHoldTheirConnections) {
  ChildProcess a({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess b({"serve", kDemo, "--port", "0", "--threads", "1"});
  test::GatedProxy stuck(a.url());
  auto model = load_model(kDemo);
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  LocalFfn local(*model, pool);
  std::vector<float> x(kHidden), expected(kHidden);
  for (size_t i = 0; i < kHidden; ++i) x[i] = 0.01f * float(i % 17) - 0.08f;
  ASSERT_TRUE(local.forward(2, x, 1, expected).ok());

  auto connect = [&](double hedge_after_ms) {
    auto r = connect_f32(*model, "0-5=" + stuck.url() + "|" + b.url(), 1500, hedge_after_ms);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(*r) : nullptr;
  };
  auto timed_forward = [&](RemoteFfn& ffn, uint32_t layer, bool exact) {
    std::vector<float> y(kHidden, 9.0f);
    const auto start = std::chrono::steady_clock::now();
    const Status status = ffn.forward(layer, x, 1, y);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (exact) {
      EXPECT_EQ(y, expected) << "the hedge's answer is the exact one";
    }
    return std::pair{ms, status.ok() ? std::string() : status.error().message};
  };
  {
    auto hedged = connect(50);
    ASSERT_NE(hedged, nullptr);
    const auto [with_hedge, hedged_error] = timed_forward(*hedged, 2, true);
    EXPECT_EQ(hedged_error, "");
    EXPECT_EQ(hedged->stats().hedges, 1u);
    EXPECT_EQ(hedged->stats().hedge_wins, 1u);
    ASSERT_TRUE(stuck.wait_for_waiting(1));
    const auto [next_ms, next_error] = timed_forward(*hedged, 3, false);
    EXPECT_EQ(next_error, "");
    EXPECT_LT(next_ms, 750) << "the next call did not wait for the stuck replica";
    EXPECT_EQ(hedged->stats().hedges, 2u);
    EXPECT_TRUE(stuck.wait_for_waiting(2)) << "the second stuck call came on a connection of its own";
    // Without hedging the first replica takes the whole --timeout-ms, which is also the
    // forward's: it fails, naming the stuck replica.
    auto plain = connect(0);
    ASSERT_NE(plain, nullptr);
    const auto [without, plain_error] = timed_forward(*plain, 2, false);
    EXPECT_NE(plain_error.find(stuck.url()), std::string::npos) << plain_error;
    std::printf("client, first replica stuck: %.0f ms hedged after 50 ms, %.0f ms without hedging (timeout 1500 ms)\n",
                with_hedge, without);
    EXPECT_LT(with_hedge * 2, without);  // same run: the hedge does not wait for the timeout
    EXPECT_EQ(plain->stats().hedges, 0u);
    stuck.open();  // the losers end now; the clients' destructors wait for them
  }
  const auto bad = test::run_command(std::string(LARQL_BINARY) + " run " + kDemo + " --prompt-ids 1 --steps 1 --ffn " + b.url() +
                                     " --hedge-after-ms -5 2>&1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("--hedge-after-ms"), std::string::npos) << bad.output;
}

TEST(Deadlines, AShardDropsWorkWhoseDeadlinePassed) {
  ChildProcess shard({"serve", kDemo, "--port", "0"});
  httplib::Client c(shard.url());
  c.set_read_timeout(300, 0);
  // Seconds of work (6 layers × kBusyRows) for a caller that will wait 300 ms.
  auto res = c.Post("/v1/walk-ffn", {{"X-Larql-Deadline-Ms", "300"}}, test::demo_f32_request({0, 1, 2, 3, 4, 5}, test::kBusyRows, 0.01f),
                    "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 504) << res->body;
  const auto j = json::parse(res->body);
  EXPECT_EQ(j.value("code", ""), "deadline_exceeded");
  EXPECT_NE(j.value("error", "").find("the caller's deadline (X-Larql-Deadline-Ms) passed after"), std::string::npos) << j;
  EXPECT_LT(test::server_metric(shard.url(), "larql_shard_compute_ms_count"), 6);
  // A deadline that is not a number of milliseconds is the caller's error.
  res = c.Post("/v1/walk-ffn", {{"X-Larql-Deadline-Ms", "soon"}}, test::demo_f32_request({1}, 1, 0.01f), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("X-Larql-Deadline-Ms is 'soon'"), std::string::npos) << res->body;
  // With time to spare the same path computes.
  res = c.Post("/v1/walk-ffn", {{"X-Larql-Deadline-Ms", "60000"}}, test::demo_f32_request({1}, 1, 0.01f), "application/x-larql-ffn");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(Deadlines, RouterAndClientSendWhatIsLeftOfTheirTime) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  test::GatedProxy watch(shard.url(), {}, /*open=*/true);  // records the deadline each call carries
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + watch.url(), "--timeout-ms", "2000"});
  httplib::Client c(router.url());
  const std::string body = test::demo_f32_request({1}, 1, 0.01f);
  ASSERT_EQ(test::must(c.Post("/v1/walk-ffn", body, "application/x-larql-ffn")).status, 200);
  int64_t forwarded = std::stoll(watch.last_deadline());
  EXPECT_TRUE(forwarded > 1500 && forwarded <= 2000) << forwarded << ": the router's --timeout-ms when the caller says nothing";
  ASSERT_EQ(test::must(c.Post("/v1/walk-ffn", {{"X-Larql-Deadline-Ms", "700"}}, body, "application/x-larql-ffn")).status, 200);
  forwarded = std::stoll(watch.last_deadline());
  EXPECT_TRUE(forwarded > 200 && forwarded <= 700) << forwarded << ": what is left of the caller's 700 ms";
  // A caller whose deadline has passed gets 504 from the router without a call to the shard.
  auto late = c.Post("/v1/walk-ffn", {{"X-Larql-Deadline-Ms", "0"}}, body, "application/x-larql-ffn");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 504);
  EXPECT_EQ(json::parse(late->body).value("code", ""), "deadline_exceeded");

  auto model = load_model(kDemo);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto remote = connect_f32(*model, watch.url(), 5000);
  ASSERT_TRUE(remote.ok()) << remote.error().message;
  std::vector<float> x(kHidden, 0.01f), y(kHidden);
  ASSERT_TRUE((*remote)->forward(2, x, 1, y).ok());
  forwarded = std::stoll(watch.last_deadline());
  EXPECT_TRUE(forwarded > 4000 && forwarded <= 5000) << forwarded << ": the client's --timeout-ms";
}

// The router's descriptors by kind: "socket" for connections, "anon_inode" for event
// loops' epoll/eventfd/timerfd.
std::map<std::string, int> descriptors(pid_t pid) {
  std::map<std::string, int> kinds;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    ++kinds[target.substr(0, target.find(':'))];
  }
  return kinds;
}

TEST(RouterDescriptors, PooledShardConnectionsCostOneDescriptorEach) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  ChildProcess router({"router", "--port", "0", "--shards", "0-5=" + shard.url()});
  const auto before = descriptors(router.pid());
  const std::string body = test::demo_f32_request({1}, 1, 0.01f);
  std::vector<std::thread> clients;
  for (int c = 0; c < 24; ++c)
    clients.emplace_back([&] {
      httplib::Client client(router.url());
      for (int i = 0; i < 5; ++i) client.Post("/v1/walk-ffn", body, "application/x-larql-ffn");
    });
  for (auto& t : clients) t.join();
  auto after = descriptors(router.pid());
  std::printf("router descriptors before: %d sockets, %d event-loop; after 24 clients: %d sockets, %d event-loop\n",
              before.count("socket") ? before.at("socket") : 0, before.count("anon_inode") ? before.at("anon_inode") : 0,
              after["socket"], after["anon_inode"]);
  EXPECT_GT(after["socket"], before.count("socket") ? before.at("socket") : 0);  // it pooled connections to the shard...
  EXPECT_LE(after["anon_inode"], (before.count("anon_inode") ? before.at("anon_inode") : 0) + 3);  // ...without an event loop each
}

TEST(Shutdown, AClientThatNeverReadsDoesNotHoldTheExitPastTheTimeout) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--shutdown-timeout-ms", "1000"});
  // 6 layers × 4096 rows: a 38 MB answer, far more than the socket buffers hold, to a client
  // that never reads it. The server's write blocks.
  const std::string body = test::demo_f32_request({0, 1, 2, 3, 4, 5}, 4096, 0.01f);
  test::RawConnection stuck(shard.port());
  ASSERT_TRUE(stuck.send("POST /v1/walk-ffn HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-larql-ffn\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(test::eventually([&] { return test::server_metric(shard.url(), "larql_shard_compute_ms_count") == 6; },
                               std::chrono::seconds(120)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(shard.stop(), 0);  // SIGTERM; stop() itself gives up (SIGKILL) after 10 s
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("exit after SIGTERM with a client that never reads: %.2f s (--shutdown-timeout-ms 1000)\n", seconds);
  EXPECT_LT(seconds, 8.0);  // the idle timeout alone would have held it 30 s
}

TEST(Shutdown, AClientMidBodyAtSigtermGetsA503ToRetryElsewhere) {
  ChildProcess shard({"serve", kDemo, "--port", "0", "--threads", "1"});
  const std::string body = test::demo_f32_request({1}, 4, 0.01f);
  test::RawConnection c(shard.port());
  ASSERT_TRUE(c.send("POST /v1/walk-ffn HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-larql-ffn\r\n"
                     "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
  // "100 Continue" proves the server has read the head and now waits for the body.
  char buf[64] = {};
  ASSERT_GT(::read(c.fd(), buf, sizeof buf - 1), 0);
  ASSERT_TRUE(std::string(buf).starts_with("HTTP/1.1 100 Continue")) << buf;
  ASSERT_TRUE(c.send(body.substr(0, 100)));
  ASSERT_EQ(::kill(shard.pid(), SIGTERM), 0);
  const std::string answer = c.read_until_close();
  EXPECT_EQ(test::status_of(answer), 503) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("the server is shutting down; send the request elsewhere"), std::string::npos) << answer;
  EXPECT_EQ(shard.stop(), 0);
}

}  // namespace
}  // namespace larql
